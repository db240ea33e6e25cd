// Package leasetest is an in-memory meter.LeaseStore over a real
// meter.Store, for the tests of the origin's lease code: the leases and
// epochs are kept in memory, reports bill the meters of the store it
// wraps, and Apply refuses, with Result.Reserved, a calls step that only
// the open leases' reservations take over its limit. It follows the
// comments of meter.LeaseStore, not the backends' transactions: ops are
// serialised by one lock, which is enough for tests, not for an origin.
package leasetest

import (
	"context"
	"sync"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// Store is a meter.Store with leases.
type Store struct {
	meter.Store

	mu     sync.Mutex
	global int64
	epochs map[string]int64
	leases map[string]*lease
}

type lease struct {
	meter.Lease
	granted time.Time // the grant's Now: the period its usage is billed in
}

var (
	_ meter.Store      = (*Store)(nil)
	_ meter.LeaseStore = (*Store)(nil)
)

// New returns m with leases.
func New(m meter.Store) *Store {
	return &Store{Store: m, epochs: map[string]int64{}, leases: map[string]*lease{}}
}

// Epoch implements meter.LeaseStore.
func (s *Store) Epoch(_ context.Context, org string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.global + s.epochs[org], nil
}

// BumpEpoch implements meter.LeaseStore.
func (s *Store) BumpEpoch(_ context.Context, org string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if org == "" {
		s.global++
	} else {
		s.epochs[org]++
	}
	return nil
}

// outstanding is what org's open leases reserve, not yet reported used,
// in the month and the hour of now. Held under s.mu.
func (s *Store) outstanding(org string, now time.Time) (month, hour int64) {
	for _, l := range s.leases {
		if l.Org != org || l.Closed || !l.Settle.After(now) {
			continue
		}
		if l.Month == meter.MonthCalls.Period(now) {
			month += l.Calls - l.Used
		}
		if l.Hour == meter.HourCalls.Period(now) {
			hour += l.Calls - l.Used
		}
	}
	return month, hour
}

// GrantLease implements meter.LeaseStore.
func (s *Store) GrantLease(ctx context.Context, g meter.LeaseGrant) (meter.Granted, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, err := s.Store.Usage(ctx, g.Org, g.Now)
	if err != nil {
		return meter.Granted{}, err
	}
	out := meter.Granted{After: u.Counters}
	switch {
	case u.Alarm != nil:
		out.Suspended = true
		return out, nil
	case s.global+s.epochs[g.Org] != g.Epoch:
		out.Stale = true
		return out, nil
	}
	month, hour := s.outstanding(g.Org, g.Now)
	calls := g.Want
	if g.MonthLimit != nil {
		calls = min(calls, (*g.MonthLimit-u.Get(meter.MonthCalls)-month)/g.Share)
	}
	if g.HourLimit != nil {
		calls = min(calls, (*g.HourLimit-u.Get(meter.HourCalls)-hour)/g.Share)
	}
	if calls < g.Floor {
		return out, nil
	}
	s.leases[g.ID] = &lease{Lease: meter.Lease{ID: g.ID, Org: g.Org, Epoch: g.Epoch, Calls: calls,
		Month: meter.MonthCalls.Period(g.Now), Hour: meter.HourCalls.Period(g.Now),
		Expires: g.Expires, Settle: g.Settle, RevokeURL: g.RevokeURL}, granted: g.Now}
	out.Calls = calls
	return out, nil
}

// ReportLeases implements meter.LeaseStore: what a report adds is billed
// in the lease's own month and hour, without a limit (the reservation
// made room for it).
func (s *Store) ReportLeases(ctx context.Context, _ time.Time, rs []meter.Report) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rs {
		l := s.leases[r.Lease]
		if l == nil {
			continue
		}
		if used := min(r.Used, l.Calls); used > l.Used {
			op := meter.Op{Org: l.Org, Now: l.granted, Stages: []meter.Stage{{
				{Meter: meter.MonthCalls, N: used - l.Used}, {Meter: meter.HourCalls, N: used - l.Used}}}}
			if _, err := s.Store.Apply(ctx, op); err != nil {
				return err
			}
			l.Used = used
		}
		if r.Final {
			l.Closed = true
		}
	}
	return nil
}

// OpenLeases implements meter.LeaseStore.
func (s *Store) OpenLeases(_ context.Context, org string, now time.Time) ([]meter.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []meter.Lease
	for _, l := range s.leases {
		if (org == "" || l.Org == org) && !l.Closed && l.Settle.After(now) {
			out = append(out, l.Lease)
		}
	}
	return out, nil
}

// Lease returns the lease of id as recorded.
func (s *Store) Lease(id string) (meter.Lease, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[id]
	if !ok {
		return meter.Lease{}, false
	}
	return l.Lease, true
}

// Apply implements meter.Store: an op whose calls step passes its limit
// but not its limit less the open leases' reservations is refused with
// Reserved, and applies nothing; every other op is the wrapped store's.
func (s *Store) Apply(ctx context.Context, op meter.Op) (meter.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	month, hour := s.outstanding(op.Org, op.Now)
	if month == 0 && hour == 0 {
		return s.Store.Apply(ctx, op)
	}
	u, err := s.Store.Usage(ctx, op.Org, op.Now)
	if err != nil {
		return meter.Result{}, err
	}
	for _, st := range op.Stages {
		for _, step := range st {
			out := month
			switch {
			case step.Limit == nil:
				continue
			case step.Meter == meter.HourCalls:
				out = hour
			case step.Meter != meter.MonthCalls:
				continue
			}
			count := u.Get(step.Meter)
			if count+step.N > *step.Limit {
				return s.Store.Apply(ctx, op) // refused without the reservations too
			}
			if count+step.N+out > *step.Limit {
				return meter.Result{Refused: &step, Reserved: true, After: u.Counters}, nil
			}
		}
	}
	return s.Store.Apply(ctx, op)
}
