package pipeline

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/etag"
	"github.com/lectern-api/lectern/shared/lease"
)

// The module's side of leases (docs/edge.md, "Leases"), driven by messages
// as a host would send them, with the origin scripted: each lease-protocol
// call the pipeline asks for is checked (URL, signature, body) and
// answered as the test says.

const revokeURL = "http://edge.test/internal/revoke"

// leaseWorld is a pipeline with leases on, the keys installed and acme's
// ETag inputs learnt, and the origin's side of the protocol scripted.
type leaseWorld struct {
	t    testing.TB
	p    *Pipeline
	tok  string
	now  int64
	seen []lease.Request  // the lease requests, in order
	sent [][]lease.Report // the reports of the usage calls, in order
}

func newLeaseWorld(t testing.TB) *leaseWorld {
	t.Helper()
	return newLeaseWorldOf(t, testCfg)
}

// newLeaseWorldOf is newLeaseWorld on cfg, with leases on.
func newLeaseWorldOf(t testing.TB, cfg Config) *leaseWorld {
	t.Helper()
	cfg.Random, cfg.Leases, cfg.Revoke = &counter{}, true, revokeURL
	p := New(cfg)
	installKeys(t, p, t0, "k1")
	w := &leaseWorld{t: t, p: p, tok: "Bearer " + sign("k1", t0, nil), now: t0ms + 1000}
	learnOrg(t, p, w.tok, "00ff", version)
	return w
}

// cond starts a revalidation of acme's subject whose candidate matches.
func (w *leaseWorld) cond(tok, grants, org string) Output {
	w.t.Helper()
	inm := etag.Derive(etag.Input{Version: version, Route: 4, Target: "subjectSlug=algebra", Params: "tier=high", Org: org, Grants: grants})
	return w.p.Start(get("/v1/subjects/algebra", "tier=high", w.now, "Authorization", tok, "If-None-Match", inm, "X-Request-Id", rid))
}

// acme is a matching revalidation of acme's with the test's token.
func (w *leaseWorld) acme() Output {
	w.t.Helper()
	return w.cond(w.tok, "00ff", "acme")
}

// gated reports whether out is the gate call.
func gated304(out Output) bool {
	return out.Kind == Subrequest && !out.Forward && strings.HasSuffix(out.URL, edgesig.GatePath)
}

// leased reports whether out is a 304 the edge answered with a lease.
func leased304(out Output) bool {
	return out.Kind == Response && out.Status == 304 && out.Lease.ID != ""
}

// leaseRequest checks that bg is a lease request, signed, with tok's
// Authorization, and returns its body.
func (w *leaseWorld) leaseRequest(bg Background, tok string) lease.Request {
	w.t.Helper()
	if bg.Handle == 0 || bg.Method != "POST" || bg.URL != "http://origin.test"+lease.Path {
		w.t.Fatalf("background %+v, want a lease request", bg)
	}
	h := headerMap(w.t, bg.Headers)
	if h["Authorization"] != tok || h["Content-Type"] != "application/json" {
		w.t.Errorf("lease request headers %v", h)
	}
	keys := edgesig.KeysOf([]byte(testCfg.Secret))
	m := edgesig.Message{Purpose: edgesig.Lease, Method: "POST", Host: "origin.test", Target: lease.Path,
		Body: edgesig.BodyHash(bg.Body), Auth: tok, RequestID: h["X-Request-Id"]}
	if _, err := edgesig.Verify(&keys, h[edgesig.Header], &m, w.now); err != nil {
		w.t.Errorf("lease request signature %q does not verify", h[edgesig.Header])
	}
	r, err := lease.ParseRequest(bg.Body)
	if err != nil {
		w.t.Fatalf("lease request body %s: %v", bg.Body, err)
	}
	if r.Revoke != revokeURL {
		w.t.Errorf("revoke URL %q, want %q", r.Revoke, revokeURL)
	}
	w.seen = append(w.seen, r)
	return r
}

// usageCall checks that a background (or a flush's subrequest) is a usage
// call, signed, without Authorization, and returns its reports.
func (w *leaseWorld) usageCall(bg Background) []lease.Report {
	w.t.Helper()
	if bg.Handle == 0 || bg.Method != "POST" || bg.URL != "http://origin.test"+lease.UsagePath {
		w.t.Fatalf("background %+v, want a usage call", bg)
	}
	h := headerMap(w.t, bg.Headers)
	if _, ok := h["Authorization"]; ok {
		w.t.Error("a usage call carries Authorization")
	}
	keys := edgesig.KeysOf([]byte(testCfg.Secret))
	m := edgesig.Message{Purpose: edgesig.Usage, Method: "POST", Host: "origin.test", Target: lease.UsagePath,
		Body: edgesig.BodyHash(bg.Body), RequestID: h["X-Request-Id"]}
	if _, err := edgesig.Verify(&keys, h[edgesig.Header], &m, w.now); err != nil {
		w.t.Errorf("usage call signature %q does not verify", h[edgesig.Header])
	}
	rs, err := lease.ParseReports(bg.Body)
	if err != nil {
		w.t.Fatalf("usage body %s: %v", bg.Body, err)
	}
	w.sent = append(w.sent, rs)
	return rs
}

