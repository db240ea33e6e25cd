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
		if !validSHA256(mfile.SHA256) {
			return 0, 0, fmt.Errorf("the manifest lists %q without a sha256", mfile.Name)
		}
		f := entries[mfile.Name]
		if f == nil || mfile.Name == "manifest.json" {
			return 0, 0, fmt.Errorf("the manifest lists %q, which the bundle does not hold", mfile.Name)
		}
		if err := write(mfile.Name, f, mfile.Bytes, mfile.SHA256); err != nil {
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
