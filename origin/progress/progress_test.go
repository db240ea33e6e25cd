package progress_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/progress"
	"github.com/lectern-api/lectern/shared/id"
)

func score(v float64) *float64 { return &v }

func lesson(tier, slug string, class int) id.Lesson {
	return id.Lesson{Tier: tier, Slug: slug, Class: class}
}

// t0 is a Monday afternoon, UTC.
var t0 = time.Date(2026, 3, 2, 15, 4, 5, 123456789, time.UTC)

func TestClassXP(t *testing.T) {
	tests := []struct {
		name string
		best *float64
		want int64
	}{
		{"no score", nil, 10},
		{"zero", score(0), 10},
		{"below ten", score(9.99), 10},
		{"ten", score(10), 11},
		{"fraction rounds down", score(79.5), 17},
		{"just under a step", score(89.999), 18},
		{"hundred", score(100), 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := progress.Class{Score: score(0), BestScore: tt.best}
			if got := c.XP(); got != tt.want {
				t.Errorf("XP with best %v: got %d, want %d", deref(tt.best), got, tt.want)
			}
		})
	}
}

func TestRecordXP(t *testing.T) {
	var r progress.Record
	if got := r.XP(); got != 0 {
		t.Errorf("empty record: got XP %d, want 0", got)
	}
	r.Apply(lesson("high", "algebra", 1), score(95), t0)   // 19
	r.Apply(lesson("high", "algebra", 2), nil, t0)         // 10
	r.Apply(lesson("high", "algebra", 3), score(42.5), t0) // 14
	// A lower latest score keeps the best's XP.
	r.Apply(lesson("high", "algebra", 1), score(5), t0) // still 19
	if got, want := r.XP(), int64(19+10+14); got != want {
		t.Errorf("got XP %d, want %d", got, want)
	}
}

func TestApplyNewClass(t *testing.T) {
	var r progress.Record
	l := lesson("high", "algebra", 3)
	now := t0.In(time.FixedZone("UTC-7", -7*3600))
	if !r.Apply(l, score(70), now) {
		t.Fatal("Apply of a new class: got false, want true")
	}
	c, ok := r.Class(l)
	if !ok {
		t.Fatal("Class: not found after Apply")
	}
	if c.Lesson != l || !eq(c.Score, 70) || !eq(c.BestScore, 70) {
		t.Errorf("got %+v, want lesson %v with score and best 70", c, l)
	}
	if c.Score == c.BestScore {
		t.Error("Score and BestScore share one pointer")
	}
	if !c.FirstRecordedAt.Equal(t0) || !c.LastRecordedAt.Equal(t0) {
		t.Errorf("recorded at %v, %v; want %v", c.FirstRecordedAt, c.LastRecordedAt, t0)
	}
	if c.FirstRecordedAt.Location() != time.UTC || c.LastRecordedAt.Location() != time.UTC {
		t.Errorf("recorded times in %v, %v; want UTC", c.FirstRecordedAt.Location(), c.LastRecordedAt.Location())
	}
	if r.Version != 0 {
		t.Errorf("Apply moved Version to %d", r.Version)
	}
	if _, ok := r.Class(lesson("high", "algebra", 4)); ok {
		t.Error("Class found a lesson never recorded")
	}
}

func TestApplyNoScore(t *testing.T) {
	var r progress.Record
	l := lesson("primary", "reading", 1)
	r.Apply(l, nil, t0)
	c, _ := r.Class(l)
	if c.Score != nil || c.BestScore != nil {
		t.Fatalf("no score sent: got score %v, best %v; want both nil", deref(c.Score), deref(c.BestScore))
	}
	// A score later sets both; a write without one then clears the
	// latest and keeps the best.
	r.Apply(l, score(60), t0.Add(time.Minute))
	r.Apply(l, nil, t0.Add(2*time.Minute))
	c, _ = r.Class(l)
	if c.Score != nil || !eq(c.BestScore, 60) {
		t.Errorf("got score %v, best %v; want nil, 60", deref(c.Score), deref(c.BestScore))
	}
}