// grant answers the lease request h with a lease.
func (w *leaseWorld) grant(h Handle, a lease.Answer) Output {
	w.t.Helper()
	out := w.p.Resume(ResumeMsg{Handle: h, Status: 200, Body: lease.AppendAnswer(nil, &a), Now: w.now,
		Headers: []Header{{"Content-Type", "application/json"}}})
	if out.Kind != Done || out.Handle != h {
		w.t.Fatalf("lease answer: got %+v, want done", out)
	}
	return out
}

// answer resumes background h with a bodiless status.
func (w *leaseWorld) answer(h Handle, status int) Output {
	w.t.Helper()
	out := w.p.Resume(ResumeMsg{Handle: h, Status: status, Now: w.now})
	if out.Kind != Done || out.Handle != h {
		w.t.Fatalf("answer %d: got %+v, want done", status, out)
	}
	return out
}

// reset is the month's end, seconds after the tests' clock.
var reset = t0.Unix() + 2_592_000

// acmeLease is a lease on acme's current state.
func acmeLease(id string, calls int64) lease.Answer {
	return lease.Answer{Lease: id, Org: "acme", Epoch: 1, ContentVersion: version, Grants: "00ff", Calls: calls, ValidMs: 5000,
		Headers: [][2]string{{"Cache-Control", "private"}, {"RateLimit-Policy", `"calls-month";q=100;w=2592000`},
			{"Vary", "Authorization, Accept-Encoding"}, {"X-Service-Content-Version", version}},
		RateLimits: []lease.RateLimit{{Name: "calls-month", Remaining: 40, Reset: reset}}}
}

// leaseUp asks for acme's lease (the first revalidation, gated) and grants
// it: the lease counts from w.now.
func (w *leaseWorld) leaseUp(a lease.Answer) {
	w.t.Helper()
	out := w.acme()
	if !gated304(out) {
		w.t.Fatalf("first revalidation: got %+v, want the gate", out)
	}
	w.leaseRequest(out.Background, w.tok)
	w.p.drop(w.p.pending[out.Handle])
	w.grant(out.Background.Handle, a)
}

// The first revalidation is gated and asks for a lease in the background
// (want MinCalls, no reports); while it is out no second one is asked;
// once granted, revalidations are answered by the edge, each counting one
// use, until its calls are spent; then the gate again.
func TestLeaseAskedThenServes(t *testing.T) {
	w := newLeaseWorld(t)
	first := w.acme()
	if !gated304(first) {
		t.Fatalf("got %+v, want the gate", first)
	}
	r := w.leaseRequest(first.Background, w.tok)
	if r.Want != lease.MinCalls || len(r.Reports) != 0 {
		t.Errorf("first lease request %+v, want %d calls and no reports", r, lease.MinCalls)
	}
	second := w.acme()
	if !gated304(second) || second.Background.Handle != 0 {
		t.Errorf("while the request is out: got %+v, want the gate alone", second)
	}
	w.grant(first.Background.Handle, acmeLease("L1", 8))
	for i := int64(1); i <= 8; i++ {
		out := w.acme()
		if !leased304(out) || out.Lease != (LeaseUse{"L1", i}) {
			t.Fatalf("use %d: got %+v, want a leased 304", i, out)
		}
		if i == 4 {
			// Half its calls: renewal, asked in the background. Four uses
			// in no time are measured over a tenth of the validity: 40 a
			// validity, twice that asked.
			if got := w.leaseRequest(out.Background, w.tok); got.Want != 80 {
				t.Errorf("renewal want %d, want 80", got.Want)
			}
		} else if out.Background.Handle != 0 {
			t.Errorf("use %d asks %+v", i, out.Background)
		}
	}
	if out := w.acme(); !gated304(out) {
		t.Errorf("calls spent: got %+v, want the gate", out)
	}
}

