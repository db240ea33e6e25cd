package main

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/lectern-api/lectern/shared/id"
	"github.com/schollz/progressbar/v3"
)

// syncOptions are what lectern sync is asked to do.
type syncOptions struct {
	Dir string
	// Tiers and Subjects ("<tier>/<slug>") select what the run updates;
	// empty: every granted subject. The subjects held outside the
	// selection are kept, unless Prune.
	Tiers, Subjects []string
	Prune           bool
	Media           bool
	JSON, Quiet     bool
	// Verify rehashes every file held before taking a subject as
	// unchanged (without it: each file's size and modification time).
	Verify bool
	// KeepPrevious is how long a subject's previous copy stays after its
	// link moves (or the subject leaves), for readers that resolved the
	// link before (keep.go); 0: removed at once.
	KeepPrevious time.Duration
	// DryRun plans the run without a billed call (dryrun.go).
	DryRun   bool
	Progress io.Writer // where progress goes (a terminal gets bars)
	now      func() time.Time
}

// summary is what a sync did, printed at its end (-json: as JSON).
type summary struct {
	ContentVersion string `json:"contentVersion"`
	Subjects       struct {
		Held      int `json:"held"`      // in the mirror at the end
		Fetched   int `json:"fetched"`   // exported and downloaded this run
		Verified  int `json:"verified"`  // checked against their manifest this run
		Unchanged int `json:"unchanged"` // kept: same content digest
		Outside   int `json:"outside"`   // held outside -tier/-subject: kept as they were
		Removed   int `json:"removed"`   // removed: RemovedSubjects says why
		Repaired  int `json:"repaired"`  // held, changed or removed locally: exported again
	} `json:"subjects"`
	RemovedSubjects []removal `json:"removedSubjects,omitempty"`
	// Classes are the classes exported and removed by class-level updates
	// (classes.go); the subjects so updated count as fetched.
	Classes struct {
		Fetched int `json:"fetched"`
		Removed int `json:"removed"`
	} `json:"classes"`
	// Feed says how the run learned what changed: "feed" (GET
	// /v1/changes), or why it listed the subjects instead ("full: …").
	Feed  string `json:"feed,omitempty"`
	Files struct {
		Fetched  int `json:"fetched"`
		Verified int `json:"verified"`
	} `json:"files"`
	Media struct {
		Fetched int `json:"fetched"`
		Held    int `json:"held"`
		Removed int `json:"removed"` // files no subject held lists any more
	} `json:"media"`
	Bytes int64 `json:"bytes"` // downloaded this run
	// Billed are the units billed to the organisation while the sync ran,
	// per meter, read from GET /v1/license before and after (another
	// client of the organisation would show here too).
	Billed   map[string]int64 `json:"billed"`
	Complete bool             `json:"complete"`
	// DryRun is a dry run's plan (-dry-run): nothing was done.
	DryRun  *dryRun `json:"dryRun,omitempty"`
	Stopped string  `json:"stopped,omitempty"`
	Error   string  `json:"error,omitempty"`
}

// removal is a subject the run took out of the mirror, and why.
type removal struct {
	Subject string `json:"subject"`
	Reason  string `json:"reason"`
}

// The reasons of a removal.
const (
	removedUngranted = "no longer granted"
	removedUnlisted  = "no longer listed"
	removedPruned    = "not selected (-prune)"
)

func (s summary) line() string {
	if s.DryRun != nil {
		return s.dryRunText()
	}
	b := make([]string, 0, 4)
	for _, m := range []string{"calls", "exports", "downloads"} {
		b = append(b, fmt.Sprintf("%s %d", m, s.Billed[m]))
	}
	state := "complete"
	if !s.Complete {
		state = "incomplete"
	}
	version := s.ContentVersion
	if version == "" {
		version = "no contentVersion yet"
	}
	outside := ""
	if s.Subjects.Outside > 0 {
		outside = fmt.Sprintf(", %d outside the selection", s.Subjects.Outside)
	}
	if s.Classes.Fetched+s.Classes.Removed > 0 {
		outside += fmt.Sprintf(", %d classes exported and %d removed by class", s.Classes.Fetched, s.Classes.Removed)
	}
	mediaRemoved := ""
	if s.Media.Removed > 0 {
		mediaRemoved = fmt.Sprintf(" (%d removed)", s.Media.Removed)
	}
	return fmt.Sprintf("lectern sync: %s at %s: %d subjects held (%d fetched, %d unchanged%s, %d removed), %d media fetched%s, %d bytes; billed: %s",
		state, version, s.Subjects.Held, s.Subjects.Fetched, s.Subjects.Unchanged, outside, s.Subjects.Removed, s.Media.Fetched, mediaRemoved,
		s.Bytes, strings.Join(b, ", "))
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
	ver   string // the contentVersion of this run
	// inspected are the subjects held inspected this run (present), with
	// their differences.
	inspected map[string][]difference
	stamped   bool    // a subject's stamps were recorded: the state is to be saved
	lic       license // the licence status at the start of this run
	spent     cost    // what the class-level plans chosen bill (classes.go)
	prog      progress
	mprog     mediaProgress
}

