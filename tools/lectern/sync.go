package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"crypto/sha256"

	"github.com/schollz/progressbar/v3"
)

// syncOptions are what lectern sync is asked to do.
type syncOptions struct {
	Dir             string
	Tiers, Subjects []string // filters; empty: every granted one
	Media           bool
	JSON, Quiet     bool
	Progress        io.Writer // where progress goes (a terminal gets bars)
	now             func() time.Time
}

// summary is what a sync did, printed at its end (-json: as JSON).
type summary struct {
	ContentVersion string `json:"contentVersion"`
	Subjects       struct {
		Held      int `json:"held"`      // in the mirror at the end
		Fetched   int `json:"fetched"`   // exported and downloaded this run
		Verified  int `json:"verified"`  // checked against their manifest this run
		Unchanged int `json:"unchanged"` // kept: same content digest
		Removed   int `json:"removed"`   // no longer granted: removed
	} `json:"subjects"`
	Files struct {
		Fetched  int `json:"fetched"`
		Verified int `json:"verified"`
	} `json:"files"`
	Media struct {
		Fetched int `json:"fetched"`
		Held    int `json:"held"`
	} `json:"media"`
	Bytes int64 `json:"bytes"` // downloaded this run
	// Billed are the units billed to the organisation while the sync ran,
	// per meter, read from GET /v1/license before and after (another
	// client of the organisation would show here too).
	Billed   map[string]int64 `json:"billed"`
	Complete bool             `json:"complete"`
	Stopped  string           `json:"stopped,omitempty"`
	Error    string           `json:"error,omitempty"`
}

func (s summary) line() string {
	b := make([]string, 0, 4)
	for _, m := range []string{"calls", "exports", "downloads"} {
		b = append(b, fmt.Sprintf("%s %d", m, s.Billed[m]))
	}
	state := "complete"
	if !s.Complete {
		state = "incomplete"
	}
	return fmt.Sprintf("lectern sync: %s at %s: %d subjects held (%d fetched, %d unchanged, %d removed), %d media fetched, %d bytes; billed: %s",
		state, s.ContentVersion, s.Subjects.Held, s.Subjects.Fetched, s.Subjects.Unchanged, s.Subjects.Removed, s.Media.Fetched, s.Bytes, strings.Join(b, ", "))
}

func writeSummary(w io.Writer, s summary) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(s)
}

// syncer is one run of lectern sync.
type syncer struct {
	o     syncOptions
	m     *mirror
	api   *apiClient
	plain *http.Client
	sum   summary
	ver   string  // the contentVersion of this run
	lic   license // the licence status at the start of this run
}

// syncDir mirrors the granted subjects into o.Dir.
func syncDir(ctx context.Context, cfg clientConfig, o syncOptions) (summary, error) {
	if o.now == nil {
		o.now = time.Now
	}
	s := &syncer{o: o, plain: plainClient()}
	s.sum.Billed = map[string]int64{}
	err := s.run(ctx, cfg)
	if err != nil {
		var stopped *stoppedError
		if errors.As(err, &stopped) {
			s.sum.Stopped = stopped.Reason
		} else {
			s.sum.Error = err.Error()
		}
	}
	return s.sum, err
}

