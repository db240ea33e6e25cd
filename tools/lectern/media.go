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
)

// mediaItem is an asset as media-manifest.json lists it.
type mediaItem struct {
	MediaID  string `json:"mediaId"`
	Bytes    int64  `json:"bytes"`
	Location string `json:"location"`
}

// maxMint is the most ids one mint takes (spec: Route rules §4).
const maxMint = 100

// mediaWorkers is how many assets download at once: below the origin's 8
// downloads of one organisation at once.
const mediaWorkers = 4

// media brings the assets of every subject held into DIR/<location>:
// those missing (or of another size) are minted in batches of at most
// maxMint, sized to what the RateLimit field says is left of the hourly
// mint cap, and downloaded, each resumable, before its link expires.
func (s *syncer) media(ctx context.Context) error {
	var want []mediaItem
	refs := make([]string, 0, len(s.m.st.Subjects))
	for ref := range s.m.st.Subjects {
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	for _, ref := range refs {
		b, err := os.ReadFile(filepath.Join(s.m.path("objects", s.m.st.Subjects[ref].Object), "media-manifest.json"))
		if err != nil {
			return fmt.Errorf("%s: %w", ref, err)
		}
		var mm struct{ Items []mediaItem }
		if err := json.Unmarshal(b, &mm); err != nil {
			return fmt.Errorf("%s media-manifest.json: %w", ref, err)
		}
		for _, it := range mm.Items {
			if !validLocation(it.Location) {
				return fmt.Errorf("%s: media location %q is not a path under media/", ref, it.Location)
			}
			if it.Bytes < 0 {
				return fmt.Errorf("%s: media %s of %d bytes", ref, it.MediaID, it.Bytes)
			}
			if st, err := os.Stat(filepath.Join(s.o.Dir, filepath.FromSlash(it.Location))); err == nil && st.Size() == it.Bytes {
				s.sum.Media.Held++
				continue
			}
			want = append(want, it)
		}
	}
	if len(want) == 0 {
		return nil
	}
	s.say("media: %d assets to fetch", len(want))
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
		if err := s.downloadMedia(ctx, want[:n], urls); err != nil {
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

// downloadMedia downloads each item from its minted url into place.
func (s *syncer) downloadMedia(ctx context.Context, items []mediaItem, urls []minted) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	work := make(chan int)
	for range mediaWorkers {
		wg.Go(func() {
			for i := range work {
				err := s.oneMedia(ctx, items[i], urls[i].URL)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					s.sum.Media.Fetched++
					s.sum.Media.Held++
					s.sum.Bytes += items[i].Bytes
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
// renames it into place once whole: never more than the bytes
// media-manifest.json lists for it.
func (s *syncer) oneMedia(ctx context.Context, it mediaItem, url string) error {
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
	dst := filepath.Join(s.o.Dir, filepath.FromSlash(it.Location))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.Rename(part, dst)
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
