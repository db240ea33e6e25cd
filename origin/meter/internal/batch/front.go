package batch

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// Front is what a backend's Apply and Reinstate do before its database:
// refuse what no store could apply and a context already done, then hand
// the job to the group committer, or, without one (NoGroupCommit), to
// Alone, which commits it in a transaction of its own. A Front is not
// copied once used.
type Front struct {
	Committer *Committer // nil under NoGroupCommit
	// Alone commits j in a transaction of its own on the backend's
	// database. ctx is the caller's (waiting for a connection may end with
	// it); tctx is the transaction's: as under group commit, once begun it
	// commits or fails on its own, within Timeout.
	Alone func(ctx, tctx context.Context, j Job) (Outcome, error)

	mu     sync.RWMutex // held for reading by Alone's calls, for writing by Close
	closed bool
}

// do hands j to the committer, or to Alone.
func (f *Front) do(ctx context.Context, j Job) (Outcome, error) {
	if err := ctx.Err(); err != nil {
		return Outcome{}, err
	}
	if f.Committer != nil {
		return f.Committer.Do(ctx, j)
	}
	out, err := f.alone(ctx, j)
	if err != nil {
		return Outcome{}, err
	}
	return out, out.Err
}

func (f *Front) alone(ctx context.Context, j Job) (Outcome, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return Outcome{}, ErrClosed
	}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), Timeout)
	defer cancel()
	return f.Alone(ctx, tctx, j)
}

// Close commits the jobs already queued and stops the committer, or,
// without one, waits for the jobs Alone is committing. Jobs fail with
// ErrClosed afterwards. The backend closes its database after it.
func (f *Front) Close() {
	if f.Committer != nil {
		f.Committer.Close()
	}
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
}

// GrantLease grants a lease (meter.LeaseStore.GrantLease).
func (f *Front) GrantLease(ctx context.Context, g meter.LeaseGrant) (meter.Granted, error) {
	if err := ValidateGrant(g); err != nil {
		return meter.Granted{}, err
	}
	out, err := f.do(ctx, Job{Grant: &g})
	return out.Granted, err
}

// ReportLeases applies lease reports at now (meter.LeaseStore.ReportLeases).
func (f *Front) ReportLeases(ctx context.Context, now time.Time, rs []meter.Report) error {
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
func (f *Front) Apply(ctx context.Context, op meter.Op) (meter.Result, error) {
	if err := Validate(op); err != nil {
		return meter.Result{}, err
	}
	out, err := f.do(ctx, Job{Op: op})
	return out.Result, err
}

// Reinstate lifts the enumeration alarm of org and reports whether one
// was in force (meter.Store.Reinstate).
func (f *Front) Reinstate(ctx context.Context, org string) (bool, error) {
	if org == "" {
		return false, errors.New("meter reinstate: empty org")
	}
	out, err := f.do(ctx, Job{Op: meter.Op{Org: org}, Reinstate: true})
	return out.Result.Suspended, err
}
