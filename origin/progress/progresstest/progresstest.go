// Package progresstest is the conformance suite for progress.Store. Every
// backend runs the same suite from its own tests:
//
//	func TestProgress(t *testing.T) {
//		var paths sync.Map // *testing.T → database path
//		progresstest.Run(t, progresstest.Exclusive, func(t *testing.T) progresstest.Store {
//			p, _ := paths.LoadOrStore(t, filepath.Join(t.TempDir(), "lectern.db"))
//			s, err := sqlitestore.New(t.Context(), p.(string))
//			...
//		})
//	}
//
// A record belongs to an organisation: it is saved only while the
// organisation exists (store.ErrNotFound otherwise) and goes with it
// (store.Store.DeleteOrg), so that an organisation created again under a
// deleted one's id starts with no progress. The suite therefore runs on
// a Store that keeps organisations too.
//
// Besides the contract's words the suite holds backends to these rules:
// a record reads back as it was saved, scores exactly (nil and 0 kept
// apart), instants in UTC to progress.Resolution, LastDay exactly, and
// classes in listing order (progress.Less) whatever order they were
// saved in; learner ids are compared byte for byte; a record with a
// negative version, no organisation or learner, or a lesson twice is an
// error and saves nothing; and what was saved survives closing and
// reopening the store.
package progresstest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/progress"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/id"
)

// Store is what the suite runs on: a progress.Store that keeps the
// organisations its records belong to.
type Store interface {
	progress.Store
	store.Store
}

// Kind says how the Stores of one database may coexist.
type Kind int

const (
	// Shared: several Stores (origins) may have one database open at
	// once, and each sees the others' saves (pgstore).
	Shared Kind = iota
	// Exclusive: one Store at a time owns a database (sqlitestore).
	Exclusive
)

// Run runs the suite. open returns a new Store over the database of t:
// the first call for a given t starts from a fresh, empty database, and
// later calls with the same t open another Store over that same data, as
// a restarted or (Shared) a second origin would. The suite closes the
// Stores it opens. Subtests run in parallel, each on its own database.
func Run(t *testing.T, kind Kind, open func(t *testing.T) Store) {
	type test struct {
		name string
		fn   func(t *testing.T, open func(t *testing.T) Store)
	}
	tests := []test{
		{"Empty", testEmpty},
		{"RoundTrip", testRoundTrip},
		{"VersionMovesByOne", testVersionMovesByOne},
		{"StaleVersion", testStaleVersion},
		{"Independent", testIndependent},
		{"NoOrg", testNoOrg},
		{"DeleteOrg", testDeleteOrg},
		{"InvalidRecord", testInvalidRecord},
		{"ManyClasses", testManyClasses},
		{"ListingOrder", testListingOrder},
		{"ConcurrentOneWins", testConcurrentOneWins},
		{"ConcurrentNoLostUpdate", testConcurrentNoLostUpdate},
		{"Reopen", testReopen},
		{"ReadShared", testReadShared},
	}
	if kind == Shared {
		tests = append(tests, test{"TwoStoresOneWins", testTwoStores})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open)
		})
	}
}

// openStore opens a Store that is closed when the test ends.
func openStore(t *testing.T, open func(t *testing.T) Store) Store {
	t.Helper()
	s := open(t)
	t.Cleanup(func() { s.Close() })
	return s
}

var (
	// A zone other than UTC, to check that backends return UTC.
	zone = time.FixedZone("UTC+5:30", 5*3600+1800)
	// t0 carries nanoseconds, to check truncation to the resolution.
	t0 = time.Date(2026, 3, 14, 15, 9, 26, 535897932, zone)
)

func score(v float64) *float64 { return &v }

func lesson(tier, slug string, class int) id.Lesson {
	return id.Lesson{Tier: tier, Slug: slug, Class: class}
}

// mustCreateOrg creates organisation orgID, as the admin API would.
func mustCreateOrg(t *testing.T, s Store, orgID string) {
	t.Helper()
	o := &store.Org{ID: orgID, Name: "Org " + orgID, Tier: "standard", Status: "active",
		Grants: []string{"high"}, EclaVersion: 1, RequiredEclaVersion: 1,
		RenewsAt: t0.AddDate(1, 0, 0), CreatedAt: t0, UpdatedAt: t0}
	if err := s.CreateOrg(t.Context(), o); err != nil {
		t.Fatalf("CreateOrg(%s): %v", orgID, err)
	}
}