// A leased 304 is, to the client, the gated 304: the same status and
// header fields, RateLimit's r an upper bound (what was left at the grant
// less the uses since), t the seconds to the reset.
func TestLease304Parity(t *testing.T) {
	w := newLeaseWorld(t)
	tag := candidateTag("00ff")
	g := w.acme()
	w.leaseRequest(g.Background, w.tok)
	w.now += 500 // the lease counts from here
	w.grant(g.Background.Handle, acmeLease("L1", 64))
	ratelimit := func(r int64) string {
		return `"calls-month";r=` + strconv.FormatInt(r, 10) + `;t=` + strconv.FormatInt(reset-(w.now/1000), 10)
	}
	gatedOut := w.p.Resume(ResumeMsg{Handle: g.Handle, Status: 204, Now: w.now, Headers: []Header{
		{"Cache-Control", "private"}, {"Date", "Sun, 01 Nov 2026 12:00:01 GMT"}, {"Etag", tag},
		{"Ratelimit", ratelimit(39)}, {"Ratelimit-Policy", `"calls-month";q=100;w=2592000`},
		{"Vary", "Authorization, Accept-Encoding"}, {"X-Lectern-Grants", "00ff"}, {"X-Lectern-Org", "acme"},
		{"X-Request-Id", rid}, {"X-Service-Content-Version", version},
	}})
	leasedOut := w.acme()
	if gatedOut.Status != 304 || !leased304(leasedOut) {
		t.Fatalf("gated %+v, leased %+v", gatedOut, leasedOut)
	}
	if !reflect.DeepEqual(gatedOut.Headers, leasedOut.Headers) || leasedOut.Body != nil {
		t.Errorf("leased 304 headers:\n got %v\nwant %v (the gated 304's)", leasedOut.Headers, gatedOut.Headers)
	}
	// The t of the reset, rounded up, from a time within a second.
	w.now += 1
	out := w.acme()
	if got, want := headerMap(t, out.Headers)["Ratelimit"], `"calls-month";r=38;t=`+strconv.FormatInt(reset-(w.now/1000), 10); got != want {
		t.Errorf("Ratelimit %q, want %q", got, want)
	}
	// Remaining never goes below 0.
	w.p.ls.orgs[orgKey{id: "acme"}].cur.used = 50
	if got := headerMap(t, w.acme().Headers)["Ratelimit"]; !strings.HasPrefix(got, `"calls-month";r=0;t=`) {
		t.Errorf("Ratelimit past the remaining: %q", got)
	}
}

// A lease serves while now < sentAt + validMs, on the now of the
// messages; at that instant it is gated again and asks anew, and its
// usage is reported final.
func TestLeaseExpires(t *testing.T) {
	w := newLeaseWorld(t)
	sentAt := w.now
	w.leaseUp(acmeLease("L1", 64))
	w.now = sentAt + 4999
	out := w.acme()
	if !leased304(out) {
		t.Fatalf("before expiry: got %+v", out)
	}
	// Past half its validity it is renewed; the renewal fails here, and
	// the lease still serves until it expires.
	w.leaseRequest(out.Background, w.tok)
	w.answer(out.Background.Handle, 0)
	w.now = sentAt + 5000
	out = w.acme()
	if !gated304(out) {
		t.Fatalf("at expiry: got %+v, want the gate", out)
	}
	if out.Background.Handle != 0 {
		t.Errorf("within the backoff of the failed renewal: asked %+v", out.Background)
	}
	w.now += minRetry
	out = w.acme()
	if !gated304(out) {
		t.Fatalf("after the backoff: got %+v, want the gate", out)
	}
	r := w.leaseRequest(out.Background, w.tok)
	if want := []lease.Report{{Lease: "L1", Used: 1, Final: true}}; !reflect.DeepEqual(r.Reports, want) {
		t.Errorf("reports %+v, want %+v", r.Reports, want)
	}
	if r.Want != lease.Size(1) {
		t.Errorf("want %d, want the size after one use (%d)", r.Want, lease.Size(1))
	}
	// Acknowledged final, the expired lease is forgotten.
	w.grant(out.Background.Handle, lease.Answer{RetryMs: 1000})
	if len(w.p.ls.held) != 0 {
		t.Errorf("held %d leases after the final report's acknowledgement", len(w.p.ls.held))
	}
}

