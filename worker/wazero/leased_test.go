package wazero

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/httpsig"
	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/etag"
	"github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/shared/token/tokentest"
)

// The host's side of leases end to end: the real module under the host,
// in front of a scripted origin that checks every lease-protocol call
// (signature, body) and counts its gate calls.

const (
	leaseVersion = "2026-11-01+abcdef012345"
	leaseGrants  = "00ff"
)

// leaseOrigin is the origin's side: JWKS, a forward that teaches the edge
// acme's ETag inputs, the gate, and the lease and usage endpoints.
type leaseOrigin struct {
	t      *testing.T
	url    string
	gates  atomic.Int64
	calls  int64 // the block each lease grants
	mu     sync.Mutex
	leases []lease.Request
	usage  []lease.Report
	next   int // lease ids granted
	hang   chan struct{}
}

func (o *leaseOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	keys := edgesig.KeysOf([]byte(testSecret))
	signed := func(purpose string) bool {
		m := httpsig.Message(purpose, r, edgesig.BodyHash(body))
		_, err := edgesig.Verify(&keys, r.Header.Get(edgesig.Header), &m, leaseNow.UnixMilli())
		return err == nil
	}
	switch r.URL.Path {
	case "/.well-known/jwks.json":
		w.Write(tokentest.JWKS("k1"))
	case "/v1/subjects":
		h := w.Header()
		h.Set("X-Lectern-Org", "acme")
		h.Set("X-Lectern-Grants", leaseGrants)
		h.Set("X-Service-Content-Version", leaseVersion)
		w.Write([]byte(`{"data":[]}`))
	case edgesig.GatePath:
		o.gates.Add(1)
		h := w.Header()
		h.Set("Cache-Control", "private")
		h.Set("X-Service-Content-Version", leaseVersion)
		h.Set("RateLimit-Policy", `"calls-month";q=100;w=2592000`)
		h.Set("RateLimit", `"calls-month";r=60;t=100`)
		h.Set("ETag", r.Header.Get("If-None-Match"))
		w.WriteHeader(204)
	case lease.Path:
		if o.hang != nil { // hold the lease request until the host gives up on it
			o.hang <- struct{}{}
			<-r.Context().Done()
			o.hang <- struct{}{}
			return
		}
		rq, err := lease.ParseRequest(body)
		if !signed(edgesig.Lease) || err != nil || r.Header.Get("Authorization") == "" {
			o.t.Errorf("lease request %q (%v) not signed, or without the client's token", body, err)
			w.WriteHeader(404)
			return
		}
		o.mu.Lock()
		o.leases = append(o.leases, rq)
		o.usage = append(o.usage, rq.Reports...)
		o.next++
		id := "L" + string(rune('0'+o.next))
		o.mu.Unlock()
		a := lease.Answer{Lease: id, Org: "acme", Epoch: 1, ContentVersion: leaseVersion, Grants: leaseGrants,
			Calls: o.calls, ValidMs: 60_000,
			Headers:    [][2]string{{"Cache-Control", "private"}, {"RateLimit-Policy", `"calls-month";q=100;w=2592000`}, {"X-Service-Content-Version", leaseVersion}},
			RateLimits: []lease.RateLimit{{Name: "calls-month", Remaining: 40, Reset: leaseNow.Unix() + 100}}}
		w.Header().Set("Content-Type", "application/json")
		w.Write(lease.AppendAnswer(nil, &a))
	case lease.UsagePath:
		rs, err := lease.ParseReports(body)
		if !signed(edgesig.Usage) || err != nil {
			o.t.Errorf("usage report %q (%v) not signed", body, err)
			w.WriteHeader(404)
			return
		}
		o.mu.Lock()
		o.usage = append(o.usage, rs...)
		o.mu.Unlock()
		w.WriteHeader(204)
	default:
		o.t.Errorf("unexpected %s %s", r.Method, r.URL)
		w.WriteHeader(500)
	}
}

// reported is the highest usage reported for id, and whether a final
// report came.
func (o *leaseOrigin) reported(id string) (used int64, final bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.usage {
		if r.Lease == id {
			used, final = max(used, r.Used), final || r.Final
		}
	}
	return used, final
}

// leaseNow is the clock of these tests' hosts.
var leaseNow = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func newLeaseOrigin(t *testing.T, calls int64) *leaseOrigin {
	o := &leaseOrigin{t: t, calls: calls}
	srv := httptest.NewServer(o)
	t.Cleanup(srv.Close)
	o.url = srv.URL
	return o
}