// read reads the record of learner in orgID with Progress, and checks
// that ReadProgress reads the same (unless a save came between).
func read(t *testing.T, s Store, orgID, learner string) progress.Record {
	t.Helper()
	shared, err := s.ReadProgress(t.Context(), orgID, learner)
	if err != nil {
		t.Fatalf("ReadProgress(%s, %s): %v", orgID, learner, err)
	}
	r, err := s.Progress(t.Context(), orgID, learner)
	if err != nil {
		t.Fatalf("Progress(%s, %s): %v", orgID, learner, err)
	}
	if shared.Version == r.Version {
		equal(t, "ReadProgress against Progress", *shared, r)
	}
	return r
}

// mustSave saves r and sets its Version to the new one.
func mustSave(t *testing.T, s Store, r *progress.Record) {
	t.Helper()
	v, err := s.SaveProgress(t.Context(), *r)
	if err != nil {
		t.Fatalf("SaveProgress(%s, %s) at version %d: %v", r.OrgID, r.Learner, r.Version, err)
	}
	if v != r.Version+1 {
		t.Fatalf("SaveProgress at version %d: got version %d, want %d", r.Version, v, r.Version+1)
	}
	r.Version = v
}

// stored is what a backend must return for r: instants in UTC to the
// resolution, classes in listing order.
func stored(r progress.Record) progress.Record {
	r = r.Clone()
	for i := range r.Classes {
		c := &r.Classes[i]
		c.FirstRecordedAt = c.FirstRecordedAt.UTC().Truncate(progress.Resolution)
		c.LastRecordedAt = c.LastRecordedAt.UTC().Truncate(progress.Resolution)
	}
	slices.SortStableFunc(r.Classes, func(a, b progress.Class) int {
		switch {
		case progress.Less(a.Lesson, b.Lesson):
			return -1
		case progress.Less(b.Lesson, a.Lesson):
			return 1
		}
		return 0
	})
	return r
}

// equal checks that got is want as a backend returns it (stored(want)):
// every field, scores through their pointers with nil apart from 0,
// instants equal and in UTC.
func equal(t *testing.T, what string, got, want progress.Record) {
	t.Helper()
	want = stored(want)
	if got.OrgID != want.OrgID || got.Learner != want.Learner || got.Version != want.Version {
		t.Errorf("%s: got %s/%s version %d, want %s/%s version %d",
			what, got.OrgID, got.Learner, got.Version, want.OrgID, want.Learner, want.Version)
	}
	if got.Run != want.Run || got.Longest != want.Longest || !got.LastDay.Equal(want.LastDay) {
		t.Errorf("%s: got run %d, longest %d, last day %v; want %d, %d, %v",
			what, got.Run, got.Longest, got.LastDay, want.Run, want.Longest, want.LastDay)
	}
	if !got.LastDay.IsZero() && got.LastDay.Location() != time.UTC {
		t.Errorf("%s: last day in %v, want UTC", what, got.LastDay.Location())
	}
	if len(got.Classes) != len(want.Classes) {
		t.Errorf("%s: got %d classes, want %d:\n got %s\nwant %s",
			what, len(got.Classes), len(want.Classes), dump(got.Classes), dump(want.Classes))
		return
	}
	for i, w := range want.Classes {
		g := got.Classes[i]
		if g.Lesson != w.Lesson || !sameScore(g.Score, w.Score) || !sameScore(g.BestScore, w.BestScore) ||
			!g.FirstRecordedAt.Equal(w.FirstRecordedAt) || !g.LastRecordedAt.Equal(w.LastRecordedAt) {
			t.Errorf("%s: class %d:\n got %s\nwant %s", what, i, dump(g), dump(w))
		}
		if g.FirstRecordedAt.Location() != time.UTC || g.LastRecordedAt.Location() != time.UTC {
			t.Errorf("%s: class %d: times in %v, %v; want UTC", what, i, g.FirstRecordedAt.Location(), g.LastRecordedAt.Location())
		}
	}
}

