package follow

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/pgschema"
	"github.com/lectern-api/lectern/origin/changes"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/store/pgstore"
	"github.com/lectern-api/lectern/origin/store/sqlitestore"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/logbuftest"
)

// Issue #14, point 6: a corpus reload reaches every origin on the
// database, a restart keeps the reloaded corpus, and a recorded corpus
// that does not load here leaves the origin on its own. Each Corpus here
// is one origin's; origin/cmd/origin's tests run them behind the whole
// origin (a rolling reload's ETags and cursors, the admin API's reload).

// writeCorpus generates the small corpus of seed into dir and returns its
// version: seed 1 is one version, seed 2 another.
func writeCorpus(t *testing.T, dir string, seed int64) string {
	t.Helper()
	sum, err := gen.Write(dir, gen.Options{Seed: seed, Small: true})
	if err != nil {
		t.Fatal(err)
	}
	return sum.ContentVersion
}

// openSQLite opens a store on a new SQLite database, closed when the test
// ends.
func openSQLite(t *testing.T) store.Store {
	t.Helper()
	s, err := sqlitestore.New(t.Context(), filepath.Join(t.TempDir(), "lectern.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openPG opens a store on dsn, closed when the test ends.
func openPG(t *testing.T, dsn string) store.Store {
	t.Helper()
	s, err := pgstore.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// twoOrigins returns the stores of two origins on one database: one
// SQLite store shared in process, or two PostgreSQL connections to a
// fresh schema (skipped without LECTERN_TEST_PG).
func twoOrigins(t *testing.T, db string) (a, b func() store.Store) {
	if db == "sqlite" {
		s := openSQLite(t)
		return func() store.Store { return s }, func() store.Store { return s }
	}
	dsn := pgschema.ForTest(t, "several origins on one PostgreSQL database")
	open := func() store.Store { return openPG(t, dsn) }
	return open, open
}

// open opens a Corpus on cfg, closed when the test ends.
func open(t *testing.T, cfg Config) *Corpus {
	t.Helper()
	c, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// version is the contentVersion c serves.
func version(c *Corpus) string { return c.Content().ContentVersion }

// A reload through origin A reaches origin B, which follows the record,
// within a bounded wait; B restarted comes up on the reloaded corpus at
// once, although its configured corpus is the old one.
func TestReloadReachesEveryOrigin(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			storeA, storeB := twoOrigins(t, db)
			dir := t.TempDir()
			v1 := writeCorpus(t, filepath.Join(dir, "corpus1"), 1)
			a := open(t, Config{Store: storeA(), Dir: filepath.Join(dir, "corpus1")})
			a.Start(nil)
			cfgB := Config{Store: storeB(), Dir: filepath.Join(dir, "corpus1"), Every: 100 * time.Millisecond}
			b := open(t, cfgB)
			b.Start(nil)
			if version(a) != v1 || version(b) != v1 {
				t.Fatalf("before the reload A serves %s, B %s; want %s", version(a), version(b), v1)
			}

			v2 := writeCorpus(t, filepath.Join(dir, "corpus2"), 2)
			got, err := a.Reload(t.Context(), filepath.Join(dir, "corpus2"))
			if err != nil || got != v2 || v2 == v1 {
				t.Fatalf("reload: %s, %v; want %s (from %s)", got, err, v2, v1)
			}
			if version(a) != v2 {
				t.Fatalf("A after its reload: %s, want %s", version(a), v2)
			}
			deadline := time.Now().Add(10 * time.Second)
			for version(b) != v2 {
				if time.Now().After(deadline) {
					t.Fatalf("B still serves %s 10 s after A's reload to %s", version(b), v2)
				}
				time.Sleep(20 * time.Millisecond)
			}

			b.Close()
			cfgB.Store = storeB()
			if b = open(t, cfgB); version(b) != v2 {
				t.Errorf("B restarted serves %s, want the recorded %s (its configured corpus holds %s)", version(b), v2, v1)
			}
		})
	}
}

// The first origin on a new database records its configured corpus: an
// origin started after it with another serves the first one's corpus from
// its start, so origins agree whatever each was given.
func TestFirstOriginRecordsItsCorpus(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			storeA, storeB := twoOrigins(t, db)
			dir := t.TempDir()
			v1 := writeCorpus(t, filepath.Join(dir, "corpus1"), 1)
			v2 := writeCorpus(t, filepath.Join(dir, "corpus2"), 2)
			if v1 == v2 {
				t.Fatal("the two corpora have one version")
			}
			open(t, Config{Store: storeA(), Dir: filepath.Join(dir, "corpus1")})
			sb := storeB()
			b := open(t, Config{Store: sb, Dir: filepath.Join(dir, "corpus2")})
			if got := version(b); got != v1 {
				t.Errorf("B, configured with %s, serves %s; want A's recorded %s", v2, got, v1)
			}
			rec, err := sb.Corpus(t.Context())
			if err != nil || rec.Dir != filepath.Join(dir, "corpus1") || rec.ContentVersion != v1 {
				t.Errorf("the record: %+v, %v; want A's corpus1 at %s", rec, err, v1)
			}
		})
	}
}