// leaseClient is a client of acme with a token the scripted JWKS verifies.
type leaseClient struct {
	t    *testing.T
	base string
	auth string
}

func newLeaseClient(t *testing.T, base string) *leaseClient {
	tok := tokentest.Mint("k1", tokentest.Claims{"iss": "http://idp.test", "aud": "lectern-api", "sub": "client1",
		"client_id": "client1", "org": "acme", "scope": "service-api/content.read", "iat": leaseNow.Unix(),
		"nbf": leaseNow.Unix(), "exp": leaseNow.Add(time.Hour).Unix(), "jti": "j1"})
	c := &leaseClient{t: t, base: base, auth: "Bearer " + tok}
	if resp := c.get("/v1/subjects", "", ""); resp.StatusCode != 200 {
		t.Fatalf("learning acme: %d", resp.StatusCode)
	}
	return c
}

func (c *leaseClient) get(path, query, inm string) *http.Response {
	c.t.Helper()
	target := c.base + path
	if query != "" {
		target += "?" + query
	}
	req, _ := http.NewRequest("GET", target, nil)
	req.Header.Set("Authorization", c.auth)
	if inm != "" {
		req.Header.Set("If-None-Match", inm)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// revalidate is a conditional GET whose candidate ETag matches.
func (c *leaseClient) revalidate() *http.Response {
	c.t.Helper()
	inm := etag.Derive(etag.Input{Version: leaseVersion, Route: 4, Target: "subjectSlug=algebra", Params: "tier=high",
		Org: "acme", Grants: leaseGrants})
	resp := c.get("/v1/subjects/algebra", "tier=high", inm)
	if resp.StatusCode != 304 || resp.Header.Get("ETag") != inm {
		c.t.Fatalf("revalidation: %d, ETag %q", resp.StatusCode, resp.Header.Get("ETag"))
	}
	return resp
}

func leaseHostConfig(o *leaseOrigin, log string) func(*Config) {
	return func(c *Config) {
		c.Issuer, c.JWKSURL, c.UsageLog = "http://idp.test", o.url+"/.well-known/jwks.json", log
		c.Now = func() time.Time { return leaseNow }
	}
}

// waitFor polls cond: the background work it waits for has no other
// signal. The test's deadline bounds it.
func waitFor(cond func() bool) {
	for !cond() {
		time.Sleep(time.Millisecond)
	}
}

// TestLeasedRevalidations: the gated 304 asks for a lease in the
// background; the host performs it and resumes the module, which then
// answers revalidations itself (no gate call), each logged before its 304;
// Flush reports the usage; the revoke push answers it final and ends the
// lease (the gate again); a host started on the log reports it final.
func TestLeasedRevalidations(t *testing.T) {
	o := newLeaseOrigin(t, 8)
	log := filepath.Join(t.TempDir(), "usage.log")
	h, base := leasedHost(t, o.url, leaseHostConfig(o, log))
	c := newLeaseClient(t, base)

	c.revalidate()
	if o.gates.Load() != 1 {
		t.Fatalf("first revalidation: %d gate calls, want 1", o.gates.Load())
	}
	waitFor(func() bool { return h.Stats().Backgrounds >= 1 }) // the lease request, answered and resumed
	o.mu.Lock()
	if len(o.leases) != 1 || o.leases[0].Want != lease.MinCalls || o.leases[0].Revoke != base+lease.RevokePath {
		t.Errorf("lease requests %+v, want one of %d calls naming %s", o.leases, lease.MinCalls, base+lease.RevokePath)
	}
	o.mu.Unlock()

	for i := 1; i <= 3; i++ {
		resp := c.revalidate()
		if rl := resp.Header.Get("RateLimit"); !strings.Contains(rl, `"calls-month";r=`+strconv.Itoa(40-i)+";") {
			t.Errorf("leased 304 %d: RateLimit %q, want r=%d", i, rl, 40-i)
		}
		b, _ := os.ReadFile(log)
		if want := "L1 " + strconv.Itoa(i) + "\n"; !strings.HasSuffix(string(b), want) {
			t.Errorf("after leased 304 %d the usage log is %q, want it to end %q", i, b, want)
		}
	}
	if g := o.gates.Load(); g != 1 {
		t.Errorf("%d gate calls after leased 304s, want 1", g)
	}

	if err := h.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if used, final := o.reported("L1"); used != 3 || final {
		t.Errorf("after Flush the origin has L1 at %d (final %v), want 3, not final", used, final)
	}

	key := edgesig.KeysOf([]byte(testSecret))
	status, _, body := revoke(t, base, "POST", edgesig.Revoke, &key, leaseNow, `{"leases":["L1","L9"],"keep":false}`)
	rs, err := lease.ParseReports([]byte(body))
	if status != 200 || err != nil || len(rs) != 1 || rs[0] != (lease.Report{Lease: "L1", Used: 3, Final: true}) {
		t.Errorf("revoke: %d %s (%v), want L1 at 3, final, alone", status, body, err)
	}
	c.revalidate()
	if g := o.gates.Load(); g != 2 {
		t.Errorf("a revalidation after the revoke: %d gate calls in all, want 2", g)
	}

	// The process killed: the log holds what it answered; the next host
	// on it reports that final.
	b, _ := os.ReadFile(log)
	os.WriteFile(log+".next", b, 0o600)
	o.mu.Lock()
	o.usage = nil
	o.mu.Unlock()
	leasedHost(t, o.url, leaseHostConfig(o, log+".next"))
	waitFor(func() bool { _, final := o.reported("L1"); return final })
	if used, _ := o.reported("L1"); used != 3 {
		t.Errorf("replayed L1 at %d, want 3", used)
	}
}

// TestLeaseUsageReportedAtClose: Close reports the usage not yet
// reported, before it ends.
func TestLeaseUsageReportedAtClose(t *testing.T) {
	o := newLeaseOrigin(t, 8)
	h, base := leasedHost(t, o.url, leaseHostConfig(o, filepath.Join(t.TempDir(), "usage.log")))
	c := newLeaseClient(t, base)
	c.revalidate()
	waitFor(func() bool { return h.Stats().Backgrounds >= 1 })
	c.revalidate()
	c.revalidate()
	if used, _ := o.reported("L1"); used != 0 {
		t.Fatalf("reported %d before Close", used)
	}
	h.Close(context.Background())
	if used, _ := o.reported("L1"); used != 2 {
		t.Errorf("Close reported L1 at %d, want 2", used)
	}
}

// TestCloseCancelsBackground: Close cancels a background subrequest still
// in flight rather than waiting for its timeout.
func TestCloseCancelsBackground(t *testing.T) {
	o := newLeaseOrigin(t, 8)
	o.hang = make(chan struct{})
	h, base := leasedHost(t, o.url, func(c *Config) {
		leaseHostConfig(o, filepath.Join(t.TempDir(), "usage.log"))(c)
		c.SubrequestTimeout = time.Hour
	})
	c := newLeaseClient(t, base)
	c.revalidate()
	<-o.hang // the lease request is at the origin
	h.Close(context.Background())
	<-o.hang // and was cancelled (the subrequest timeout is an hour)
}

// TestLeaseReportsByIntervalOnly: the host configures the module to
// report usage by lease.ReportInterval only (its usage log holds what is
// unreported): lease.ReportEvery leased 304s and more start no usage
// report of the module's (the clock stands still, so no interval passes);
// Flush reports them. Without leases the configuration names no
// reportEvery.
func TestLeaseReportsByIntervalOnly(t *testing.T) {
	o := newLeaseOrigin(t, 64)
	h, base := leasedHost(t, o.url, leaseHostConfig(o, filepath.Join(t.TempDir(), "usage.log")))
	if b, _ := json.Marshal(h.configMessage()); !strings.Contains(string(b), `"reportEvery":0`) {
		t.Errorf("configure with leases: %s, want reportEvery 0", b)
	}
	if b, _ := json.Marshal((&Host{}).configMessage()); strings.Contains(string(b), "reportEvery") {
		t.Errorf("configure without leases: %s, want no reportEvery", b)
	}
	c := newLeaseClient(t, base)
	c.revalidate()
	waitFor(func() bool { return h.Stats().Backgrounds >= 1 }) // the lease request
	const uses = lease.ReportEvery + 8                         // fewer than half the lease: no renewal
	for range uses {
		c.revalidate()
	}
	// Background work starts before its output's 304 is written: all of
	// it is in the wait group by now.
	h.bg.Wait()
	if n := h.Stats().Backgrounds; n != 1 {
		t.Errorf("%d background calls after %d leased 304s, want the lease request alone", n, uses)
	}
	if err := h.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if used, _ := o.reported("L1"); used != uses {
		t.Errorf("Flush reported L1 at %d, want %d", used, uses)
	}
}
