package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/httpsig"
	"github.com/lectern-api/lectern/origin/lease"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/etag"
	wire "github.com/lectern-api/lectern/shared/lease"
)

// midHour is a fixed clock for lease tests: the middle of the current
// hour, so that no lease is cut short by the hour's end, and the RateLimit
// fields' seconds until the reset are the same at every call.
func midHour() func() time.Time {
	t := time.Now().UTC().Truncate(time.Hour).Add(30 * time.Minute)
	return func() time.Time { return t }
}

// leaseHarness is a harness whose server grants leases.
func leaseHarness(t *testing.T, cfg lease.Config) *harness {
	t.Helper()
	return newHarnessOpts(t, smallContent(t, ""), harnessOptions{leases: &cfg, now: midHour()})
}

var edgeCalls atomic.Int64

// edgeCall posts body to path as the edge does, signed for purpose (no
// signature when purpose is "", nor when hdr sets one), with header pairs.
func (h *harness) edgeCall(path, purpose string, body []byte, hdr ...string) resp {
	h.t.Helper()
	id := fmt.Sprintf("edge-call-%06d", edgeCalls.Add(1))
	req, err := http.NewRequest("POST", h.api+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("X-Request-Id", id)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if purpose != "" && req.Header.Get(edgesig.Header) == "" {
		httpsig.Sign(testEdgeKeys, purpose, req, body, h.now())
	}
	return h.send(req)
}

// askLease asks for a lease with tok and wants 200.
func (h *harness) askLease(tok string, ask wire.Request) wire.Answer {
	h.t.Helper()
	r := h.edgeCall(wire.Path, edgesig.Lease, wire.AppendRequest(nil, &ask), "Authorization", "Bearer "+tok)
	wantStatus(h.t, r, 200)
	a, err := wire.ParseAnswer(r.body)
	if err != nil {
		h.t.Fatalf("answer: %v: %s", err, r.body)
	}
	return a
}

// report posts reports to the usage endpoint and wants 204.
func (h *harness) report(rs ...wire.Report) {
	h.t.Helper()
	wantStatus(h.t, h.edgeCall(wire.UsagePath, edgesig.Usage, wire.AppendReports(nil, rs)), 204)
}

func (h *harness) updateOrg(id string, mod func(*store.Org)) {
	h.t.Helper()
	if _, err := h.store.UpdateOrg(context.Background(), id, func(o *store.Org) error { mod(o); return nil }); err != nil {
		h.t.Fatal(err)
	}
}

// docs/edge.md, Leases: the lease endpoint answers nothing without a
// valid signature (404, as the gate), 400 to a malformed message, and
// then the token's and the gate's refusals; the reports it carries are
// applied first, whatever else happens.
func TestLeaseRefusals(t *testing.T) {
	h := leaseHarness(t, lease.Config{})
	tok := h.org("acme", "topics")
	ask := wire.AppendRequest(nil, &wire.Request{Want: 16})
	auth := []string{"Authorization", "Bearer " + tok}

	h.edgeCall(wire.Path, "", ask, auth...).wantError(t, 404, "NOT_FOUND")
	h.edgeCall(wire.Path, edgesig.Usage, ask, auth...).wantError(t, 404, "NOT_FOUND")
	h.edgeCall(wire.Path, edgesig.Lease, ask, append(auth, edgesig.Header, "v1=1.00")...).wantError(t, 404, "NOT_FOUND")
	h.get(wire.Path, tok).wantError(t, 404, "NOT_FOUND")
	for _, body := range []string{``, `nope`, `{"want":1}`, `{"want":16,"extra":1}`, `{"want":16,"reports":[{"lease":"a b","used":1}]}`} {
		h.edgeCall(wire.Path, edgesig.Lease, []byte(body), auth...).wantError(t, 400, "BAD_REQUEST")
	}
	// Over wire.MaxBody the body is not read whole: not what was signed.
	h.edgeCall(wire.Path, edgesig.Lease, bytes.Repeat([]byte(" "), wire.MaxBody+1), auth...).wantError(t, 404, "NOT_FOUND")
	for _, u := range []string{"ftp://edge/internal/revoke", "/internal/revoke", "http://user:pw@edge/x", "http://edge/x#f"} {
		h.edgeCall(wire.Path, edgesig.Lease, wire.AppendRequest(nil, &wire.Request{Want: 16, Revoke: u}), auth...).wantError(t, 400, "BAD_REQUEST")
	}

	// The reports of a request that is then refused are applied.
	a := h.askLease(tok, wire.Request{Want: 16})
	before := h.calls("acme")
	bad := wire.AppendRequest(nil, &wire.Request{Want: 16, Reports: []wire.Report{{Lease: a.Lease, Used: 3}}})
	h.edgeCall(wire.Path, edgesig.Lease, bad, "Authorization", "Bearer nope").wantError(t, 401, "invalid_token")
	if got := h.calls("acme") - before; got != 3 {
		t.Errorf("the reports of a refused lease request billed %d, want 3", got)
	}
	h.edgeCall(wire.Path, edgesig.Lease, ask).wantError(t, 401, "invalid_token")

	h.updateOrg("acme", func(o *store.Org) { o.Status = licence.StatusSuspended })
	h.edgeCall(wire.Path, edgesig.Lease, ask, auth...).wantError(t, 403, "ORG_SUSPENDED")
	h.updateOrg("acme", func(o *store.Org) { o.Status, o.RenewsAt = licence.StatusActive, h.now().Add(-time.Second) })
	h.edgeCall(wire.Path, edgesig.Lease, ask, auth...).wantError(t, 403, "LICENSE_EXPIRED")
}

// A lease's answer: the organisation, its content version and grants
// digest, the block and validity, and the 304's fixed fields exactly as
// the gated 304 carries them (the gate's 204 and the origin's own 304
// alike), but ETag, RateLimit and X-Request-Id, which the edge sets, and
// its X-Lectern-* fields. The RateLimit the edge writes from rateLimits
// after one use is the gated 304's.
func TestLeaseAnswerIsTheGated304(t *testing.T) {
	h := leaseHarness(t, lease.Config{})
	tok := h.org("acme", "topics")
	h.updateOrg("acme", func(o *store.Org) { o.Quota.Calls, o.RateLimits.CallsPerHour = n64(1000), n64(400) })
	first := h.get("/v1/tiers", tok)
	wantStatus(t, first, 200)
	tag := first.header.Get("ETag")

	a := h.askLease(tok, wire.Request{Want: 64})
	o, _ := h.store.GetOrg(context.Background(), "acme")
	if a.Calls != 64 || a.ValidMs != 5000 || a.Org != "acme" || a.ContentVersion != h.content.Load().ContentVersion ||
		a.Grants != etag.GrantsDigest(o.Grants) || a.RetryMs != 0 {
		t.Fatalf("answer %+v", a)
	}

	gate := h.gateCall("/v1/tiers", tok, tag)
	wantStatus(t, gate, 204)
	direct := h.get("/v1/tiers", tok, "If-None-Match", tag)
	wantStatus(t, direct, 304)
	for name, got := range map[string]http.Header{"gate": gate.header, "304": direct.header} {
		want := map[string]string{}
		for k, vs := range got {
			switch {
			case k == "Etag", k == "Ratelimit", k == "X-Request-Id", k == "Date", strings.HasPrefix(k, "X-Lectern-"):
				continue
			}
			want[k] = strings.Join(vs, ", ")
		}
		have := map[string]string{}
		for _, kv := range a.Headers {
			have[kv[0]] = kv[1]
		}
		if fmt.Sprint(have) != fmt.Sprint(want) {
			t.Errorf("lease headers %v, %s's %v", have, name, want)
		}
	}
	if !slices.IsSortedFunc(a.Headers, func(x, y [2]string) int { return strings.Compare(x[0], y[0]) }) {
		t.Errorf("headers not sorted: %v", a.Headers)
	}
	// The gate billed one call after the grant: as a lease's first use.
	var parts []string
	for _, rl := range a.RateLimits {
		left := max(0, rl.Remaining-1)
		parts = append(parts, `"`+rl.Name+`";r=`+strconv.FormatInt(left, 10)+";t="+strconv.FormatInt(rl.Reset-h.now().Unix(), 10))
	}
	if got := strings.Join(parts, ", "); got != gate.header.Get("RateLimit") {
		t.Errorf("RateLimit from the lease %q, the gate's %q", got, gate.header.Get("RateLimit"))
	}
}

func n64(v int64) *int64 { return &v }

// forwardSig is the edge's signature of a GET of target forwarded with
// token tok, request id and X-Lectern-Usage usage.
func (h *harness) forwardSig(target, tok, id, usage string) string {
	return edgesig.NewSigner(testEdgeKeys, 1).Sign(&edgesig.Message{Purpose: edgesig.Forward, Method: "GET",
		Host: strings.TrimPrefix(h.api, "http://"), Target: target, Auth: "Bearer " + tok, Usage: usage, RequestID: id}, h.now().UnixMilli())
}

// gateCall makes the edge's gate call for a conditional GET of target.
func (h *harness) gateCall(target, tok, inm string, hdr ...string) resp {
	h.t.Helper()
	id := fmt.Sprintf("edge-gate-%06d", edgeCalls.Add(1))
	req, _ := http.NewRequest("POST", h.api+edgesig.GatePath, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("If-None-Match", inm)
	req.Header.Set("X-Request-Id", id)
	req.Header.Set(edgesig.TargetHeader, target)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	httpsig.Sign(testEdgeKeys, edgesig.Gate, req, nil, h.now())
	return h.send(req)
}

// No lease when leases are off, or when fewer than the floor could be
// reserved near the quota: calls 0 and when to ask again.
func TestNoLease(t *testing.T) {
	off := leaseHarness(t, lease.Config{Off: true})
	tok := off.org("acme", "topics")
	if a := off.askLease(tok, wire.Request{Want: 16}); a.Calls != 0 || a.RetryMs != lease.RetryOff.Milliseconds() {
		t.Errorf("leases off: %+v", a)
	}

	h := leaseHarness(t, lease.Config{})
	tok = h.org("acme", "topics")
	h.updateOrg("acme", func(o *store.Org) { o.Quota.Calls = n64(40) })
	for range 9 {
		wantStatus(t, h.get("/v1/tiers", tok), 200)
	}
	if a := h.askLease(tok, wire.Request{Want: 16}); a.Calls != 0 || a.RetryMs < 1000 { // (40 - 9) / 4 = 7 < 8
		t.Errorf("near the quota: %+v", a)
	}
	h.updateOrg("acme", func(o *store.Org) { o.RenewsAt = h.now().Add(50 * time.Millisecond) })
	if a := h.askLease(tok, wire.Request{Want: 16}); a.Calls != 0 {
		t.Errorf("a licence ending in 50 ms: %+v", a)
	}
}

// Reports through the usage endpoint and the X-Lectern-Usage field of
// edge-signed forwards and gate calls are applied, idempotently; the
// field of a request the edge did not sign is not.
func TestUsageReports(t *testing.T) {
	h := leaseHarness(t, lease.Config{})
	tok := h.org("acme", "topics")
	a := h.askLease(tok, wire.Request{Want: 64})
	base := h.calls("acme")
	h.report(wire.Report{Lease: a.Lease, Used: 5})
	h.report(wire.Report{Lease: a.Lease, Used: 5})
	h.report(wire.Report{Lease: a.Lease, Used: 2})
	if got := h.calls("acme") - base; got != 5 {
		t.Errorf("usage reports billed %d, want 5", got)
	}
	h.edgeCall(wire.UsagePath, edgesig.Usage, []byte(`{"reports":5}`)).wantError(t, 400, "BAD_REQUEST")
	h.edgeCall(wire.UsagePath, "", wire.AppendReports(nil, []wire.Report{{Lease: a.Lease, Used: 50}})).wantError(t, 404, "NOT_FOUND")
	h.edgeCall(wire.UsagePath, edgesig.Lease, wire.AppendReports(nil, []wire.Report{{Lease: a.Lease, Used: 50}})).wantError(t, 404, "NOT_FOUND")
	if got := h.calls("acme") - base; got != 5 {
		t.Errorf("refused reports billed: %d, want 5", got)
	}

	// A forward signed by the edge: its field is applied, and the
	// request is billed as ever (one call).
	id := "edge-fwd-000001"
	sig := h.forwardSig("/v1/tiers", tok, id, a.Lease+"=9")
	wantStatus(t, h.get("/v1/tiers", tok, "X-Request-Id", id, edgesig.Header, sig, wire.UsageHeader, a.Lease+"=9"), 200)
	if got := h.calls("acme") - base; got != 9+1 {
		t.Errorf("after a forward reporting 9: billed %d, want 10", got)
	}
	// A malformed field is ignored: the request is served.
	id = "edge-fwd-000002"
	sig = h.forwardSig("/v1/tiers", tok, id, a.Lease+"=many")
	wantStatus(t, h.get("/v1/tiers", tok, "X-Request-Id", id, edgesig.Header, sig, wire.UsageHeader, a.Lease+"=many"), 200)
	wantStatus(t, h.get("/v1/tiers", tok, wire.UsageHeader, a.Lease+"=30"), 200)
	if got := h.calls("acme") - base; got != 12 {
		t.Errorf("an unsigned request's field was applied: billed %d, want 12", got)
	}
	tag := h.get("/v1/tiers", tok).header.Get("ETag")
	wantStatus(t, h.gateCall("/v1/tiers", tok, tag, wire.UsageHeader, a.Lease+"=12;final"), 204)
	// 12 used, the two forwards, the unsigned call, the one that read
	// the tag, and the gated 304.
	if got := h.calls("acme") - base; got != 12+4+1 {
		t.Errorf("after a gate call reporting 12: billed %d, want 17", got)
	}
	if l := h.openLeases("acme"); len(l) != 0 {
		t.Errorf("a final report left the lease open: %+v", l)
	}
}

func (h *harness) openLeases(orgID string) []meter.Lease {
	h.t.Helper()
	o, err := h.store.GetOrg(context.Background(), orgID)
	if err != nil {
		h.t.Fatal(err)
	}
	ls, err := h.leaseStore.OpenLeases(context.Background(), meter.Key(o), h.now())
	if err != nil {
		h.t.Fatal(err)
	}
	return ls
}

// docs/edge.md, Leases: a call refused only because of leases'
// reservations recalls them (a push, the edge's usage applied) and is
// served: no false 429.
func TestRecallAvoidsFalse429(t *testing.T) {
	h, e := leaseEdgeHarness(t, lease.Config{})
	tok := h.org("acme", "topics")
	h.updateOrg("acme", func(o *store.Org) { o.Quota.Calls = n64(40) })
	a := h.askLease(tok, wire.Request{Want: 64, Revoke: e.URL()})
	if a.Calls != 10 {
		t.Fatalf("a quarter of 40: %d", a.Calls)
	}
	e.Set(a.Lease, 2)
	for range 30 {
		wantStatus(t, h.get("/v1/tiers", tok), 200)
	}
	// 30 billed + 10 reserved: the next call is refused only for the lease.
	wantStatus(t, h.get("/v1/tiers", tok), 200)
	if ps := e.Pushes(); len(ps) != 1 || ps[0].Keep || ps[0].Leases[0] != a.Lease {
		t.Errorf("pushes %+v, want one revoke of the lease", ps)
	}
	if got := h.calls("acme"); got != 30+2+1 {
		t.Errorf("billed %d, want 33", got)
	}
	for range 7 {
		wantStatus(t, h.get("/v1/tiers", tok), 200)
	}
	h.fails("/v1/tiers", tok, 429, "QUOTA_EXCEEDED")
}

// GET /v1/license settles the organisation's leases first: the usage an
// edge holds unreported is in its calls, and the lease stays the edge's.
func TestLicenseSettles(t *testing.T) {
	h, e := leaseEdgeHarness(t, lease.Config{})
	tok := h.org("acme", "topics")
	a := h.askLease(tok, wire.Request{Want: 64, Revoke: e.URL()})
	e.Set(a.Lease, 5)
	body := h.ok("/v1/license", tok)
	used := body["quota"].(map[string]any)["calls"].(map[string]any)["used"]
	if fmt.Sprint(used) != "5" {
		t.Errorf("licence status calls used %v, want 5", used)
	}
	if ps := e.Pushes(); len(ps) != 1 || !ps[0].Keep {
		t.Errorf("pushes %+v, want one settle", ps)
	}
	if l := h.openLeases("acme"); len(l) != 1 {
		t.Errorf("a settle closed the lease: %+v", l)
	}
	// The admin API's reading settles too.
	e.Set(a.Lease, 8)
	o, _ := h.store.GetOrg(context.Background(), "acme")
	_, extras, err := h.srv.OrgExtras(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	meters := extras["meters"].(map[string]any)
	if got := meters["month"].(map[string]int64)["calls"]; got != 8 {
		t.Errorf("the admin reading's calls: %d, want 8", got)
	}
	if settled, unreported := meters["settled"], meters["unreported"]; settled != true || unreported != int64(0) {
		t.Errorf("the admin reading: settled %v, unreported %v; want true and 0", settled, unreported)
	}
}

// TestLicenseDoesNotWaitForAFrozenEdge (issue #28, point 2; #33): with
// the edge holding the settle push unanswered, GET /v1/license and the
// admin API's reading of the organisation answer at their bound
// (lease.SettleTimeout, 250 ms), not the push's (2 s; before #33 the
// admin reading waited that long), billed calls only; the admin reading
// says it is not settled and by how much its meters may lag: the lease's
// block, none of it reported.
func TestLicenseDoesNotWaitForAFrozenEdge(t *testing.T) {
	h, e := leaseEdgeHarness(t, lease.Config{})
	tok := h.org("acme", "topics")
	a := h.askLease(tok, wire.Request{Want: 64, Revoke: e.URL()})
	e.Set(a.Lease, 5)
	arrived := e.Hold()
	defer e.Release()
	began := time.Now()
	body := h.ok("/v1/license", tok)
	took := time.Since(began)
	<-arrived
	if took >= lease.PushTimeout/2 {
		t.Errorf("/v1/license took %s with the edge frozen, want about %s", took, lease.SettleTimeout)
	}
	if used := body["quota"].(map[string]any)["calls"].(map[string]any)["used"]; fmt.Sprint(used) != "0" {
		t.Errorf("licence status calls used %v, want 0 (the frozen edge's 5 are not reported yet)", used)
	}

	o, _ := h.store.GetOrg(context.Background(), "acme")
	began = time.Now()
	_, extras, err := h.srv.OrgExtras(context.Background(), o)
	took = time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	<-arrived
	if took >= lease.PushTimeout/2 {
		t.Errorf("the admin reading took %s with the edge frozen, want about %s", took, lease.SettleTimeout)
	}
	meters := extras["meters"].(map[string]any)
	if got := meters["month"].(map[string]int64)["calls"]; got != 0 {
		t.Errorf("the admin reading's calls: %d, want 0 (the frozen edge's 5 are not reported yet)", got)
	}
	if settled, unreported := meters["settled"], meters["unreported"]; settled != false || unreported != a.Calls {
		t.Errorf("the admin reading: settled %v, unreported %v; want false and the lease's %d calls", settled, unreported, a.Calls)
	}
}

// The lesson read that trips the enumeration alarm is answered only
// after the organisation's leases are revoked.
func TestAlarmTripRevokes(t *testing.T) {
	h, e := leaseEdgeHarness(t, lease.Config{})
	tok, path, crossing := alarmOrg(t, h, "alarm")
	a := h.askLease(tok, wire.Request{Want: 16, Revoke: e.URL()})
	e.Set(a.Lease, 1)
	for n := 1; n < crossing; n++ {
		h.ok(path(n), tok)
	}
	if len(e.Pushes()) != 0 {
		t.Fatal("a read that did not trip the alarm revoked")
	}
	arrived := e.Hold()
	done := make(chan resp, 1)
	go func() { done <- h.get(path(crossing), tok) }()
	<-arrived
	select {
	case r := <-done:
		t.Fatalf("the tripping read was answered (%d) before the revoke", r.status)
	default:
	}
	e.Release()
	wantStatus(t, <-done, 200)
	if l := h.openLeases("alarm"); len(l) != 0 {
		t.Errorf("open leases after the trip: %+v", l)
	}
	if a := h.askLease(tok, wire.Request{Want: 16}); a.Calls != 0 {
		t.Errorf("a lease for a suspended organisation: %+v", a)
	}
}

// TestSignedForAnotherOrigin: an origin that knows its names
// (LECTERN_ORIGIN_HOSTS) refuses a call signed for a peer, though the
// call names that peer in its Host field; the same call signed for one
// of its names is taken, once.
func TestSignedForAnotherOrigin(t *testing.T) {
	h := newHarnessOpts(t, smallContent(t, ""), harnessOptions{leases: &lease.Config{}, now: midHour(),
		originHosts: []string{"origin-1.internal:8080"}})
	tok := h.org("acme", "topics")
	ask := wire.AppendRequest(nil, &wire.Request{Want: 16})
	call := func(host string) resp {
		req, _ := http.NewRequest("POST", h.api+wire.Path, bytes.NewReader(ask))
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("X-Request-Id", fmt.Sprintf("edge-call-%06d", edgeCalls.Add(1)))
		httpsig.Sign(testEdgeKeys, edgesig.Lease, req, ask, h.now())
		return h.send(req)
	}
	call("origin-2.internal:8080").wantError(t, 404, "NOT_FOUND")
	call(strings.TrimPrefix(h.api, "http://")).wantError(t, 404, "NOT_FOUND")
	if r := call("Origin-1.internal:8080"); r.status != 200 {
		t.Errorf("signed for the origin's own name: %d %s", r.status, r.body)
	}
}

// TestSignedBeforeTheStart: a call the edge signed before the origin's
// process started may have been accepted by its last run, and is refused;
// one signed after the process started, while it loaded and before the
// server was made, is taken.
func TestSignedBeforeTheStart(t *testing.T) {
	now := midHour()
	h := newHarnessOpts(t, smallContent(t, ""), harnessOptions{leases: &lease.Config{}, now: now,
		started: now().Add(-time.Second)})
	tok := h.org("acme", "topics")
	ask := wire.AppendRequest(nil, &wire.Request{Want: 16})
	call := func(signed time.Time) resp {
		req, _ := http.NewRequest("POST", h.api+wire.Path, bytes.NewReader(ask))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("X-Request-Id", fmt.Sprintf("edge-call-%06d", edgeCalls.Add(1)))
		httpsig.Sign(testEdgeKeys, edgesig.Lease, req, ask, signed)
		return h.send(req)
	}
	call(now().Add(-2*time.Second)).wantError(t, 404, "NOT_FOUND")
	if r := call(now().Add(-500 * time.Millisecond)); r.status != 200 {
		t.Errorf("signed after the process started, before the server was made: %d %s", r.status, r.body)
	}
}