func sameScore(a, b *float64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// dump prints classes with their scores rather than pointers.
func dump[T progress.Class | []progress.Class](v T) string {
	one := func(c progress.Class) string {
		f := func(p *float64) string {
			if p == nil {
				return "nil"
			}
			return fmt.Sprint(*p)
		}
		return fmt.Sprintf("{%v score %s best %s %v … %v}", c.Lesson, f(c.Score), f(c.BestScore),
			c.FirstRecordedAt.Format(time.RFC3339Nano), c.LastRecordedAt.Format(time.RFC3339Nano))
	}
	switch v := any(v).(type) {
	case progress.Class:
		return one(v)
	case []progress.Class:
		s := "["
		for i, c := range v {
			if i > 0 {
				s += " "
			}
			s += one(c)
		}
		return s + "]"
	}
	return ""
}

// testEmpty: a learner with nothing saved reads as version 0 with no
// classes and no streak, in an organisation that exists or not.
func testEmpty(t *testing.T, open func(t *testing.T) Store) {
	s := openStore(t, open)
	mustCreateOrg(t, s, "acme")
	for _, org := range []string{"acme", "nowhere"} {
		got := read(t, s, org, "ada")
		equal(t, "Progress of "+org, got, progress.Record{OrgID: org, Learner: "ada"})
	}
}

// full is a record exercising every field: no score, a score of 0, a
// latest score below the best, fractions that are not exact in
// decimal, instants with nanoseconds in another zone.
func full(orgID, learner string) progress.Record {
	return progress.Record{
		OrgID: orgID, Learner: learner,
		Classes: []progress.Class{
			{Lesson: lesson("topics", "kinematics", 7), Score: score(0), BestScore: score(0),
				FirstRecordedAt: t0, LastRecordedAt: t0},
			{Lesson: lesson("high", "algebra", 2), Score: nil, BestScore: nil,
				FirstRecordedAt: t0.Add(-48 * time.Hour), LastRecordedAt: t0.Add(time.Nanosecond)},
			{Lesson: lesson("high", "algebra", 10), Score: score(100.0 / 3), BestScore: score(99.99999999999999),
				FirstRecordedAt: t0.Add(-time.Hour).In(time.UTC), LastRecordedAt: t0.Add(999 * time.Nanosecond)},
			{Lesson: lesson("primary", "reading", 999999), Score: nil, BestScore: score(0.1),
				FirstRecordedAt: t0.Add(-24 * time.Hour), LastRecordedAt: t0},
		},
		Run: 3, Longest: 12,
		LastDay: time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC),
	}
}

// testRoundTrip: a record saved at version 0 reads back as saved, at
// version 1.
func testRoundTrip(t *testing.T, open func(t *testing.T) Store) {
	s := openStore(t, open)
	mustCreateOrg(t, s, "acme")
	r := full("acme", "ada")
	want := r.Clone()
	mustSave(t, s, &r)
	want.Version = 1
	equal(t, "read back", read(t, s, "acme", "ada"), want)

	// The saved record changed by Apply, as the server does, saves and
	// reads back too.
	got := read(t, s, "acme", "ada")
	got.Apply(lesson("high", "algebra", 2), score(55.5), t0.Add(26*time.Hour))
	got.Apply(lesson("college", "physics", 1), nil, t0.Add(26*time.Hour))
	want = got.Clone()
	mustSave(t, s, &got)
	want.Version = 2
	equal(t, "read back after Apply", read(t, s, "acme", "ada"), want)
}

