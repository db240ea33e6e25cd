package main

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// bundleManifest is what the sync reads of a bundle's manifest.json.
type bundleManifest struct {
	ContentVersion string `json:"contentVersion"`
	Subject        string `json:"subject"`
	Files          []struct {
		Name   string `json:"name"`
		Bytes  int64  `json:"bytes"`
		SHA256 string `json:"sha256"`
	} `json:"files"`
}

// unpack checks the zip at path against its manifest (every file it lists
// there, with its size and SHA-256, and no other file but the manifest)
// and writes the files into dir, which it creates; it syncs them. It
// returns the number of files and their bytes.
//
// Before it writes a byte, each entry's size in the zip must be the one
// the manifest lists, and their sum must fit the disk's free space; while
// it writes, an entry's data stops at that size (archive/zip refuses data
// past the size its header declares), so a bundle never writes more than
// its manifest declares.
func unpack(path, dir, subject string) (files int, bytes int64, err error) {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return 0, 0, fmt.Errorf("the bundle is not a whole zip: %w", err)
	}
	defer zr.Close()
	entries := map[string]*zip.File{}
	for _, f := range zr.File {
		if !filepath.IsLocal(f.Name) || strings.ContainsAny(f.Name, `/\`) || entries[f.Name] != nil {
			return 0, 0, fmt.Errorf("the bundle holds an unexpected entry %q", f.Name)
		}
		entries[f.Name] = f
	}
	mf := entries["manifest.json"]
	if mf == nil {
		return 0, 0, fmt.Errorf("the bundle has no manifest.json")
	}
	raw, err := readEntry(mf, 16<<20)
	if err != nil {
		return 0, 0, err
	}
	var m bundleManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return 0, 0, fmt.Errorf("manifest.json: %w", err)
	}
	if m.Subject != subject {
		return 0, 0, fmt.Errorf("the bundle is of %q, not %q", m.Subject, subject)
	}
	if len(m.Files)+1 != len(entries) {
		return 0, 0, fmt.Errorf("the bundle holds %d files, its manifest lists %d", len(entries), len(m.Files)+1)
	}
	total := int64(len(raw))
	for _, mfile := range m.Files {
		if !validSHA256(mfile.SHA256) {
			return 0, 0, fmt.Errorf("the manifest lists %q without a sha256", mfile.Name)
		}
		f := entries[mfile.Name]
		if f == nil || mfile.Name == "manifest.json" {
			return 0, 0, fmt.Errorf("the manifest lists %q, which the bundle does not hold", mfile.Name)
		}
		if mfile.Bytes < 0 || f.UncompressedSize64 != uint64(mfile.Bytes) {
			return 0, 0, fmt.Errorf("%s is of %d bytes in the zip, the manifest lists %d", mfile.Name, f.UncompressedSize64, mfile.Bytes)
		}
		if total += mfile.Bytes; total < 0 || total > 1<<60 {
			return 0, 0, fmt.Errorf("the manifest lists over %s of files", sizeOf(1<<60))
		}
	}
	if free, err := freeBytes(filepath.Dir(dir)); err == nil && total > free {
		// ENOSPC: a local failure, which keeps the pending export (sync.go).
		return 0, 0, fmt.Errorf("no space left: the bundle's files are %d bytes, more than the %d free on the disk: %w", total, free, syscall.ENOSPC)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, 0, err
	}
	write := func(name string, f *zip.File, want int64, sum string) error {
		rc, err := f.Open()
		if err != nil {
			return err
		}
		defer rc.Close()
		out, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(rc, want+1))
		if err == nil {
			err = out.Sync()
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if sum != "" && (n != want || hex.EncodeToString(h.Sum(nil)) != sum) {
			return fmt.Errorf("%s does not match the manifest (%d bytes, want %d; or its sha256 differs)", name, n, want)
		}
		bytes += n
		return nil
	}
	for _, mfile := range m.Files {
		if err := write(mfile.Name, entries[mfile.Name], mfile.Bytes, mfile.SHA256); err != nil {
			return 0, 0, err
		}
	}
	if err := write("manifest.json", mf, int64(len(raw)), ""); err != nil {
		return 0, 0, err
	}
	return len(m.Files) + 1, bytes, syncDirEntry(dir)
}

// readEntry reads a zip entry of at most max bytes.
func readEntry(f *zip.File, max int64) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is over %d bytes", f.Name, max)
	}
	return b, nil
}

// freeBytes is the space free to an unprivileged user on the file system
// of path.
func freeBytes(path string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// validSHA256 reports whether s is a SHA-256 in lower-case hex.
func validSHA256(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
