package batch

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// Leases (meter.LeaseStore) run in the batches of the meters: a grant and
// a report are jobs like an op, evaluated in order against the same
// State, so they are exactly as serialised with the ops of their org as
// ops are with each other. The State holds, for every org whose jobs may
// need them (LeaseOrgs), its leases not closed whose Settle is after the
// batch's earliest time (Floor): from them, outstanding(org, period, now)
// is the sum of max(0, Calls - Used) of those not closed with now before
// their Settle, in that period.

// Bounds of a lease's text fields, in bytes.
const (
	MaxLeaseID = 128  // the origin's ids are 32 hex digits; shared/lease allows 64
	MaxRevoke  = 2048 // a revoke URL
)

// Lease is a lease as a batch knows it: its record and the limits of its
// grant, which bound what a report after its Settle bills.
type Lease struct {
	meter.Lease
	MonthLimit, HourLimit *int64

	open   bool // in its org's list of leases that may reserve
	added  bool // granted by this batch
	dirty  bool // Used or Closed changed by this batch
	joined bool // read by Tx.Leases: its org and periods are the batch's
}

// reserving reports whether l's unused calls are outstanding at now.
func (l *Lease) reserving(now time.Time) bool { return !l.Closed && now.Before(l.Settle) }

// ValidateGrant rejects a grant no store could record.
func ValidateGrant(g meter.LeaseGrant) error {
	switch {
	case g.Org == "":
		return errors.New("lease grant: empty org")
	case g.Want < 0 || g.Floor < 0:
		return fmt.Errorf("lease grant: negative want %d or floor %d", g.Want, g.Floor)
	case g.Share < 1:
		return fmt.Errorf("lease grant: share %d, want at least 1", g.Share)
	case !g.Expires.After(g.Now) || g.Settle.Before(g.Expires):
		return errors.New("lease grant: want now < expires <= settle")
	}
	if err := validLeaseID(g.ID); err != nil {
		return fmt.Errorf("lease grant: %w", err)
	}
	return validText("lease grant: revoke URL", g.RevokeURL, MaxRevoke)
}

// ValidateReports rejects reports no store could apply.
func ValidateReports(rs []meter.Report) error {
	for _, r := range rs {
		if err := validLeaseID(r.Lease); err != nil {
			return fmt.Errorf("lease report: %w", err)
		}
		if r.Used < 0 {
			return fmt.Errorf("lease report: negative used %d", r.Used)
		}
	}
	return nil
}

func validLeaseID(id string) error {
	if id == "" {
		return errors.New("empty lease id")
	}
	return validText("lease id", id, MaxLeaseID)
}

// initLeases notes what the grants and reports of the batch name, and its
// earliest time; newState calls it for every job.
func (s *State) initLeases(j Job) {
	var now time.Time
	switch {
	case j.Reinstate:
		return
	case j.Grant != nil:
		g := j.Grant
		now = g.Now
		s.leaseIDs = append(s.leaseIDs, g.ID)
		s.epochOrgs = append(s.epochOrgs, g.Org)
		s.leaseOrgs = append(s.leaseOrgs, g.Org)
	case j.Reports != nil:
		now = j.Op.Now
		for _, r := range j.Reports {
			s.leaseIDs = append(s.leaseIDs, r.Lease)
			s.reported = append(s.reported, r.Lease)
		}
	default:
		now = j.Op.Now
		if reservable(j.Op) {
			s.leaseOrgs = append(s.leaseOrgs, j.Op.Org)
		}
	}
	if s.floor.IsZero() || now.Before(s.floor) {
		s.floor = now
	}
}

// reservable reports whether op has a step leases' reservations count
// against: a MonthCalls or HourCalls step with a limit.
func reservable(op meter.Op) bool {
	for _, stage := range op.Stages {
		for _, st := range stage {
			if st.Limit != nil && (st.Meter == meter.MonthCalls || st.Meter == meter.HourCalls) {
				return true
			}
		}
	}
	return false
}

// sortLeaseNames sorts and dedupes what initLeases collected.
func (s *State) sortLeaseNames() {
	for _, l := range []*[]string{&s.leaseIDs, &s.reported, &s.epochOrgs, &s.leaseOrgs} {
		slices.Sort(*l)
		*l = slices.Compact(*l)
	}
}