// testReadShared: the record ReadProgress returns may be shared, but is
// never changed under its reader: not by a change to Progress's record
// (the caller's own), nor by a save; a ReadProgress after the save reads
// the saved record.
func testReadShared(t *testing.T, open func(t *testing.T) Store) {
	s := openStore(t, open)
	mustCreateOrg(t, s, "acme")
	r := full("acme", "ada")
	mustSave(t, s, &r)
	shared, err := s.ReadProgress(t.Context(), "acme", "ada")
	if err != nil {
		t.Fatal(err)
	}
	want := shared.Clone()

	got := read(t, s, "acme", "ada")
	for _, c := range got.Classes { // the caller's own record: change it
		if c.Score != nil {
			*c.Score = 99
		}
	}
	got.Apply(lesson("high", "algebra", 5), score(12), t0.Add(48*time.Hour))
	again, err := s.ReadProgress(t.Context(), "acme", "ada")
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "ReadProgress after Progress's record changed", *again, want)

	got = read(t, s, "acme", "ada")
	got.Apply(lesson("high", "algebra", 5), score(12), t0.Add(48*time.Hour))
	saved := got.Clone()
	mustSave(t, s, &got)
	equal(t, "a record ReadProgress returned, after a save", *shared, want)
	equal(t, "a record ReadProgress returned, after a save (again)", *again, want)
	after, err := s.ReadProgress(t.Context(), "acme", "ada")
	if err != nil {
		t.Fatal(err)
	}
	saved.Version = got.Version
	equal(t, "ReadProgress after the save", *after, saved)
}

// testVersionMovesByOne: each save makes the version one more, also a
// save that changes nothing else.
func testVersionMovesByOne(t *testing.T, open func(t *testing.T) Store) {
	s := openStore(t, open)
	mustCreateOrg(t, s, "acme")
	r := progress.Record{OrgID: "acme", Learner: "ada"}
	for v := int64(1); v <= 5; v++ {
		r.Apply(lesson("high", "algebra", int(v)), score(float64(v)), t0)
		mustSave(t, s, &r)
		if got := read(t, s, "acme", "ada"); got.Version != v || len(got.Classes) != int(v) {
			t.Fatalf("after save %d: got version %d with %d classes, want %d, %d", v, got.Version, len(got.Classes), v, v)
		}
	}
	mustSave(t, s, &r) // the same record again
	if got := read(t, s, "acme", "ada"); got.Version != 6 {
		t.Errorf("after an identical save: got version %d, want 6", got.Version)
	}
}

// testStaleVersion: a save at any version but the stored one is
// ErrConflict and changes nothing.
func testStaleVersion(t *testing.T, open func(t *testing.T) Store) {
	s := openStore(t, open)
	ctx := t.Context()
	mustCreateOrg(t, s, "acme")

	// Nothing stored yet: only version 0 saves.
	r := full("acme", "ada")
	r.Version = 1
	if _, err := s.SaveProgress(ctx, r); !errors.Is(err, progress.ErrConflict) {
		t.Fatalf("save at version 1 with nothing stored: got error %v, want ErrConflict", err)
	}
	if got := read(t, s, "acme", "ada"); got.Version != 0 || len(got.Classes) != 0 {
		t.Fatalf("a refused save wrote version %d with %d classes", got.Version, len(got.Classes))
	}

	r.Version = 0
	mustSave(t, s, &r)
	mustSave(t, s, &r)
	want := r.Clone() // version 2
	for _, v := range []int64{0, 1, 3, 1 << 40} {
		stale := full("acme", "ada")
		stale.Classes = stale.Classes[:1]
		stale.Run, stale.Longest = 0, 0
		stale.Version = v
		if _, err := s.SaveProgress(ctx, stale); !errors.Is(err, progress.ErrConflict) {
			t.Errorf("save at version %d over version 2: got error %v, want ErrConflict", v, err)
		}
		equal(t, fmt.Sprintf("after a refused save at version %d", v), read(t, s, "acme", "ada"), want)
	}
	// The current version still saves.
	mustSave(t, s, &r)
}

