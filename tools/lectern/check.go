package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/lectern-api/lectern/shared/id"
)

// exitDifferences is the exit status of a check that found the mirror
// not as its manifests say.
const exitDifferences = 1

// difference is one way the mirror is not what its state and manifests
// say.
type difference struct {
	Subject string `json:"subject"`
	File    string `json:"file,omitempty"` // "" for the subject itself
	Kind    string `json:"kind"`           // missing, changed or extra
	Detail  string `json:"detail,omitempty"`
}

func (d difference) String() string {
	what := d.Subject
	if d.File != "" {
		what += "/" + d.File
	}
	if d.Detail != "" {
		return what + ": " + d.Kind + " (" + d.Detail + ")"
	}
	return what + ": " + d.Kind
}

// The kinds of a difference.
const (
	diffMissing = "missing"
	diffChanged = "changed"
	diffExtra   = "extra"
)

// inspectSubject compares the subject ref, held as h in the mirror at dir,
// with what it was installed as: its link names h's object, and the
// object holds each file its manifest.json lists at the size and sha256
// listed, and nothing else. manifest.json itself is rehashed against the
// one installed (h.Manifest) when the state has it.
//
// With rehash every file is read and hashed. Without, a file is trusted
// when its size and modification time are those h.Stamps recorded at
// install (or, when h has no stamps, its size is the manifest's); a file
// of the right size whose time moved is rehashed, so a file only touched
// is not taken for a changed one. stamps are the files' stamps now, for
// the state, when nothing differs.
func inspectSubject(dir, ref string, h *heldSubject, rehash bool) (diffs []difference, stamps map[string]fileStamp) {
	add := func(file, kind, detail string) {
		diffs = append(diffs, difference{Subject: ref, File: file, Kind: kind, Detail: detail})
	}
	link := filepath.Join(dir, filepath.FromSlash(ref))
	switch t, err := os.Readlink(link); {
	case errors.Is(err, os.ErrNotExist):
		add("", diffMissing, "no "+ref+" in the mirror")
		return diffs, nil
	case err != nil:
		add("", diffChanged, ref+" is not the link lectern made")
		return diffs, nil
	case filepath.Base(t) != h.Object:
		add("", diffChanged, "links to "+t+", not to "+h.Object)
		return diffs, nil
	}
	obj := filepath.Join(dir, metaDir, "objects", h.Object)
	raw, err := os.ReadFile(filepath.Join(obj, "manifest.json"))
	if err != nil {
		add("manifest.json", diffMissing, "")
		return diffs, nil
	}
	stamps = map[string]fileStamp{}
	if fi, err := os.Stat(filepath.Join(obj, "manifest.json")); err == nil {
		stamps["manifest.json"] = stampOf(fi)
	}
	if h.Manifest != "" && sha256Hex(raw) != h.Manifest {
		add("manifest.json", diffChanged, "not the manifest installed")
		return diffs, nil
	}
	var m bundleManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		add("manifest.json", diffChanged, "not a manifest: "+err.Error())
		return diffs, nil
	}
	listed := map[string]bool{"manifest.json": true}
	for _, f := range m.Files {
		listed[f.Name] = true
		p := filepath.Join(obj, f.Name)
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			add(f.Name, diffMissing, "")
			continue
		case err != nil:
			add(f.Name, diffChanged, err.Error())
			continue
		case !fi.Mode().IsRegular():
			add(f.Name, diffChanged, "not a regular file")
			continue
		case fi.Size() != f.Bytes:
			add(f.Name, diffChanged, fmt.Sprintf("%d bytes, the manifest lists %d", fi.Size(), f.Bytes))
			continue
		}
		old, stamped := h.Stamps[f.Name]
		if rehash || stamped && old != stampOf(fi) {
			sum, err := fileSHA256(p)
			if err != nil {
				add(f.Name, diffChanged, err.Error())
				continue
			}
			if sum != f.SHA256 {
				add(f.Name, diffChanged, "its sha256 is not the manifest's")
				continue
			}
		}
		stamps[f.Name] = stampOf(fi)
	}
	des, err := os.ReadDir(obj)
	if err != nil {
		add("", diffChanged, err.Error())
	}
	for _, de := range des {
		if !listed[de.Name()] {
			add(de.Name(), diffExtra, "not in the manifest")
		}
	}
	if len(diffs) > 0 {
		stamps = nil
	}
	return diffs, stamps
}

