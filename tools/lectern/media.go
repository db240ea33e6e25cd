package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// mediaItem is an asset as media-manifest.json lists it.
type mediaItem struct {
	MediaID string `json:"mediaId"`
	Bytes   int64  `json:"bytes"`
	// SHA256 is the file's SHA-256 in lowercase hex when the corpus
	// declares it; "" when it does not (the asset is checked by size).
	SHA256   string `json:"sha256"`
	Location string `json:"location"`
}

// maxMint is the most ids one mint takes (spec: Route rules §4).
const maxMint = 100

// mediaWorkers is how many assets download at once: below the origin's 8
// downloads of one organisation at once.
const mediaWorkers = 4

// readMediaManifest reads the media-manifest.json of object.
func (m *mirror) readMediaManifest(object string) ([]mediaItem, error) {
	return readMediaManifest(m.path("objects", object))
}

// readMediaManifest reads the media-manifest.json in the directory obj,
// each item checked: a location under media/, a size, a sha256 of 64 hex
// digits when there is one.
func readMediaManifest(obj string) ([]mediaItem, error) {
	b, err := os.ReadFile(filepath.Join(obj, "media-manifest.json"))
	if err != nil {
		return nil, err
	}
	var mm struct{ Items []mediaItem }
	if err := json.Unmarshal(b, &mm); err != nil {
		return nil, fmt.Errorf("media-manifest.json: %w", err)
	}
	for _, it := range mm.Items {
		switch {
		case !validLocation(it.Location):
			return nil, fmt.Errorf("media location %q is not a path under media/", it.Location)
		case it.Bytes < 0:
			return nil, fmt.Errorf("media %s of %d bytes", it.MediaID, it.Bytes)
		case it.SHA256 != "" && !isHexSHA256(it.SHA256):
			return nil, fmt.Errorf("media %s: sha256 %q is not 64 lowercase hex digits", it.MediaID, it.SHA256)
		}
	}
	return mm.Items, nil
}

// media brings the assets of every subject held into DIR/<location>:
// those missing, of another size or, when media-manifest.json gives
// their sha256, of other bytes are minted in batches of at most maxMint,
// sized to what the RateLimit field says is left of the hourly mint
// cap, and downloaded, each resumable, before its link expires.
func (s *syncer) media(ctx context.Context) error {
	sums := s.m.mediaSums()
	defer func() {
		if err := s.m.saveMediaSums(); err != nil {
			s.warn("could not record the media checked: %v", err)
		}
	}()
	var want []mediaItem
	var wantBytes int64
	refs := make([]string, 0, len(s.m.st.Subjects))
	for ref := range s.m.st.Subjects {
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	for _, ref := range refs {
		items, err := s.m.readMediaManifest(s.m.st.Subjects[ref].Object)
		if err != nil {
			return fmt.Errorf("%s: %w", ref, err)
		}
		for _, it := range items {
			if sums.held(s.o.Dir, it, s.o.Verify) {
				s.sum.Media.Held++
				continue
			}
			want = append(want, it)
			wantBytes += it.Bytes
		}
	}
	if len(want) == 0 {
		return nil
	}
	s.say("media: %d assets to fetch, %s", len(want), mib(wantBytes))
	s.mprog = mediaProgress{total: len(want), totalBytes: wantBytes}
	// The first batch fits the hourly cap; later ones what the answers'
	// RateLimit field says is left of it.
	batch := maxMint
	if c := s.lic.RateLimits["urlMintsPerHour"]; c != nil {
		batch = int(min(max(*c, 1), maxMint))
	}
	for len(want) > 0 {
		n := min(batch, len(want))
		ids := make([]string, n)
		for i := range ids {
			ids[i] = want[i].MediaID
		}
		urls, left, err := s.api.mint(ctx, ids)
		if err != nil {
			return stopOr(err, "mint")
		}
		if err := s.downloadMedia(ctx, want[:n], urls, sums); err != nil {
			return err
		}
		want = want[n:]
		if left >= 0 {
			if left == 0 && len(want) > 0 {
				return &stoppedError{Reason: fmt.Sprintf("the hourly mint cap is reached with %d assets left; run again after the top of the hour", len(want))}
			}
			batch = int(min(left, maxMint))
		}
	}
	return nil
}

// mediaHeld reports whether every asset of the selected subjects held is
// in place (mediaSums.held: size, and sha256 where listed, read when the
// file's stamp moved or -verify), saying how many are not and what
// fetching them bills.
func (s *syncer) mediaHeld() bool {
	sums := s.m.mediaSums()
	defer s.m.saveMediaSums()
	missing := 0
	for ref, h := range s.m.st.Subjects {
		if !s.o.selects(ref) {
			continue
		}
		items, err := s.m.readMediaManifest(h.Object)
		if err != nil {
			return false
		}
		for _, it := range items {
			if !sums.held(s.o.Dir, it, s.o.Verify) {
				missing++
			}
		}
	}
	if missing > 0 {
		s.warn("media: %d assets missing or changed locally; fetching them again bills a call per mint of up to %d and a download each", missing, maxMint)
	}
	return missing == 0
}

// downloadMedia downloads each item from its minted url into place.
func (s *syncer) downloadMedia(ctx context.Context, items []mediaItem, urls []minted, sums *mediaSums) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	work := make(chan int)
	for range mediaWorkers {
		wg.Go(func() {
			for i := range work {
				err := s.oneMedia(ctx, items[i], urls[i].URL, sums)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					s.sum.Media.Fetched++
					s.sum.Media.Held++
					s.sum.Bytes += items[i].Bytes
					s.mediaProgressed(items[i].Bytes)
				}
				mu.Unlock()
			}
		})
	}
	for i := range items {
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	return firstErr
}

