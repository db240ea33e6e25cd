package corpus

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sync"
)

// fileSums collects the SHA-256 of each corpus file as the loader reads
// it (lessons are read in parallel).
type fileSums struct {
	mu   sync.Mutex
	sums map[string][sha256.Size]byte
}

func (f *fileSums) add(name string, b []byte) {
	sum := sha256.Sum256(b)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sums == nil {
		f.sums = map[string][sha256.Size]byte{}
	}
	f.sums[name] = sum
}

// digest is Corpus.ContentDigest over files (the manifest's list, all of
// them read): for each file in bytewise order of its path, the path, a
// NUL byte, then the file's own SHA-256. Any changed byte of any file moves it; corpus.json,
// and so the declared contentVersion, is not part of it.
func (f *fileSums) digest(files []string) string {
	files = slices.Clone(files)
	slices.Sort(files)
	h := sha256.New()
	for _, name := range files {
		sum := f.sums[name]
		h.Write([]byte(name))
		h.Write([]byte{0})
		h.Write(sum[:])
	}
	return DigestPrefix + hex.EncodeToString(h.Sum(nil))
}
