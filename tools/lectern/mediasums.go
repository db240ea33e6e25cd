package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
)

// mediaSums are the assets whose bytes a run hashed and found as
// media-manifest.json lists them, by location, with the size and
// modification time they had then: .lectern/media-sums.json. A later run
// takes an asset of the same stamp and sha256 as checked without reading
// it (-verify reads it). Only assets the manifest gives a sha256 are
// here; losing the file costs a rehash, never a download.
type mediaSums struct {
	mu    sync.Mutex
	Files map[string]mediaSum `json:"files"`
	dirty bool
}

// mediaSum is an asset's stamp when its bytes hashed to SHA256.
type mediaSum struct {
	fileStamp
	SHA256 string `json:"sha256"`
}

// mediaSums reads .lectern/media-sums.json once; a missing or unreadable
// file is an empty record.
func (m *mirror) mediaSums() *mediaSums {
	if m.sums != nil {
		return m.sums
	}
	m.sums = &mediaSums{Files: map[string]mediaSum{}}
	if b, err := os.ReadFile(m.path("media-sums.json")); err == nil {
		var f struct {
			Files map[string]mediaSum `json:"files"`
		}
		if json.Unmarshal(b, &f) == nil && f.Files != nil {
			m.sums.Files = f.Files
		}
	}
	return m.sums
}

// saveMediaSums writes the record when it changed.
func (m *mirror) saveMediaSums() error {
	s := m.sums
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.dirty {
		return nil
	}
	b, err := json.Marshal(struct {
		Files map[string]mediaSum `json:"files"`
	}{s.Files})
	if err != nil {
		return err
	}
	if err := writeAtomic(m.path("media-sums.json"), b); err != nil {
		return err
	}
	s.dirty = false
	return nil
}

// held reports whether the asset it is in place under dir: a regular
// file of its size and, when it has a sha256, of those bytes (read
// unless this record has its stamp and sum, or rehash).
func (s *mediaSums) held(dir string, it mediaItem, rehash bool) bool {
	p := filepath.Join(dir, filepath.FromSlash(it.Location))
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != it.Bytes {
		return false
	}
	if it.SHA256 == "" {
		return true
	}
	s.mu.Lock()
	rec, ok := s.Files[it.Location]
	s.mu.Unlock()
	if ok && !rehash && rec.SHA256 == it.SHA256 && rec.fileStamp == stampOf(fi) {
		return true
	}
	sum, err := fileSHA256(p)
	if err != nil || sum != it.SHA256 {
		return false
	}
	s.record(it.Location, stampOf(fi), sum)
	return true
}

// record notes the asset at loc hashed to sum at stamp st.
func (s *mediaSums) record(loc string, st fileStamp, sum string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Files[loc] = mediaSum{fileStamp: st, SHA256: sum}
	s.dirty = true
}

// forget drops loc from the record.
func (s *mediaSums) forget(loc string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.Files[loc]; ok {
		delete(s.Files, loc)
		s.dirty = true
	}
}
