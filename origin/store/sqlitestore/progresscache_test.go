package sqlitestore

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/progress"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/id"
)

var day0 = time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC)

// newProgressStore opens a fresh Store with organisation "acme".
func newProgressStore(t *testing.T) *Store {
	t.Helper()
	s, err := New(t.Context(), filepath.Join(t.TempDir(), "lectern.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	createOrg(t, s, "acme")
	return s
}

func createOrg(t *testing.T, s *Store, orgID string) {
	t.Helper()
	o := &store.Org{ID: orgID, Name: "Org " + orgID, Tier: "standard", Status: "active",
		Grants: []string{"high"}, EclaVersion: 1, RequiredEclaVersion: 1,
		RenewsAt: day0.AddDate(1, 0, 0), CreatedAt: day0, UpdatedAt: day0}
	if err := s.CreateOrg(t.Context(), o); err != nil {
		t.Fatal(err)
	}
}

// record is a record of n classes, in listing order, at version v.
func record(org, learner string, v int64, n int) progress.Record {
	r := progress.Record{OrgID: org, Learner: learner, Version: v, Run: 1, Longest: 1, LastDay: day0}
	for i := range n {
		sc := float64(i % 101)
		r.Classes = append(r.Classes, progress.Class{
			Lesson: id.Lesson{Tier: "high", Slug: "physics", Class: i + 1},
			Score:  &sc, BestScore: &sc, FirstRecordedAt: day0, LastRecordedAt: day0.Add(time.Hour)})
	}
	return r
}

func save(t *testing.T, s *Store, r progress.Record) int64 {
	t.Helper()
	v, err := s.SaveProgress(t.Context(), r)
	if err != nil {
		t.Fatalf("SaveProgress at version %d: %v", r.Version, err)
	}
	return v
}

func read(t *testing.T, s *Store, org, learner string) progress.Record {
	t.Helper()
	r, err := s.Progress(t.Context(), org, learner)
	if err != nil {
		t.Fatalf("Progress(%s, %s): %v", org, learner, err)
	}
	return r
}

// TestProgressCacheServesSaves: a read after a save returns the saved
// record without the database: the read pool is closed, so any query
// would fail.
func TestProgressCacheServesSaves(t *testing.T) {
	s := newProgressStore(t)
	if r := read(t, s, "acme", "ada"); r.Version != 0 {
		t.Fatalf("fresh record at version %d", r.Version)
	}
	want := record("acme", "ada", 0, 100)
	want.Version = save(t, s, want)
	if err := s.rdb.Close(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, s, "acme", "ada"); !reflect.DeepEqual(got, want) {
		t.Fatalf("read after save:\n got %+v\nwant %+v", got, want)
	}
	// The pool is really closed: a record never cached needs it.
	if _, err := s.Progress(t.Context(), "acme", "bob"); err == nil {
		t.Fatal("read of an uncached record with the read pool closed: no error")
	}
}

// TestProgressCacheFillsOnMiss: a record read from the database is
// cached; the next read does not query.
func TestProgressCacheFillsOnMiss(t *testing.T) {
	s := newProgressStore(t)
	want := record("acme", "ada", 0, 3)
	want.Version = save(t, s, want)
	s.progress.drop("acme", "ada")
	if got := read(t, s, "acme", "ada"); !reflect.DeepEqual(got, want) {
		t.Fatalf("read from the database:\n got %+v\nwant %+v", got, want)
	}
	s.rdb.Close()
	if got := read(t, s, "acme", "ada"); !reflect.DeepEqual(got, want) {
		t.Fatalf("read from the cache:\n got %+v\nwant %+v", got, want)
	}
}

// TestProgressCacheStoredForm: the cache holds a record as the database
// returns it (classes in listing order, instants in UTC to the
// resolution), not as the caller passed it.
func TestProgressCacheStoredForm(t *testing.T) {
	s := newProgressStore(t)
	r := record("acme", "ada", 0, 3)
	r.Classes[0], r.Classes[2] = r.Classes[2], r.Classes[0]
	r.Classes[1].FirstRecordedAt = day0.Add(time.Nanosecond).In(time.FixedZone("x", 3600))
	save(t, s, r)
	cached := read(t, s, "acme", "ada")
	s.progress.drop("acme", "ada")
	if fromDB := read(t, s, "acme", "ada"); !reflect.DeepEqual(cached, fromDB) {
		t.Fatalf("cached record differs from the database's:\n cache %+v\n   db %+v", cached, fromDB)
	}
}

// TestProgressCacheConflict: a save refused as a conflict leaves what
// reads return as the winner saved it.
func TestProgressCacheConflict(t *testing.T) {
	s := newProgressStore(t)
	won := record("acme", "ada", 0, 2)
	won.Version = save(t, s, won)
	lost := record("acme", "ada", 0, 5)
	if _, err := s.SaveProgress(t.Context(), lost); !errors.Is(err, progress.ErrConflict) {
		t.Fatalf("stale save: got %v, want ErrConflict", err)
	}
	if got := read(t, s, "acme", "ada"); !reflect.DeepEqual(got, won) {
		t.Fatalf("after a conflict:\n got %+v\nwant %+v", got, won)
	}
	// And the cache was not left holding anything of the loser.
	lost.Version = won.Version - 1 + 5 // a stale version never saved
	if _, err := s.SaveProgress(t.Context(), lost); !errors.Is(err, progress.ErrConflict) {
		t.Fatalf("save at a version never stored: got %v, want ErrConflict", err)
	}
	if got := read(t, s, "acme", "ada"); !reflect.DeepEqual(got, won) {
		t.Fatalf("after a second conflict:\n got %+v\nwant %+v", got, won)
	}
	// A write behind the Store's back (which the file lock makes the
	// admin's doing, never another origin's) is seen once a save
	// conflicts with it: the conflict drops the cached record.
	behind := record("acme", "ada", won.Version+1, 7)
	doc, err := progress.Encode(&behind)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(t.Context(), `UPDATE progress SET version = ?, record = ? WHERE org_id = 'acme' AND learner = 'ada'`,
		behind.Version, string(doc)); err != nil {
		t.Fatal(err)
	}
	if got := read(t, s, "acme", "ada"); got.Version != won.Version {
		t.Fatalf("read before the conflict: version %d, want the cached %d", got.Version, won.Version)
	}
	if _, err := s.SaveProgress(t.Context(), won); !errors.Is(err, progress.ErrConflict) {
		t.Fatalf("save over a write behind the Store's back: got %v, want ErrConflict", err)
	}
	if got := read(t, s, "acme", "ada"); !reflect.DeepEqual(got, behind) {
		t.Fatalf("after the conflict:\n got %+v\nwant %+v", got, behind)
	}
}

// TestProgressCacheDeleteOrg: deleting an organisation forgets its
// cached records; one created again under its id starts with none.
func TestProgressCacheDeleteOrg(t *testing.T) {
	s := newProgressStore(t)
	createOrg(t, s, "other")
	save(t, s, record("acme", "ada", 0, 4))
	keep := record("other", "ada", 0, 1)
	keep.Version = save(t, s, keep)
	read(t, s, "acme", "ada")
	if err := s.DeleteOrg(t.Context(), "acme"); err != nil {
		t.Fatal(err)
	}
	createOrg(t, s, "acme")
	s.rdb.Close() // the answer must come from the cache only for "other"
	if got := read(t, s, "other", "ada"); !reflect.DeepEqual(got, keep) {
		t.Fatalf("other organisation's record:\n got %+v\nwant %+v", got, keep)
	}
	if _, err := s.Progress(t.Context(), "acme", "ada"); err == nil {
		t.Fatal("deleted organisation's record still cached")
	}
}

// TestProgressCacheDeepCopies: changing a record returned by Progress,
// or passed to SaveProgress, changes nothing the next read returns.
func TestProgressCacheDeepCopies(t *testing.T) {
	s := newProgressStore(t)
	r := record("acme", "ada", 0, 3)
	v := save(t, s, r)
	*r.Classes[0].Score = 99
	r.Classes[1].Lesson.Class = 42
	want := record("acme", "ada", v, 3)
	got := read(t, s, "acme", "ada")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after changing the saved record:\n got %+v\nwant %+v", got, want)
	}
	*got.Classes[0].Score = 77
	*got.Classes[0].BestScore = 77
	got.Classes[2].Lesson.Slug = "chemistry"
	got.Classes = append(got.Classes[:1], got.Classes[2:]...)
	got.Run = 9
	if again := read(t, s, "acme", "ada"); !reflect.DeepEqual(again, want) {
		t.Fatalf("after changing a read record:\n got %+v\nwant %+v", again, want)
	}
}

// TestProgressCacheBound: the cache never holds more weight than its
// budget, evicts the least recently used record first, and an evicted
// record reads back from the database.
func TestProgressCacheBound(t *testing.T) {
	s := newProgressStore(t)
	s.progress.budget = 25 // weight: 1 per record + 1 per class
	want := map[string]progress.Record{}
	for i := range 8 {
		l := fmt.Sprintf("l%d", i)
		r := record("acme", l, 0, 4) // weight 5
		r.Version = save(t, s, r)
		want[l] = r
		if s.progress.weight > 25 || len(s.progress.m) > 5 {
			t.Fatalf("after %d saves: weight %d, %d entries; budget 25", i+1, s.progress.weight, len(s.progress.m))
		}
		if _, ok := s.progress.m[progressKey{"acme", "l0"}]; !ok {
			t.Fatalf("after %d saves: the most recently read record was evicted", i+1)
		}
		read(t, s, "acme", "l0") // keeps l0 recently used
	}
	if _, ok := s.progress.m[progressKey{"acme", "l1"}]; ok {
		t.Fatal("the least recently used record was kept")
	}
	for l, w := range want {
		if got := read(t, s, "acme", l); !reflect.DeepEqual(got, w) {
			t.Fatalf("%s:\n got %+v\nwant %+v", l, got, w)
		}
	}
	// A record heavier than the budget is not cached, and evicts nothing.
	n := len(s.progress.m)
	big := record("acme", "big", 0, 30)
	big.Version = save(t, s, big)
	if _, ok := s.progress.m[progressKey{"acme", "big"}]; ok || len(s.progress.m) != n {
		t.Fatalf("record of weight 31 over budget 25: cached %v, entries %d → %d", ok, n, len(s.progress.m))
	}
	if got := read(t, s, "acme", "big"); !reflect.DeepEqual(got, big) {
		t.Fatalf("big record:\n got %+v\nwant %+v", got, big)
	}
}

// TestProgressCacheOrder covers the races the store cannot be made to
// hit on demand: a read that loaded a record before a save stores it
// after the save.
func TestProgressCacheOrder(t *testing.T) {
	rec := func(v int64) *progress.Record { r := record("acme", "ada", v, 1); return &r }
	version := func(c *progressCache) int64 {
		r, _ := c.get("acme", "ada")
		if r == nil {
			return -1
		}
		return r.Version
	}
	t.Run("ReadAfterSave", func(t *testing.T) {
		var c progressCache
		_, gen := c.get("acme", "ada") // miss; the read loads version 4
		c.saved(rec(5), c.begin())
		c.fill(rec(4), gen)
		if v := version(&c); v != 5 {
			t.Fatalf("cached version %d, want 5", v)
		}
	})
	t.Run("ReadAfterEvictedSave", func(t *testing.T) {
		c := progressCache{budget: 2}
		_, gen := c.get("acme", "ada")
		c.saved(rec(5), c.begin())
		r := record("acme", "bob", 1, 1) // evicts ada's
		c.saved(&r, c.begin())
		c.fill(rec(4), gen)
		if v := version(&c); v != -1 {
			t.Fatalf("cached version %d, want none", v)
		}
	})
	t.Run("SavesOutOfOrder", func(t *testing.T) {
		var c progressCache
		d5, d6 := c.begin(), c.begin()
		c.saved(rec(6), d6)
		c.saved(rec(5), d5)
		if v := version(&c); v != 6 {
			t.Fatalf("cached version %d, want 6", v)
		}
	})
	t.Run("SavesOutOfOrderEvicted", func(t *testing.T) {
		c := progressCache{budget: 2}
		d5, d6 := c.begin(), c.begin()
		c.saved(rec(6), d6)
		r := record("acme", "bob", 1, 1) // evicts ada's version 6
		c.saved(&r, c.begin())
		c.saved(rec(5), d5)
		if v := version(&c); v != -1 {
			t.Fatalf("cached version %d, want none", v)
		}
	})
	t.Run("LateSaveDropsOlder", func(t *testing.T) {
		var c progressCache
		c.saved(rec(4), c.begin())
		d5 := c.begin()
		r := record("acme", "bob", 1, 1) // another write since the save began
		c.saved(&r, c.begin())
		c.saved(rec(5), d5)
		if v := version(&c); v != -1 {
			t.Fatalf("cached version %d, want none", v)
		}
	})
	t.Run("SaveAcrossDeleteOrg", func(t *testing.T) {
		var c progressCache
		d := c.begin()
		c.dropOrg("acme") // committed after the save; the row is gone
		c.saved(rec(5), d)
		if v := version(&c); v != -1 {
			t.Fatalf("cached version %d, want none", v)
		}
	})
	t.Run("ReadAcrossConflict", func(t *testing.T) {
		var c progressCache
		_, gen := c.get("acme", "ada")
		c.drop("acme", "ada")
		c.fill(rec(4), gen)
		if v := version(&c); v != -1 {
			t.Fatalf("cached version %d, want none", v)
		}
	})
}

// TestProgressCacheConcurrent: savers (compare and swap, retrying on
// conflicts) and readers on a few learners at once (run with -race). A
// read that begins after a save returned version v returns v or later,
// and the final records hold every saved write.
func TestProgressCacheConcurrent(t *testing.T) {
	s := newProgressStore(t)
	s.progress.budget = 8 // some evictions too
	const learners, savers, writes, readers = 3, 6, 15, 4
	var saved [learners]atomic.Int64 // highest version a save returned
	var sw, rw sync.WaitGroup
	errs := make(chan error, savers+readers)
	for g := range savers {
		sw.Go(func() {
			l := g % learners
			for range writes {
				for {
					r, err := s.Progress(t.Context(), "acme", fmt.Sprint("l", l))
					if err != nil {
						errs <- err
						return
					}
					r.Classes = append(r.Classes, progress.Class{Lesson: id.Lesson{Tier: "high", Slug: fmt.Sprint("s", g), Class: len(r.Classes) + 1},
						FirstRecordedAt: day0, LastRecordedAt: day0})
					v, err := s.SaveProgress(t.Context(), r)
					if errors.Is(err, progress.ErrConflict) {
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					for {
						old := saved[l].Load()
						if v <= old || saved[l].CompareAndSwap(old, v) {
							break
						}
					}
					break
				}
			}
		})
	}
	var done atomic.Bool
	for g := range readers {
		rw.Go(func() {
			for i := 0; !done.Load(); i++ {
				l := (g + i) % learners
				floor := saved[l].Load()
				r, err := s.Progress(t.Context(), "acme", fmt.Sprint("l", l))
				if err != nil {
					errs <- err
					return
				}
				if r.Version < floor || int64(len(r.Classes)) != r.Version {
					errs <- fmt.Errorf("l%d: read version %d with %d classes after a save returned %d", l, r.Version, len(r.Classes), floor)
					return
				}
			}
		})
	}
	sw.Wait()
	done.Store(true)
	rw.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for l := range learners {
		if r := read(t, s, "acme", fmt.Sprint("l", l)); r.Version != writes*savers/learners || len(r.Classes) != int(r.Version) {
			t.Errorf("l%d: final version %d with %d classes, want %d", l, r.Version, len(r.Classes), writes*savers/learners)
		}
	}
}
