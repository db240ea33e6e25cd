package sqlitemeter

import (
	"time"

	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/internal/batch"
)

// memo holds what this Store's transactions committed: every counter of
// the periods they loaded, the alarms of the orgs they touched, of the
// days they read lessons on, the count and the lessons known to be in the
// record, and of the orgs whose leases they read, those that may reserve. It is exact because the Store is its tables' only writer (see
// the package doc); it is bounded by forgetting everything when it grows
// past maxMemo entries or maxMemoLessons lessons, after which batches read
// from the database again. A nil memo remembers nothing.
type memo struct {
	periods map[batch.Periods]bool
	counts  map[batch.Key]int64
	alarms  map[string]batch.Alarm
	days    map[batch.Day]*memoDay
	lessons int // lessons held by days
	// leases are, by org, its leases that may reserve: every one not
	// closed whose Settle is after floor.
	orgLeases map[string]memoLeases
	nLeases   int // leases held by leases
}

type memoLeases struct {
	floor time.Time
	list  []batch.Lease
}

// memoDay is what the memo knows of a day's record: its count, and some
// of the lessons in it (all of them when complete).
type memoDay struct {
	n    int
	read map[string]bool
}

// complete reports whether d knows every lesson of the record, so that a
// lesson it does not know is not in it.
func (d *memoDay) complete() bool { return d != nil && len(d.read) == d.n }

// maxMemo bounds the periods (org × hour), alarms and days remembered;
// maxMemoLessons the lessons.
const (
	maxMemo        = 10000
	maxMemoLessons = 100000
)

func newMemo() *memo {
	m := &memo{}
	m.reset()
	return m
}

func (m *memo) reset() {
	m.periods = map[batch.Periods]bool{}
	m.counts = map[batch.Key]int64{}
	m.alarms = map[string]batch.Alarm{}
	m.days = map[batch.Day]*memoDay{}
	m.lessons = 0
	m.orgLeases = map[string]memoLeases{}
	m.nLeases = 0
}

// leases returns the remembered leases of org that may reserve at
// earliest or later, if it has them; the caller must not change them.
func (m *memo) leases(org string, earliest time.Time) ([]batch.Lease, bool) {
	if m == nil {
		return nil, false
	}
	ml, ok := m.orgLeases[org]
	if !ok || earliest.Before(ml.floor) {
		return nil, false
	}
	return ml.list, true
}

// load sets into s the counters of p, if all of them are remembered.
func (m *memo) load(p batch.Periods, s *batch.State) bool {
	if m == nil || !m.periods[p] {
		return false
	}
	for _, k := range keys(p) {
		s.Set(k, m.counts[k])
	}
	return true
}

// alarm returns the remembered alarm of org, and whether there is one.
func (m *memo) alarm(org string) (batch.Alarm, bool) {
	if m == nil {
		return batch.Alarm{}, false
	}
	a, ok := m.alarms[org]
	return a, ok
}

// day returns what the memo knows of d, or nil; the caller must not
// change it.
func (m *memo) day(d batch.Day) *memoDay {
	if m == nil {
		return nil
	}
	return m.days[d]
}

// remember records what a committed batch left in s.
func (m *memo) remember(s *batch.State) {
	ps, orgs, ds := s.Periods(), s.Orgs(), s.Days()
	// What the batch read of an org's leases holds every one not closed
	// whose Settle is after its Floor, or after the memo's floor when it
	// read them from the memo (later than its Floor, by up to the slack).
	lorgs := s.LeaseOrgs()
	var buf [8]time.Time
	floors := buf[:0]
	for _, org := range lorgs {
		f := s.Floor()
		if prev, ok := m.orgLeases[org]; ok && prev.floor.After(f) {
			f = prev.floor
		}
		floors = append(floors, f)
	}
	if len(m.periods)+len(ps) > maxMemo || len(m.alarms)+len(orgs) > maxMemo || len(m.days)+len(ds) > maxMemo ||
		m.lessons > maxMemoLessons || len(m.orgLeases)+len(lorgs) > maxMemo || m.nLeases > maxMemoLessons {
		m.reset()
	}
	for i, org := range lorgs {
		ml := memoLeases{floor: floors[i]}
		for _, l := range s.Open(org) {
			if !l.Closed && l.Settle.After(ml.floor) {
				ml.list = append(ml.list, *l)
			}
		}
		m.nLeases += len(ml.list) - len(m.orgLeases[org].list)
		m.orgLeases[org] = ml
	}
	for _, p := range ps {
		m.periods[p] = true
		for _, k := range keys(p) {
			m.counts[k] = s.Count(k)
		}
	}
	for _, org := range orgs {
		m.alarms[org] = s.Alarm(org)
	}
	for _, d := range ds {
		md := m.days[d]
		if md == nil {
			md = &memoDay{read: map[string]bool{}}
			m.days[d] = md
		}
		md.n = s.DayCount(d)
		for _, l := range s.Lessons(d) {
			if s.Read(d, l) && !md.read[l] {
				md.read[l] = true
				m.lessons++
			}
		}
	}
}

// keys are the counters of every meter in p.
func keys(p batch.Periods) []batch.Key {
	ks := make([]batch.Key, 0, len(meter.Meters))
	for _, mt := range meter.Meters {
		period := p.Month
		if mt.Hourly() {
			period = p.Hour
		}
		ks = append(ks, batch.Key{Org: p.Org, Meter: mt, Period: period})
	}
	return ks
}