// A lease serves only while the orgs-cache entry's org, version and
// grants are the lease's: new grants learnt from the origin, or a new
// content version, gate again (and ask for a lease on the new state).
func TestLeaseNeedsTheSameState(t *testing.T) {
	w := newLeaseWorld(t)
	w.leaseUp(acmeLease("L1", 64))
	if !leased304(w.acme()) {
		t.Fatal("no leased 304")
	}
	learnOrg(t, w.p, w.tok, "0f0f", version)
	out := w.cond(w.tok, "0f0f", "acme")
	if !gated304(out) || out.Background.Handle != 0 {
		// The cache may be ahead of the lease for a moment: asked again
		// no sooner than minRetry after it was.
		t.Fatalf("new grants: got %+v, want the gate alone", out)
	}
	w.now += minRetry
	out = w.cond(w.tok, "0f0f", "acme")
	if !gated304(out) {
		t.Fatalf("new grants: got %+v, want the gate", out)
	}
	w.leaseRequest(out.Background, w.tok)
	learnOrg(t, w.p, w.tok, "00ff", version) // back to the lease's grants
	if !leased304(w.acme()) {
		t.Error("the lease's state again: no leased 304")
	}
	stale := acmeLease("L2", 64)
	stale.ContentVersion = "2026-10-01+000000000000"
	w.grant(out.Background.Handle, stale)
	if out := w.acme(); !gated304(out) {
		t.Errorf("a lease of another version: got %+v, want the gate", out)
	}
}

// A lease of one organisation never serves another's revalidation, even
// one whose tag matches: the lease is the organisation's, by its key.
func TestLeaseOneOrgOnly(t *testing.T) {
	w := newLeaseWorld(t)
	w.leaseUp(acmeLease("L1", 64))
	beta := "Bearer " + sign("k1", t0, claims{"org": "beta", "jti": "b"})
	out := w.p.Start(get("/v1/subjects", "", w.now, "Authorization", beta))
	w.p.Resume(ResumeMsg{Handle: out.Handle, Status: 200, Now: w.now, Headers: []Header{
		{"X-Lectern-Org", "beta"}, {"X-Lectern-Grants", "00ff"}, {"X-Service-Content-Version", version}}})
	out = w.cond(beta, "00ff", "beta")
	if !gated304(out) {
		t.Fatalf("beta: got %+v, want the gate", out)
	}
	w.leaseRequest(out.Background, beta) // beta's own, with beta's token
	// A token of client c2 in acme's organisation has its own cache key
	// (the client's): acme's lease is not its.
	other := "Bearer " + sign("k1", t0, claims{"org": nil, "client_id": "c2", "jti": "c"})
	out = w.p.Start(get("/v1/subjects", "", w.now, "Authorization", other))
	w.p.Resume(ResumeMsg{Handle: out.Handle, Status: 200, Now: w.now, Headers: []Header{
		{"X-Lectern-Org", "acme"}, {"X-Lectern-Grants", "00ff"}, {"X-Service-Content-Version", version}}})
	if out := w.cond(other, "00ff", "acme"); !gated304(out) {
		t.Errorf("another key of the same org: got %+v, want the gate", out)
	}
	if out := w.acme(); !leased304(out) {
		t.Errorf("acme: got %+v, want a leased 304", out)
	}
}

// A renewal's lease replaces the current one, which is retired: its next
// report is final, and it serves no more.
func TestLeaseRenewal(t *testing.T) {
	w := newLeaseWorld(t)
	w.leaseUp(acmeLease("L1", 8))
	var renew Background
	for range 4 {
		if out := w.acme(); out.Background.Handle != 0 {
			renew = out.Background
		}
	}
	w.leaseRequest(renew, w.tok)
	w.grant(renew.Handle, acmeLease("L2", 16))
	out := w.acme()
	if !leased304(out) || out.Lease != (LeaseUse{"L2", 1}) {
		t.Fatalf("after the renewal: got %+v, want L2's first use", out)
	}
	bg, ok := w.p.usageCall(w.now)
	if !ok {
		t.Fatal("nothing to report")
	}
	want := []lease.Report{{Lease: "L1", Used: 4, Final: true}, {Lease: "L2", Used: 1}}
	if got := w.usageCall(bg); !reflect.DeepEqual(got, want) {
		t.Errorf("reports %+v, want %+v", got, want)
	}
	w.answer(bg.Handle, 204)
	if len(w.p.ls.held) != 1 || w.p.ls.held[0].id != "L2" {
		t.Errorf("held %v after L1's final acknowledgement, want L2 alone", w.p.ls.held)
	}
}

