package batch

import (
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// A request is billed once (meter.Op.Once): the first op of a key that
// is not suspended bills as any op and leaves a record of its outcome; a
// later op of the key, in the same batch or another, from this Store or
// another origin's, bills nothing and reports that outcome. An op whose
// Unless key has a record applies nothing and leaves none (excluded).

// OnceKey names an applied request: its org and its Op.Once.
type OnceKey struct {
	Org, Key string
}

// Once is the record of the first application of a key.
type Once struct {
	OnceKey
	Created time.Time // the op's Now
	// RefusedStage and RefusedStep locate the step that refused it in its
	// op's Stages; -1 when it passed.
	RefusedStage, RefusedStep int
	Granted                   int64 // its Result.Granted
	// LedgerFirst is the id of the first of its LedgerN ledger rows, which
	// are numbered one after another (0 when it wrote none). For a record
	// the batch makes, LedgerOffset is the index of that first row in
	// State.Ledger(), LedgerFirst known only once Save has numbered them.
	LedgerFirst  int64
	LedgerN      int
	LedgerOffset int
	// Shape is ShapeOf the op: an op of the key with another shape is not
	// the same request's (two origins disagreed on what it bills, or a
	// client reused a key) and is applied as a new one.
	Shape int64
	fresh bool // made by this batch
}

// ShapeOf hashes what op bills, but not its limits (an organisation's
// plan may change between two origins' reads): each step's meter, units,
// Force, Shorten and Refund, in stage order, its ledger rows' count and targets,
// and whether it records a lesson read.
func ShapeOf(op meter.Op) int64 {
	h := fnv.New64a()
	var b []byte
	for _, st := range op.Stages {
		b = append(b, '|')
		for _, s := range st {
			b = append(b, byte(s.Meter), boolByte(s.Force), boolByte(s.Shorten))
			if s.Refund { // only then: the shapes of the ops before refunds stay as N-1 computes them
				b = append(b, 'R')
			}
			b = strconv.AppendInt(b, s.N, 10)
			b = append(b, ',')
		}
	}
	b = strconv.AppendInt(append(b, '#'), int64(len(op.Ledger)), 10)
	for _, e := range op.Ledger {
		b = append(append(b, 0), e.Kind+"\x00"+e.Target...)
	}
	if op.Read != nil {
		b = append(append(b, 'r'), op.Read.Lesson...)
	}
	h.Write(b)
	return int64(h.Sum64())
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// initOnce lists the keys of the batch's ops, their Unless keys
// included, sorted.
func (s *State) initOnce() {
	s.once = map[OnceKey]*Once{}
	for op := range s.ops() {
		if op.Once != "" {
			s.onceKeys = append(s.onceKeys, OnceKey{op.Org, op.Once})
		}
		if op.Unless != "" {
			s.onceKeys = append(s.onceKeys, OnceKey{op.Org, op.Unless})
		}
	}
	slices.SortFunc(s.onceKeys, func(a, b OnceKey) int {
		if c := strings.Compare(a.Org, b.Org); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	s.onceKeys = slices.Compact(s.onceKeys)
}

// SetClock is the database's clock as Load read it: an op whose request
// was signed more than meter.OnceMaxAge before it is refused
// (meter.ErrTooOld). Not set: no op is refused for its age.
func (s *State) SetClock(t time.Time) { s.clock = t }

// tooOld reports whether op's request was signed too long before the
// batch's clock to be billed once.
func (s *State) tooOld(op meter.Op) bool {
	return op.Once != "" && !op.OnceSigned.IsZero() && !s.clock.IsZero() && s.clock.Sub(op.OnceSigned) > meter.OnceMaxAge
}

// OnceKeys are the distinct keys of the batch's ops, sorted: the records
// Load reads.
func (s *State) OnceKeys() []OnceKey { return s.onceKeys }

// SetOnce records that o's key was applied before the batch.
func (s *State) SetOnce(o Once) {
	o.fresh = false
	s.once[o.OnceKey] = &o
}

// NewOnce are the records of the keys the batch applied first, in job
// order: those Save inserts.
func (s *State) NewOnce() []*Once { return s.newOnce }

// onceOf is the record of op's key, or nil when it has none (or no key),
// or when the record's op billed something else (Once.Shape).
func (s *State) onceOf(op meter.Op) *Once {
	if op.Once == "" {
		return nil
	}
	o := s.once[OnceKey{op.Org, op.Once}]
	if o == nil || o.Shape != ShapeOf(op) {
		return nil
	}
	return o
}

// excluded reports whether op's Unless key was applied before, in an
// earlier batch or earlier in this one, whatever that op's shape: the
// other end of op's request stands, so op applies nothing
// (meter.Op.Unless). Its record is read under the same locks as op's own
// key (Load reads OnceKeys, Unless keys included), so of two ops that
// name each other only the first to commit applies.
func (s *State) excluded(op meter.Op) bool {
	if op.Unless == "" {
		return false
	}
	_, ok := s.once[OnceKey{op.Org, op.Unless}]
	return ok
}

// duplicate is the Result of op, whose key o records: nothing billed,
// the first application's outcome, the counts as they are.
func (s *State) duplicate(op meter.Op, o *Once) meter.Result {
	res := meter.Result{Duplicate: true, Granted: o.Granted}
	if o.RefusedStage >= 0 && o.RefusedStage < len(op.Stages) && o.RefusedStep >= 0 && o.RefusedStep < len(op.Stages[o.RefusedStage]) {
		step := op.Stages[o.RefusedStage][o.RefusedStep]
		res.Refused = &step
	}
	if !o.fresh { // a fresh record's rows are numbered by Save (numberDuplicates)
		for i := range o.LedgerN {
			res.LedgerIDs = append(res.LedgerIDs, o.LedgerFirst+int64(i))
		}
	}
	s.after(op, &res)
	return res
}

// numberDuplicates gives the duplicates of keys the batch applied first
// the ids Save gave those first applications' ledger rows.
func (s *State) numberDuplicates(outs []Outcome) {
	for i, j := range s.jobs {
		if !j.isOp() || !outs[i].Result.Duplicate {
			continue
		}
		if o := s.onceOf(j.Op); o != nil && o.fresh {
			for _, r := range s.ledger[o.LedgerOffset : o.LedgerOffset+o.LedgerN] {
				outs[i].Result.LedgerIDs = append(outs[i].Result.LedgerIDs, r.ID)
			}
		}
	}
}

// recordOnce keeps the outcome res of op, just applied, when op has a key
// and billed as it will be billed: a suspended op bills nothing and will
// be refused again, a Reserved one is applied again once its
// organisation's leases are recalled, and an Excluded one applied
// nothing (its rival's record stands, and must keep excluding it).
func (s *State) recordOnce(op meter.Op, res meter.Result) {
	if op.Once == "" || res.Duplicate || res.Excluded || res.Suspended || res.Reserved {
		return
	}
	if _, ok := s.once[OnceKey{op.Org, op.Once}]; ok {
		return // of another shape: billed anew, the first record kept
	}
	o := &Once{OnceKey: OnceKey{op.Org, op.Once}, Created: Micro(op.Now), RefusedStage: -1, RefusedStep: -1, Granted: res.Granted,
		Shape: ShapeOf(op), fresh: true}
	if res.Refused != nil {
		o.RefusedStage, o.RefusedStep = refusedAt(op, res.Refused)
	} else if n := len(op.Ledger); n > 0 {
		o.LedgerN, o.LedgerOffset = n, len(s.ledger)-n
	}
	s.once[o.OnceKey] = o
	s.newOnce = append(s.newOnce, o)
}

// refusedAt locates step, a copy of one of op's steps, in op.Stages: the
// first step of the same meter, N and limit (a stage's steps are billed
// all or nothing, so which of two equal steps refused is the same
// outcome).
func refusedAt(op meter.Op, step *meter.Step) (stage, index int) {
	for i, st := range op.Stages {
		for j, x := range st {
			if x.Meter == step.Meter && x.N == step.N && x.Force == step.Force && x.Shorten == step.Shorten && sameLimit(x.Limit, step.Limit) {
				return i, j
			}
		}
	}
	return -1, -1
}

func sameLimit(a, b *int64) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }
