package batch

import (
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// Key names one counter row: a meter of an org in one period.
type Key struct {
	Org    string
	Meter  meter.Meter
	Period string
}

func compareKeys(a, b Key) int {
	if c := strings.Compare(a.Org, b.Org); c != 0 {
		return c
	}
	if c := strings.Compare(a.Period, b.Period); c != 0 {
		return c
	}
	return strings.Compare(a.Meter.String(), b.Meter.String())
}

// MeterOf is the meter stored under name in a period of the given kind;
// the spec's names repeat across kinds ("calls" is a month and an hour
// meter), the period's shape tells them apart.
func MeterOf(name string, hourly bool) (meter.Meter, bool) {
	for _, m := range meter.Meters {
		if m.Hourly() == hourly && m.String() == name {
			return m, true
		}
	}
	return 0, false
}

// Periods are the periods an op counts in: its org's month and hour.
type Periods struct {
	Org   string
	Month string // "2006-01"
	Hour  string // "2006-01-02T15"
}

// Day names one day's bitset of lessons read by an org.
type Day struct {
	Org  string
	Date string // "2006-01-02", UTC
}

// DayOf is the UTC date of t, as Day.Date holds it.
func DayOf(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// Bitset is one org's lessons read on one day under one corpus version:
// bit i set means ordinal i was read. N caches the popcount.
type Bitset struct {
	Version string
	Bits    []byte
	N       int
	dirty   bool
}

// Clone returns a copy of b that shares no memory with it.
func (b *Bitset) Clone() *Bitset {
	return &Bitset{Version: b.Version, Bits: append([]byte(nil), b.Bits...), N: b.N}
}

// set records ordinal i under version, starting afresh when the stored
// bitset belongs to another version, and reports whether i is new.
func (b *Bitset) set(version string, i int) bool {
	if b.Version != version {
		*b = Bitset{Version: version, dirty: true}
	}
	if need := i/8 + 1; len(b.Bits) < need {
		b.Bits = append(b.Bits, make([]byte, need-len(b.Bits))...)
	}
	mask := byte(1) << (i % 8)
	if b.Bits[i/8]&mask == 0 {
		b.Bits[i/8] |= mask
		b.N++
		b.dirty = true
		return true
	}
	return false
}

// Count is the number of distinct lessons read under version.
func (b *Bitset) Count(version string) int {
	if b == nil || b.Version != version {
		return 0
	}
	return b.N
}

// State is what one batch transaction read, and what its ops did to it.
// It holds every counter of every op's periods and the bitset of every
// op's day; the transaction holds the write lock (SQLite) or the row
// locks (PostgreSQL) of the ones its ops may change, so evaluating the
// ops one after another in memory is exact, and each op sees the effects
// of the ones before it.
type State struct {
	ops     []meter.Op
	counts  map[Key]int64
	dirty   map[Key]bool
	days    map[Day]*Bitset
	dayKeys []Day
}

// numMeters is the number of meters.
const numMeters = len(meter.Counters{})

// newState is the state of ops before Load: every counter they may read
// is 0 and every day's bitset empty, as when no row is stored.
func newState(ops []meter.Op) *State {
	s := &State{ops: ops, counts: map[Key]int64{}, dirty: map[Key]bool{}, days: map[Day]*Bitset{}}
	for _, op := range ops {
		for _, k := range opKeys(op) {
			s.counts[k] = 0
		}
	}
	s.dayKeys = readDays(ops)
	for _, d := range s.dayKeys {
		s.days[d] = &Bitset{}
	}
	return s
}

// Periods are the distinct periods of the ops, in their order.
func (s *State) Periods() []Periods {
	seen := map[Periods]bool{}
	var ps []Periods
	for _, op := range s.ops {
		p := Periods{op.Org, meter.MonthCalls.Period(op.Now), meter.HourCalls.Period(op.Now)}
		if !seen[p] {
			seen[p] = true
			ps = append(ps, p)
		}
	}
	return ps
}

// Stepped are the distinct counters the ops may write, sorted: the rows a
// batch locks, always in this order, so two batches never deadlock.
func (s *State) Stepped() []Key {
	seen := map[Key]bool{}
	var ks []Key
	for _, op := range s.ops {
		for _, stage := range op.Stages {
			for _, st := range stage {
				k := Key{op.Org, st.Meter, st.Meter.Period(op.Now)}
				if !seen[k] {
					seen[k] = true
					ks = append(ks, k)
				}
			}
		}
	}
	slices.SortFunc(ks, compareKeys)
	return ks
}

// Days are the distinct days whose bitsets the ops may write, sorted.
func (s *State) Days() []Day { return s.dayKeys }

// Count is the count of k as the ops left it (what was loaded before any
// op ran).
func (s *State) Count(k Key) int64 { return s.counts[k] }

// Day is the bitset of d as the ops left it; nil if no op reads on d.
func (s *State) Day(d Day) *Bitset { return s.days[d] }

// Set records the stored count of k.
func (s *State) Set(k Key, n int64) { s.counts[k] = n }

// SetDay records the stored bitset of d.
func (s *State) SetDay(d Day, b *Bitset) { s.days[d] = b }

// Changed yields the counters the ops changed, with their new counts.
func (s *State) Changed() iter.Seq2[Key, int64] {
	return func(yield func(Key, int64) bool) {
		for k := range s.dirty {
			if !yield(k, s.counts[k]) {
				return
			}
		}
	}
}

// ChangedDays yields the bitsets the ops changed.
func (s *State) ChangedDays() iter.Seq2[Day, *Bitset] {
	return func(yield func(Day, *Bitset) bool) {
		for d, b := range s.days {
			if b.dirty && !yield(d, b) {
				return
			}
		}
	}
}

// opKeys are the counters op may read: every meter in its periods,
// indexed by meter.
func opKeys(op meter.Op) [numMeters]Key {
	var ks [numMeters]Key
	for _, m := range meter.Meters {
		ks[m] = Key{op.Org, m, m.Period(op.Now)}
	}
	return ks
}

// readDays are the distinct days whose bitsets ops may write, sorted.
func readDays(ops []meter.Op) []Day {
	seen := map[Day]bool{}
	var ds []Day
	for _, op := range ops {
		if op.Read == nil {
			continue
		}
		d := Day{op.Org, DayOf(op.Now)}
		if !seen[d] {
			seen[d] = true
			ds = append(ds, d)
		}
	}
	slices.SortFunc(ds, func(a, b Day) int {
		if c := strings.Compare(a.Org, b.Org); c != 0 {
			return c
		}
		return strings.Compare(a.Date, b.Date)
	})
	return ds
}

// apply evaluates op against s and records its effects in s.
//
// A stage is billed all or nothing. Within a stage, a step that does not
// fit its limit refuses the op and bills none of the stage, even when
// another step of the stage is a Force step over its limit (a monthly
// quota refusal bills nothing, spec: Limits, "Effects of refusals"); when
// only Force steps are over, the stage is billed and the first of them
// refuses the op. Steps of one stage on the same counter add up.
func (s *State) apply(op meter.Op) meter.Result {
	var res meter.Result
	type add struct {
		k Key
		n int64
	}
	var adds []add
stages:
	for _, stage := range op.Stages {
		adds = adds[:0]
		var hard, forced *meter.Step
		granted := int64(-1)
		for i := range stage {
			st := &stage[i]
			k := Key{op.Org, st.Meter, st.Meter.Period(op.Now)}
			cur := s.counts[k]
			for _, a := range adds {
				if a.k == k {
					cur += a.n
				}
			}
			n := st.N
			if st.Limit != nil {
				left := *st.Limit - cur
				switch {
				case n <= left:
				case st.Shorten && left >= 1:
					n = left
				case st.Force:
					if forced == nil {
						forced = st
					}
				default:
					if hard == nil {
						hard = st
					}
				}
			}
			if st.Shorten {
				granted = n
			}
			adds = append(adds, add{k, n})
		}
		if hard != nil {
			step := *hard
			res.Refused = &step
			break stages
		}
		for _, a := range adds {
			s.counts[a.k] += a.n
			s.dirty[a.k] = true
		}
		if granted >= 0 {
			res.Granted = granted
		}
		if forced != nil {
			step := *forced
			res.Refused = &step
			break stages
		}
	}
	for m, k := range opKeys(op) {
		res.After[m] = s.counts[k]
	}
	if op.Read != nil {
		d := s.days[Day{op.Org, DayOf(op.Now)}]
		if res.Refused == nil {
			res.FirstRead = d.set(op.Read.Version, op.Read.Ordinal)
		}
		res.LessonsRead = d.Count(op.Read.Version)
	}
	return res
}
