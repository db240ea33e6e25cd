package main

import (
	"context"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/clock"
	"github.com/lectern-api/lectern/origin/lease/leasetest"
	"github.com/lectern-api/lectern/origin/meter"
	wire "github.com/lectern-api/lectern/shared/lease"
)

// LECTERN_EDGE_URLS (-edge-urls) lists the edge hosts that take revoke
// pushes: base URLs, kept in canonical form; unset is none. A malformed
// list stops the start with a message naming the variable and the entry.
func TestEdgeURLsSetting(t *testing.T) {
	parse := func(args []string, env map[string]string) (config, error) {
		return parseConfig(args, func(k string) string { return env[k] })
	}
	if c, err := parse(nil, nil); err != nil || c.edgeURLs != nil {
		t.Errorf("unset: %q, %v; want none", c.edgeURLs, err)
	}
	c, err := parse(nil, map[string]string{"LECTERN_EDGE_URLS": "http://10.0.0.5:8787/, https://Edge-2.Internal:443,http://10.0.0.5:8787"})
	if want := []string{"http://10.0.0.5:8787", "https://edge-2.internal"}; err != nil || !slices.Equal(c.edgeURLs, want) {
		t.Errorf("a list: %q, %v; want %q", c.edgeURLs, err, want)
	}
	if c, err := parse([]string{"-edge-urls", "http://127.0.0.1:8787"}, nil); err != nil || !slices.Equal(c.edgeURLs, []string{"http://127.0.0.1:8787"}) {
		t.Errorf("-edge-urls: %q, %v", c.edgeURLs, err)
	}
	for _, bad := range []string{
		"10.0.0.5:8787", "edge-1", "ftp://edge-1", "http://", "http://edge-1:", "http://edge-1:0", "http://edge-1:70000",
		"http://edge-1:8787/internal/revoke", "http://edge-1/x", "http://edge-1?x=1", "http://edge-1/#f",
		"http://admin:pw@edge-1", "http://edge-1,", ",http://edge-1", "http://edge-1,,http://edge-2", "http://edge-1 http://edge-2",
	} {
		_, err := parse(nil, map[string]string{"LECTERN_EDGE_URLS": bad})
		if err == nil || !strings.Contains(err.Error(), "LECTERN_EDGE_URLS") || !strings.Contains(err.Error(), "entry ") {
			t.Errorf("LECTERN_EDGE_URLS=%q: %v; want an error naming the variable and the entry", bad, err)
		}
	}
}

// The whole origin, on its real meters: with LECTERN_EDGE_URLS listing an
// edge host, a lease request naming its revoke URL gets a lease and the
// origin pushes to it (the admin reading settles), while any other
// revoke URL (the admin API, the origin, another port, a path or a
// query) is 400 on revoke. Restarted with the edge host no longer listed
// (the setting unset: it logs that pushes are off), the origin never
// calls the lease it granted there: an admin change that revokes the
// organisation's leases pushes nothing and is acknowledged once the
// lease has expired, as for a lease without a revoke URL.
func TestRevokePushesOnlyToListedEdges(t *testing.T) {
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"))
	var stackClock atomic.Pointer[clock.Clock]
	e := leasetest.NewEdge(t, testEdgeKeys, func() time.Time { return stackClock.Load().Now() })
	const off = "revoke pushes are off until LECTERN_EDGE_URLS lists the edge hosts"

	s := bootStack(t, testEnv(dir, map[string]string{"LECTERN_TEST_CLOCK": "1", "LECTERN_LEASE_TTL": "1s",
		"LECTERN_EDGE_URLS": e.Base()}), nil)
	stackClock.Store(s.Clock())
	if strings.Contains(s.out.String(), off) {
		t.Errorf("with an edge host listed, the origin logged %q", off)
	}
	id, secret := s.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read")
	tok := s.token(id, secret, "content.read")
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(e.Base(), "http://"))
	p, _ := strconv.Atoi(port)
	for _, u := range []string{
		s.AdminURL + wire.RevokePath, s.AdminURL + "/admin/v1/orgs", s.OriginURL + wire.RevokePath,
		"http://127.0.0.1:" + strconv.Itoa(p+1) + wire.RevokePath, e.Base() + "/admin/v1/orgs", e.URL() + "?x=1",
	} {
		if code, _ := s.lease(tok, u); code != 400 {
			t.Errorf("revoke %q: %d, want 400", u, code)
		}
	}
	if l := openLeases(t, s, "acme"); len(l) != 0 {
		t.Fatalf("refused lease requests left leases open: %+v", l)
	}
	asked := s.Clock().Now()
	code, a := s.lease(tok, e.URL())
	if code != 200 || a.Calls == 0 {
		t.Fatalf("the listed edge's revoke URL: %d %+v", code, a)
	}
	e.Set(a.Lease, 3)
	if got := s.calls("acme"); got != 3 {
		t.Errorf("the admin reading shows %v calls, want the 3 the edge holds (a settle push)", got)
	}
	if ps := e.Pushes(); len(ps) != 1 || !ps[0].Keep {
		t.Fatalf("pushes %+v, want one settle", ps)
	}
	s.Close()

	// Restarted on the same database, the edge host no longer listed.
	s2 := bootStack(t, testEnv(dir, map[string]string{"LECTERN_TEST_CLOCK": "1", "LECTERN_LEASE_TTL": "1s"}), nil)
	t.Cleanup(func() { s2.Close() })
	stackClock.Store(s2.Clock())
	if strings.Count(s2.out.String(), off) != 1 {
		t.Errorf("with no edge host listed, the origin's log does not say once %q:\n%s", off, s2.out)
	}
	if l := openLeases(t, s2, "acme"); len(l) != 1 || l[0].RevokeURL != e.URL() {
		t.Fatalf("after the restart: open leases %+v, want the edge's", l)
	}
	if c, m := s2.admin("PATCH", "/admin/v1/orgs/acme", `{"status":"suspended"}`); c != 200 {
		t.Fatalf("PATCH: %d %v", c, m)
	}
	if waited := s2.Clock().Now().Sub(asked); waited < time.Duration(a.ValidMs)*time.Millisecond {
		t.Errorf("the PATCH was answered %v after the lease request, before its %d ms were over", waited, a.ValidMs)
	}
	if ps := e.Pushes(); len(ps) != 1 {
		t.Errorf("the edge host no longer listed was pushed to: %+v", ps[1:])
	}
	if !e.Holds(a.Lease) {
		t.Error("the lease was taken from the edge host no longer listed")
	}
	if code, _ := s2.lease(tok, e.URL()); code != 400 {
		t.Errorf("a lease request naming the edge host no longer listed: %d, want 400", code)
	}
}