func TestApplyLatestAndBest(t *testing.T) {
	var r progress.Record
	l := lesson("high", "algebra", 1)
	steps := []struct {
		score      *float64
		want, best float64
	}{
		{score(50), 50, 50},
		{score(80), 80, 80},
		{score(30), 30, 80}, // the best never drops
		{score(80.5), 80.5, 80.5},
		{score(0), 0, 80.5},
	}
	for i, s := range steps {
		at := t0.Add(time.Duration(i) * time.Minute)
		if !r.Apply(l, s.score, at) {
			t.Fatalf("step %d: a new score changed nothing", i)
		}
		c, _ := r.Class(l)
		if !eq(c.Score, s.want) || !eq(c.BestScore, s.best) {
			t.Errorf("step %d: got score %v, best %v; want %v, %v", i, deref(c.Score), deref(c.BestScore), s.want, s.best)
		}
		if !c.FirstRecordedAt.Equal(t0) || !c.LastRecordedAt.Equal(at) {
			t.Errorf("step %d: recorded %v … %v, want %v … %v", i, c.FirstRecordedAt, c.LastRecordedAt, t0, at)
		}
	}
	if len(r.Classes) != 1 {
		t.Errorf("got %d classes, want 1", len(r.Classes))
	}
}

func TestApplyUnchanged(t *testing.T) {
	l := lesson("high", "algebra", 1)
	midnight := time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		first, then *float64
		at          time.Time // of the second write; the first is at t0
		want        bool
	}{
		{"same score same day", score(70), score(70), t0.Add(time.Hour), false},
		{"no score twice same day", nil, nil, t0.Add(time.Hour), false},
		{"same score, same UTC day in another zone", score(70), score(70),
			midnight.Add(-time.Second).In(time.FixedZone("UTC+9", 9*3600)), false},
		{"other score same day", score(70), score(71), t0.Add(time.Hour), true},
		{"score then none", score(70), nil, t0.Add(time.Hour), true},
		{"none then score", nil, score(70), t0.Add(time.Hour), true},
		{"same score next day", score(70), score(70), midnight, true},
		{"same score, next UTC day in another zone", score(70), score(70),
			midnight.In(time.FixedZone("UTC-9", -9*3600)), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r progress.Record
			r.Apply(l, tt.first, t0)
			before := r.Clone()
			if got := r.Apply(l, tt.then, tt.at); got != tt.want {
				t.Fatalf("second Apply: got %v, want %v", got, tt.want)
			}
			if !tt.want && !equalRecords(r, before) {
				t.Errorf("an unchanged write moved the record:\n got %+v\nwant %+v", r, before)
			}
			if tt.want {
				c, _ := r.Class(l)
				if !c.LastRecordedAt.Equal(tt.at) || !c.FirstRecordedAt.Equal(t0) {
					t.Errorf("recorded %v … %v, want %v … %v", c.FirstRecordedAt, c.LastRecordedAt, t0, tt.at)
				}
			}
		})
	}
}

