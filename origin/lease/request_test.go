package lease_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/lease"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
	wire "github.com/lectern-api/lectern/shared/lease"
)

// asker is a lease.Asker that reads the organisations of orgs in turn
// (the last again when they run out) and records what was asked of it.
type asker struct {
	auth  error
	orgs  []*store.Org
	err   error
	onOrg func(n int) // called before the n-th organisation read, from 1
	reads int
	calls []string
}

func (a *asker) Authenticate(context.Context) error {
	a.calls = append(a.calls, "authenticate")
	return a.auth
}

func (a *asker) Org(context.Context) (*store.Org, error) {
	a.calls = append(a.calls, "org")
	a.reads++
	if a.onOrg != nil {
		a.onOrg(a.reads)
	}
	if a.err != nil || len(a.orgs) == 0 {
		return nil, a.err
	}
	return a.orgs[min(a.reads, len(a.orgs))-1], nil
}

func (a *asker) ContentVersion() string {
	a.calls = append(a.calls, "version")
	return "2030-03-01+abcd"
}

func wantCode(t *testing.T, err error, code apierr.Code) {
	t.Helper()
	var ae *apierr.Error
	if !errors.As(err, &ae) || ae.Code != code {
		t.Errorf("got %v, want %s", err, code)
	}
}

// docs/edge.md, The lease request: the reports first, whatever happens
// next; the revoke URL (400); the token (401); the organisation gate; the
// epoch read between two reads of the organisation, the content version
// after the gate, then the grant.
func TestLease(t *testing.T) { eachBackend(t, testLease) }

func testLease(t *testing.T, s leaseStore) {
	ctx := context.Background()
	m := lease.New(lease.Config{Store: s, Now: func() time.Time { return day }})
	ask := wire.Request{Want: 16}

	t.Run("granted", func(t *testing.T) {
		a := &asker{orgs: []*store.Org{acme(nil)}}
		l, err := m.Lease(ctx, ask, a)
		if err != nil {
			t.Fatal(err)
		}
		ep, _ := m.Epoch(ctx, "acme")
		if l.Grant.Calls != 16 || l.Org == nil || l.Org.ID != "acme" || l.Epoch != ep ||
			l.ContentVersion != "2030-03-01+abcd" || !l.At.Equal(day) {
			t.Errorf("leased %+v", l)
		}
		if want := []string{"authenticate", "org", "org", "version"}; !slices.Equal(a.calls, want) {
			t.Errorf("asked %v, want %v", a.calls, want)
		}
	})

	t.Run("reports applied whatever happens next", func(t *testing.T) {
		g := grant(t, m, acme(func(o *store.Org) { o.ID = "reporter" }), 16, "", day)
		refused := &asker{auth: apierr.New(apierr.InvalidToken, "no"), orgs: []*store.Org{acme(nil)}}
		_, err := m.Lease(ctx, wire.Request{Want: 16, Reports: []wire.Report{{Lease: g.ID, Used: 3}}}, refused)
		wantCode(t, err, apierr.InvalidToken)
		if got := calls(t, s, "reporter", day); got != 3 {
			t.Errorf("the reports of a refused request billed %d, want 3", got)
		}
		if want := []string{"authenticate"}; !slices.Equal(refused.calls, want) {
			t.Errorf("asked %v, want %v", refused.calls, want)
		}
	})

	t.Run("revoke URL of no edge host", func(t *testing.T) {
		a := &asker{orgs: []*store.Org{acme(nil)}}
		_, err := m.Lease(ctx, wire.Request{Want: 16, Revoke: "http://edge.test/internal/revoke"}, a)
		wantCode(t, err, apierr.BadRequest)
		if len(a.calls) != 0 {
			t.Errorf("asked %v before the revoke URL was refused", a.calls)
		}
	})

	t.Run("the gate", func(t *testing.T) {
		for _, c := range []struct {
			name string
			a    *asker
			code apierr.Code
		}{
			{"no organisation", &asker{}, apierr.NoOrganization},
			{"suspended", &asker{orgs: []*store.Org{acme(func(o *store.Org) { o.Status = "suspended" })}}, apierr.OrgSuspended},
			{"suspended between the reads", &asker{orgs: []*store.Org{acme(nil), acme(func(o *store.Org) { o.Status = "suspended" })}}, apierr.OrgSuspended},
			{"expired", &asker{orgs: []*store.Org{acme(func(o *store.Org) { o.RenewsAt = day })}}, apierr.LicenseExpired},
			{"deleted between the reads", &asker{orgs: []*store.Org{acme(nil), nil}}, apierr.NoOrganization},
		} {
			_, err := m.Lease(ctx, ask, c.a)
			if err == nil {
				t.Errorf("%s: leased", c.name)
				continue
			}
			wantCode(t, err, c.code)
		}
		failed := errors.New("store down")
		if _, err := m.Lease(ctx, ask, &asker{err: failed}); !errors.Is(err, failed) {
			t.Errorf("a failed read: %v", err)
		}
	})

	t.Run("created again between the reads", func(t *testing.T) {
		o := acme(func(o *store.Org) { o.ID, o.Generation = "again", "g1" })
		again := acme(func(o *store.Org) { o.ID, o.Generation = "again", "g2" })
		l, err := m.Lease(ctx, ask, &asker{orgs: []*store.Org{o, again}})
		if err != nil || l.Grant.Calls != 0 || l.Grant.Retry != lease.Retry {
			t.Errorf("leased %+v, %v; want none, asked again after %v", l, err, lease.Retry)
		}
	})

	t.Run("changed after the epoch was read", func(t *testing.T) {
		o := acme(func(o *store.Org) { o.ID = "changed" })
		a := &asker{orgs: []*store.Org{o}, onOrg: func(n int) {
			if n == 2 { // the change commits, and bumps the epoch, between the reads
				if err := s.BumpEpoch(ctx, meter.Key(o)); err != nil {
					t.Fatal(err)
				}
			}
		}}
		l, err := m.Lease(ctx, ask, a)
		if err != nil || l.Grant.Calls != 0 || l.Grant.Retry < time.Second {
			t.Errorf("leased %+v, %v; want none", l, err)
		}
	})
}