// openLeases are the leases of orgID the stack's meters hold open.
func openLeases(t *testing.T, s *testStack, orgID string) []meter.Lease {
	t.Helper()
	o, err := s.Store().GetOrg(context.Background(), orgID)
	if err != nil {
		t.Fatal(err)
	}
	ls, ok := s.Meters().(meter.LeaseStore)
	if !ok {
		t.Fatal("the stack's meters keep no leases")
	}
	open, err := ls.OpenLeases(context.Background(), meter.Key(o), s.Clock().Now())
	if err != nil {
		t.Fatal(err)
	}
	return open
}

// LECTERN_ORIGIN_HOSTS (-origin-hosts) names this origin for the edge's
// signatures: host[:port] entries, lower-cased; unset is none (any).
func TestOriginHostsSetting(t *testing.T) {
	parse := func(env map[string]string) (config, error) {
		return parseConfig(nil, func(k string) string { return env[k] })
	}
	if c, err := parse(nil); err != nil || c.originHosts != nil {
		t.Errorf("unset: %q, %v; want none", c.originHosts, err)
	}
	c, err := parse(map[string]string{"LECTERN_ORIGIN_HOSTS": "10.0.0.5:8080, Origin-1.Internal:8080,[::1]:8080"})
	if want := []string{"10.0.0.5:8080", "origin-1.internal:8080", "[::1]:8080"}; err != nil || !slices.Equal(c.originHosts, want) {
		t.Errorf("a list: %q, %v; want %q", c.originHosts, err, want)
	}
	for _, bad := range []string{"http://origin-1:8080", "origin-1:8080/x", "a@origin-1", "origin-1,", ",origin-1", ":8080", "origin 1"} {
		if _, err := parse(map[string]string{"LECTERN_ORIGIN_HOSTS": bad}); err == nil || !strings.Contains(err.Error(), "LECTERN_ORIGIN_HOSTS") {
			t.Errorf("LECTERN_ORIGIN_HOSTS=%q: %v; want an error naming the variable", bad, err)
		}
	}
}

// LECTERN_LEASE_RETENTION: a Go duration from 1h to 9600h, 24h unset.
func TestLeaseRetentionSetting(t *testing.T) {
	parse := func(v string) (config, error) {
		return parseConfig(nil, func(k string) string { return map[string]string{"LECTERN_LEASE_RETENTION": v}[k] })
	}
	if c, err := parse(""); err != nil || c.leaseRetention != 24*time.Hour {
		t.Errorf("unset: %v, %v; want 24h", c.leaseRetention, err)
	}
	if c, err := parse("90m"); err != nil || c.leaseRetention != 90*time.Minute {
		t.Errorf("90m: %v, %v", c.leaseRetention, err)
	}
	for _, bad := range []string{"59m", "401d", "9601h", "soon", "-1h"} {
		if _, err := parse(bad); err == nil || !strings.Contains(err.Error(), "LECTERN_LEASE_RETENTION") {
			t.Errorf("LECTERN_LEASE_RETENTION=%q: %v; want an error naming it", bad, err)
		}
	}
}
