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
}

// heldSubject is a subject the mirror holds, verified.
type heldSubject struct {
	Digest         string `json:"contentDigest"` // the subject's contentDigest when it was exported: its validator
	ContentVersion string `json:"contentVersion"`
	Object         string `json:"object"` // its directory under .lectern/objects
	Files          int    `json:"files"`
	Bytes          int64  `json:"bytes"`
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
	b, err := os.ReadFile(m.path("state.json"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		m.st = state{Version: 1}
	case err != nil:
		m.Close()
		return nil, err
	default:
		if err := json.Unmarshal(b, &m.st); err != nil || m.st.Version != 1 {
			m.Close()
			return nil, fmt.Errorf("%s is not a state file of this lectern (%v)", m.path("state.json"), err)
		}
	}
	if m.st.Subjects == nil {
		m.st.Subjects = map[string]*heldSubject{}
	}
	if m.st.Pending == nil {
		m.st.Pending = map[string]*pendingExport{}
	}
	return m, nil
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