// Reports: ReportEvery unacknowledged uses attach a usage call; a failure
// acknowledges nothing (the next one carries the same usage, after a
// backoff); a 204 acknowledges what it carried, and only that.
func TestLeaseReportsAcknowledgedOnSuccess(t *testing.T) {
	w := newLeaseWorld(t)
	w.leaseUp(acmeLease("L1", 1024))
	var bg Background
	for i := 1; i <= lease.ReportEvery; i++ {
		out := w.acme()
		if i < lease.ReportEvery && out.Background.Handle != 0 {
			t.Fatalf("use %d: background %+v before ReportEvery", i, out.Background)
		}
		bg = out.Background
	}
	if got := w.usageCall(bg); !reflect.DeepEqual(got, []lease.Report{{Lease: "L1", Used: 16}}) {
		t.Errorf("report %+v", got)
	}
	if out := w.acme(); out.Background.Handle != 0 {
		t.Errorf("a second usage call while one is out: %+v", out.Background)
	}
	w.answer(bg.Handle, 500)
	if l := w.p.ls.held[0]; l.acked != 0 {
		t.Fatalf("a 500 acknowledged %d", l.acked)
	}
	if out := w.acme(); out.Background.Handle != 0 {
		t.Errorf("within the backoff: %+v", out.Background)
	}
	w.now += minRetry
	bg = w.acme().Background
	if got := w.usageCall(bg); !reflect.DeepEqual(got, []lease.Report{{Lease: "L1", Used: 19}}) {
		t.Errorf("report after the failure %+v", got)
	}
	w.acme() // a use after the report was sent
	w.answer(bg.Handle, 204)
	if l := w.p.ls.held[0]; l.acked != 19 || l.used != 20 || !l.pendingReport() {
		t.Errorf("after the 204: acked %d used %d", l.acked, l.used)
	}
	// The use after it is reported at ReportInterval, on any request's
	// output (here a 404's).
	w.now += reportInterval - 1
	if out := w.p.Start(get("/v1/nope", "", w.now)); out.Background.Handle != 0 {
		t.Errorf("before ReportInterval: %+v", out.Background)
	}
	w.now += leaseSweepEvery + 1
	out := w.p.Start(get("/v1/nope", "", w.now))
	if got := w.usageCall(out.Background); !reflect.DeepEqual(got, []lease.Report{{Lease: "L1", Used: 20}}) {
		t.Errorf("interval report %+v", got)
	}
}

// X-Lectern-Usage rides on forwards and gate calls while usage is
// unacknowledged, and acknowledges nothing.
func TestLeaseUsageHeader(t *testing.T) {
	w := newLeaseWorld(t)
	fwd := w.p.Start(get("/v1/subjects", "", w.now, "Authorization", w.tok))
	if _, ok := headerMap(t, fwd.Headers)[lease.UsageHeader]; ok {
		t.Error("a usage header with nothing to report")
	}
	w.leaseUp(acmeLease("L1", 8))
	w.acme()
	w.acme()
	fwd = w.p.Start(get("/v1/subjects", "", w.now, "Authorization", w.tok))
	if got := headerMap(t, fwd.Headers)[lease.UsageHeader]; got != "L1=2" {
		t.Errorf("forward's usage header %q, want L1=2", got)
	}
	// Spent, it gates: the gate call says so too.
	for range 6 {
		w.acme()
	}
	g := w.acme()
	if got := headerMap(t, g.Headers)[lease.UsageHeader]; !gated304(g) || got != "L1=8" {
		t.Errorf("gate call's usage header %q, want L1=8", got)
	}
	if l := w.p.ls.held[0]; l.acked != 0 {
		t.Errorf("the header acknowledged %d", l.acked)
	}
}

// A lease request carries the unacknowledged reports, and its 200 (lease
// or not) acknowledges them; a failed one does not.
func TestLeaseRequestCarriesReports(t *testing.T) {
	w := newLeaseWorld(t)
	w.leaseUp(acmeLease("L1", 8))
	var renew Background
	for range 4 {
		if out := w.acme(); out.Background.Handle != 0 {
			renew = out.Background
		}
	}
	if r := w.leaseRequest(renew, w.tok); !reflect.DeepEqual(r.Reports, []lease.Report{{Lease: "L1", Used: 4}}) {
		t.Fatalf("renewal's reports %+v", r.Reports)
	}
	w.answer(renew.Handle, 401)
	if l := w.p.ls.held[0]; l.acked != 0 {
		t.Fatalf("a 401 acknowledged %d", l.acked)
	}
	w.now += minRetry
	renew = w.acme().Background
	if r := w.leaseRequest(renew, w.tok); !reflect.DeepEqual(r.Reports, []lease.Report{{Lease: "L1", Used: 5}}) {
		t.Fatalf("renewal's reports %+v", r.Reports)
	}
	// No lease (calls 0): the reports are acknowledged, the current lease
	// retired, and no lease is asked for before retryMs.
	w.grant(renew.Handle, lease.Answer{RetryMs: 3000})
	if l := w.p.ls.held[0]; l.acked != 5 || !l.final {
		t.Errorf("after a 200 without lease: acked %d final %v", l.acked, l.final)
	}
	out := w.acme()
	if !gated304(out) || out.Background.Handle != 0 {
		t.Errorf("after no lease: got %+v, want the gate and no request", out)
	}
	w.now += 3000
	if out := w.acme(); out.Background.Handle == 0 {
		t.Error("after retryMs: no lease request")
	} else if r := w.leaseRequest(out.Background, w.tok); !reflect.DeepEqual(r.Reports, []lease.Report{{Lease: "L1", Used: 5, Final: true}}) {
		t.Errorf("reports %+v, want L1's final", r.Reports)
	}
}