// LeaseIDs are the ids the batch's grants and reports name, sorted: the
// leases Tx.Leases reads.
func (s *State) LeaseIDs() []string { return s.leaseIDs }

// Reported are the ids the batch's reports name, sorted.
func (s *State) Reported() []string { return s.reported }

// LeaseOrgs are the orgs whose leases that may reserve the batch needs,
// sorted: those of its grants, of the leases its reports name (once
// Tx.Leases read them), and of its ops with a reservable step.
func (s *State) LeaseOrgs() []string { return s.leaseOrgs }

// EpochOrgs are the orgs of the batch's grants, sorted: Load reads their
// epochs and the global one (SetEpoch).
func (s *State) EpochOrgs() []string { return s.epochOrgs }

// floorSlack is how far Floor is before the batch's earliest time. Ops
// take their Now before they queue, so a batch may hold one a little
// older than the earliest of the batch before it; with the slack, what a
// batch read of an org's leases (sqlitemeter's memo) still answers for
// it.
const floorSlack = time.Minute

// Floor is before the batch's earliest time (by floorSlack): a lease whose
// Settle is not after it reserves for none of its jobs, and Load reads
// those whose Settle is after it.
func (s *State) Floor() time.Time { return s.floor.Add(-floorSlack) }

// Earliest is the batch's earliest time: what it reads of an org's leases
// must hold every one not closed whose Settle is after it.
func (s *State) Earliest() time.Time { return s.floor }

// SetEpoch records the stored epoch of org; "" is the global one.
func (s *State) SetEpoch(org string, n int64) {
	if s.epochs == nil {
		s.epochs = map[string]int64{}
	}
	s.epochs[org] = n
}

// AddLease records a stored lease. Added again (read twice), it is
// updated in place. It joins its org's leases that may reserve when its
// org is one of LeaseOrgs, it is not closed and its Settle is after Floor.
func (s *State) AddLease(l Lease) {
	if s.leases == nil {
		s.leases = map[string]*Lease{}
	}
	cur := s.leases[l.ID]
	if cur == nil {
		cur = &Lease{}
		s.leases[l.ID] = cur
	}
	open, joined := cur.open, cur.joined
	*cur = l
	cur.open, cur.joined, cur.added, cur.dirty = open, joined, false, false
	if !cur.open && !cur.Closed && cur.Settle.After(s.Floor()) {
		if _, ok := slices.BinarySearch(s.leaseOrgs, cur.Org); ok {
			cur.open = true
			if s.open == nil {
				s.open = map[string][]*Lease{}
			}
			s.open[cur.Org] = append(s.open[cur.Org], cur)
		}
	}
}

// Open yields the leases of org that may reserve (not closed, Settle after
// Floor when loaded) as the jobs left them, closed ones included.
func (s *State) Open(org string) []*Lease { return s.open[org] }

// NewLeases yields the leases the grants recorded.
func (s *State) NewLeases() []*Lease {
	var out []*Lease
	for _, id := range s.leaseIDs {
		if l := s.leases[id]; l != nil && l.added {
			out = append(out, l)
		}
	}
	return out
}

// ChangedLeases yields the stored leases whose Used or Closed the reports
// changed.
func (s *State) ChangedLeases() []*Lease {
	var out []*Lease
	for _, id := range s.reported {
		if l := s.leases[id]; l != nil && l.dirty && !l.added {
			out = append(out, l)
		}
	}
	return out
}

// joinReported adds to the batch the orgs and periods of the leases its
// reports name, once Tx.Leases has read them: their alarms are locked,
// their counters loaded (and locked where a report may bill them), and
// their leases that may reserve loaded.
func (s *State) joinReported() {
	for _, id := range s.reported {
		l := s.leases[id]
		if l == nil {
			continue
		}
		l.joined = true
		if _, ok := s.alarms[l.Org]; !ok {
			s.alarms[l.Org] = &alarm{}
			s.orgs = append(s.orgs, l.Org)
		}
		s.leaseOrgs = append(s.leaseOrgs, l.Org)
		p := Periods{l.Org, l.Month, l.Hour}
		if !slices.Contains(s.joined, p) {
			s.joined = append(s.joined, p)
			for _, k := range keys(p) {
				if _, ok := s.counts[k]; !ok {
					s.counts[k] = 0
				}
			}
		}
	}
	slices.Sort(s.orgs)
	slices.Sort(s.leaseOrgs)
	s.leaseOrgs = slices.Compact(s.leaseOrgs)
}

