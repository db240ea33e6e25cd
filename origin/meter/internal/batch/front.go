package batch

import (
	"context"
	"errors"

	"github.com/lectern-api/lectern/origin/meter"
)

// Front is what a backend's Apply and Reinstate do before its database:
// refuse what no store could apply and a context already done, then hand
// the job to the group committer, or, without one (NoGroupCommit), to
// Alone, which commits it in a transaction of its own.
type Front struct {
	Committer *Committer // nil under NoGroupCommit
	Alone     func(context.Context, Job) (meter.Result, error)
}

// Apply applies op (meter.Store.Apply).
func (f Front) Apply(ctx context.Context, op meter.Op) (meter.Result, error) {
	if err := Validate(op); err != nil {
		return meter.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return meter.Result{}, err
	}
	if f.Committer != nil {
		return f.Committer.Apply(ctx, op)
	}
	return f.Alone(ctx, Job{Op: op})
}

// Reinstate lifts the enumeration alarm of org and reports whether one
// was in force (meter.Store.Reinstate).
func (f Front) Reinstate(ctx context.Context, org string) (bool, error) {
	if org == "" {
		return false, errors.New("meter reinstate: empty org")
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if f.Committer != nil {
		return f.Committer.Reinstate(ctx, org)
	}
	res, err := f.Alone(ctx, Job{Op: meter.Op{Org: org}, Reinstate: true})
	return res.Suspended, err
}