// testIndependent: one learner id in two organisations, and two learners
// of one organisation (learner ids compared byte for byte), are four
// records with versions of their own.
func testIndependent(t *testing.T, open func(t *testing.T) Store) {
	s := openStore(t, open)
	mustCreateOrg(t, s, "acme")
	mustCreateOrg(t, s, "beta")
	keys := []struct{ org, learner string }{
		{"acme", "ada"}, {"beta", "ada"}, {"acme", "Ada"}, {"acme", "ada "},
	}
	want := make([]progress.Record, len(keys))
	for i, k := range keys {
		r := progress.Record{OrgID: k.org, Learner: k.learner}
		// Record i is saved i+1 times, each with a class of its own.
		for n := 0; n <= i; n++ {
			r.Apply(lesson("high", "algebra", n+1), score(float64(10*i+n)), t0.AddDate(0, 0, i))
			mustSave(t, s, &r)
		}
		want[i] = r
	}
	for i, k := range keys {
		equal(t, fmt.Sprintf("record of %s/%q", k.org, k.learner), read(t, s, k.org, k.learner), want[i])
	}
	// A save on one at version 1 conflicts only where its version is not 1.
	for i, k := range keys {
		r := read(t, s, k.org, k.learner)
		r.Version = 1
		_, err := s.SaveProgress(t.Context(), r)
		if wantOK := i == 0; wantOK != (err == nil) || (!wantOK && !errors.Is(err, progress.ErrConflict)) {
			t.Errorf("save %s/%q at version 1 (stored %d): got error %v", k.org, k.learner, want[i].Version, err)
		}
	}
	if got := read(t, s, "beta", "ada"); got.Version != 2 {
		t.Errorf("beta/ada moved to version %d by another record's save", got.Version)
	}
}

// testNoOrg: a record of an organisation that does not exist is not
// saved: store.ErrNotFound.
func testNoOrg(t *testing.T, open func(t *testing.T) Store) {
	s := openStore(t, open)
	r := full("nowhere", "ada")
	if _, err := s.SaveProgress(t.Context(), r); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("save in no organisation: got error %v, want store.ErrNotFound", err)
	}
	mustCreateOrg(t, s, "nowhere")
	if got := read(t, s, "nowhere", "ada"); got.Version != 0 || len(got.Classes) != 0 {
		t.Errorf("the refused save left version %d with %d classes", got.Version, len(got.Classes))
	}
	mustSave(t, s, &r)
}

// testDeleteOrg: DeleteOrg takes the organisation's records with it, so
// one created again under its id starts with no progress; another
// organisation's records stay.
func testDeleteOrg(t *testing.T, open func(t *testing.T) Store) {
	s := openStore(t, open)
	ctx := t.Context()
	mustCreateOrg(t, s, "acme")
	mustCreateOrg(t, s, "beta")
	for _, learner := range []string{"ada", "bob"} {
		for _, org := range []string{"acme", "beta"} {
			r := full(org, learner)
			mustSave(t, s, &r)
			mustSave(t, s, &r)
		}
	}
	if err := s.DeleteOrg(ctx, "acme"); err != nil {
		t.Fatalf("DeleteOrg: %v", err)
	}
	for _, learner := range []string{"ada", "bob"} {
		equal(t, "deleted org's "+learner, read(t, s, "acme", learner), progress.Record{OrgID: "acme", Learner: learner})
		want := full("beta", learner)
		want.Version = 2
		equal(t, "other org's "+learner, read(t, s, "beta", learner), want)
	}
	r := full("acme", "ada")
	r.Version = 2
	if _, err := s.SaveProgress(ctx, r); err == nil {
		t.Error("save at the deleted record's version 2 succeeded")
	}
	mustCreateOrg(t, s, "acme")
	equal(t, "re-created org's ada", read(t, s, "acme", "ada"), progress.Record{OrgID: "acme", Learner: "ada"})
	if _, err := s.SaveProgress(ctx, r); !errors.Is(err, progress.ErrConflict) {
		t.Errorf("save at the old version 2 in the re-created org: got error %v, want ErrConflict", err)
	}
	r.Version = 0
	mustSave(t, s, &r)
}

// testInvalidRecord: records the rules never make are errors, not
// conflicts, and save nothing.
func testInvalidRecord(t *testing.T, open func(t *testing.T) Store) {
	s := openStore(t, open)
	mustCreateOrg(t, s, "acme")
	twice := full("acme", "ada")
	twice.Classes = append(twice.Classes, twice.Classes[0])
	offDay := full("acme", "ada")
	offDay.LastDay = offDay.LastDay.Add(time.Hour)
	tests := []struct {
		name string
		r    progress.Record
	}{
		{"negative version", func() progress.Record { r := full("acme", "ada"); r.Version = -1; return r }()},
		{"no learner", full("acme", "")},
		{"no organisation", full("", "ada")},
		{"a lesson twice", twice},
		{"last day not a UTC midnight", offDay},
	}
	for _, tt := range tests {
		_, err := s.SaveProgress(t.Context(), tt.r)
		if err == nil || errors.Is(err, progress.ErrConflict) {
			t.Errorf("%s: got error %v, want an error other than ErrConflict", tt.name, err)
		}
	}
	for _, learner := range []string{"ada", ""} {
		if got := read(t, s, "acme", learner); got.Version != 0 {
			t.Errorf("invalid saves left %q at version %d", learner, got.Version)
		}
	}
}