// control revoke: the named leases stop serving at once and are answered
// with final reports; keep only reports; a lease not held is left out,
// and its grant arriving later is refused; a malformed body is 400.
func TestLeaseRevoke(t *testing.T) {
	w := newLeaseWorld(t)
	w.leaseUp(acmeLease("L1", 64))
	w.acme()
	w.acme()
	control := func(body string) wireOutput {
		msg := fmt.Sprintf(`{"op":"revoke","now":%d,"body":%s}`, w.now, strconv.Quote(body))
		return decodeOut(t, w.p.HandleControl([]byte(msg)))
	}
	out := control(`{"leases":["L1","L9"],"keep":true}`)
	if out.Kind != "done" || out.Handle != 0 || out.Body == nil || *out.Body != `{"reports":[{"lease":"L1","used":2}]}` {
		t.Errorf("keep: got %+v", out)
	}
	if !leased304(w.acme()) {
		t.Fatal("a kept lease stopped serving")
	}
	out = control(`{"leases":["L1","L9"],"keep":false}`)
	if out.Kind != "done" || out.Body == nil || *out.Body != `{"reports":[{"lease":"L1","used":3,"final":true}]}` {
		t.Errorf("revoke: got %+v", out)
	}
	g := w.acme()
	if !gated304(g) {
		t.Fatalf("after the revoke: got %+v, want the gate", g)
	}
	// L1's final report stays queued until a usage call acknowledges it.
	bg, ok := w.p.usageCall(w.now)
	if !ok || !reflect.DeepEqual(w.usageCall(bg), []lease.Report{{Lease: "L1", Used: 3, Final: true}}) {
		t.Fatalf("after the revoke: usage %v %+v", ok, bg)
	}
	w.answer(bg.Handle, 204)
	if len(w.p.ls.held) != 0 {
		t.Errorf("%d leases held after L1's final acknowledgement", len(w.p.ls.held))
	}
	// The grant of L9, revoked before it arrived, is not taken.
	w.leaseRequest(g.Background, w.tok)
	w.grant(g.Background.Handle, acmeLease("L9", 64))
	if out := w.acme(); !gated304(out) {
		t.Errorf("a revoked lease's late grant serves: %+v", out)
	}
	for _, bad := range []string{`{"leases":"L1"}`, `{}`, `nope`, `{"leases":["bad id"]}`} {
		if out := control(bad); out.Kind != "response" || out.Status != 400 || out.Handle != 0 {
			t.Errorf("revoke %s: got %+v, want 400", bad, out)
		}
	}
	for _, bad := range []string{`{"op":"flush"}`, `{"op":"reboot","now":5}`, `{"op":`} {
		if out := decodeOut(t, w.p.HandleControl([]byte(bad))); out.Kind != "response" || out.Status != 500 {
			t.Errorf("control %s: got %+v, want 500", bad, out)
		}
	}
}

// control flush posts every unacknowledged report (expired leases'
// final), or answers done when there is none; its 204 acknowledges them.
func TestLeaseFlush(t *testing.T) {
	w := newLeaseWorld(t)
	flush := func() wireOutput {
		return decodeOut(t, w.p.HandleControl([]byte(fmt.Sprintf(`{"op":"flush","now":%d}`, w.now))))
	}
	if out := flush(); out.Kind != "done" || out.Handle != 0 {
		t.Errorf("nothing to flush: got %+v", out)
	}
	w.leaseUp(acmeLease("L1", 64))
	w.acme()
	w.now += 6000 // expired
	out := flush()
	if out.Kind != "subrequest" || out.Method != "POST" || out.URL != "http://origin.test"+lease.UsagePath || out.Body == nil {
		t.Fatalf("flush: got %+v", out)
	}
	if *out.Body != `{"reports":[{"lease":"L1","used":1,"final":true}]}` {
		t.Errorf("flush body %s", *out.Body)
	}
	w.answer(Handle(out.Handle), 503)
	if again := flush(); again.Kind != "subrequest" || *again.Body != *out.Body {
		t.Fatalf("after a failed flush: got %+v", again)
	} else {
		w.answer(Handle(again.Handle), 204)
	}
	if out := flush(); out.Kind != "done" || len(w.p.ls.held) != 0 {
		t.Errorf("after the acknowledgement: got %+v, %d held", out, len(w.p.ls.held))
	}
}

