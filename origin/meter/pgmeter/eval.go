package pgmeter

// This file is the evaluation of ops against the counters a batch
// transaction has read. sqlitemeter/eval.go and pgmeter/eval.go are
// identical but for the package clause (TestSharedFiles checks it): change
// both.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// MaxOrdinal bounds Read.Ordinal: a day's bitset holds at most MaxOrdinal
// bits (128 KiB), far above the corpus's 3,680 lessons.
const MaxOrdinal = 1 << 20

// validate rejects an op that no store could apply, before it is queued,
// so that one bad op never fails the batch it would have shared.
func validate(op meter.Op) error {
	if op.Org == "" {
		return errors.New("meter op: empty org")
	}
	for _, stage := range op.Stages {
		for _, st := range stage {
			if int(st.Meter) >= numMeters {
				return fmt.Errorf("meter op: unknown meter %d", st.Meter)
			}
			if st.N < 0 {
				return fmt.Errorf("meter op: negative N %d on %s", st.N, st.Meter)
			}
		}
	}
	if op.Read != nil && (op.Read.Ordinal < 0 || op.Read.Ordinal >= MaxOrdinal) {
		return fmt.Errorf("meter op: lesson ordinal %d out of range [0, %d)", op.Read.Ordinal, MaxOrdinal)
	}
	return nil
}

// key names one counter row: a meter of an org in one period.
type key struct {
	org    string
	meter  meter.Meter
	period string
}

func compareKeys(a, b key) int {
	if c := strings.Compare(a.org, b.org); c != 0 {
		return c
	}
	if c := strings.Compare(a.period, b.period); c != 0 {
		return c
	}
	return strings.Compare(a.meter.String(), b.meter.String())
}

// meterOf is the meter stored under name in a period of the given kind;
// the spec's names repeat across kinds ("calls" is a month and an hour
// meter), the period's shape tells them apart.
func meterOf(name string, hourly bool) (meter.Meter, bool) {
	for _, m := range meter.Meters {
		if m.Hourly() == hourly && m.String() == name {
			return m, true
		}
	}
	return 0, false
}

// dayKey names one day's bitset of lessons read by an org.
type dayKey struct {
	org string
	day string // "2006-01-02", UTC
}

func dayOf(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// bitset is one org's lessons read on one day under one corpus version:
// bit i set means ordinal i was read. n caches the popcount.
type bitset struct {
	version string
	bits    []byte
	n       int
	dirty   bool
}

// set records ordinal i under version, starting afresh when the stored
// bitset belongs to another version, and reports whether i is new.
func (b *bitset) set(version string, i int) bool {
	if b.version != version {
		*b = bitset{version: version, dirty: true}
	}
	if need := i/8 + 1; len(b.bits) < need {
		b.bits = append(b.bits, make([]byte, need-len(b.bits))...)
	}
	mask := byte(1) << (i % 8)
	if b.bits[i/8]&mask == 0 {
		b.bits[i/8] |= mask
		b.n++
		b.dirty = true
		return true
	}
	return false
}

// count is the number of distinct lessons read under version.
func (b *bitset) count(version string) int {
	if b == nil || b.version != version {
		return 0
	}
	return b.n
}

// state is what one batch transaction read, and what its ops did to it.
// It holds every counter of every op's periods and the bitset of every
// op's day; the transaction holds the write lock (SQLite) or the row
// locks (PostgreSQL) of the ones its ops may change, so evaluating the
// ops one after another in memory is exact, and each op sees the effects
// of the ones before it.
type state struct {
	counts map[key]int64
	dirty  map[key]bool
	days   map[dayKey]*bitset
}

func newState() *state {
	return &state{counts: map[key]int64{}, dirty: map[key]bool{}, days: map[dayKey]*bitset{}}
}

// numMeters is the number of meters.
const numMeters = len(meter.Counters{})

// opKeys are the counters op may read: every meter in its periods,
// indexed by meter.
func opKeys(op meter.Op) [numMeters]key {
	var ks [numMeters]key
	for _, m := range meter.Meters {
		ks[m] = key{op.Org, m, m.Period(op.Now)}
	}
	return ks
}

// stepped are the distinct counters ops may write, sorted: the rows a
// batch locks, always in this order, so two batches never deadlock.
func stepped(ops []meter.Op) []key {
	seen := map[key]bool{}
	var ks []key
	for _, op := range ops {
		for _, stage := range op.Stages {
			for _, st := range stage {
				k := key{op.Org, st.Meter, st.Meter.Period(op.Now)}
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

// readDays are the distinct days whose bitsets ops may write, sorted.
func readDays(ops []meter.Op) []dayKey {
	seen := map[dayKey]bool{}
	var ds []dayKey
	for _, op := range ops {
		if op.Read == nil {
			continue
		}
		d := dayKey{op.Org, dayOf(op.Now)}
		if !seen[d] {
			seen[d] = true
			ds = append(ds, d)
		}
	}
	slices.SortFunc(ds, func(a, b dayKey) int {
		if c := strings.Compare(a.org, b.org); c != 0 {
			return c
		}
		return strings.Compare(a.day, b.day)
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
func (s *state) apply(op meter.Op) meter.Result {
	var res meter.Result
	type add struct {
		k key
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
			k := key{op.Org, st.Meter, st.Meter.Period(op.Now)}
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
		d := s.days[dayKey{op.Org, dayOf(op.Now)}]
		if res.Refused == nil {
			res.FirstRead = d.set(op.Read.Version, op.Read.Ordinal)
		}
		res.LessonsRead = d.count(op.Read.Version)
	}
	return res
}