// testManyClasses: a record of 500 classes round-trips, also after one
// more class is applied.
func testManyClasses(t *testing.T, open func(t *testing.T) Store) {
	s := openStore(t, open)
	mustCreateOrg(t, s, "acme")
	r := progress.Record{OrgID: "acme", Learner: "ada"}
	for i := range 500 {
		l := lesson(id.Tiers[i%len(id.Tiers)], fmt.Sprintf("subject-%02d", i%37), 1+i/37)
		var sc *float64
		if i%7 != 0 {
			sc = score(float64(i%101) + 0.25)
		}
		if !r.Apply(l, sc, t0.Add(time.Duration(i)*time.Minute)) {
			t.Fatalf("Apply %v: changed nothing", l)
		}
	}
	if len(r.Classes) != 500 {
		t.Fatalf("built %d classes, want 500", len(r.Classes))
	}
	want := r.Clone()
	mustSave(t, s, &r)
	want.Version = 1
	got := read(t, s, "acme", "ada")
	equal(t, "500 classes", got, want)
	if got.XP() != want.XP() {
		t.Errorf("XP read back %d, want %d", got.XP(), want.XP())
	}
	got.Apply(lesson("middle", "subject-00", 1000), score(100), t0.AddDate(0, 0, 1))
	want = got.Clone()
	mustSave(t, s, &got)
	want.Version = 2
	equal(t, "501 classes", read(t, s, "acme", "ada"), want)
}

// testListingOrder: classes saved in any order read back in listing
// order (tier as id.Tiers, slug, class number as a number).
func testListingOrder(t *testing.T, open func(t *testing.T) Store) {
	s := openStore(t, open)
	mustCreateOrg(t, s, "acme")
	var want []id.Lesson
	for _, tier := range id.Tiers {
		for _, slug := range []string{"a", "algebra", "algebra-2", "b"} {
			for _, class := range []int{1, 2, 10, 11, 100} {
				want = append(want, lesson(tier, slug, class))
			}
		}
	}
	r := progress.Record{OrgID: "acme", Learner: "ada"}
	for i, l := range want {
		r.Classes = append(r.Classes, progress.Class{Lesson: l, Score: score(float64(i % 101)),
			BestScore: score(float64(i % 101)), FirstRecordedAt: t0, LastRecordedAt: t0})
	}
	rand.Shuffle(len(r.Classes), func(i, j int) { r.Classes[i], r.Classes[j] = r.Classes[j], r.Classes[i] })
	mustSave(t, s, &r)
	got := read(t, s, "acme", "ada")
	var order []id.Lesson
	for _, c := range got.Classes {
		order = append(order, c.Lesson)
	}
	if !slices.Equal(order, want) {
		t.Errorf("classes saved shuffled read back as\n %v\nwant\n %v", order, want)
	}
	equal(t, "shuffled record", got, r)
}

// concurrency is the number of savers racing in the concurrent tests.
const concurrency = 16

// testConcurrentOneWins: savers racing at one version, on a new record
// and on a saved one: exactly one wins, the others get ErrConflict, and
// the winner's record is the one stored.
func testConcurrentOneWins(t *testing.T, open func(t *testing.T) Store) {
	s := openStore(t, open)
	mustCreateOrg(t, s, "acme")
	base := progress.Record{OrgID: "acme", Learner: "ada"}
	for round := range 3 {
		if round > 0 {
			base = read(t, s, "acme", "ada")
		}
		won := race(t, base, func(int) Store { return s })
		want := won.Clone()
		want.Version = base.Version + 1
		equal(t, fmt.Sprintf("round %d: the winner's record", round), read(t, s, "acme", "ada"), want)
	}
}