func (s *syncer) run(ctx context.Context, cfg clientConfig) error {
	m, err := openMirror(s.o.Dir)
	if err != nil {
		return err
	}
	defer m.Close()
	s.m = m
	scopes := []string{"service-api/content.read", "service-api/content.export"}
	if s.o.Media {
		scopes = append(scopes, "service-api/media.download")
	}
	tc, err := tokenClient(ctx, cfg, s.plain, scopes)
	if err != nil {
		return err
	}
	if s.api, err = newAPI(cfg.URL, tc); err != nil {
		return err
	}
	before, err := s.api.license(ctx)
	if err != nil {
		return fmt.Errorf("read the licence status: %w", err)
	}
	defer func() {
		s.sum.Subjects.Held = len(m.st.Subjects)
		after, err := s.api.license(context.WithoutCancel(ctx))
		if err != nil {
			return
		}
		for k, q := range after.Quota {
			s.sum.Billed[k] = q.Used - before.Quota[k].Used
		}
	}()
	s.ver, s.lic = before.ContentVersion, before
	s.sum.ContentVersion = s.ver
	if before.Status != "active" {
		return fmt.Errorf("the organisation's plan is %s: content cannot be read", before.Status)
	}
	filter := strings.Join(s.o.Tiers, ",") + "|" + strings.Join(s.o.Subjects, ",")
	st := &m.st
	if st.Complete && st.ContentVersion == s.ver && sameGrants(st.Grants, before.ContentGrants) && st.Filter == filter &&
		len(st.Pending) == 0 && (!s.o.Media || st.MediaComplete) && s.held() {
		// Nothing moved: nothing to ask that bills.
		s.sum.Subjects.Unchanged = len(st.Subjects)
		s.sum.Complete = true
		s.say("up to date at %s: %d subjects; nothing billed", s.ver, len(st.Subjects))
		return nil
	}
	st.Complete, st.MediaComplete = false, false
	subjects, err := s.listSubjects(ctx)
	if err != nil {
		return err
	}
	wanted := map[string]bool{}
	for _, sub := range subjects {
		wanted[sub.ref()] = true
	}
	// Subjects no longer granted (or no longer asked for) leave the mirror.
	for ref := range st.Subjects {
		if !wanted[ref] {
			if err := s.remove(ref); err != nil {
				return err
			}
			s.sum.Subjects.Removed++
		}
	}
	for ref := range st.Pending {
		if !wanted[ref] {
			delete(st.Pending, ref)
		}
	}
	for _, sub := range subjects {
		if err := s.subject(ctx, sub); err != nil {
			m.save()
			return err
		}
	}
	st.ContentVersion, st.Grants, st.Filter, st.Complete = s.ver, before.ContentGrants, filter, true
	if err := m.save(); err != nil {
		return err
	}
	s.sweep()
	if s.o.Media {
		if err := s.media(ctx); err != nil {
			m.save()
			return err
		}
		st.MediaComplete = true
		if err := m.save(); err != nil {
			return err
		}
	}
	s.sum.Complete = true
	return nil
}

// held reports whether every subject of the state is in the mirror.
func (s *syncer) held() bool {
	for ref, h := range s.m.st.Subjects {
		if !s.present(ref, h) {
			return false
		}
	}
	return true
}

// listSubjects lists the granted subjects the filters keep, in tier then
// slug order.
func (s *syncer) listSubjects(ctx context.Context) ([]subject, error) {
	tier := ""
	if len(s.o.Tiers) == 1 {
		tier = s.o.Tiers[0]
	}
	all, err := s.api.subjects(ctx, tier)
	if err != nil {
		return nil, stopOr(err, "list the subjects")
	}
	var out []subject
	for _, sub := range all {
		if !slices.Contains(tiers, sub.Tier) || !validSlug(sub.Slug) {
			return nil, fmt.Errorf("the subject list names %q/%q, not a tier and slug this client will make a path of", sub.Tier, sub.Slug)
		}
		if len(s.o.Tiers) > 0 && !slices.Contains(s.o.Tiers, sub.Tier) ||
			len(s.o.Subjects) > 0 && !slices.Contains(s.o.Subjects, sub.ref()) {
			continue
		}
		out = append(out, sub)
	}
	if len(s.o.Subjects) > 0 && len(out) < len(s.o.Subjects) {
		for _, want := range s.o.Subjects {
			if !slices.ContainsFunc(out, func(sub subject) bool { return sub.ref() == want }) {
				return nil, fmt.Errorf("-subject %s: no granted subject of that tier/slug", want)
			}
		}
	}
	return out, nil
}