// Bounds: no lease is asked for when the table of held leases is full
// (the organisation is gated, always correct), and a call the host never
// answers is presumed lost after bgLost, so its organisation asks again.
func TestLeaseBounds(t *testing.T) {
	w := newLeaseWorld(t)
	for i := range MaxLeases {
		w.p.ls.held = append(w.p.ls.held, &heldLease{id: "F" + strconv.Itoa(i), final: true, used: 1, since: w.now})
	}
	if out := w.acme(); !gated304(out) || out.Background.Handle != 0 {
		t.Errorf("table full: got %+v, want the gate alone", out)
	}
	w.p.ls.held = nil
	out := w.acme()
	w.leaseRequest(out.Background, w.tok)
	lost := out.Background.Handle
	w.now += bgLost - 1
	if out := w.acme(); out.Background.Handle != 0 {
		t.Errorf("while the request may still be answered: %+v", out.Background)
	}
	w.now += 1 + leaseSweepEvery
	w.p.Start(get("/v1/nope", "", w.now)) // the sweep presumes it lost
	w.now += minRetry
	out = w.acme()
	if out.Background.Handle == 0 {
		t.Fatalf("after the loss: got %+v, want a new lease request", out.Background)
	}
	w.leaseRequest(out.Background, w.tok)
	// The lost one's late answer changes nothing.
	late := acmeLease("L7", 64)
	if out := w.p.Resume(ResumeMsg{Handle: lost, Status: 200, Body: lease.AppendAnswer(nil, &late), Now: w.now}); out.Kind != Response || out.Status != 500 {
		t.Errorf("late answer: got %+v", out)
	}
	if len(w.p.ls.held) != 0 {
		t.Errorf("a lost request's late grant was taken")
	}
}