// syncDir mirrors the granted subjects into o.Dir.
func syncDir(ctx context.Context, cfg clientConfig, o syncOptions) (summary, error) {
	if o.now == nil {
		o.now = time.Now
	}
	s := &syncer{o: o, plain: plainClient()}
	s.sum.Billed = map[string]int64{}
	err := s.run(ctx, cfg)
	if s.sum.ContentVersion == "" && s.m != nil {
		// The licence was not read: the version DIR holds.
		s.sum.ContentVersion = s.m.st.ContentVersion
	}
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

// run is the sync: the mirror opened, the licence status read, and the
// selected subjects brought to its contentVersion (a dry run: planned).
func (s *syncer) run(ctx context.Context, cfg clientConfig) error {
	var m *mirror
	var err error
	if s.o.DryRun {
		// Read only: no directory made, no lock taken.
		m = &mirror{dir: s.o.Dir}
		if m.st, err = readState(m.path("state.json")); err != nil {
			return err
		}
	} else {
		if m, err = openMirror(s.o.Dir); err != nil {
			return err
		}
		defer m.Close()
	}
	s.m = m
	if err := s.connect(ctx, cfg); err != nil {
		return err
	}
	before, err := s.api.license(ctx)
	if err != nil {
		return fmt.Errorf("read the licence status: %w", err)
	}
	defer s.tally(ctx, before)
	s.ver, s.lic = before.ContentVersion, before
	s.sum.ContentVersion = s.ver
	if before.Status != "active" {
		return fmt.Errorf("the organisation's plan is %s: content cannot be read", before.Status)
	}
	// A selection no grant covers is refused before anything is billed.
	if err := s.o.checkGranted(before.ContentGrants); err != nil {
		return err
	}
	if s.o.DryRun {
		s.plan(before)
		return nil
	}
	return s.catchUp(ctx, before)
}

// connect makes the run's API client, with a token of the scopes it needs.
func (s *syncer) connect(ctx context.Context, cfg clientConfig) error {
	scopes := []string{"service-api/content.read", "service-api/content.export"}
	if s.o.Media {
		scopes = append(scopes, "service-api/media.download")
	}
	tc, err := tokenClient(ctx, cfg, s.plain, scopes)
	if err != nil {
		return err
	}
	s.api, err = newAPI(cfg.URL, tc)
	return err
}

// tally ends the summary: the subjects held, and the units billed while
// the run went, from the licence status read again (whatever stopped the
// run) against before.
func (s *syncer) tally(ctx context.Context, before license) {
	s.sum.Subjects.Held = len(s.m.st.Subjects)
	after, err := s.api.license(context.WithoutCancel(ctx))
	if err != nil {
		return
	}
	for k, q := range after.Quota {
		s.sum.Billed[k] = q.Used - before.Quota[k].Used
	}
}

// catchUp brings the mirror to the contentVersion of before (the licence
// status read): through the change feed or the listing, unless nothing
// moved since the last run; then the media, and the state written.
func (s *syncer) catchUp(ctx context.Context, before license) error {
	st := &s.m.st
	// Previous copies whose grace has passed leave, whatever this run does.
	if s.reap() {
		if err := s.m.save(); err != nil {
			return fmt.Errorf("write the state: %w", err)
		}
		s.sweepMedia()
	}
	filter, whole := s.o.filter(), s.o.filter() == wholeFilter
	// current: the last run completed at this contentVersion and these
	// grants; wholeCurrent: and it selected every granted subject, so
	// any selection of them is current too.
	current := st.Complete && st.ContentVersion == s.ver && sameGrants(st.Grants, before.ContentGrants)
	wholeCurrent := current && st.Filter == wholeFilter
	if current && (st.Filter == filter || wholeCurrent && s.selectionHeld()) && len(st.Pending) == 0 &&
		(!s.o.Media || st.MediaComplete && s.mediaHeld()) && s.held() && !(s.o.Prune && s.anyOutside()) {
		return s.nothingMoved()
	}
	mediaWhole := st.MediaComplete
	st.Complete, st.MediaComplete = false, false
	if err := s.update(ctx, before); err != nil {
		return err
	}
	// A selection of a mirror current as a whole leaves it current as a
	// whole: nothing outside the selection moved at this contentVersion.
	keepWhole := wholeCurrent && !whole && !s.o.Prune
	st.ContentVersion, st.Grants, st.Filter, st.Complete = s.ver, before.ContentGrants, filter, true
	if keepWhole {
		st.Filter = wholeFilter
	}
	if err := s.m.save(); err != nil {
		return fmt.Errorf("write the state: %w", err)
	}
	s.sweep()
	s.sweepMedia()
	if s.o.Media {
		if err := s.selectedMedia(ctx); err != nil {
			return s.saveAfter(err)
		}
	}
	// The state's MediaComplete is of what its Filter selects.
	st.MediaComplete = s.o.Media
	if keepWhole {
		st.MediaComplete = mediaWhole
	}
	if err := s.m.save(); err != nil {
		return fmt.Errorf("write the state: %w", err)
	}
	s.sum.Complete = true
	return nil
}

// nothingMoved ends a run whose mirror is current: the subjects counted,
// nothing asked that bills.
func (s *syncer) nothingMoved() error {
	st := &s.m.st
	for ref := range st.Subjects {
		if s.o.selects(ref) {
			s.sum.Subjects.Unchanged++
		} else {
			s.sum.Subjects.Outside++
		}
	}
	if st.Since == "" && s.allAt(s.ver) {
		// A mirror made before the change feed: the next run asks the
		// feed from here.
		st.Since, st.SinceVersion = s.ver, s.ver
		s.stamped = true
	}
	if s.stamped {
		if err := s.m.save(); err != nil {
			return fmt.Errorf("write the state: %w", err)
		}
	}
	s.sum.Complete = true
	s.progressAll(s.sum.Subjects.Unchanged)
	s.say("up to date at %s: %d subjects; nothing billed", s.ver, len(st.Subjects))
	return nil
}

// update brings the selected subjects to this run's version, through the
// change feed when it can serve the mirror, else from the listing; the
// class exports pending of another version are dropped.
func (s *syncer) update(ctx context.Context, before license) error {
	st := &s.m.st
	viaFeed, err := s.viaFeed(ctx, before)
	if err != nil {
		return s.saveAfter(err)
	}
	if !viaFeed {
		if err := s.full(ctx, before); err != nil {
			return err
		}
		// The next run asks the feed from here: the version this run
		// brought every selected subject to, under these grants.
		st.Since, st.SinceVersion = s.ver, s.ver
	}
	// Class exports of another version are of no use any more.
	for key, p := range st.ClassPending {
		if p.ContentVersion != s.ver {
			s.dropClassPending(strings.Join(strings.Split(key, "/")[:2], "/"))
		}
	}
	return nil
}

// full brings the selected subjects up to date from the listing (a call
// a page): the path of a mirror the change feed cannot serve (feed.go).
func (s *syncer) full(ctx context.Context, before license) error {
	st := &s.m.st
	subjects, err := s.listSubjects(ctx)
	if err != nil {
		return err
	}
	listed := map[string]bool{}
	for _, sub := range subjects {
		listed[sub.ref()] = true
	}
	// What no grant covers leaves the mirror, selected or not; what the
	// selection covers and the listing no longer has leaves it too;
	// anything else held outside the selection stays, unless -prune.
	refs := make([]string, 0, len(st.Subjects))
	for ref := range st.Subjects {
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	for _, ref := range refs {
		why := s.removal(ref, before.ContentGrants, listed)
		if why == "" {
			if !s.o.selects(ref) {
				s.sum.Subjects.Outside++
			}
			continue
		}
		if err := s.remove(ref); err != nil {
			return err
		}
		s.sum.Subjects.Removed++
		s.sum.RemovedSubjects = append(s.sum.RemovedSubjects, removal{Subject: ref, Reason: why})
		s.say("removed %s: %s", ref, why)
	}
	// A pending export outside the selection is kept for the run that
	// selects it: its link is paid for.
	for ref := range st.Pending {
		if s.removal(ref, before.ContentGrants, listed) != "" {
			delete(st.Pending, ref)
		}
	}
	s.prog = progress{total: len(subjects)}
	for _, sub := range subjects {
		if err := stopIfInterrupted(ctx); err != nil {
			return s.saveAfter(err)
		}
		fetched := s.sum.Subjects.Fetched
		if err := s.subject(ctx, sub); err != nil {
			return s.saveAfter(err)
		}
		s.progressed(fetched)
	}
	return nil
}

// allAt reports whether every subject held is known to be version's
// content.
func (s *syncer) allAt(version string) bool {
	for _, h := range s.m.st.Subjects {
		if h.ContentVersion != version {
			return false
		}
	}
	return true
}

// saveAfter writes the state after err stopped the run: err, with the
// write's own error when it fails too.
func (s *syncer) saveAfter(err error) error {
	if serr := s.m.save(); serr != nil {
		return errors.Join(err, fmt.Errorf("write the state: %w", serr))
	}
	return err
}

// removal is why the subject ref leaves the mirror this run, or "" when
// it stays: grants are the organisation's, listed the subjects the
// listing of the selection answered.
func (s *syncer) removal(ref string, grants []string, listed map[string]bool) string {
	switch {
	case !granted(grants, ref):
		return removedUngranted
	case s.o.selects(ref) && !listed[ref]:
		return removedUnlisted
	case s.o.Prune && !s.o.selects(ref):
		return removedPruned
	}
	return ""
}

// selectedMedia brings the media of the selected subjects held.
func (s *syncer) selectedMedia(ctx context.Context) error {
	// media takes the subjects of the state (it never writes the state):
	// it is shown only those selected while it runs.
	all := s.m.st.Subjects
	selected := make(map[string]*heldSubject, len(all))
	for ref, h := range all {
		if s.o.selects(ref) {
			selected[ref] = h
		}
	}
	s.m.st.Subjects = selected
	defer func() { s.m.st.Subjects = all }()
	return s.media(ctx)
}

// selectionHeld reports whether each subject -subject names is held.
func (s *syncer) selectionHeld() bool {
	for _, ref := range s.o.Subjects {
		if s.m.st.Subjects[ref] == nil {
			return false
		}
	}
	return true
}

// anyOutside reports whether a subject held is outside the selection.
func (s *syncer) anyOutside() bool {
	for ref := range s.m.st.Subjects {
		if !s.o.selects(ref) {
			return true
		}
	}
	return false
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

// listSubjects lists the granted subjects the selection keeps, in tier
// then slug order.
func (s *syncer) listSubjects(ctx context.Context) ([]subject, error) {
	all, err := s.api.subjects(ctx, s.o.listTier())
	if err != nil {
		return nil, stopOr(err, "list the subjects")
	}
	var out []subject
	for _, sub := range all {
		if !id.ValidTier(sub.Tier) || !id.ValidSlug(sub.Slug) {
			return nil, fmt.Errorf("the subject list names %q/%q, not a tier and slug this client will make a path of", sub.Tier, sub.Slug)
		}
		if s.o.selects(sub.ref()) {
			out = append(out, sub)
		}
	}
	for _, want := range s.o.Subjects {
		if !slices.ContainsFunc(out, func(sub subject) bool { return sub.ref() == want }) {
			return nil, &usageError{fmt.Sprintf("-subject %s: the organisation's subjects have no such subject", want)}
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
	if h := st.Subjects[ref]; h != nil && sub.ContentDigest != "" && h.Digest == sub.ContentDigest {
		diffs := s.damage(ref, h)
		if len(diffs) == 0 {
			h.ContentVersion = s.ver
			s.sum.Subjects.Unchanged++
			return nil
		}
		// Damaged here: this client keeps no bundle, so the repair is a
		// new export, billed; said before it is made.
		s.sum.Subjects.Repaired++
		s.warn("%s: %s; re-export bills %s", ref, damageLine(diffs), exportCost(sub.ClassCount))
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
// object and swaps the subject's link to it. A bundle that fails its
// check is dropped with its export (the next run exports again); a local
// failure (no room, a write refused) keeps both, so the next run installs
// the same download without a new export while the link is valid.
func (s *syncer) install(sub subject, part string) error {
	st := &s.m.st
	ref := sub.ref()
	sum := sha256.Sum256([]byte(ref + "\x00" + sub.ContentDigest + "\x00" + s.ver + "\x00" + time.Now().String()))
	object := sub.Tier + "-" + sub.Slug + "-" + hex.EncodeToString(sum[:6])
	tmp := s.m.path("objects", object+".tmp")
	os.RemoveAll(tmp)
	err := s.roomFor(part, ref)
	var files int
	var bytes int64
	if err == nil {
		files, bytes, err = unpackBundle(part, tmp, ref)
	}
	if err == nil {
		err = os.Rename(tmp, s.m.path("objects", object))
	}
	if err != nil {
		os.RemoveAll(tmp)
		if localFault(err) {
			keep := ""
			if p := st.Pending[ref]; p != nil {
				keep = fmt.Sprintf("; its export is kept, valid until %s: run again before then and it is installed without a new export",
					p.ExpiresAt.Local().Format(time.DateTime))
			}
			return fmt.Errorf("unpack %s: %w%s", ref, err, keep)
		}
		os.Remove(part) // what was downloaded is not the bundle: export again
		delete(st.Pending, ref)
		return fmt.Errorf("verify %s: %w", ref, err)
	}
	// The verified object is named in the state before the link moves to
	// it, so a kill between the two is finished by the next run (adopt),
	// not downloaded again.
	if p := st.Pending[ref]; p != nil {
		p.Object, p.Files, p.Bytes = object, files, bytes
		if err := s.m.save(); err != nil {
			return fmt.Errorf("write the state: %w", err)
		}
	}
	os.Remove(part)
	s.sum.Subjects.Verified++
	s.sum.Files.Fetched += files
	s.sum.Files.Verified += files
	return s.swap(sub, object, files, bytes)
}

// unpackBundle is unpack; tests replace it to fail as a full disk does.
var unpackBundle = unpack

// freeSpace is the bytes free to an unprivileged writer in dir's file
// system; tests replace it.
var freeSpace = statfsFree

func statfsFree(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// noSpaceError is a bundle that needs more room than the mirror's file
// system has free.
type noSpaceError struct {
	need, free int64
	dir        string
}

func (e *noSpaceError) Error() string {
	return fmt.Sprintf("no space left: unpacking needs %d bytes, %s has %d free", e.need, e.dir, e.free)
}

func (e *noSpaceError) Unwrap() error { return syscall.ENOSPC }

// roomFor checks, before anything is written, that the files the bundle's
// manifest lists fit in the free space of the mirror's file system (each
// rounded up to a 4 KiB block). A bundle whose manifest cannot be read, or
// whose sizes are not its entries', is left to unpack to refuse.
func (s *syncer) roomFor(part, ref string) error {
	zr, err := zip.OpenReader(part)
	if err != nil {
		return nil
	}
	defer zr.Close()
	entries := map[string]*zip.File{}
	for _, f := range zr.File {
		entries[f.Name] = f
	}
	mf := entries["manifest.json"]
	if mf == nil {
		return nil
	}
	raw, err := readEntry(mf, 16<<20)
	if err != nil {
		return nil
	}
	var m bundleManifest
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	const block = 4096
	blocks := func(n int64) int64 { return (n + block - 1) / block * block }
	need := block + blocks(int64(len(raw))) // the directory and the manifest
	for _, f := range m.Files {
		e := entries[f.Name]
		if e == nil || f.Bytes < 0 || e.UncompressedSize64 != uint64(f.Bytes) {
			return nil
		}
		need += blocks(f.Bytes)
	}
	dir := s.m.path("objects")
	free, err := freeSpace(dir)
	if err != nil || free >= need {
		return nil
	}
	return &noSpaceError{need: need, free: free, dir: dir}
}

// localFault reports whether err, from installing a bundle, is this
// machine's (a file system refusing a write: no room, read-only, no
// permission, an I/O error) rather than the bundle's: unpack reports what
// is wrong with a bundle in errors of its own, never an *fs.PathError. A
// name that exists already is the bundle's (a file listed twice).
func localFault(err error) bool {
	if errors.Is(err, fs.ErrExist) {
		return false
	}
	var pe *fs.PathError
	var le *os.LinkError
	var se *os.SyscallError
	return errors.As(err, &pe) || errors.As(err, &le) || errors.As(err, &se) || errors.Is(err, syscall.ENOSPC)
}

// swap points the subject's link at object, verified, and records it.
func (s *syncer) swap(sub subject, object string, files int, bytes int64) error {
	st := &s.m.st
	ref := sub.ref()
	if err := s.link(ref, object); err != nil {
		return err
	}
	old := st.Subjects[ref]
	h := &heldSubject{Digest: sub.ContentDigest, ContentVersion: s.ver, Object: object, Files: files, Bytes: bytes, Classes: sub.ClassCount}
	if raw, err := os.ReadFile(filepath.Join(s.m.path("objects", object), "manifest.json")); err == nil {
		h.Manifest = sha256Hex(raw)
	}
	// The files' stamps as installed: a later run notices a change by them.
	if _, stamps := inspectSubject(s.o.Dir, ref, h, false); stamps != nil {
		h.Stamps = stamps
	}
	st.Subjects[ref] = h
	delete(s.inspected, ref)
	delete(st.Pending, ref)
	if old != nil && old.Object != object {
		s.retire(old.Object)
	}
	if err := s.m.save(); err != nil {
		return err
	}
	s.reap()
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
	for _, r := range s.m.st.Retired {
		named[r.Object] = true
	}
	if des, err := os.ReadDir(s.m.path("objects")); err == nil {
		for _, de := range des {
			if !named[de.Name()] {
				os.RemoveAll(s.m.path("objects", de.Name()))
			}
		}
	}
	if len(s.m.st.Pending) == 0 && len(s.m.st.ClassPending) == 0 {
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

// present reports whether the subject ref is in the mirror as h says:
// its link, and each file as installed (inspectSubject: by size and
// modification time, rehashed with -verify). A state without the files'
// stamps gets them once the files pass.
func (s *syncer) present(ref string, h *heldSubject) bool {
	return len(s.damage(ref, h)) == 0
}

// damage is how the subject ref differs from h in the mirror, inspected
// once a run.
func (s *syncer) damage(ref string, h *heldSubject) []difference {
	if s.inspected == nil {
		s.inspected = map[string][]difference{}
	}
	if d, ok := s.inspected[ref]; ok {
		return d
	}
	diffs, stamps := inspectSubject(s.o.Dir, ref, h, s.o.Verify)
	if len(diffs) == 0 && stamps != nil && !maps.Equal(stamps, h.Stamps) {
		h.Stamps = stamps // saved with the state
		s.stamped = true
	}
	s.inspected[ref] = diffs
	return diffs
}

// remove takes a subject out of the mirror: its link, then its files.
func (s *syncer) remove(ref string) error {
	h := s.m.st.Subjects[ref]
	if err := os.Remove(filepath.Join(s.o.Dir, filepath.FromSlash(ref))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	delete(s.m.st.Subjects, ref)
	if h != nil {
		s.retire(h.Object)
	}
	if err := s.m.save(); err != nil {
		return err
	}
	s.reap()
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

// warn writes a line the user must see before it happens (what a repair
// bills), unless -quiet; -json does not silence it.
func (s *syncer) warn(format string, args ...any) {
	if s.o.Progress != nil {
		fmt.Fprintf(s.o.Progress, "lectern sync: "+format+"\n", args...)
	}
}

// damageLine says what differs in a subject, e.g. "2 files changed
// locally, 1 missing".
func damageLine(diffs []difference) string {
	n := map[string]int{}
	for _, d := range diffs {
		n[d.Kind]++
	}
	var parts []string
	for _, k := range []string{diffChanged, diffMissing, diffExtra} {
		if n[k] == 0 {
			continue
		}
		noun := "files"
		if n[k] == 1 {
			noun = "file"
		}
		parts = append(parts, fmt.Sprintf("%d %s %s", n[k], noun, k))
	}
	return strings.Join(parts, ", ") + " locally"
}

// exportCost is what a subject export of a subject of classes classes
// bills (spec: 1 call, 1 export, a download per class).
func exportCost(classes int) string {
	return fmt.Sprintf("1 export, %d downloads and 1 call", classes)
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

// wholeFilter is the filter of a run that selects every granted subject.
const wholeFilter = "|"

// filter is the selection as the state records it.
func (o syncOptions) filter() string {
	return strings.Join(o.Tiers, ",") + "|" + strings.Join(o.Subjects, ",")
}

// selects reports whether the subject ref is in the selection.
func (o syncOptions) selects(ref string) bool {
	tier, _, _ := strings.Cut(ref, "/")
	return (len(o.Tiers) == 0 || slices.Contains(o.Tiers, tier)) &&
		(len(o.Subjects) == 0 || slices.Contains(o.Subjects, ref))
}

// listTier is the tier the listing asks for: the one tier the selection
// takes subjects from, or "" for all.
func (o syncOptions) listTier() string {
	if len(o.Tiers) == 1 {
		return o.Tiers[0]
	}
	tier := ""
	for i, ref := range o.Subjects {
		t, _, _ := strings.Cut(ref, "/")
		if i > 0 && t != tier {
			return ""
		}
		tier = t
	}
	return tier
}

// checkGranted refuses a selection that names a tier or a subject no
// grant covers: it could select nothing.
func (o syncOptions) checkGranted(grants []string) error {
	for _, t := range o.Tiers {
		if !slices.ContainsFunc(grants, func(g string) bool { return g == t || strings.HasPrefix(g, t+"/") }) {
			return &usageError{fmt.Sprintf("-tier %s: not granted to the organisation (its grants: %s)", t, strings.Join(grants, ", "))}
		}
	}
	for _, ref := range o.Subjects {
		if !granted(grants, ref) {
			return &usageError{fmt.Sprintf("-subject %s: not granted to the organisation (its grants: %s)", ref, strings.Join(grants, ", "))}
		}
	}
	return nil
}

// granted reports whether a grant covers the subject ref: its tier, or
// the subject itself (spec: contentGrants).
func granted(grants []string, ref string) bool {
	tier, _, _ := strings.Cut(ref, "/")
	return slices.Contains(grants, tier) || slices.Contains(grants, ref)
}

// usageError is a selection the run cannot take: lectern exits 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// parseSelection reads the values of -tier and -subject (comma-separated)
// with the API's own rules (shared/id): a tier is one of id.Tiers, a
// subject <tier>/<slug> with an id.ValidSlug slug. A flag given with no
// value selects nothing and is refused. The lists come back sorted,
// without repeats.
func parseSelection(tierFlag, subjectFlag string, tierSet, subjectSet bool) (tiers, subjects []string, err error) {
	tiers, subjects = list(tierFlag), list(subjectFlag)
	if tierSet && len(tiers) == 0 {
		return nil, nil, &usageError{"-tier names no tier"}
	}
	if subjectSet && len(subjects) == 0 {
		return nil, nil, &usageError{"-subject names no subject"}
	}
	for _, t := range tiers {
		if !id.ValidTier(t) {
			return nil, nil, &usageError{fmt.Sprintf("-tier: %q is not a tier (%s)", t, strings.Join(id.Tiers, ", "))}
		}
	}
	for _, ref := range subjects {
		tier, slug, ok := strings.Cut(ref, "/")
		if !ok || !id.ValidTier(tier) || !id.ValidSlug(slug) {
			return nil, nil, &usageError{fmt.Sprintf("-subject: %q is not tier/slug (a tier of %s, a slug of lower-case letters and digits with single inner hyphens, at most %d bytes)",
				ref, strings.Join(id.Tiers, ", "), id.MaxSlugLen)}
		}
		if len(tiers) > 0 && !slices.Contains(tiers, tier) {
			return nil, nil, &usageError{fmt.Sprintf("-subject %s is not of a -tier named (%s)", ref, strings.Join(tiers, ","))}
		}
	}
	slices.Sort(tiers)
	slices.Sort(subjects)
	return slices.Compact(tiers), slices.Compact(subjects), nil
}

// validSlug reports whether slug is a subject slug, by the API's own rule
// (id.ValidSlug): safe as a path segment.
func validSlug(slug string) bool { return id.ValidSlug(slug) }