// race has concurrency savers save base, each with a class of its own,
// through the store storeFor gives it, and returns the one record saved.
func race(t *testing.T, base progress.Record, storeFor func(saver int) Store) progress.Record {
	t.Helper()
	var (
		wg        sync.WaitGroup
		start     = make(chan struct{})
		mu        sync.Mutex
		won       []progress.Record
		conflicts atomic.Int64
	)
	for i := range concurrency {
		r := base.Clone()
		r.Apply(lesson("high", fmt.Sprintf("saver-%02d", i), int(base.Version)+1), score(float64(i)), t0)
		wg.Go(func() {
			<-start
			v, err := storeFor(i).SaveProgress(t.Context(), r)
			switch {
			case err == nil:
				if v != base.Version+1 {
					t.Errorf("saver %d: got version %d, want %d", i, v, base.Version+1)
				}
				mu.Lock()
				won = append(won, r)
				mu.Unlock()
			case errors.Is(err, progress.ErrConflict):
				conflicts.Add(1)
			default:
				t.Errorf("saver %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(won) != 1 || conflicts.Load() != concurrency-1 {
		t.Fatalf("%d savers at version %d: %d won, %d conflicts; want 1, %d",
			concurrency, base.Version, len(won), conflicts.Load(), concurrency-1)
	}
	return won[0]
}

// testConcurrentNoLostUpdate: savers that read, apply and save again on
// a conflict, as a client retrying a 409 would, lose no write: the
// record ends with every class, at one version per saved write.
func testConcurrentNoLostUpdate(t *testing.T, open func(t *testing.T) Store) {
	s := openStore(t, open)
	mustCreateOrg(t, s, "acme")
	const writes = 4 // per saver
	var (
		wg    sync.WaitGroup
		saves atomic.Int64
	)
	for i := range concurrency {
		wg.Go(func() {
			for n := range writes {
				l := lesson(id.Tiers[i%len(id.Tiers)], fmt.Sprintf("saver-%02d", i), n+1)
				for attempt := 0; ; attempt++ {
					if attempt == 10000 {
						t.Errorf("saver %d: no save in %d attempts", i, attempt)
						return
					}
					r, err := s.Progress(t.Context(), "acme", "ada")
					if err != nil {
						t.Errorf("saver %d: %v", i, err)
						return
					}
					if !r.Apply(l, score(float64(n)), t0) {
						t.Errorf("saver %d: Apply of %v changed nothing", i, l)
						return
					}
					_, err = s.SaveProgress(t.Context(), r)
					if err == nil {
						saves.Add(1)
						break
					}
					if !errors.Is(err, progress.ErrConflict) {
						t.Errorf("saver %d: %v", i, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	got := read(t, s, "acme", "ada")
	if got.Version != concurrency*writes || saves.Load() != concurrency*writes || len(got.Classes) != concurrency*writes {
		t.Errorf("%d saves acknowledged; record at version %d with %d classes; want %d each",
			saves.Load(), got.Version, len(got.Classes), concurrency*writes)
	}
}

// testReopen: what was saved survives closing the store and opening it
// again.
func testReopen(t *testing.T, open func(t *testing.T) Store) {
	s := open(t)
	mustCreateOrg(t, s, "acme")
	r := full("acme", "ada")
	mustSave(t, s, &r)
	mustSave(t, s, &r)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s = openStore(t, open)
	equal(t, "after reopening", read(t, s, "acme", "ada"), r)
	mustSave(t, s, &r)
}

// testTwoStores: savers racing through two Stores over one database:
// exactly one wins, and each Store reads the winner's record.
func testTwoStores(t *testing.T, open func(t *testing.T) Store) {
	a := openStore(t, open)
	b := openStore(t, open)
	mustCreateOrg(t, a, "acme")
	base := progress.Record{OrgID: "acme", Learner: "ada"}
	for round := range 3 {
		if round > 0 {
			base = read(t, b, "acme", "ada")
		}
		won := race(t, base, func(i int) Store {
			if i%2 == 0 {
				return a
			}
			return b
		})
		want := won.Clone()
		want.Version = base.Version + 1
		equal(t, fmt.Sprintf("round %d: store a", round), read(t, a, "acme", "ada"), want)
		equal(t, fmt.Sprintf("round %d: store b", round), read(t, b, "acme", "ada"), want)
	}
}
