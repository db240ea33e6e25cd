// Package progress is a learner's progress record and its rules: one
// record per organisation and learner, with a version that moves with
// every saved write, the classes recorded (score, best score, first and
// last recorded), XP, and the streak of consecutive UTC days with a saved
// write (spec: Route rules §7; docs/decisions/learner-progress.md).
//
// The record is read, changed by Apply and saved with a compare and swap
// on its version (Store.SaveProgress), so two writers racing on one
// learner never lose an update silently: the loser gets ErrConflict and
// the API answers 409 WRITE_CONFLICT. Other learner-facing apps share the
// record through the same Store, and their writes move the version too.
package progress

import (
	"context"
	"errors"
	"math"
	"sort"
	"time"

	"github.com/lectern-api/lectern/shared/id"
)

// ErrConflict is SaveProgress's answer when the stored version is no
// longer the one the record was read at: another writer saved first, and
// nothing was written.
var ErrConflict = errors.New("progress: the record changed since it was read")

// Class is one recorded class of a learner.
type Class struct {
	Lesson id.Lesson // tier, subject slug and class number
	// Score is the latest write's score; nil when that write sent none.
	Score *float64
	// BestScore is the highest score ever sent for the class; nil when
	// none was.
	BestScore       *float64
	FirstRecordedAt time.Time
	LastRecordedAt  time.Time
}

// XP is the class's experience points: 10, plus a tenth of the best
// score rounded down.
func (c Class) XP() int64 {
	if c.BestScore == nil {
		return 10
	}
	return 10 + int64(math.Floor(*c.BestScore/10))
}

// Record is one learner's progress in one organisation.
type Record struct {
	OrgID   string
	Learner string
	// Version is 0 for a learner with nothing saved; each saved write
	// makes it one more.
	Version int64
	// Classes are the recorded classes, in listing order (Less). A
	// record is never dropped, not even for a lesson a reloaded corpus
	// lacks.
	Classes []Class
	// Run is the number of consecutive UTC days with a saved write that
	// ends on LastDay, and Longest the longest such run ever.
	Run     int64
	Longest int64
	// LastDay is the UTC day of the last saved write, at midnight; zero
	// when nothing was saved.
	LastDay time.Time
}

// Streak is the learner's streak as the API reports it.
type Streak struct {
	Current int64
	Longest int64
	LastDay time.Time // zero when nothing was saved
}

// Streak is r's streak on now's UTC day: the run ending on LastDay while
// LastDay is today or yesterday, otherwise 0.
func (r *Record) Streak(now time.Time) Streak {
	s := Streak{Longest: r.Longest, LastDay: r.LastDay}
	if !r.LastDay.IsZero() {
		if gap := day(now).Sub(r.LastDay); gap >= 0 && gap <= 24*time.Hour {
			s.Current = r.Run
		}
	}
	return s
}

// XP sums the XP of every recorded class, granted now or not.
func (r *Record) XP() int64 {
	var xp int64
	for _, c := range r.Classes {
		xp += c.XP()
	}
	return xp
}

// Class returns the recorded class of lesson l, if any.
func (r *Record) Class(l id.Lesson) (Class, bool) {
	if i, ok := r.find(l); ok {
		return r.Classes[i], true
	}
	return Class{}, false
}

// Apply records a write of score (nil: none sent) for lesson l at now and
// reports whether it changed the record. A write that changes nothing,
// the same score for a recorded class on the same UTC day as its last
// write, leaves the record as it was, so that a retried PUT is harmless;
// a changed record must be saved with SaveProgress. Apply does not move
// Version: SaveProgress does.
func (r *Record) Apply(l id.Lesson, score *float64, now time.Time) bool {
	now = now.UTC()
	i, ok := r.find(l)
	if ok {
		c := &r.Classes[i]
		if sameScore(c.Score, score) && day(c.LastRecordedAt).Equal(day(now)) {
			return false
		}
		c.Score = clone(score)
		if score != nil && (c.BestScore == nil || *score > *c.BestScore) {
			c.BestScore = clone(score)
		}
		c.LastRecordedAt = now
	} else {
		c := Class{Lesson: l, Score: clone(score), BestScore: clone(score), FirstRecordedAt: now, LastRecordedAt: now}
		r.Classes = append(r.Classes, Class{})
		copy(r.Classes[i+1:], r.Classes[i:])
		r.Classes[i] = c
	}
	r.countDay(day(now))
	return true
}

// countDay extends the streak with a saved write on day d.
func (r *Record) countDay(d time.Time) {
	switch gap := d.Sub(r.LastDay); {
	case !r.LastDay.IsZero() && gap <= 0:
		// Same day (or a clock that ran back): the run stands.
		return
	case !r.LastDay.IsZero() && gap == 24*time.Hour:
		r.Run++
	default:
		r.Run = 1
	}
	r.LastDay = d
	if r.Run > r.Longest {
		r.Longest = r.Run
	}
}

// find returns the index of lesson l in r.Classes, or where it belongs.
func (r *Record) find(l id.Lesson) (int, bool) {
	i := sort.Search(len(r.Classes), func(i int) bool { return !Less(r.Classes[i].Lesson, l) })
	return i, i < len(r.Classes) && r.Classes[i].Lesson == l
}

// Less is the listing order: tier in canonical order (id.Tiers), then
// subject slug, then class number.
func Less(a, b id.Lesson) bool {
	if ra, rb := id.TierRank(a.Tier), id.TierRank(b.Tier); ra != rb {
		return ra < rb
	}
	if a.Slug != b.Slug {
		return a.Slug < b.Slug
	}
	return a.Class < b.Class
}

// Clone returns a deep copy of r. The copies of the scores share one
// allocation (two per class otherwise: a cached record is cloned on every
// read), each its own element of it.
func (r *Record) Clone() Record {
	c := *r
	c.Classes = make([]Class, len(r.Classes))
	scores := make([]float64, 0, 2*len(r.Classes))
	cp := func(p *float64) *float64 {
		if p == nil {
			return nil
		}
		scores = append(scores, *p) // within capacity: never moves
		return &scores[len(scores)-1]
	}
	for i, k := range r.Classes {
		k.Score, k.BestScore = cp(k.Score), cp(k.BestScore)
		c.Classes[i] = k
	}
	return c
}

// day is t's UTC day at midnight.
func day(t time.Time) time.Time {
	return t.UTC().Truncate(24 * time.Hour)
}

func sameScore(a, b *float64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func clone(p *float64) *float64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Store keeps progress records; sqlitestore and pgstore implement it, and
// progresstest is the conformance suite both pass.
type Store interface {
	// Progress reads the record of learner in organisation orgID: a
	// Record with Version 0 and no classes when nothing was saved.
	Progress(ctx context.Context, orgID, learner string) (Record, error)
	// ReadProgress is Progress for a reader that changes nothing: the
	// record it returns may be shared, with the store's cache and with
	// other readers, so neither it nor what it points to may be
	// modified. It spares GET /v1/progress a copy of the record
	// (Progress's is the caller's own, for Apply).
	ReadProgress(ctx context.Context, orgID, learner string) (*Record, error)
	// SaveProgress stores r as version r.Version+1 if the stored version
	// is still r.Version (0: none stored), in one transaction, and
	// returns the new version. ErrConflict, with nothing written, if
	// another write saved first. The write is durable when it returns.
	SaveProgress(ctx context.Context, r Record) (int64, error)
}
