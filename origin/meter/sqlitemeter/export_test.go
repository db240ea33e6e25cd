package sqlitemeter

import (
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