// Leases off (the default): no lease is asked for, none serves, no usage
// header, flush and revoke find nothing: the edge of before leases.
func TestLeasesOff(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"origin":"http://origin.test","jwksUrl":"j","issuer":"i","audience":"a","secret":"s"}`))
	if err != nil || cfg.Leases || cfg.Revoke != "" {
		t.Fatalf("config without leases: %+v, %v", cfg, err)
	}
	p, _, out := gateSetup(t)
	if out.Background.Handle != 0 || p.ls.on {
		t.Errorf("leases off: background %+v", out.Background)
	}
	if got := string(p.HandleControl([]byte(`{"op":"flush","now":5}`))); got != `{"kind":"done","handle":0}` {
		t.Errorf("flush: %s", got)
	}
	if got := string(p.HandleControl([]byte(`{"op":"revoke","now":5,"body":"{\"leases\":[\"L1\"]}"}`))); got != `{"kind":"done","handle":0,"body":"{\"reports\":[]}"}` {
		t.Errorf("revoke: %s", got)
	}
}

// TestLease304Allocations holds a leased 304 (start through the JSON
// codec, answered by the edge) to no allocation, under both toolchains,
// as TestGate304Allocations does the gated one. Each run is measured
// alone: a single allocation in any of them fails.
func TestLease304Allocations(t *testing.T) {
	w := newLeaseWorld(t)
	w.leaseUp(acmeLease("L1", 1024))
	start := []byte(`{"method":"GET","path":"/v1/subjects/algebra","query":"tier=high&detail=full","headers":[["Host","127.0.0.1:8787"],["Authorization",` +
		strconv.Quote(w.tok) + `],["If-None-Match",` + strconv.Quote(candidateTag("00ff")) + `],["Accept-Encoding","gzip"]],"now":` + strconv.FormatInt(w.now, 10) + `}`)
	// Fewer than ReportEvery uses: no report is due, so each output is the
	// 304 alone (a background call is the host's work, not the 304's).
	for i := range lease.ReportEvery/2 - 1 {
		allocs := testing.AllocsPerRun(1, func() {
			if out := w.p.HandleStart(start); !bytes.Contains(out, []byte(`"status":304`)) || bytes.Contains(out, []byte(`"background"`)) {
				t.Fatalf("%s", out)
			}
		})
		if allocs > 0 {
			t.Errorf("run %d: %.0f allocations for a leased 304, want none", i, allocs)
		}
	}
}

func TestParseConfigLeases(t *testing.T) {
	base := `{"origin":"http://origin.test","jwksUrl":"j","issuer":"i","audience":"a","secret":"s"`
	cfg, err := ParseConfig([]byte(base + `,"leases":true,"revoke":"` + revokeURL + `"}`))
	if err != nil || !cfg.Leases || cfg.Revoke != revokeURL {
		t.Errorf("leases on: %+v, %v", cfg, err)
	}
	cfg, err = ParseConfig([]byte(base + `,"leases":false,"revoke":""}`))
	if err != nil || cfg.Leases || cfg.Revoke != "" {
		t.Errorf("leases off: %+v, %v", cfg, err)
	}
	for _, bad := range []string{`,"leases":"on"}`, `,"leases":1}`, `,"revoke":true}`, `,"revoke":"` + strings.Repeat("x", 2049) + `"}`} {
		if _, err := ParseConfig([]byte(base + bad)); err == nil {
			t.Errorf("config with %s accepted", bad)
		}
	}
}

// FuzzLeaseMessages: whatever the origin answers to a lease request and
// whatever control message the host sends, the module answers with an
// output message (never a panic), and a lease it took is one ParseAnswer
// accepts.
func FuzzLeaseMessages(f *testing.F) {
	good := acmeLease("L1", 8)
	f.Add(lease.AppendAnswer(nil, &good), []byte(`{"op":"revoke","now":1793534401000,"body":"{\"leases\":[\"L1\"],\"keep\":true}"}`))
	f.Add([]byte(`{"calls":0,"retryMs":5,"epoch":0,"validMs":0}`), []byte(`{"op":"flush","now":1793534401000}`))
	f.Add([]byte(`{"lease":"L1","org":"acme","calls":9999}`), []byte(`{"op":"revoke","now":1,"body":"{"}`))
	f.Fuzz(func(t *testing.T, answer, control []byte) {
		w := newLeaseWorld(t)
		out := w.acme()
		if out.Background.Handle == 0 {
			t.Fatal("no lease request")
		}
		msg := fmt.Appendf(nil, `{"handle":%d,"status":200,"body":%s,"now":%d}`, out.Background.Handle, strconv.Quote(string(answer)), w.now)
		// Each output is read before the next call, which reuses its buffer.
		decodeOutAny(t, w.p.HandleResume(msg))
		decodeOutAny(t, w.p.HandleStart(fmt.Appendf(nil, `{"method":"GET","path":"/v1/nope","now":%d}`, w.now)))
		decodeOutAny(t, w.p.HandleControl(control))
		if a, err := lease.ParseAnswer(answer); err != nil || a.Calls == 0 {
			if len(w.p.ls.held) != 0 {
				t.Errorf("a lease was taken from %q", answer)
			}
		}
	})
}

// decodeOutAny checks that b is an output message of a known kind.
func decodeOutAny(t *testing.T, b []byte) {
	t.Helper()
	o := decodeOut(t, b)
	switch o.Kind {
	case "response", "subrequest", "park", "done":
	default:
		t.Fatalf("output %s: unknown kind", b)
	}
}

// Uses that pile up while a report is out are reported as soon as it is
// answered, when ReportEvery or more are unacknowledged: the answer's own
// output carries the next report.
func TestLeaseReportAfterAnswer(t *testing.T) {
	w := newLeaseWorld(t)
	w.leaseUp(acmeLease("L1", 1024))
	var bg Background
	for range lease.ReportEvery {
		bg = w.acme().Background
	}
	w.usageCall(bg)
	for range lease.ReportEvery + 4 {
		if out := w.acme(); out.Background.Handle != 0 {
			t.Fatalf("a second report while one is out: %+v", out.Background)
		}
	}
	done := w.answer(bg.Handle, 204)
	if got := w.usageCall(done.Background); !reflect.DeepEqual(got, []lease.Report{{Lease: "L1", Used: 2*lease.ReportEvery + 4}}) {
		t.Errorf("next report %+v", got)
	}
}

// A settle (revoke with keep) that names a lease whose grant is still on
// its way: the origin closes a lease the edge leaves out, so the grant,
// arriving after, must never serve (else a suspension acknowledged later
// would not reach this edge: the origin no longer lists the lease).
func TestLeaseSettleRacesItsGrant(t *testing.T) {
	w := newLeaseWorld(t)
	g := w.acme() // gated, and asks for a lease
	if !gated304(g) || g.Background.Handle == 0 {
		t.Fatalf("first revalidation: got %+v, want the gate and a lease request", g)
	}
	w.leaseRequest(g.Background, w.tok)
	msg := fmt.Sprintf(`{"op":"revoke","now":%d,"body":%s}`, w.now, strconv.Quote(`{"leases":["L9"],"keep":true}`))
	if out := decodeOut(t, w.p.HandleControl([]byte(msg))); out.Kind != "done" || out.Body == nil || *out.Body != `{"reports":[]}` {
		t.Fatalf("settle: got %+v", out)
	}
	w.grant(g.Background.Handle, acmeLease("L9", 64))
	if out := w.acme(); !gated304(out) {
		t.Errorf("a lease settled before its grant arrived serves: %+v", out)
	}
}