// subject brings one subject up to date: kept when its content digest is
// the one held, else exported (or its pending export resumed), checked
// against its manifest, and swapped in whole.
func (s *syncer) subject(ctx context.Context, sub subject) error {
	st := &s.m.st
	ref := sub.ref()
	if h := st.Subjects[ref]; h != nil && sub.ContentDigest != "" && h.Digest == sub.ContentDigest && s.present(ref, h) {
		h.ContentVersion = s.ver
		s.sum.Subjects.Unchanged++
		return nil
	}
	if p := st.Pending[ref]; p != nil && p.Object != "" && p.Digest == sub.ContentDigest && p.ContentVersion == s.ver {
		if _, err := os.Stat(filepath.Join(s.m.path("objects", p.Object), "manifest.json")); err == nil {
			// Verified and unpacked by a run killed before its swap.
			s.sum.Subjects.Verified++
			return s.swap(sub, p.Object, p.Files, p.Bytes)
		}
	}
	part := s.m.path("tmp", sub.Tier+"-"+sub.Slug+".zip")
	for attempt := 0; ; attempt++ {
		p := st.Pending[ref]
		if p == nil || p.ContentVersion != s.ver || p.Digest != sub.ContentDigest || !s.o.now().Add(time.Minute).Before(p.ExpiresAt) {
			os.Remove(part)
			x, err := s.api.export(ctx, sub)
			if err != nil {
				return stopOr(err, "export "+ref)
			}
			p = &pendingExport{URL: x.URL, ExpiresAt: x.ExpiresAt, Digest: sub.ContentDigest, ContentVersion: s.ver}
			st.Pending[ref] = p
			if err := s.m.save(); err != nil {
				return err
			}
		}
		bar := s.bar(ref)
		etag, err := fetch(ctx, s.plain, p.URL, part, p.ETag, func(have, total int64, etag string) error {
			bar.ChangeMax64(total)
			bar.Set64(have)
			if etag != p.ETag {
				p.ETag = etag
				return s.m.save()
			}
			return nil
		}, func(n int) {
			bar.Add(n)
			s.sum.Bytes += int64(n)
		})
		bar.Finish()
		if errors.Is(err, errLinkGone) && attempt == 0 {
			delete(st.Pending, ref) // expired or refused: export again, once
			continue
		}
		if err != nil {
			return fmt.Errorf("download %s: %w", ref, err)
		}
		p.ETag = etag
		break
	}
	s.sum.Subjects.Fetched++
	return s.install(sub, part)
}

// install checks the downloaded bundle of sub, unpacks it into a new
// object and swaps the subject's link to it.
func (s *syncer) install(sub subject, part string) error {
	st := &s.m.st
	ref := sub.ref()
	sum := sha256.Sum256([]byte(ref + "\x00" + sub.ContentDigest + "\x00" + s.ver + "\x00" + time.Now().String()))
	object := sub.Tier + "-" + sub.Slug + "-" + hex.EncodeToString(sum[:6])
	tmp := s.m.path("objects", object+".tmp")
	os.RemoveAll(tmp)
	files, bytes, err := unpack(part, tmp, ref)
	if err != nil {
		os.RemoveAll(tmp)
		os.Remove(part) // what was downloaded is not the bundle: download again
		delete(st.Pending, ref)
		s.m.save()
		return fmt.Errorf("verify %s: %w", ref, err)
	}
	final := s.m.path("objects", object)
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	// The verified object is named in the state before the link moves to
	// it, so a kill between the two is finished by the next run (adopt),
	// not downloaded again.
	if p := st.Pending[ref]; p != nil {
		p.Object, p.Files, p.Bytes = object, files, bytes
		if err := s.m.save(); err != nil {
			return err
		}
	}
	os.Remove(part)
	s.sum.Subjects.Verified++
	s.sum.Files.Fetched += files
	s.sum.Files.Verified += files
	return s.swap(sub, object, files, bytes)
}

