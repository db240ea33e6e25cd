package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/httpsig"
	"github.com/lectern-api/lectern/origin/clock"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/lease/leasetest"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/shared/edgesig"
	wire "github.com/lectern-api/lectern/shared/lease"
)

// lease asks the stack's origin for a lease as the edge does.
func (s *testStack) lease(tok, revoke string) (int, wire.Answer) {
	s.t.Helper()
	id := "edge-lease-" + time.Now().Format("150405.000000000")
	body := wire.AppendRequest(nil, &wire.Request{Want: 32, Revoke: revoke})
	req, _ := http.NewRequest("POST", s.OriginURL+wire.Path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("X-Request-Id", id)
	httpsig.Sign(testEdgeKeys, edgesig.Lease, req, body, s.Clock().Now())
	r := s.send(req)
	if r.status != 200 {
		return r.status, wire.Answer{}
	}
	a, err := wire.ParseAnswer(r.body)
	if err != nil {
		s.t.Fatalf("lease answer: %v: %s", err, r.body)
	}
	return r.status, a
}

// adminAsync calls the admin API in the background.
func (s *testStack) adminAsync(method, path, body string) chan int {
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(method, s.AdminURL+path, bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+s.AdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	return done
}

// issue #19, revocation: through the whole origin on its real meters, an
// admin change is committed, pushed to the edge host holding the
// organisation's lease, and acknowledged only once the push is answered;
// the usage the edge answers is billed, and the next lease request sees
// the change. A corpus reload revokes every lease, and the admin reading
// of an organisation settles first. On SQLite and PostgreSQL.
func TestLeasesRevokedByAdminChanges(t *testing.T) {
	// The edge host is listed in LECTERN_EDGE_URLS: it must exist before
	// the origin starts. It checks signatures on the stack's clock.
	var stackClock atomic.Pointer[clock.Clock]
	e := leasetest.NewEdge(t, testEdgeKeys, func() time.Time { return stackClock.Load().Now() })
	onBothStoresWith(t, "leases revoked by admin changes", map[string]string{"LECTERN_EDGE_URLS": e.Base()},
		func(t *testing.T, s *testStack) {
			stackClock.Store(s.Clock())
			testLeasesRevokedByAdminChanges(t, s, e)
		})
}

func testLeasesRevokedByAdminChanges(t *testing.T, s *testStack, e *leasetest.Edge) {
	if s.Leases() == nil {
		t.Fatal("the stack's meters keep no leases")
	}
	id, secret := s.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read")
	tok := s.token(id, secret, "content.read")

	code, a := s.lease(tok, e.URL())
	if code != 200 || a.Calls != 32 || a.Org != "acme" {
		t.Fatalf("lease: %d %+v", code, a)
	}
	e.Set(a.Lease, 4)
	if got := s.calls("acme"); got != 4 { // the admin reading settles
		t.Errorf("the admin reading shows %v calls, want the 4 the edge holds", got)
	}

	arrived := e.Hold()
	done := s.adminAsync("PATCH", "/admin/v1/orgs/acme", `{"status":"suspended"}`)
	<-arrived
	select {
	case c := <-done:
		t.Fatalf("the PATCH was answered (%d) before the revoke push was", c)
	default:
	}
	e.Release()
	if c := <-done; c != 200 {
		t.Fatalf("PATCH: %d", c)
	}
	if e.Holds(a.Lease) {
		t.Error("the edge still holds the lease")
	}
	if code, _ := s.lease(tok, e.URL()); code != 403 {
		t.Errorf("a lease for the suspended organisation: %d", code)
	}

	if c, _ := s.admin("PATCH", "/admin/v1/orgs/acme", `{"status":"active"}`); c != 200 {
		t.Fatalf("reinstate: %d", c)
	}
	_, a = s.lease(tok, e.URL())
	e.Set(a.Lease, 2)
	dir := filepath.Join(t.TempDir(), "corpus2")
	sum, err := gen.Write(dir, gen.Options{Seed: 2, Small: true})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{"dir": dir})
	if c, m := s.admin("POST", "/admin/v1/corpus/reload", string(b)); c != 200 {
		t.Fatalf("reload: %d %v", c, m)
	}
	if e.Holds(a.Lease) {
		t.Error("a corpus reload left the lease with the edge")
	}
	if got := s.calls("acme"); got != 4+2 {
		t.Errorf("calls %v, want 6", got)
	}
	if _, a = s.lease(tok, e.URL()); a.ContentVersion != sum.ContentVersion {
		t.Errorf("a lease after the reload names %q, want %q", a.ContentVersion, sum.ContentVersion)
	}
}

// LECTERN_LEASES=off: the origin grants no lease.
func TestLeasesOff(t *testing.T) {
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"))
	s := bootStack(t, testEnv(dir, map[string]string{"LECTERN_LEASES": "off"}), nil)
	t.Cleanup(func() { s.Close() })
	id, secret := s.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read")
	tok := s.token(id, secret, "content.read")
	if code, a := s.lease(tok, ""); code != 200 || a.Calls != 0 || a.RetryMs < 1000 {
		t.Errorf("leases off: %d %+v", code, a)
	}
}

// A lease's validity is cut at the next UTC hour and month and at the
// licence's expiry, on the admin test clock.
func TestLeaseValidityOnTheTestClock(t *testing.T) {
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"))
	s := bootStack(t, testEnv(dir, map[string]string{"LECTERN_TEST_CLOCK": "1", "LECTERN_LEASE_TTL": "60s"}), nil)
	t.Cleanup(func() { s.Close() })
	id, secret := s.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read")

	end := meter.NextMonth(s.Clock().Now())
	if c, m := s.admin("POST", "/admin/v1/clock", `{"now":"`+end.Add(-30*time.Second).Format(time.RFC3339)+`"}`); c != 200 {
		t.Fatalf("clock: %d %v", c, m)
	}
	tok := s.token(id, secret, "content.read")
	if code, a := s.lease(tok, ""); code != 200 || a.Calls == 0 || a.ValidMs > 30_000 {
		t.Errorf("30 s before the month's end: %d %+v", code, a)
	}

	if c, m := s.admin("POST", "/admin/v1/clock", `{"now":"`+end.Add(10*time.Minute).Format(time.RFC3339)+`"}`); c != 200 {
		t.Fatalf("clock: %d %v", c, m)
	}
	renews := s.Clock().Now().Add(20 * time.Second).UTC().Format(time.RFC3339)
	if c, m := s.admin("PATCH", "/admin/v1/orgs/acme", `{"renewsAt":"`+renews+`"}`); c != 200 {
		t.Fatalf("renewsAt: %d %v", c, m)
	}
	if code, a := s.lease(tok, ""); code != 200 || a.Calls == 0 || a.ValidMs > 20_000 {
		t.Errorf("20 s before the licence's expiry: %d %+v", code, a)
	}
}

// Where no push reaches the edge (a lease without a revoke URL), an admin
// change is acknowledged only once the lease has expired on the origin's
// clock.
func TestAdminWaitsForLeaseExpiry(t *testing.T) {
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"))
	s := bootStack(t, testEnv(dir, map[string]string{"LECTERN_TEST_CLOCK": "1", "LECTERN_LEASE_TTL": "300ms"}), nil)
	t.Cleanup(func() { s.Close() })
	id, secret := s.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read")
	tok := s.token(id, secret, "content.read")
	before := s.Clock().Now()
	code, a := s.lease(tok, "")
	if code != 200 || a.Calls == 0 {
		t.Fatalf("lease: %d %+v", code, a)
	}
	if c, m := s.admin("PATCH", "/admin/v1/orgs/acme", `{"status":"suspended"}`); c != 200 {
		t.Fatalf("PATCH: %d %v", c, m)
	}
	if waited := s.Clock().Now().Sub(before); waited < time.Duration(a.ValidMs)*time.Millisecond {
		t.Errorf("the PATCH was answered %v after the lease request, before its %d ms were over", waited, a.ValidMs)
	}
}
