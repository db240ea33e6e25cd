package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// The mirror's layout, under DIR:
//
//	<tier>/<slug>              a symbolic link to the subject's files (.lectern/objects/…),
//	                           swapped in one rename, so a reader sees the old copy or the new, whole
//	media/…                    the assets (-media), at the location media-manifest.json names
//	.lectern/state.json        what the mirror holds (state), replaced in one rename
//	.lectern/media-sums.json   the assets hashed and found as their manifest says (mediaSums)
//	.lectern/objects/<name>/   a subject's verified files
//	.lectern/tmp/              downloads in progress (resumed by the next run)
//	.lectern/lock              held while a sync runs
const metaDir = ".lectern"

// state is what a mirror holds, written after every subject.
type state struct {
	Version int `json:"version"` // of this file's format: 1
	// ContentVersion and Grants are the licence status the mirror was
	// last completed under; Filter the -tier and -subject it was made with.
	ContentVersion string   `json:"contentVersion"`
	Grants         []string `json:"grants"`
	Filter         string   `json:"filter"`
	Complete       bool     `json:"complete"` // every subject of the last listing is held
	MediaComplete  bool     `json:"mediaComplete"`
	// Subjects are the subjects held, by "<tier>/<slug>".
	Subjects map[string]*heldSubject `json:"subjects"`
	// Pending are the exports made and not yet verified: their links are
	// reused while valid, so a run killed mid-download resumes without
	// exporting (and billing) again.
	Pending map[string]*pendingExport `json:"pending"`
	// ClassPending are the class exports made and not yet installed, by
	// lessonId (<tier>/<slug>/<classNum>), as Pending: a class-level
	// update killed before its swap resumes without exporting again. A
	// class bundle verified is unpacked under tmp/ (Object names it there).
	ClassPending map[string]*pendingExport `json:"classPending,omitempty"`
	// Since is where the next run asks the change feed from (GET
	// /v1/changes): the feed's next once a run through it held every
	// subject at its version, else the contentVersion a full run reached
	// (whose grants are then State.Grants). SinceVersion is the version it
	// names. "" in older state files: the first full run records it.
	Since        string `json:"since,omitempty"`
	SinceVersion string `json:"sinceVersion,omitempty"`
	// Retired are the objects subjects' links named before a swap or a
	// removal, kept for the readers that resolved a link before it moved
	// until Until (-keep-previous), then removed by a run (keep.go).
	Retired []retiredObject `json:"retired,omitempty"`
}

// retiredObject is an object no link names any more, kept a while.
type retiredObject struct {
	Object string    `json:"object"`
	Until  time.Time `json:"until"`
}

// heldSubject is a subject the mirror holds, verified.
type heldSubject struct {
	Digest         string `json:"contentDigest"` // the subject's contentDigest when it was exported: its validator
	ContentVersion string `json:"contentVersion"`
	Object         string `json:"object"` // its directory under .lectern/objects
	Files          int    `json:"files"`
	Bytes          int64  `json:"bytes"`
	// Classes is the subject's classCount when it was exported: what a
	// new export of it bills in downloads (0 in older state files).
	Classes int `json:"classes,omitempty"`
	// Manifest is the sha256 of the subject's manifest.json as installed.
	Manifest string `json:"manifest,omitempty"`
	// Stamps are each file's size and modification time as installed, by
	// name (manifest.json included): a run compares them to notice a file
	// changed or removed locally without reading it. Absent in older state
	// files: a run records them once the sizes match the manifest.
	Stamps map[string]fileStamp `json:"stamps,omitempty"`
}

// fileStamp is a file's size and modification time (Unix nanoseconds).
type fileStamp struct {
	Size  int64 `json:"size"`
	Mtime int64 `json:"mtime"`
}

// pendingExport is an export whose bundle is not yet verified.
type pendingExport struct {
	URL            string    `json:"url"`
	ExpiresAt      time.Time `json:"expiresAt"`
	ETag           string    `json:"etag"` // of the bytes downloaded so far, for If-Range
	Digest         string    `json:"contentDigest"`
	ContentVersion string    `json:"contentVersion"`
	// Object is set once the bundle is verified and unpacked, before the
	// subject's link moves to it, with its files and bytes.
	Object string `json:"object,omitempty"`
	Files  int    `json:"files,omitempty"`
	Bytes  int64  `json:"bytes,omitempty"`
}

// mirror is an open mirror directory: its state and its lock.
type mirror struct {
	dir   string
	st    state
	lockF *os.File
	sums  *mediaSums // read by mediaSums, once
}

// openMirror opens (creating) the mirror in dir and takes its lock: two
// syncs of one directory never run at once.
func openMirror(dir string) (*mirror, error) {
	for _, d := range []string{dir, filepath.Join(dir, metaDir, "objects"), filepath.Join(dir, metaDir, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, metaDir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another lectern sync holds %s", dir)
	}
	m := &mirror{dir: dir, lockF: f}
	st, err := readState(m.path("state.json"))
	if err != nil {
		m.Close()
		return nil, err
	}
	m.st = st
	return m, nil
}

// readState reads the state file at path; a mirror without one holds
// nothing.
func readState(path string) (state, error) {
	st := state{Version: 1}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return st, err
	default:
		if err := json.Unmarshal(b, &st); err != nil || st.Version != 1 {
			return st, fmt.Errorf("%s is not a state file of this lectern (%v)", path, err)
		}
	}
	if st.Subjects == nil {
		st.Subjects = map[string]*heldSubject{}
	}
	if st.Pending == nil {
		st.Pending = map[string]*pendingExport{}
	}
	if st.ClassPending == nil {
		st.ClassPending = map[string]*pendingExport{}
	}
	return st, nil
}

// path is name under the mirror's .lectern directory.
func (m *mirror) path(name ...string) string {
	return filepath.Join(append([]string{m.dir, metaDir}, name...)...)
}

// Close releases the lock.
func (m *mirror) Close() error { return m.lockF.Close() }

// save writes the state: into a temporary file, synced, renamed over the
// old one, and the directory synced, so a kill at any moment leaves the
// old state or the new.
func (m *mirror) save() error {
	b, err := json.MarshalIndent(&m.st, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(m.path("state.json"), b)
}

// writeAtomic replaces path with b in one rename.
func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	return syncDirEntry(filepath.Dir(path))
}

// syncDirEntry syncs a directory, so that a rename in it is durable.
func syncDirEntry(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// sameGrants reports whether a and b list the same grants.
func sameGrants(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