// swap points the subject's link at object, verified, and records it.
func (s *syncer) swap(sub subject, object string, files int, bytes int64) error {
	st := &s.m.st
	ref := sub.ref()
	if err := s.link(ref, object); err != nil {
		return err
	}
	old := st.Subjects[ref]
	st.Subjects[ref] = &heldSubject{Digest: sub.ContentDigest, ContentVersion: s.ver, Object: object, Files: files, Bytes: bytes}
	delete(st.Pending, ref)
	if err := s.m.save(); err != nil {
		return err
	}
	if old != nil && old.Object != object {
		os.RemoveAll(s.m.path("objects", old.Object))
	}
	return nil
}

// sweep removes what no subject or pending export names: objects left by
// a kill mid-unpack or mid-swap, and downloads of subjects no longer
// pending.
func (s *syncer) sweep() {
	named := map[string]bool{}
	for _, h := range s.m.st.Subjects {
		named[h.Object] = true
	}
	for _, p := range s.m.st.Pending {
		if p.Object != "" {
			named[p.Object] = true
		}
	}
	if des, err := os.ReadDir(s.m.path("objects")); err == nil {
		for _, de := range des {
			if !named[de.Name()] {
				os.RemoveAll(s.m.path("objects", de.Name()))
			}
		}
	}
	if len(s.m.st.Pending) == 0 {
		if des, err := os.ReadDir(s.m.path("tmp")); err == nil {
			for _, de := range des {
				os.RemoveAll(s.m.path("tmp", de.Name()))
			}
		}
	}
}

// link points DIR/<tier>/<slug> at object in one rename.
func (s *syncer) link(ref, object string) error {
	dst := filepath.Join(s.o.Dir, filepath.FromSlash(ref))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	target, err := filepath.Rel(filepath.Dir(dst), s.m.path("objects", object))
	if err != nil {
		return err
	}
	tmp := dst + ".lectern-new"
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDirEntry(filepath.Dir(dst))
}

// present reports whether the subject ref is in the mirror as h says.
func (s *syncer) present(ref string, h *heldSubject) bool {
	t, err := os.Readlink(filepath.Join(s.o.Dir, filepath.FromSlash(ref)))
	if err != nil || filepath.Base(t) != h.Object {
		return false
	}
	_, err = os.Stat(filepath.Join(s.m.path("objects", h.Object), "manifest.json"))
	return err == nil
}

// remove takes a subject out of the mirror: its link, then its files.
func (s *syncer) remove(ref string) error {
	h := s.m.st.Subjects[ref]
	if err := os.Remove(filepath.Join(s.o.Dir, filepath.FromSlash(ref))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	delete(s.m.st.Subjects, ref)
	if err := s.m.save(); err != nil {
		return err
	}
	if h != nil {
		os.RemoveAll(s.m.path("objects", h.Object))
	}
	return nil
}

// bar is a progress bar of a download named what, on the progress output
// (a terminal gets it drawn; anything else gets nothing but the summary).
func (s *syncer) bar(what string) *progressbar.ProgressBar {
	w := s.o.Progress
	if w == nil || !isTerminal(w) {
		w = io.Discard
	}
	return progressbar.NewOptions64(-1, progressbar.OptionSetWriter(w), progressbar.OptionShowBytes(true),
		progressbar.OptionSetDescription(what), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(), progressbar.OptionSetPredictTime(true))
}

// say writes a line of progress, unless quiet.
func (s *syncer) say(format string, args ...any) {
	if s.o.Progress != nil && !s.o.JSON {
		fmt.Fprintf(s.o.Progress, "lectern sync: "+format+"\n", args...)
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// tiers are the API's tier values (spec: Conventions).
var tiers = []string{"topics", "college", "high", "middle", "primary"}

// validSlug reports whether slug is safe as a path segment: lower-case
// letters, digits and inner hyphens, as the corpus writes slugs.
func validSlug(slug string) bool {
	if slug == "" || len(slug) > 100 || slug[0] == '-' || slug[len(slug)-1] == '-' {
		return false
	}
	for i := 0; i < len(slug); i++ {
		c := slug[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
