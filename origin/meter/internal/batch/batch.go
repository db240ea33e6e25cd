// Package batch is what the meter backends (sqlitemeter, pgmeter) share:
// the validation of ops, their evaluation against the counters and
// bitsets one transaction read (State), the transaction itself (Commit),
// and the group committer that batches concurrent ops into it
// (Committer).
//
// A backend supplies only its dialect: a Backend that begins transactions
// and says which failures to retry, and a Tx that loads a State's rows,
// locking those its ops may change, and saves what they changed.
package batch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// MaxOrdinal bounds Read.Ordinal: a day's bitset holds at most MaxOrdinal
// bits (128 KiB), far above the corpus's 3,680 lessons.
const MaxOrdinal = 1 << 20

// Timeout bounds one batch transaction, lock waits included.
const Timeout = 30 * time.Second

// Validate rejects an op that no store could apply, before it is queued,
// so that one bad op never fails the batch it would have shared.
func Validate(op meter.Op) error {
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

// Backend is a database a batch runs in.
type Backend interface {
	// Begin begins a read-write transaction.
	Begin(ctx context.Context) (Tx, error)
	// Retry reports whether a batch whose attempt-th try (from 1) failed
	// with err is tried again in a new transaction.
	Retry(err error, attempt int) bool
}

// Tx is one batch transaction.
type Tx interface {
	// Load reads into s, with s.Set and s.SetDay, the counters of every
	// period in s.Periods and the bitset of every day in s.Days, and
	// holds the locks on those the ops may change (s.Stepped, s.Days)
	// until the transaction ends, so that evaluating the ops against
	// what it read is exact. Rows not stored need not be set.
	Load(ctx context.Context, s *State) error
	// Save writes back what the ops changed (s.Changed, s.ChangedDays).
	Save(ctx context.Context, s *State) error
	Commit(ctx context.Context) error
	// Rollback ends the transaction if Commit has not; it is deferred
	// after Begin, so it is also called after Commit.
	Rollback(ctx context.Context) error
}

// Commit applies ops, in order, in one transaction of b, and commits it;
// on a failure that b retries it starts over in a new transaction. On
// error nothing was applied (but see pgmeter on a lost connection during
// COMMIT).
func Commit(ctx context.Context, b Backend, ops []meter.Op) ([]meter.Result, error) {
	for attempt := 1; ; attempt++ {
		res, err := commitOnce(ctx, b, ops)
		if err != nil && b.Retry(err, attempt) {
			continue
		}
		return res, err
	}
}

func commitOnce(ctx context.Context, b Backend, ops []meter.Op) ([]meter.Result, error) {
	tx, err := b.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("meter batch: %w", err)
	}
	defer tx.Rollback(ctx)
	s := newState(ops)
	if err := tx.Load(ctx, s); err != nil {
		return nil, fmt.Errorf("meter batch: %w", err)
	}
	results := make([]meter.Result, len(ops))
	for i, op := range ops {
		results[i] = s.apply(op)
	}
	if err := tx.Save(ctx, s); err != nil {
		return nil, fmt.Errorf("meter batch: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("meter batch: commit: %w", err)
	}
	return results, nil
}