func TestStreak(t *testing.T) {
	day := func(n int) time.Time { return time.Date(2026, 3, 1+n, 0, 0, 0, 0, time.UTC) }
	l := lesson("high", "algebra", 1)
	var r progress.Record
	if s := r.Streak(t0); s != (progress.Streak{}) {
		t.Fatalf("nothing saved: got %+v, want zero", s)
	}
	// Writes on days 0, 0, 1, 2 (late at night), then a gap, then 5, 6.
	// Each write sends another score so that it is saved.
	writes := []struct {
		at           time.Time
		run, longest int64
		lastDay      time.Time
	}{
		{day(0).Add(9 * time.Hour), 1, 1, day(0)},
		{day(0).Add(23 * time.Hour), 1, 1, day(0)},
		{day(1).Add(time.Minute), 2, 2, day(1)},
		{day(2).Add(24*time.Hour - time.Nanosecond), 3, 3, day(2)},
		{day(5).Add(12 * time.Hour), 1, 3, day(5)}, // days 3 and 4 missed
		{day(6), 2, 3, day(6)},
	}
	for i, w := range writes {
		if !r.Apply(l, score(float64(i)), w.at) {
			t.Fatalf("write %d: changed nothing", i)
		}
		if r.Run != w.run || r.Longest != w.longest || !r.LastDay.Equal(w.lastDay) {
			t.Errorf("write %d at %v: got run %d, longest %d, last day %v; want %d, %d, %v",
				i, w.at, r.Run, r.Longest, r.LastDay, w.run, w.longest, w.lastDay)
		}
		if r.LastDay.Location() != time.UTC {
			t.Errorf("write %d: LastDay in %v, want UTC", i, r.LastDay.Location())
		}
	}
	// Current counts while the last day is today or yesterday.
	reads := []struct {
		at      time.Time
		current int64
	}{
		{day(6), 2},
		{day(6).Add(24*time.Hour - time.Nanosecond), 2},
		{day(7), 2},
		{day(7).Add(23 * time.Hour), 2},
		{day(8), 0},
		{day(30), 0},
	}
	for _, rd := range reads {
		want := progress.Streak{Current: rd.current, Longest: 3, LastDay: day(6)}
		if got := r.Streak(rd.at); got != want {
			t.Errorf("Streak at %v: got %+v, want %+v", rd.at, got, want)
		}
	}
	// A longer run later replaces the longest.
	for d := 7; d <= 10; d++ {
		r.Apply(l, score(float64(d)), day(d).Add(time.Hour))
	}
	if want := (progress.Streak{Current: 6, Longest: 6, LastDay: day(10)}); r.Streak(day(10)) != want {
		t.Errorf("after days 5 to 10: got %+v, want %+v", r.Streak(day(10)), want)
	}
}

// TestStreakUTCDays: days are UTC days whatever now's time zone; two
// writes on one local day that fall on two UTC days make a run of two,
// and the reverse a run of one.
func TestStreakUTCDays(t *testing.T) {
	east := time.FixedZone("UTC+10", 10*3600)
	west := time.FixedZone("UTC-10", -10*3600)
	l := lesson("high", "algebra", 1)

	var r progress.Record
	// 2026-03-02 08:00 and 12:00 in UTC+10: 22:00 on 03-01 and 02:00 on
	// 03-02 UTC.
	r.Apply(l, score(1), time.Date(2026, 3, 2, 8, 0, 0, 0, east))
	r.Apply(l, score(2), time.Date(2026, 3, 2, 12, 0, 0, 0, east))
	if r.Run != 2 || !r.LastDay.Equal(time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("one local day over two UTC days: got run %d, last day %v; want 2, 2026-03-02", r.Run, r.LastDay)
	}

	var s progress.Record
	// 2026-03-01 20:00 and 2026-03-02 10:00 in UTC-10: both on 03-02 UTC.
	s.Apply(l, score(1), time.Date(2026, 3, 1, 20, 0, 0, 0, west))
	s.Apply(l, score(2), time.Date(2026, 3, 2, 10, 0, 0, 0, west))
	if s.Run != 1 || !s.LastDay.Equal(time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("two local days on one UTC day: got run %d, last day %v; want 1, 2026-03-02", s.Run, s.LastDay)
	}
	// Read in a zone where it is still 03-03 although UTC is on 03-04:
	// the last day is two UTC days back, so the current run is 0.
	at := time.Date(2026, 3, 3, 20, 0, 0, 0, west) // 2026-03-04 06:00 UTC
	if got := s.Streak(at).Current; got != 0 {
		t.Errorf("Streak on the UTC day after tomorrow: got current %d, want 0", got)
	}
	at = time.Date(2026, 3, 4, 8, 0, 0, 0, east) // 2026-03-03 22:00 UTC
	if got := s.Streak(at).Current; got != 1 {
		t.Errorf("Streak on the UTC day after: got current %d, want 1", got)
	}
}

