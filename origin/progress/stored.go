package progress

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/lectern-api/lectern/shared/id"
)

// Resolution is the precision to which a Store keeps the instants of a
// record (FirstRecordedAt, LastRecordedAt): microseconds, as every
// instant the stores keep (PostgreSQL's resolution). They read back in
// UTC; LastDay, a UTC midnight, reads back exactly.
const Resolution = time.Microsecond

// stored is a record as the stores keep it, one JSON document per
// organisation and learner beside its version.
type stored struct {
	Classes []storedClass `json:"classes"`
	Run     int64         `json:"run"`
	Longest int64         `json:"longest"`
	LastDay string        `json:"lastDay,omitempty"` // YYYY-MM-DD; absent when nothing was saved
}

type storedClass struct {
	Tier  string    `json:"tier"`
	Slug  string    `json:"slug"`
	Class int       `json:"class"`
	Score *float64  `json:"score"`
	Best  *float64  `json:"bestScore"`
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
}

const dayLayout = "2006-01-02"

// Encode is the stored form of r's classes and streak, shared by
// sqlitestore and pgstore (the stores keep OrgID, Learner and Version
// beside it): a JSON document, its classes in listing order (Less) even
// when r's are not, with instants in UTC truncated to Resolution. It
// refuses what the rules never make: a record with no OrgID or Learner
// or a negative Version, a lesson recorded twice, a LastDay that is not
// a UTC midnight.
func Encode(r *Record) ([]byte, error) {
	if r.OrgID == "" || r.Learner == "" || r.Version < 0 {
		return nil, fmt.Errorf("progress: invalid record (org %q, learner %q, version %d)", r.OrgID, r.Learner, r.Version)
	}
	cs := r.Classes
	if !slices.IsSortedFunc(cs, compare) {
		cs = slices.Clone(cs)
		slices.SortStableFunc(cs, compare)
	}
	out := stored{Classes: make([]storedClass, len(cs)), Run: r.Run, Longest: r.Longest}
	for i, c := range cs {
		if i > 0 && cs[i-1].Lesson == c.Lesson {
			return nil, fmt.Errorf("progress: lesson %s recorded twice", c.Lesson)
		}
		out.Classes[i] = storedClass{
			Tier: c.Lesson.Tier, Slug: c.Lesson.Slug, Class: c.Lesson.Class,
			Score: c.Score, Best: c.BestScore,
			First: c.FirstRecordedAt.UTC().Truncate(Resolution),
			Last:  c.LastRecordedAt.UTC().Truncate(Resolution),
		}
	}
	if !r.LastDay.IsZero() {
		if !r.LastDay.Equal(day(r.LastDay)) {
			return nil, fmt.Errorf("progress: last day %v is not a UTC midnight", r.LastDay)
		}
		out.LastDay = r.LastDay.UTC().Format(dayLayout)
	}
	return json.Marshal(out)
}

// Decode reads what Encode wrote into r's classes and streak. An empty
// document is a record with nothing saved.
func Decode(b []byte, r *Record) error {
	var in stored
	if len(b) > 0 {
		if err := json.Unmarshal(b, &in); err != nil {
			return fmt.Errorf("progress: decode record: %w", err)
		}
	}
	r.Classes = make([]Class, len(in.Classes))
	for i, c := range in.Classes {
		r.Classes[i] = Class{
			Lesson: id.Lesson{Tier: c.Tier, Slug: c.Slug, Class: c.Class},
			Score:  c.Score, BestScore: c.Best,
			FirstRecordedAt: c.First.UTC(), LastRecordedAt: c.Last.UTC(),
		}
	}
	r.Run, r.Longest, r.LastDay = in.Run, in.Longest, time.Time{}
	if in.LastDay != "" {
		d, err := time.Parse(dayLayout, in.LastDay)
		if err != nil {
			return fmt.Errorf("progress: decode record: %w", err)
		}
		r.LastDay = d
	}
	return nil
}

// compare orders classes by Less.
func compare(a, b Class) int {
	switch {
	case Less(a.Lesson, b.Lesson):
		return -1
	case Less(b.Lesson, a.Lesson):
		return 1
	}
	return 0
}
