package wiring

import (
	"context"
	"slices"
	"time"

	"github.com/lectern-api/lectern/internal/telemetry"
	"github.com/lectern-api/lectern/origin/meter"
)

// Meters is a meter.Store that tells each request's Record what its ops
// billed, counts how long they took in Metrics, and tells Events what
// they did. Everything else is the Store's.
type Meters struct {
	meter.Store
	Metrics *telemetry.Metrics // nil: none
	// Events, when set, sends the webhooks an op's result reveals: the
	// enumeration alarm's suspension, a quota threshold (webhooks.go).
	Events *MeterEvents
}

var _ meter.Store = (*Meters)(nil)

// Apply applies op and records what it billed: the meters of the stages
// the store applied (meter.Stage: all or nothing), which are those before
// the refused step's stage, and that stage too when the step is Force (an
// hourly cap hit bills the call); none for an error, a suspension, a
// duplicate (another origin billed the request: meter.Op.Once) or an op
// its rival excluded (meter.Op.Unless).
func (m *Meters) Apply(ctx context.Context, op meter.Op) (meter.Result, error) {
	start := time.Now()
	res, err := m.Store.Apply(ctx, op)
	if m.Metrics != nil {
		r := "ok"
		switch {
		case err != nil:
			r = "error"
		case res.Suspended || res.Refused != nil:
			r = "refused"
		case res.Duplicate:
			r = "duplicate"
		case res.Excluded:
			r = "excluded"
		}
		m.Metrics.MeterApply(r, time.Since(start))
	}
	if rec := telemetry.FromContext(ctx); rec != nil {
		rec.Billed(billed(op, res, err)...)
	}
	if err == nil && m.Events != nil {
		m.Events.applied(ctx, op, res)
	}
	return res, err
}

// billed are the names of the meters op billed, given its outcome, each
// once (the monthly and the hourly calls are both "calls").
func billed(op meter.Op, res meter.Result, err error) []string {
	if err != nil || res.Suspended || res.Duplicate || res.Excluded {
		return nil
	}
	stages := op.Stages
	if f := res.Refused; f != nil {
		for i, st := range op.Stages {
			if holds(st, f.Meter) {
				stages = op.Stages[:i]
				if f.Force {
					stages = op.Stages[:i+1]
				}
				break
			}
		}
	}
	var names []string
	for _, st := range stages {
		for _, s := range st {
			if s.N == 0 || (s.Shorten && res.Granted == 0) || slices.Contains(names, s.Meter.String()) {
				continue
			}
			names = append(names, s.Meter.String())
		}
	}
	return names
}

func holds(st meter.Stage, m meter.Meter) bool {
	for _, s := range st {
		if s.Meter == m {
			return true
		}
	}
	return false
}
