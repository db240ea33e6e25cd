package server

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/origin/lease"
	"github.com/lectern-api/lectern/origin/lease/leasetest"
	"github.com/lectern-api/lectern/shared/edgesig"
	wire "github.com/lectern-api/lectern/shared/lease"
)

// leaseEdgeHarness is leaseHarness with a fake edge host that takes
// revoke pushes, listed in cfg.Edges (LECTERN_EDGE_URLS) so that the
// origin accepts its revoke URL and pushes to it.
func leaseEdgeHarness(t *testing.T, cfg lease.Config) (*harness, *leasetest.Edge) {
	t.Helper()
	now := midHour()
	e := leasetest.NewEdge(t, testEdgeKeys, now)
	cfg.Edges = append(cfg.Edges, e.Base())
	return newHarnessOpts(t, smallContent(t, ""), harnessOptions{leases: &cfg, now: now}), e
}

// A lease request's revoke URL must be exactly the revoke endpoint of an
// edge host listed in LECTERN_EDGE_URLS: any other (another port or host,
// the admin API or the origin itself, another path, a query, a fragment,
// credentials) is 400 BAD_REQUEST on the parameter revoke, naming the
// setting, and grants nothing and pushes nothing; the listed one gets its
// lease. With no edge host listed, every revoke URL is refused and a
// request naming none still gets its lease.
func TestLeaseRevokeURLMustBeAListedEdge(t *testing.T) {
	h, e := leaseEdgeHarness(t, lease.Config{})
	tok := h.org("acme", "topics")
	auth := []string{"Authorization", "Bearer " + tok}
	host, port, err := net.SplitHostPort(strings.TrimPrefix(e.Base(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	other := func(h string, p int) string {
		return "http://" + net.JoinHostPort(h, strconv.Itoa(p)) + wire.RevokePath
	}
	refuse := func(h *harness, u string) {
		t.Helper()
		before := h.calls("acme")
		r := h.edgeCall(wire.Path, edgesig.Lease, wire.AppendRequest(nil, &wire.Request{Want: 16, Revoke: u}), auth...)
		ae := r.wantError(t, 400, "BAD_REQUEST")
		if ae.Parameter != "revoke" || !strings.Contains(ae.Message, lease.EdgesSetting) {
			t.Errorf("revoke %q: parameter %q, message %q; want revoke and a message naming %s", u, ae.Parameter, ae.Message, lease.EdgesSetting)
		}
		if l := h.openLeases("acme"); len(l) != 0 {
			t.Errorf("revoke %q: refused, yet leases are open: %+v", u, l)
		}
		if got := h.calls("acme"); got != before {
			t.Errorf("revoke %q: refused, yet billed %d", u, got-before)
		}
	}
	for _, u := range []string{
		other(host, p+1),      // another port
		other("127.0.0.2", p), // another host
		other("localhost", p), // the same host by another name
		"https://" + net.JoinHostPort(host, port) + wire.RevokePath, // another scheme
		"http://127.0.0.1:8081/admin/v1/orgs",                       // an admin address
		h.api + "/admin/v1/orgs",                                    // the origin itself
		h.api + wire.RevokePath,
		e.Base() + "/admin/v1/orgs", // another path on the edge host
		e.Base() + "/",
		e.Base(),
		e.Base() + wire.RevokePath + "/x",
		e.Base() + "/x" + wire.RevokePath,
		e.URL() + "?to=http://127.0.0.1:8081/admin", // a query
		e.URL() + "?",
		e.URL() + "#f",                                             // a fragment
		"http://user:pw@" + strings.TrimPrefix(e.URL(), "http://"), // credentials
		"ftp://" + strings.TrimPrefix(e.URL(), "http://"),
		wire.RevokePath,
	} {
		refuse(h, u)
	}
	if ps := e.Pushes(); len(ps) != 0 {
		t.Errorf("pushes %+v after refusals only", ps)
	}

	a := h.askLease(tok, wire.Request{Want: 16, Revoke: e.URL()})
	if a.Calls == 0 || a.Lease == "" {
		t.Fatalf("the listed edge's revoke URL: no lease: %+v", a)
	}
	if l := h.openLeases("acme"); len(l) != 1 || l[0].RevokeURL != e.URL() {
		t.Errorf("open leases %+v, want the one with the edge's revoke URL", l)
	}
	if a := h.askLease(tok, wire.Request{Want: 16}); a.Calls == 0 {
		t.Errorf("no revoke URL: no lease: %+v", a)
	}

	// LECTERN_EDGE_URLS unset: no revoke URL is anyone's.
	none := leaseHarness(t, lease.Config{})
	tok = none.org("acme", "topics")
	auth = []string{"Authorization", "Bearer " + tok}
	refuse(none, e.URL())
	if a := none.askLease(tok, wire.Request{Want: 16}); a.Calls == 0 {
		t.Errorf("no list and no revoke URL (as on Cloudflare): no lease: %+v", a)
	}
}
