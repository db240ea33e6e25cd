package sqlitemeter

import (
	"time"

	"context"

	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/internal/batch"
)

// ApplyBatch applies ops in one transaction, as one batch of the
// committer would (metertest.Batcher). It runs on the caller's goroutine
// with the committer's memo, so no other op may be in flight.
func (s *Store) ApplyBatch(ctx context.Context, ops []meter.Op) ([]meter.Result, error) {
	jobs := make([]batch.Job, len(ops))
	for i, op := range ops {
		if err := batch.Validate(op); err != nil {
			return nil, err
		}
		jobs[i] = batch.Job{Op: op}
	}
	outs, err := batch.Commit(ctx, s.w, jobs)
	if err != nil {
		return nil, err
	}
	return batch.Results(outs), nil
}

// MemoLeases reports what the memo holds of org's leases that may reserve
// for a batch whose earliest op is at now: how many, and whether it holds
// them (a batch then reads none from the database). Only while no op is
// in flight.
func (s *Store) MemoLeases(org string, now time.Time) (int, bool) {
	ls, ok := s.w.memo.leases(org, now)
	return len(ls), ok
}
