package batch

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// Front is what a backend's Apply and Reinstate do before its database:
// refuse what no store could apply and a context already done, then hand
// the job to the group committer, or, without one (NoGroupCommit), to
// Alone, which commits it in a transaction of its own.
type Front struct {
	Committer *Committer // nil under NoGroupCommit
	Alone     func(context.Context, Job) (Outcome, error)
}

// do hands j to the committer, or to Alone.
func (f Front) do(ctx context.Context, j Job) (Outcome, error) {
	if err := ctx.Err(); err != nil {
		return Outcome{}, err
	}
	if f.Committer != nil {
		return f.Committer.Do(ctx, j)
	}
	out, err := f.Alone(ctx, j)
	if err != nil {
		return Outcome{}, err
	}
	return out, out.Err
}

// GrantLease grants a lease (meter.LeaseStore.GrantLease).
func (f Front) GrantLease(ctx context.Context, g meter.LeaseGrant) (meter.Granted, error) {
	if err := ValidateGrant(g); err != nil {
		return meter.Granted{}, err
	}
	out, err := f.do(ctx, Job{Grant: &g})
	return out.Granted, err
}

// ReportLeases applies lease reports at now (meter.LeaseStore.ReportLeases).
func (f Front) ReportLeases(ctx context.Context, now time.Time, rs []meter.Report) error {
	if err := ValidateReports(rs); err != nil {
		return err
	}
	if len(rs) == 0 {
		return nil
	}
	_, err := f.do(ctx, Job{Op: meter.Op{Now: now}, Reports: slices.Clone(rs)})
	return err
}

// Apply applies op (meter.Store.Apply).
func (f Front) Apply(ctx context.Context, op meter.Op) (meter.Result, error) {
	if err := Validate(op); err != nil {
		return meter.Result{}, err
	}
	out, err := f.do(ctx, Job{Op: op})
	return out.Result, err
}

// Reinstate lifts the enumeration alarm of org and reports whether one
// was in force (meter.Store.Reinstate).
func (f Front) Reinstate(ctx context.Context, org string) (bool, error) {
	if org == "" {
		return false, errors.New("meter reinstate: empty org")
	}
	out, err := f.do(ctx, Job{Op: meter.Op{Org: org}, Reinstate: true})
	return out.Result.Suspended, err
}