// keys are the counters of every meter in p.
func keys(p Periods) [numMeters]Key {
	var ks [numMeters]Key
	for _, m := range meter.Meters {
		period := p.Month
		if m.Hourly() {
			period = p.Hour
		}
		ks[m] = Key{p.Org, m, period}
	}
	return ks
}

// outstanding is what the leases of org reserve at now against m in
// period: 0 but for MonthCalls and HourCalls.
func (s *State) outstanding(org string, m meter.Meter, period string, now time.Time) int64 {
	if m != meter.MonthCalls && m != meter.HourCalls {
		return 0
	}
	var n int64
	for _, l := range s.open[org] {
		p := l.Month
		if m == meter.HourCalls {
			p = l.Hour
		}
		if p == period && l.reserving(now) && l.Calls > l.Used {
			n += l.Calls - l.Used
		}
	}
	return n
}

// grant evaluates a grant (meter.LeaseStore.GrantLease) and records its
// lease. Its error refuses it alone: a lease of its id exists.
func (s *State) grant(g meter.LeaseGrant) (meter.Granted, error) {
	var out meter.Granted
	op := meter.Op{Org: g.Org, Now: g.Now}
	if _, ok := s.leases[g.ID]; ok {
		return out, fmt.Errorf("lease grant: a lease %q exists", g.ID)
	}
	var res meter.Result
	s.after(op, &res)
	out.After = res.After
	switch {
	case s.alarms[g.Org].InForce:
		out.Suspended = true
		return out, nil
	case s.epochs[g.Org]+s.epochs[""] != g.Epoch:
		out.Stale = true
		return out, nil
	}
	month, hour := meter.MonthCalls.Period(g.Now), meter.HourCalls.Period(g.Now)
	n := g.Want
	for _, c := range []struct {
		m      meter.Meter
		period string
		limit  *int64
	}{{meter.MonthCalls, month, g.MonthLimit}, {meter.HourCalls, hour, g.HourLimit}} {
		if c.limit != nil {
			left := *c.limit - s.counts[Key{g.Org, c.m, c.period}] - s.outstanding(g.Org, c.m, c.period, g.Now)
			n = min(n, left/g.Share)
		}
	}
	if n < max(g.Floor, 1) {
		return out, nil
	}
	out.Calls = n
	s.AddLease(Lease{
		Lease: meter.Lease{ID: g.ID, Org: g.Org, Epoch: g.Epoch, Calls: n, Month: month, Hour: hour,
			Expires: Micro(g.Expires), Settle: Micro(g.Settle), RevokeURL: g.RevokeURL},
		MonthLimit: clone(g.MonthLimit), HourLimit: clone(g.HourLimit),
	})
	s.leases[g.ID].added = true
	return out, nil
}

func clone(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// report applies cumulative reports at now (meter.LeaseStore.ReportLeases).
func (s *State) report(now time.Time, rs []meter.Report) {
	for _, r := range rs {
		l := s.leases[r.Lease]
		if l == nil || !l.joined {
			// Unknown when the batch began (Tx.Leases): a lease is
			// reported once its grant answered, after its commit.
			continue
		}
		if used := min(r.Used, l.Calls); used > l.Used {
			delta := used - l.Used
			if !l.reserving(now) {
				// Its reservation is released: bill only what its
				// grant's limits still leave room for.
				delta = min(delta, s.room(l.Org, meter.MonthCalls, l.Month, l.MonthLimit, now),
					s.room(l.Org, meter.HourCalls, l.Hour, l.HourLimit, now))
			}
			l.Used, l.dirty = used, true
			if delta > 0 {
				for _, k := range []Key{{l.Org, meter.MonthCalls, l.Month}, {l.Org, meter.HourCalls, l.Hour}} {
					s.counts[k] += delta
					s.dirty[k] = true
				}
			}
		}
		if r.Final && !l.Closed {
			l.Closed, l.dirty = true, true
		}
	}
}

// room is what is left under limit (nil: no cap) of m in period at now,
// reservations counted, at least 0.
func (s *State) room(org string, m meter.Meter, period string, limit *int64, now time.Time) int64 {
	if limit == nil {
		return math.MaxInt64
	}
	return max(0, *limit-s.counts[Key{org, m, period}]-s.outstanding(org, m, period, now))
}