// oneMedia downloads one asset into a part file under .lectern/tmp and
// renames it into place once whole and, when media-manifest.json gives
// its sha256, of those bytes: never more than the bytes listed for it.
func (s *syncer) oneMedia(ctx context.Context, it mediaItem, url string, sums *mediaSums) error {
	h := sha256.Sum256([]byte(it.MediaID))
	part := s.m.path("tmp", "media-"+hex.EncodeToString(h[:8]))
	etag := ""
	for attempt := 0; attempt < 3; attempt++ {
		var err error
		etag, err = fetchSized(ctx, s.plain, url, part, etag, it.Bytes, nil, nil)
		if err == nil {
			break
		}
		if attempt == 2 || errors.Is(err, errLinkGone) || errors.Is(err, errSize) || ctx.Err() != nil {
			return fmt.Errorf("download %s: %w", it.MediaID, err)
		}
	}
	if st, err := os.Stat(part); err != nil || st.Size() != it.Bytes {
		os.Remove(part)
		return fmt.Errorf("download %s: not %d bytes", it.MediaID, it.Bytes)
	}
	if it.SHA256 != "" {
		sum, err := fileSHA256(part)
		if err != nil {
			return fmt.Errorf("download %s: %w", it.MediaID, err)
		}
		if sum != it.SHA256 {
			os.Remove(part)
			return fmt.Errorf("download %s: its sha256 is %s, media-manifest.json lists %s; not installed", it.MediaID, sum, it.SHA256)
		}
	}
	dst := filepath.Join(s.o.Dir, filepath.FromSlash(it.Location))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := os.Rename(part, dst); err != nil {
		return err
	}
	if it.SHA256 != "" {
		if fi, err := os.Stat(dst); err == nil {
			sums.record(it.Location, stampOf(fi), it.SHA256)
		}
	}
	return nil
}

// mediaProgress counts a run's media downloads for the progress line.
type mediaProgress struct {
	done, total       int
	bytes, totalBytes int64
	said              time.Time
}

// mediaProgressed counts an asset of n bytes downloaded and says so every
// progressEvery, and for the last.
func (s *syncer) mediaProgressed(n int64) {
	p := &s.mprog
	p.done++
	p.bytes += n
	if p.done < p.total && time.Since(p.said) < progressEvery {
		return
	}
	p.said = time.Now()
	s.say("media %d/%d assets, %s/%s", p.done, p.total, mib(p.bytes), mib(p.totalBytes))
}

// mib is n bytes in MiB, e.g. "12.5 MiB".
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// sweepMedia removes from DIR/media every file no subject held lists in
// its media-manifest.json, nor a previous copy kept for readers
// (-keep-previous): the assets of a subject removed, or of a class whose
// assets moved, once nothing names them. Empty directories go too. A
// manifest of a held subject that cannot be read leaves everything (a
// sweep needs the whole list).
func (s *syncer) sweepMedia() {
	root := filepath.Join(s.o.Dir, "media")
	if _, err := os.Lstat(root); err != nil {
		return
	}
	listed := map[string]bool{}
	for ref, h := range s.m.st.Subjects {
		items, err := s.m.readMediaManifest(h.Object)
		if err != nil {
			s.warn("media not swept: %s: %v", ref, err)
			return
		}
		for _, it := range items {
			listed[it.Location] = true
		}
	}
	for _, r := range s.m.st.Retired {
		items, _ := s.m.readMediaManifest(r.Object) // reaped already: nothing to keep
		for _, it := range items {
			listed[it.Location] = true
		}
	}
	var (
		files int
		bytes int64
		dirs  []string
	)
	sums := s.m.mediaSums()
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if p != root {
				dirs = append(dirs, p)
			}
			return nil
		}
		rel, err := filepath.Rel(s.o.Dir, p)
		if err != nil || listed[filepath.ToSlash(rel)] {
			return nil
		}
		var size int64
		if fi, err := d.Info(); err == nil {
			size = fi.Size()
		}
		if os.Remove(p) == nil {
			files++
			bytes += size
			sums.forget(filepath.ToSlash(rel))
		}
		return nil
	})
	// Deepest first: a directory emptied by its children's removal goes.
	slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
	for _, d := range dirs {
		os.Remove(d) // fails, and stays, when not empty
	}
	if files > 0 {
		s.sum.Media.Removed += files
		s.say("media: removed %d files no subject held lists, %s", files, mib(bytes))
		if err := s.m.saveMediaSums(); err != nil {
			s.warn("could not record the media checked: %v", err)
		}
	}
}

// validLocation reports whether loc is a media location the sync may
// write: a clean relative path under media/, of safe segments (nothing a
// subject's link, the .lectern directory or another place could be
// reached by).
func validLocation(loc string) bool {
	rest, ok := strings.CutPrefix(loc, "media/")
	if !ok || !filepath.IsLocal(loc) || path.Clean(loc) != loc {
		return false
	}
	for _, seg := range strings.Split(rest, "/") {
		if seg == "" || seg[0] == '.' {
			return false
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
				return false
			}
		}
	}
	return true
}

// isHexSHA256 reports whether s is a SHA-256 in lowercase hex.
func isHexSHA256(s string) bool {
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
