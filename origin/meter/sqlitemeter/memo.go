package sqlitemeter

import (
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/internal/batch"
)

// memo holds what this Store's transactions committed: every counter of
// the periods they loaded, and the bitsets of the days they read on. It is
// exact because the Store is its tables' only writer (see the package
// doc); it is bounded by forgetting everything when it grows past
// maxMemo periods, after which batches read from the database again.
// A nil memo remembers nothing.
type memo struct {
	periods map[batch.Periods]bool
	counts  map[batch.Key]int64
	days    map[batch.Day]*batch.Bitset
}

// maxMemo bounds the periods (org × hour) remembered.
const maxMemo = 10000

func newMemo() *memo {
	m := &memo{}
	m.reset()
	return m
}

func (m *memo) reset() {
	m.periods = map[batch.Periods]bool{}
	m.counts = map[batch.Key]int64{}
	m.days = map[batch.Day]*batch.Bitset{}
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

// day returns a copy of the remembered bitset of d, or nil.
func (m *memo) day(d batch.Day) *batch.Bitset {
	if m == nil {
		return nil
	}
	if b := m.days[d]; b != nil {
		return b.Clone()
	}
	return nil
}

// remember records what a committed batch left in s.
func (m *memo) remember(s *batch.State) {
	ps := s.Periods()
	if len(m.periods)+len(ps) > maxMemo {
		m.reset()
	}
	for _, p := range ps {
		m.periods[p] = true
		for _, k := range keys(p) {
			m.counts[k] = s.Count(k)
		}
	}
	for _, d := range s.Days() {
		if b := s.Day(d); b != nil {
			m.days[d] = b.Clone()
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