// A recorded corpus missing on an origin's machine: the origin logs an
// error and keeps serving what it serves, at start (its configured
// corpus) and when following the record, tries again after Retry rather
// than on every read, and loads it once it is there. A restart with the
// recorded directory in place serves it.
func TestRecordedCorpusMissing(t *testing.T) {
	dir := t.TempDir()
	v1 := writeCorpus(t, filepath.Join(dir, "corpus"), 1)
	s := openSQLite(t)
	out := new(logbuftest.Buffer)
	cfg := Config{Store: s, Dir: filepath.Join(dir, "corpus"), Log: slog.New(slog.NewJSONHandler(out, nil))}
	c := open(t, cfg)
	v2dir, away := filepath.Join(dir, "corpus2"), filepath.Join(dir, "moved")
	v2 := writeCorpus(t, v2dir, 2)
	if got, err := c.Reload(t.Context(), v2dir); got != v2 || err != nil {
		t.Fatalf("reload: %s, %v; want %s", got, err, v2)
	}
	c.Close()
	// A restart serves the recorded corpus, not the configured one.
	c = open(t, cfg)
	if got := version(c); got != v2 {
		t.Errorf("restarted after the reload: serving %s, want the recorded %s", got, v2)
	}
	c.Close()

	// A restart without the recorded directory serves the configured one.
	if err := os.Rename(v2dir, away); err != nil {
		t.Fatal(err)
	}
	c = open(t, cfg)
	if got := version(c); got != v1 {
		t.Fatalf("restarted without the recorded corpus: serving %s, want the configured %s", got, v1)
	}
	if out := out.String(); !strings.Contains(out, `"level":"ERROR"`) || !strings.Contains(out, v2dir) {
		t.Errorf("no error naming the recorded corpus in the log:\n%s", out)
	}
	// Back in place, it is not loaded before Retry has passed...
	if err := os.Rename(away, v2dir); err != nil {
		t.Fatal(err)
	}
	c.Sync(t.Context())
	if got := version(c); got != v1 {
		t.Fatalf("the failed record was loaded again at once: %s", got)
	}
	// ...and is then.
	c.reloading.Lock()
	c.failed.at = c.failed.at.Add(-Retry)
	c.reloading.Unlock()
	c.Sync(t.Context())
	if got := version(c); got != v2 {
		t.Fatalf("after Retry: serving %s, want the recorded %s", got, v2)
	}

	// A record whose directory holds another version here is not loaded:
	// the origin keeps its version rather than serve a third.
	if err := s.RecordCorpus(t.Context(), store.CorpusRecord{Dir: filepath.Join(dir, "corpus"),
		ContentVersion: "2099-01-01+0000", LoadedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	c.Sync(t.Context())
	if got := version(c); got != v2 {
		t.Errorf("a record of another version than its directory holds: serving %s, want %s kept", got, v2)
	}
	if out := out.String(); !strings.Contains(out, "holds contentVersion "+v1+" here, not 2099-01-01+0000") {
		t.Errorf("no error naming the versions in the log:\n%s", out)
	}
}

// failingRecord is a store whose corpus records fail.
type failingRecord struct{ store.Store }

func (failingRecord) RecordCorpus(context.Context, store.CorpusRecord) error {
	return errors.New("the database is down")
}

// A reload whose record cannot be written changes nothing: INTERNAL (the
// admin API's 500), the origin keeps its version (a swap without a record
// would be undone by the origin's next read of the record).
func TestReloadUnrecordedChangesNothing(t *testing.T) {
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"), 1)
	c := open(t, Config{Store: openSQLite(t), Dir: filepath.Join(dir, "corpus")})
	v1 := version(c)
	c.cfg.Store = failingRecord{c.cfg.Store}
	v2dir := filepath.Join(t.TempDir(), "corpus2")
	writeCorpus(t, v2dir, 2)
	_, err := c.Reload(t.Context(), v2dir)
	if e := (*apierr.Error)(nil); !errors.As(err, &e) || e.Code != apierr.Internal {
		t.Errorf("an unrecorded reload: %v, want INTERNAL", err)
	}
	if got := version(c); got != v1 {
		t.Errorf("an unrecorded reload swapped in %s", got)
	}
}

// A reload whose admin client disconnects while the corpus loads still
// completes: the corpus is recorded and swapped in (the record is not
// written under the request's context, which net/http cancels).
func TestReloadCompletesAfterClientLeaves(t *testing.T) {
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"), 1)
	s := openSQLite(t)
	c := open(t, Config{Store: s, Dir: filepath.Join(dir, "corpus")})
	src := filepath.Join(t.TempDir(), "corpus2")
	v2 := writeCorpus(t, src, 2)
	held := holdCorpus(t, src)
	t.Cleanup(held.feed)
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		version string
		err     error
	}
	done := make(chan result, 1)
	go func() {
		v, err := c.Reload(ctx, held.dir)
		done <- result{v, err}
	}()
	held.waitOpened(t)
	cancel() // the client leaves; the load waits on the FIFO meanwhile
	held.feed()
	if r := <-done; r.err != nil || r.version != v2 {
		t.Fatalf("the reload its client left: %s, %v; want %s", r.version, r.err, v2)
	}
	if got := version(c); got != v2 {
		t.Errorf("the reload its client left serves %s, want %s", got, v2)
	}
	if rec, err := s.Corpus(t.Context()); err != nil || rec.Dir != held.dir || rec.ContentVersion != v2 {
		t.Errorf("the record: %+v, %v; want %s at %s", rec, err, held.dir, v2)
	}
}

// Reloads run one at a time (issue #13: four at once took the origin from
// 0.8 to 2.8 GB): while one runs, another is refused WRITE_CONFLICT with
// Retry-After (the admin API's 409) and changes nothing; once it ends, the
// next one runs. The running reload is held on a FIFO in place of its
// corpus.json, which the test feeds when it is done.
func TestReloadOneAtATime(t *testing.T) {
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"), 1)
	c := open(t, Config{Store: openSQLite(t), Dir: filepath.Join(dir, "corpus")})
	src := filepath.Join(t.TempDir(), "corpus2")
	v2 := writeCorpus(t, src, 2)
	held := holdCorpus(t, src)
	type result struct {
		version string
		err     error
	}
	first := make(chan result, 1)
	go func() {
		v, err := c.Reload(context.Background(), held.dir)
		first <- result{v, err}
	}()
	held.waitOpened(t)
	t.Cleanup(held.feed) // runs before the Corpus's cleanup, which waits for the reload

	_, err := c.Reload(t.Context(), src)
	e := (*apierr.Error)(nil)
	if !errors.As(err, &e) || e.Code != apierr.WriteConflict {
		t.Errorf("a reload while one runs: %v, want WRITE_CONFLICT", err)
	} else if e.RetryAfter == nil || *e.RetryAfter != ReloadRetryAfter {
		t.Errorf("a reload while one runs: Retry-After %v, want %d", e.RetryAfter, ReloadRetryAfter)
	}

	held.feed()
	if r := <-first; r.err != nil || r.version != v2 {
		t.Fatalf("the held reload: %s, %v", r.version, r.err)
	}
	// The lock is let go, on success and on failure alike.
	if _, err := c.Reload(t.Context(), filepath.Join(t.TempDir(), "missing")); err == nil || errors.As(err, &e) && e.Code == apierr.WriteConflict {
		t.Errorf("a reload after it: %v, want the error of a missing corpus", err)
	}
	if _, err := c.Reload(t.Context(), src); err != nil {
		t.Errorf("a reload after a failed one: %v", err)
	}
}

// heldCorpus is a copy of a corpus whose corpus.json is a FIFO: a load of
// it waits inside the load until feed writes the manifest.
type heldCorpus struct {
	dir      string
	fifo     string
	manifest []byte
	w        *os.File
	feed     func() // writes the manifest, once; then the load goes on
}

// holdCorpus copies the corpus in src into a held one; the test is
// skipped where there are no FIFOs.
func holdCorpus(t *testing.T, src string) *heldCorpus {
	t.Helper()
	manifest, err := os.ReadFile(filepath.Join(src, "corpus.json"))
	if err != nil {
		t.Fatal(err)
	}
	h := &heldCorpus{dir: filepath.Join(t.TempDir(), "held"), manifest: manifest}
	if err := os.CopyFS(h.dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	h.fifo = filepath.Join(h.dir, "corpus.json")
	if err := os.Remove(h.fifo); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(h.fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	h.feed = sync.OnceFunc(func() {
		if h.w != nil {
			h.w.Write(h.manifest)
			h.w.Close()
		}
	})
	return h
}

// waitOpened returns once a load has opened the held corpus.json: opening
// the FIFO for writing without blocking succeeds once a reader has it.
func (h *heldCorpus) waitOpened(t *testing.T) {
	t.Helper()
	for i := 0; ; i++ {
		f, err := os.OpenFile(h.fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		switch {
		case err == nil:
			h.w = f
			return
		case i == 3000:
			t.Fatalf("no load opened the held corpus.json: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Issue #35, point 8: a reload declaring the version of the record with
// other content is refused on an origin that has not followed the record
// yet (it serves the previous version): the other origins serve the
// recorded directory under that version and would never load this one.
func TestReloadRefusedAgainstTheRecord(t *testing.T) {
	storeA, storeB := twoOrigins(t, "sqlite")
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus1"), 1)
	a := open(t, Config{Store: storeA(), Dir: filepath.Join(dir, "corpus1")})
	b := open(t, Config{Store: storeB(), Dir: filepath.Join(dir, "corpus1")}) // not following
	v2 := writeCorpus(t, filepath.Join(dir, "corpus2"), 2)
	if got, err := a.Reload(t.Context(), filepath.Join(dir, "corpus2")); err != nil || got != v2 {
		t.Fatalf("reload on A: %s, %v", got, err)
	}
	edited := filepath.Join(dir, "edited")
	writeCorpus(t, edited, 2)
	p := filepath.Join(edited, "tiers.json")
	old, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(strings.Replace(string(old), `"label": "Topics"`, `"label": "Topics, revised"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	v1 := version(b)
	_, err := b.Reload(t.Context(), edited)
	if e := (*apierr.Error)(nil); !errors.As(err, &e) || e.Code != apierr.BadRequest || !strings.Contains(e.Message, "contentVersion must move") {
		t.Fatalf("reload on B of other content under the recorded %s: %v, want BAD_REQUEST", v2, err)
	}
	if rec, _ := storeB().Corpus(t.Context()); rec.Dir != filepath.Join(dir, "corpus2") || version(b) != v1 {
		t.Errorf("after the refusal: record %+v, B serves %s; want corpus2 recorded, B on %s", rec, version(b), v1)
	}
	// The same content as the record's is accepted.
	if got, err := b.Reload(t.Context(), filepath.Join(dir, "corpus2")); err != nil || got != v2 {
		t.Errorf("reload on B of the recorded corpus: %s, %v", got, err)
	}
}

// On the origin itself: the served version with other content is
// refused, the same content again accepted.
func TestReloadRefusedAgainstTheServed(t *testing.T) {
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus1"), 1)
	c := open(t, Config{Store: openSQLite(t), Dir: filepath.Join(dir, "corpus1")})
	v1 := version(c)
	edited := filepath.Join(dir, "edited")
	writeCorpus(t, edited, 1)
	if got, err := c.Reload(t.Context(), edited); err != nil || got != v1 {
		t.Fatalf("reload of a copy: %s, %v", got, err)
	}
	p := filepath.Join(edited, "subjects.json")
	old, _ := os.ReadFile(p)
	if err := os.WriteFile(p, append(old, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := c.Reload(t.Context(), edited)
	if e := (*apierr.Error)(nil); !errors.As(err, &e) || e.Code != apierr.BadRequest || e.Parameter != "dir" {
		t.Fatalf("reload of other content under %s: %v, want BAD_REQUEST on dir", v1, err)
	}
}

// editInPlace changes one label of the corpus in dir, keeping its
// contentVersion: other content under the same version.
func editInPlace(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, "tiers.json")
	old, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(old), `"label": "Topics"`, `"label": "Topics, revised"`, 1)
	if edited == string(old) {
		t.Fatal("the edit changed nothing")
	}
	if err := os.WriteFile(p, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Issue #35, point 8, at a start: an origin restarted on a corpus whose
// files changed under the version it served refuses to start, whether
// the changed directory is the recorded one or LECTERN_CORPUS, on both
// backends; the same content restarts.
func TestStartRefusesOtherContentUnderAVersion(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			storeA, storeB := twoOrigins(t, db)
			dir := filepath.Join(t.TempDir(), "corpus")
			v := writeCorpus(t, dir, 1)
			a, err := Open(t.Context(), Config{Store: storeA(), Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			a.Close()
			again := open(t, Config{Store: storeB(), Dir: dir})
			if version(again) != v {
				t.Fatalf("restart on the same content serves %s, want %s", version(again), v)
			}
			editInPlace(t, dir)
			_, err = Open(t.Context(), Config{Store: storeB(), Dir: dir})
			if e := (*apierr.Error)(nil); !errors.As(err, &e) || e.Code != apierr.BadRequest || !strings.Contains(e.Message, "contentVersion must move") {
				t.Fatalf("start on other content under %s: %v, want the refusal", v, err)
			}
		})
	}
}

// Going back: a reload of an earlier version's number with other content
// is refused although that version is no longer served or recorded.
func TestReloadRefusedForAnEarlierVersion(t *testing.T) {
	dir := t.TempDir()
	v1 := writeCorpus(t, filepath.Join(dir, "corpus1"), 1)
	c := open(t, Config{Store: openSQLite(t), Dir: filepath.Join(dir, "corpus1")})
	v2 := writeCorpus(t, filepath.Join(dir, "corpus2"), 2)
	if got, err := c.Reload(t.Context(), filepath.Join(dir, "corpus2")); err != nil || got != v2 {
		t.Fatalf("reload of %s: %s, %v", v2, got, err)
	}
	editInPlace(t, filepath.Join(dir, "corpus1"))
	_, err := c.Reload(t.Context(), filepath.Join(dir, "corpus1"))
	if e := (*apierr.Error)(nil); !errors.As(err, &e) || e.Code != apierr.BadRequest || e.Parameter != "dir" {
		t.Fatalf("reload of %s with other content: %v, want BAD_REQUEST on dir", v1, err)
	}
	if version(c) != v2 {
		t.Errorf("after the refusal the origin serves %s, want %s", version(c), v2)
	}
}

// Following: an origin whose copy of the recorded directory holds other
// content than the origin that recorded it served stays on its corpus.
func TestFollowRefusesOtherContentUnderAVersion(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			storeA, storeB := twoOrigins(t, db)
			dir := t.TempDir()
			v1 := writeCorpus(t, filepath.Join(dir, "corpus1"), 1)
			a := open(t, Config{Store: storeA(), Dir: filepath.Join(dir, "corpus1")})
			b := open(t, Config{Store: storeB(), Dir: filepath.Join(dir, "corpus1")})
			v2 := writeCorpus(t, filepath.Join(dir, "corpus2"), 2)
			if got, err := a.Reload(t.Context(), filepath.Join(dir, "corpus2")); err != nil || got != v2 {
				t.Fatalf("reload on A: %s, %v", got, err)
			}
			editInPlace(t, filepath.Join(dir, "corpus2"))
			b.Sync(t.Context())
			if version(b) != v1 {
				t.Fatalf("B followed to %s over other content, want it kept on %s", version(b), v1)
			}
		})
	}
}

// Issue #37, point 1: every version an origin serves is recorded with its
// parts, on both backends, so that the change feed of any origin answers
// from it: the first at the start, the next at the reload, and the
// difference between them is the edited class.
func TestVersionsRecordedForTheFeed(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			storeA, storeB := twoOrigins(t, db)
			dir := t.TempDir()
			writeCorpus(t, filepath.Join(dir, "corpus1"), 1)
			a := open(t, Config{Store: storeA(), Dir: filepath.Join(dir, "corpus1")})
			v1 := version(a)
			edited := filepath.Join(dir, "edited")
			writeCorpus(t, edited, 1)
			lp := filepath.Join(edited, "lessons", "high", "algebra.json")
			lb, err := os.ReadFile(lp)
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := json.Unmarshal(lb, &doc); err != nil {
				t.Fatal(err)
			}
			class2 := doc["classes"].([]any)[1].(map[string]any)
			class2["title"] = class2["title"].(string) + " (revised)"
			lb, _ = json.Marshal(doc)
			if err := os.WriteFile(lp, lb, 0o644); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(edited, "corpus.json")
			b, _ := os.ReadFile(p)
			if err := os.WriteFile(p, []byte(strings.Replace(string(b), v1, "2026-12-24+0feed", 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			v2, err := a.Reload(t.Context(), edited)
			if err != nil {
				t.Fatal(err)
			}
			parts := map[string]*changes.Version{}
			for _, v := range []string{v1, v2} {
				raw, err := storeB().CorpusVersionParts(t.Context(), v)
				if err != nil {
					t.Fatalf("parts of %s: %v", v, err)
				}
				if parts[v], err = changes.Decode(raw); err != nil {
					t.Fatal(err)
				}
			}
			all := []string{"college", "high", "middle", "primary", "topics"}
			subjects, lessons := changes.Diff(parts[v1], parts[v2], all, all)
			if len(subjects) != 1 || subjects[0].Subject != "high/algebra" || len(lessons) != 1 || lessons[0].LessonID != "high/algebra/2" {
				t.Errorf("class 2 of high/algebra edited: %+v %+v, want it alone", subjects, lessons)
			}
		})
	}
}