// stampOf is fi's size and modification time.
func stampOf(fi os.FileInfo) fileStamp {
	return fileStamp{Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// fileSHA256 is the SHA-256 of the file at path, in lower-case hex.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// checkReport is what lectern check -json writes.
type checkReport struct {
	Subjects    int          `json:"subjects"`
	Files       int          `json:"files"`
	Media       int          `json:"media"` // assets checked
	Differences []difference `json:"differences"`
	Clean       bool         `json:"clean"`
}

// checkDir verifies the mirror at dir against its state and manifests,
// rehashing every file. It reads only the disk: no network.
func checkDir(dir string) (checkReport, error) {
	rep := checkReport{Differences: []difference{}}
	statePath := filepath.Join(dir, metaDir, "state.json")
	if _, err := os.Stat(statePath); err != nil {
		return rep, fmt.Errorf("%s is not a lectern mirror (no %s)", dir, filepath.Join(metaDir, "state.json"))
	}
	// A sync swapping subjects while we read would show as differences.
	if lf, err := os.Open(filepath.Join(dir, metaDir, "lock")); err == nil {
		defer lf.Close()
		if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
			return rep, fmt.Errorf("a lectern sync is running in %s: check it once the sync ends", dir)
		}
	}
	st, err := readState(statePath)
	if err != nil {
		return rep, err
	}
	refs := make([]string, 0, len(st.Subjects))
	for ref := range st.Subjects {
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	for _, ref := range refs {
		h := st.Subjects[ref]
		diffs, _ := inspectSubject(dir, ref, h, true)
		rep.Subjects++
		rep.Files += h.Files
		rep.Differences = append(rep.Differences, diffs...)
	}
	// What DIR/<tier>/ holds that the state does not.
	for _, tier := range id.Tiers {
		des, err := os.ReadDir(filepath.Join(dir, tier))
		if err != nil {
			continue
		}
		for _, de := range des {
			if ref := tier + "/" + de.Name(); st.Subjects[ref] == nil {
				rep.Differences = append(rep.Differences, difference{Subject: ref, Kind: diffExtra, Detail: "no subject the mirror holds"})
			}
		}
	}
	rep.Differences = append(rep.Differences, inspectMedia(dir, st, &rep.Media)...)
	sort.SliceStable(rep.Differences, func(i, j int) bool { return rep.Differences[i].Subject < rep.Differences[j].Subject })
	rep.Clean = len(rep.Differences) == 0
	return rep, nil
}

const checkUsage = `Usage: lectern check [-json] DIR

Verify the mirror in DIR against its manifests, without the network: every
subject's link, every file its manifest.json lists (size and sha256, each
file read and rehashed), and any file or subject the mirror does not hold.
Media under DIR/media are checked against the subjects' media-manifest.json:
each asset's size, and its sha256 where the manifest lists one (rehashed);
an asset missing counts once a -media run completed; a file no subject (nor
a previous copy kept for readers) lists is extra. Each difference is one
line: missing, changed or extra. Nothing is billed and nothing is repaired:
lectern sync DIR repairs (it says what that bills first).

Exit status: 0 the mirror is as its manifests say; 1 a difference; 2 a usage
error, or DIR could not be checked (not a mirror, a sync running in it).

Flags:
`

// runCheck is lectern check.
func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lectern check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "write the differences as JSON on standard output")
	fs.Usage = func() {
		fmt.Fprint(stderr, checkUsage)
		fs.PrintDefaults()
	}
	dir, code := parseDir(fs, args, stderr)
	if code >= 0 {
		return code
	}
	rep, err := checkDir(dir)
	if err != nil {
		fmt.Fprintln(stderr, "lectern check:", err)
		return 2
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		for _, d := range rep.Differences {
			fmt.Fprintln(stdout, d)
		}
	}
	if !rep.Clean {
		fmt.Fprintf(stderr, "lectern check: %d differences in %d subjects (%d files, %d media)\n", len(rep.Differences), rep.Subjects, rep.Files, rep.Media)
		return exitDifferences
	}
	fmt.Fprintf(stderr, "lectern check: %d subjects, %d files, %d media: as their manifests say\n", rep.Subjects, rep.Files, rep.Media)
	return 0
}

// mediaSubject is the Subject of a difference in DIR/media.
const mediaSubject = "media"

// inspectMedia compares DIR/media with the media-manifest.json of every
// subject held, rehashing each asset that has a sha256; n counts the
// assets checked. An asset missing is a difference once a -media run
// completed (st.MediaComplete); a file listed by no subject held nor by a
// copy kept for readers is extra.
func inspectMedia(dir string, st state, n *int) []difference {
	root := filepath.Join(dir, "media")
	if _, err := os.Lstat(root); err != nil && !st.MediaComplete {
		return nil
	}
	var diffs []difference
	add := func(loc, kind, detail string) {
		diffs = append(diffs, difference{Subject: mediaSubject, File: strings.TrimPrefix(loc, "media/"), Kind: kind, Detail: detail})
	}
	listed := map[string]bool{}
	objects := func(yield func(string, bool) bool) {
		for _, h := range st.Subjects {
			if !yield(h.Object, true) {
				return
			}
		}
		for _, r := range st.Retired {
			if !yield(r.Object, false) {
				return
			}
		}
	}
	for obj, held := range objects {
		items, err := readMediaManifest(filepath.Join(dir, metaDir, "objects", obj))
		if err != nil {
			if held {
				add(obj, diffChanged, "media-manifest.json of "+obj+": "+err.Error())
			}
			continue
		}
		for _, it := range items {
			if listed[it.Location] {
				continue
			}
			listed[it.Location] = true
			if !held {
				continue
			}
			*n++
			p := filepath.Join(dir, filepath.FromSlash(it.Location))
			fi, err := os.Lstat(p)
			switch {
			case errors.Is(err, os.ErrNotExist):
				if st.MediaComplete {
					add(it.Location, diffMissing, it.MediaID)
				}
			case err != nil:
				add(it.Location, diffChanged, err.Error())
			case !fi.Mode().IsRegular():
				add(it.Location, diffChanged, "not a regular file")
			case fi.Size() != it.Bytes:
				add(it.Location, diffChanged, fmt.Sprintf("%d bytes, media-manifest.json lists %d", fi.Size(), it.Bytes))
			case it.SHA256 != "":
				if sum, err := fileSHA256(p); err != nil {
					add(it.Location, diffChanged, err.Error())
				} else if sum != it.SHA256 {
					add(it.Location, diffChanged, "its sha256 is not media-manifest.json's")
				}
			}
		}
	}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if rel, err := filepath.Rel(dir, p); err == nil && !listed[filepath.ToSlash(rel)] {
			add(filepath.ToSlash(rel), diffExtra, "no subject held lists it")
		}
		return nil
	})
	return diffs
}