func TestLess(t *testing.T) {
	// want is in listing order: tiers as id.Tiers, then slug (bytes),
	// then class number as a number (2 before 10).
	var want []id.Lesson
	for _, tier := range id.Tiers {
		for _, slug := range []string{"a", "algebra", "algebra-2", "biology"} {
			for _, class := range []int{1, 2, 9, 10, 11, 100, 999999} {
				want = append(want, lesson(tier, slug, class))
			}
		}
	}
	for i := range want {
		for j := range want {
			if got := progress.Less(want[i], want[j]); got != (i < j) {
				t.Fatalf("Less(%v, %v): got %v, want %v", want[i], want[j], got, i < j)
			}
		}
	}
	got := slices.Clone(want)
	rand.Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
	slices.SortFunc(got, func(a, b id.Lesson) int {
		switch {
		case progress.Less(a, b):
			return -1
		case progress.Less(b, a):
			return 1
		}
		return 0
	})
	if !slices.Equal(got, want) {
		t.Errorf("sorted by Less: got %v, want %v", got, want)
	}
}

// TestApplyKeepsListingOrder: classes applied in any order are kept in
// listing order, each once.
func TestApplyKeepsListingOrder(t *testing.T) {
	var want []id.Lesson
	for _, tier := range id.Tiers {
		for _, slug := range []string{"algebra", "biology"} {
			for _, class := range []int{1, 2, 10, 20} {
				want = append(want, lesson(tier, slug, class))
			}
		}
	}
	order := slices.Clone(want)
	rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	var r progress.Record
	for i, l := range order {
		if !r.Apply(l, score(float64(i%101)), t0) {
			t.Fatalf("Apply %v: changed nothing", l)
		}
		// Applying it again on the same day with the same score is a
		// no-op and adds no second entry.
		if r.Apply(l, score(float64(i%101)), t0) {
			t.Fatalf("Apply %v again: changed the record", l)
		}
	}
	got := make([]id.Lesson, len(r.Classes))
	for i, c := range r.Classes {
		got[i] = c.Lesson
	}
	if !slices.Equal(got, want) {
		t.Errorf("applied in order %v:\n got %v\nwant %v", order, got, want)
	}
}

func TestClone(t *testing.T) {
	var r progress.Record
	r.OrgID, r.Learner, r.Version = "org", "ada", 3
	l := lesson("high", "algebra", 1)
	r.Apply(l, score(50), t0)
	c := r.Clone()
	if !equalRecords(c, r) {
		t.Fatalf("Clone: got %+v, want %+v", c, r)
	}
	*c.Classes[0].Score = 99
	*c.Classes[0].BestScore = 99
	c.Apply(lesson("high", "algebra", 2), nil, t0)
	if !eq(r.Classes[0].Score, 50) || !eq(r.Classes[0].BestScore, 50) || len(r.Classes) != 1 {
		t.Errorf("changing the clone changed the original: %+v", r.Classes)
	}
	// Scores of a clone are each their own: changing one changes no other.
	r.Apply(lesson("high", "algebra", 2), score(70), t0)
	r.Apply(lesson("high", "algebra", 3), nil, t0)
	c = r.Clone()
	*c.Classes[0].Score = 1
	if !eq(c.Classes[0].BestScore, 50) || !eq(c.Classes[1].Score, 70) || !eq(c.Classes[1].BestScore, 70) ||
		c.Classes[2].Score != nil || c.Classes[2].BestScore != nil {
		t.Errorf("changing a clone's score changed its others: %+v", c.Classes)
	}
	var empty progress.Record
	if c := empty.Clone(); len(c.Classes) != 0 {
		t.Errorf("clone of an empty record has %d classes", len(c.Classes))
	}
}

// eq reports whether p holds v.
func eq(p *float64, v float64) bool { return p != nil && *p == v }

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// equalRecords compares records by value, scores through their pointers
// and times with Equal.
func equalRecords(a, b progress.Record) bool {
	if a.OrgID != b.OrgID || a.Learner != b.Learner || a.Version != b.Version ||
		a.Run != b.Run || a.Longest != b.Longest || !a.LastDay.Equal(b.LastDay) || len(a.Classes) != len(b.Classes) {
		return false
	}
	for i := range a.Classes {
		x, y := a.Classes[i], b.Classes[i]
		if x.Lesson != y.Lesson || deref(x.Score) != deref(y.Score) || deref(x.BestScore) != deref(y.BestScore) ||
			!x.FirstRecordedAt.Equal(y.FirstRecordedAt) || !x.LastRecordedAt.Equal(y.LastRecordedAt) {
			return false
		}
	}
	return true
}
