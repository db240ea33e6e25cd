package admin_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/lectern-api/lectern/origin/admin"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
)

// revoker is the edge's leases as the admin API sees them: it records
// each revocation with what the store held of the organisation when it
// came (the change must be committed before), and holds it until
// released (the answer must come after).
type revoker struct {
	store   store.Store
	mu      sync.Mutex
	calls   []string // "org:<key>:<status when revoked>" or "all"
	arrived chan struct{}
	release chan struct{}
}

func (r *revoker) Revoke(ctx context.Context, org string) error {
	id, _, _ := strings.Cut(org, "/")
	state := "gone"
	if o, err := r.store.GetOrg(ctx, id); err == nil && meter.Key(o) == org {
		state = o.Status
	}
	return r.record("org:" + org + ":" + state)
}

func (r *revoker) RevokeAll(context.Context) error { return r.record("all") }

func (r *revoker) record(call string) error {
	r.mu.Lock()
	r.calls = append(r.calls, call)
	arrived, release := r.arrived, r.release
	r.mu.Unlock()
	if arrived != nil {
		arrived <- struct{}{}
		<-release
	}
	return nil
}

// hold makes every revocation from now on wait to be released.
func (r *revoker) hold() {
	r.mu.Lock()
	r.arrived, r.release = make(chan struct{}), make(chan struct{})
	r.mu.Unlock()
}

func (r *revoker) took() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// docs/edge.md, Leases: a change that must apply on the next call is
// committed, then the organisation's leases are revoked, and only then
// answered: PATCH (suspended and reinstated alike), DELETE, and a move
// of the test clock (every lease).
func TestChangesRevokeLeases(t *testing.T) {
	rv := &revoker{}
	e := newEnv(t, func(c *admin.Config) { c.Leases = rv; c.TestClock = true })
	rv.store = e.store
	// A creation revokes nothing: a new organisation has no lease.
	if r := e.do("POST", "/admin/v1/orgs", `{"orgId":"acme"}`); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	if got := rv.took(); len(got) != 0 {
		t.Errorf("a creation revoked %v", got)
	}
	o, err := e.store.GetOrg(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	key := meter.Key(o)
	rv.hold()

	for _, c := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"PATCH", "/admin/v1/orgs/acme", `{"status":"suspended"}`, 200, "org:" + key + ":suspended"},
		{"PATCH", "/admin/v1/orgs/acme", `{"status":"active"}`, 200, "org:" + key + ":active"},
		{"PATCH", "/admin/v1/orgs/acme", `{"contentGrants":["topics"]}`, 200, "org:" + key + ":active"},
		{"POST", "/admin/v1/clock", `{"advanceSeconds":60}`, 200, "all"},
		{"DELETE", "/admin/v1/orgs/acme", ``, 204, "org:" + key + ":gone"},
	} {
		done := make(chan response, 1)
		go func() { done <- e.do(c.method, c.path, c.body) }()
		<-rv.arrived
		select {
		case r := <-done:
			t.Fatalf("%s %s answered %d before its revocation ended", c.method, c.path, r.status)
		default:
		}
		rv.release <- struct{}{}
		if r := <-done; r.status != c.status {
			t.Fatalf("%s %s: %d %s", c.method, c.path, r.status, r.raw)
		}
		if got := rv.took(); got[len(got)-1] != c.want {
			t.Errorf("%s %s revoked %q, want %q", c.method, c.path, got[len(got)-1], c.want)
		}
	}
	// A refused change revokes nothing.
	rv.mu.Lock()
	rv.arrived, rv.release = nil, nil
	rv.mu.Unlock()
	n := len(rv.took())
	if r := e.do("PATCH", "/admin/v1/orgs/acme", `{"status":"active"}`); r.status != 404 {
		t.Errorf("PATCH of a deleted org: %d", r.status)
	}
	if r := e.do("PATCH", "/admin/v1/orgs/other", `{"status":"nope"}`); r.status != 400 {
		t.Errorf("a bad PATCH: %d", r.status)
	}
	if got := rv.took(); len(got) != n {
		t.Errorf("refused changes revoked: %v", got[n:])
	}
}
