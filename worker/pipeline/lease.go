package pipeline

import (
	"strings"
	"time"

	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/shared/ratelimit"
	"github.com/lectern-api/lectern/shared/token"
)

// Leases (docs/edge.md, "Leases"; the wire contract is shared/lease). The
// origin grants this instance, per organisation, a short lease on the
// licence state and a block of calls reserved against its quotas; within
// it the edge answers a matching revalidation with 304 itself, without the
// gate call, and reports its cumulative usage. Everything the edge asks of
// the origin for leases travels as a background subrequest attached to
// whatever output is being made (Output.Background): no client request
// waits for it.

// Bounds on the lease state. A lease request is not sent when it could
// not be kept: the organisation is then gated, which is always correct.
const (
	MaxLeases    = 256  // leases held: in use, or retired with usage not yet acknowledged final
	MaxLeaseOrgs = 1024 // organisations with lease state (a lease, a request in flight, a backoff)
	maxRevoked   = 256  // ids revoked lately, whose late grant is refused
	// maxUsageInFlight bounds the usage calls out at once (background
	// reports and the host's flushes): one that hangs must not let a
	// flush every second pile up more.
	maxUsageInFlight = 4
)

// Times of the lease protocol, in ms.
const (
	minRetry = 1000 // the least wait before asking again for a lease, or retrying a failed report
	// leaseSweepEvery is how often the held leases are looked over
	// (expiry, reports due, calls presumed lost): reports are due at
	// ReportInterval, so a tenth of it is precise enough.
	leaseSweepEvery = int64(lease.ReportInterval/time.Millisecond) / 10
	reportInterval  = int64(lease.ReportInterval / time.Millisecond)
	// bgLost is when a background call the host never answered is
	// presumed lost, as a JWKS fetch is: its organisation may ask again,
	// and what it carried is reported again.
	bgLost = int64(token.DefaultInFlightTimeout / time.Millisecond)
	// minSpanPart: a lease's rate is measured over at least this part of
	// its validity (rateSize), so a burst of uses in a few ms asks for at
	// most ten times the lease's calls, not MaxCalls at once.
	minSpanPart = 10
)

// heldLease is a lease this instance holds: in use by its organisation,
// or retired (final) until its last usage is acknowledged.
type heldLease struct {
	id     string
	key    orgKey
	org    string // what the orgs-cache entry must say for the lease to serve
	ver    string
	grants string
	calls  int64
	sentAt int64 // the now of the call whose output asked for it: validity counts from there
	valid  int64 // ms
	// headers are the 304's fixed fields, with the names a gated 304's
	// carry (canonical, as the host reads the origin's); limits make its
	// RateLimit field.
	headers []Header
	limits  []lease.RateLimit

	used       int64 // 304s answered with it
	acked      int64 // the most usage the origin acknowledged
	final      bool  // retired: it serves no more, and its next report says so
	finalAcked bool  // the origin acknowledged a final report
	since      int64 // when the usage not yet acknowledged began; 0 when there is none
}

// pendingReport reports whether l has usage, or its finality, still to
// acknowledge.
func (l *heldLease) pendingReport() bool {
	return l.used > l.acked || l.final && !l.finalAcked
}

func (l *heldLease) report() lease.Report {
	return lease.Report{Lease: l.id, Used: l.used, Final: l.final}
}

// orgLease is an organisation's lease state, next to its orgs-cache entry
// and under the same key.
type orgLease struct {
	key      orgKey     // the map's own copy (a request's may point into its message)
	cur      *heldLease // the lease in use; nil when none
	asking   Handle     // its lease request in flight; 0 when none
	retryAt  int64      // no lease request before this (unix ms)
	lastSize int64      // what the lease last retired measured (rateSize), for the next request
	sizeEnd  int64      // when lastSize stops counting: a validity after that lease ended
}

type bgKind uint8

const (
	bgLease bgKind = iota + 1 // POST lease.Path
	bgUsage                   // POST lease.UsagePath (a background report or a flush)
)

// bgCall is a lease-protocol call out: what it was for and the reports it
// carried, which its success acknowledges.
type bgCall struct {
	kind    bgKind
	key     orgKey // a lease request's organisation
	sentAt  int64
	carried []lease.Report
}

// leaseState is the instance's lease state.
type leaseState struct {
	on        bool
	revokeURL string
	leaseURL  string
	usageURL  string
	// reportEvery is how many unacknowledged uses of a lease make a report
	// due; 0: none, reports go by ReportInterval only (Config.ReportEvery).
	reportEvery int64

	held    []*heldLease // oldest first: reports go in this order
	orgs    map[orgKey]*orgLease
	bg      map[Handle]*bgCall
	usageN  int   // usage calls in flight
	usageAt int64 // no background report before this (after a failed one)
	revoked fifo[string, struct{}]
	sweepAt int64
	due     bool // look the leases over in this call: a report may be due now

	reports []lease.Report // scratch for the usage header
	header  []byte         // the usage header's value, reused
}

func newLeaseState(cfg Config, origin string) leaseState {
	ls := leaseState{
		on:        cfg.Leases,
		revokeURL: cfg.Revoke,
		leaseURL:  origin + lease.Path,
		usageURL:  origin + lease.UsagePath,
		orgs:      map[orgKey]*orgLease{},
		bg:        map[Handle]*bgCall{},
		revoked:   newFIFO[string, struct{}](maxRevoked),
	}
	switch every := cfg.ReportEvery; {
	case every == 0:
		ls.reportEvery = lease.ReportEvery
	case every > 0:
		ls.reportEvery = every
	} // negative (ReportByInterval): 0, by interval only
	return ls
}

// LeaseUse is the lease a 304 was answered with (docs/edge.md: the host
// logs it before writing the response).
type LeaseUse struct {
	ID   string
	Used int64
}

// Background is a subrequest tied to no client request: the host performs
// it without holding anything up and resumes Handle with its answer.
type Background struct {
	Handle  Handle
	Method  string
	URL     string
	Headers []Header
	Body    []byte
	// Signatures, with several origins, are the call's X-Lectern-Edge
	// values, one per origin in Config.Origins' order (docs/edge.md).
	Signatures []string
}

// leased answers st, a request whose candidate tag matched, with its
// organisation's lease when one can serve it: 304 with the lease's fixed
// fields, the tag, the RateLimit left and the request id, the gated 304's
// fields but RateLimit's r. It allocates nothing.
func (p *Pipeline) leased(st *pending, tag string, now int64) (Output, bool) {
	if !p.ls.on {
		return Output{}, false
	}
	ol := p.ls.orgs[st.orgKey]
	if ol == nil || ol.cur == nil {
		return Output{}, false
	}
	l := ol.cur
	if now >= l.sentAt+l.valid {
		p.retire(ol, now)
		return Output{}, false
	}
	o, _ := p.orgs.get(st.orgKey)
	if l.used >= l.calls || o.org != l.org || o.version != l.ver || o.grants != l.grants {
		return Output{}, false
	}
	l.used++
	if l.since == 0 {
		l.since = now
	}
	if p.countDue(l) && p.ls.usageN == 0 && now >= p.ls.usageAt {
		p.ls.due = true // a report can go now: look the leases over in this call
	}
	h := append(p.leaseOut[:0], l.headers...)
	h = append(h, Header{"Etag", tag}, Header{"X-Request-Id", st.id})
	if len(l.limits) > 0 {
		h = append(h, Header{"Ratelimit", st.text.keep(appendRateLimit(st.text.free(), l, now))})
	}
	sortHeaders(h)
	p.leaseOut = h
	return Output{Kind: Response, Handle: st.handle, Status: 304, Headers: h, Lease: LeaseUse{ID: l.id, Used: l.used}}, true
}

// appendRateLimit appends the RateLimit field of l's next 304: for each
// capped meter, what was left at the grant less the calls answered with
// l since (an upper bound: other clients' calls are not in it), and the
// seconds to its reset, written as the origin writes them (shared/ratelimit).
func appendRateLimit(b []byte, l *heldLease, now int64) []byte {
	for i, r := range l.limits {
		if i > 0 {
			b = append(b, ", "...)
		}
		untilReset := time.Duration(r.Reset*1000-now) * time.Millisecond
		b = ratelimit.AppendState(b, r.Name, max(0, r.Remaining-l.used), ratelimit.Seconds(untilReset))
	}
	return b
}

// askLease is the background lease request st's run calls for, if any:
// its organisation has no lease that can serve it (or one due for renewal:
// half its calls or half its validity gone), none is being asked for, and
// its backoff has passed. It carries the client's Authorization and the
// reports not yet acknowledged.
func (p *Pipeline) askLease(st *pending, now int64) Background {
	if !p.ls.on || st.orgKey.id == "" {
		return Background{}
	}
	ol := p.ls.orgs[st.orgKey]
	if ol != nil && (ol.asking != 0 || now < ol.retryAt || ol.cur != nil && !p.renewalDue(st.orgKey, ol.cur, now)) {
		return Background{}
	}
	if ol == nil {
		if ol = p.newOrgLease(st.orgKey, now); ol == nil {
			return Background{}
		}
	}
	if len(p.ls.held)+p.asking() >= MaxLeases {
		return Background{}
	}
	want := int64(lease.MinCalls) // the first, or after a quiet spell
	switch {
	case ol.cur != nil:
		want = rateSize(ol.cur, now)
	case now < ol.sizeEnd:
		want = ol.lastSize
	}
	carried := p.unacked(nil)
	body := lease.AppendRequest(nil, &lease.Request{Want: want, Revoke: p.ls.revokeURL, Reports: carried})
	h := p.newHandle()
	id := p.requestID("", nil)
	p.ls.bg[h] = &bgCall{kind: bgLease, key: ol.key, sentAt: now, carried: carried}
	ol.asking = h
	auth := headerValue(st.req.Headers, "Authorization")
	m := edgesig.Message{Purpose: edgesig.Lease, Method: "POST", Target: lease.Path,
		Body: edgesig.BodyHash(body), Auth: auth, RequestID: id}
	sig, all := p.signAll(&m, now)
	return Background{Handle: h, Method: "POST", URL: p.ls.leaseURL, Body: body, Signatures: all, Headers: []Header{
		{"Authorization", auth},
		{"Content-Type", "application/json"},
		{"X-Request-Id", id},
		{edgesig.Header, sig},
	}}
}

// renewalDue reports whether l, the organisation's lease, is to be
// renewed: half its calls or half its validity are gone, or it cannot
// serve (spent, or for another state of the organisation than the
// cache's). A lease for another state is asked again no sooner than
// minRetry after it was: the cache may lag behind the origin for a
// moment, and each lease asked reserves calls.
func (p *Pipeline) renewalDue(key orgKey, l *heldLease, now int64) bool {
	if 2*l.used >= l.calls || now >= l.sentAt+l.valid/2 {
		return true
	}
	o, _ := p.orgs.get(key)
	return (o.org != l.org || o.version != l.ver || o.grants != l.grants) && now >= l.sentAt+minRetry
}

// rateSize is the block to ask for after l, by its rate: the uses of the
// time since it was asked (at most its validity, at least a tenth of it:
// minSpanPart), projected over a validity and doubled by lease.Size. A
// renewal comes at half the calls or half the validity, so a busy
// organisation's leases grow up to tenfold a renewal (8, 80, 800, 1024),
// a quiet one's stay at MinCalls, and they shrink at the first renewal
// after the rate drops.
func rateSize(l *heldLease, now int64) int64 {
	span := min(now-l.sentAt, l.valid)
	span = max(span, l.valid/minSpanPart, 1)
	return lease.Size(l.used * l.valid / span)
}

// newOrgLease makes key's lease state, after forgetting idle ones when
// the table is full; nil when it stays full.
func (p *Pipeline) newOrgLease(key orgKey, now int64) *orgLease {
	if len(p.ls.orgs) >= MaxLeaseOrgs {
		p.forgetIdle(now)
		if len(p.ls.orgs) >= MaxLeaseOrgs {
			return nil
		}
	}
	key.id = strings.Clone(key.id)
	ol := &orgLease{key: key}
	p.ls.orgs[key] = ol
	return ol
}

// forgetIdle drops the lease state of organisations with no lease, no
// request in flight and no backoff.
func (p *Pipeline) forgetIdle(now int64) {
	for k, ol := range p.ls.orgs {
		if ol.cur == nil && ol.asking == 0 && now >= ol.retryAt {
			delete(p.ls.orgs, k)
		}
	}
}

func (p *Pipeline) asking() int {
	n := 0
	for _, c := range p.ls.bg {
		if c.kind == bgLease {
			n++
		}
	}
	return n
}

// retire ends ol's current lease: it serves no more, and its next report
// is final.
func (p *Pipeline) retire(ol *orgLease, now int64) {
	l := ol.cur
	end := min(now, l.sentAt+l.valid) // an expired lease is retired when next looked at
	ol.cur, ol.lastSize, ol.sizeEnd = nil, rateSize(l, end), end+l.valid
	l.final = true
	if l.since == 0 {
		l.since = now
	}
}

// unacked appends to dst the reports not yet acknowledged, oldest lease
// first, at most lease.MaxReports.
func (p *Pipeline) unacked(dst []lease.Report) []lease.Report {
	for _, l := range p.ls.held {
		if len(dst) == lease.MaxReports {
			break
		}
		if l.pendingReport() {
			dst = append(dst, l.report())
		}
	}
	return dst
}

// usageHeader is the X-Lectern-Usage value for a forward or gate call:
// the reports not yet acknowledged, or "" when there are none. It is best
// effort: the origin applies it, but the edge counts nothing acknowledged
// by it. The value lives until the next call.
func (p *Pipeline) usageHeader() string {
	if !p.ls.on || len(p.ls.held) == 0 {
		return ""
	}
	p.ls.reports = p.unacked(p.ls.reports[:0])
	if len(p.ls.reports) == 0 {
		return ""
	}
	p.ls.header = lease.AppendHeader(p.ls.header[:0], p.ls.reports)
	return view(p.ls.header)
}

// usageCall is a POST of every report not yet acknowledged, under a new
// handle; ok is false when there is none or too many are out.
func (p *Pipeline) usageCall(now int64) (Background, bool) {
	if p.ls.usageN >= maxUsageInFlight {
		return Background{}, false
	}
	carried := p.unacked(nil)
	if len(carried) == 0 {
		return Background{}, false
	}
	h := p.newHandle()
	id := p.requestID("", nil)
	p.ls.bg[h] = &bgCall{kind: bgUsage, sentAt: now, carried: carried}
	p.ls.usageN++
	body := lease.AppendReports(nil, carried)
	m := edgesig.Message{Purpose: edgesig.Usage, Method: "POST", Target: lease.UsagePath, Body: edgesig.BodyHash(body), RequestID: id}
	sig, all := p.signAll(&m, now)
	return Background{Handle: h, Method: "POST", URL: p.ls.usageURL, Body: body, Signatures: all, Headers: []Header{
		{"Content-Type", "application/json"},
		{"X-Request-Id", id},
		{edgesig.Header, sig},
	}}, true
}

// sweepLeases looks the held leases over: it retires expired ones,
// forgets those whose final usage is acknowledged, presumes lost the calls
// the host never answered, and returns a background report when one is
// due (a lease with Config.ReportEvery uses unacknowledged, or usage older
// than ReportInterval) and none is out.
func (p *Pipeline) sweepLeases(now int64) Background {
	p.ls.sweepAt, p.ls.due = now+leaseSweepEvery, false
	for h, c := range p.ls.bg {
		if now-c.sentAt < bgLost {
			continue
		}
		p.callFailed(c, now) // before the delete, as in backgroundDone
		delete(p.ls.bg, h)
	}
	for _, ol := range p.ls.orgs {
		if l := ol.cur; l != nil && now >= l.sentAt+l.valid {
			p.retire(ol, now)
		}
	}
	p.forgetDone()
	due := false
	for _, l := range p.ls.held {
		if l.pendingReport() && (p.countDue(l) || now-l.since >= reportInterval) {
			due = true
			break
		}
	}
	if !due || p.ls.usageN > 0 || now < p.ls.usageAt {
		return Background{}
	}
	bg, _ := p.usageCall(now)
	return bg
}

// countDue reports whether l has enough unacknowledged uses for a report
// (Config.ReportEvery); never when reports go by interval only.
func (p *Pipeline) countDue(l *heldLease) bool {
	return p.ls.reportEvery > 0 && l.used-l.acked >= p.ls.reportEvery
}

// forgetDone drops the retired leases whose final usage is acknowledged.
func (p *Pipeline) forgetDone() {
	kept := p.ls.held[:0]
	for _, l := range p.ls.held {
		if !(l.final && l.finalAcked && l.acked >= l.used) {
			kept = append(kept, l)
		}
	}
	clear(p.ls.held[len(kept):])
	p.ls.held = kept
}

// callFailed records a lease-protocol call that got no success: nothing
// it carried is acknowledged, and its kind waits before the next try.
func (p *Pipeline) callFailed(c *bgCall, now int64) {
	switch c.kind {
	case bgUsage:
		p.ls.usageN--
		p.ls.usageAt = now + minRetry
	case bgLease:
		if ol := p.ls.orgs[c.key]; ol != nil {
			ol.asking = 0
			ol.retryAt = now + minRetry
		}
	}
}

// backgroundDone reads the answer to a lease-protocol call: a 204 to a
// report, a 200 to a lease request acknowledge what they carried, and a
// lease answer replaces the organisation's lease. The output is done.
//
// c leaves ls.bg only once it is read: until then the map keeps it
// reachable. Under TinyGo a pointer held only by the running function
// is not always seen by the collector, and reading the answer allocates:
// c, dropped from the map first, was collected and its memory reused
// while it was still read (garbage orgKey in its map lookup, or an
// organisation left asking for a call no longer out).
func (p *Pipeline) backgroundDone(c *bgCall, in ResumeMsg) Output {
	defer delete(p.ls.bg, in.Handle)
	now := in.Now
	switch {
	case c.kind == bgUsage && in.Status == 204:
		p.ls.usageN--
		p.ack(c)
	case c.kind == bgLease && in.Status == 200:
		a, err := lease.ParseAnswer(in.Body)
		if err != nil {
			p.callFailed(c, now)
			break
		}
		p.ack(c)
		p.granted(c, a, now)
	default:
		p.callFailed(c, now)
	}
	p.forgetDone()
	p.ls.due = true // what is left unacknowledged may be due at once
	return Output{Kind: Done, Handle: in.Handle}
}

// ack applies the acknowledgement of the reports c carried.
func (p *Pipeline) ack(c *bgCall) {
	for _, r := range c.carried {
		l := p.heldByID(r.Lease)
		if l == nil {
			continue
		}
		l.acked = max(l.acked, r.Used)
		if r.Final {
			l.finalAcked = true
		}
		if !l.pendingReport() {
			l.since = 0
		} else if l.since < c.sentAt {
			// What is left began after the call was sent.
			l.since = c.sentAt
		}
	}
}

// granted takes a lease answer for c's organisation: a lease replaces the
// current one, which is retired; no lease (calls 0) retires the current
// one too (the origin says the organisation is not to be leased now) and
// waits max(retryMs, 1 s). A lease revoked before its grant arrived, or
// one already held, is not taken.
func (p *Pipeline) granted(c *bgCall, a lease.Answer, now int64) {
	ol := p.ls.orgs[c.key]
	if ol == nil {
		return
	}
	ol.asking = 0
	if a.Calls == 0 {
		if ol.cur != nil {
			p.retire(ol, now)
		}
		ol.retryAt = now + max(a.RetryMs, minRetry)
		return
	}
	if _, gone := p.ls.revoked.m[a.Lease]; gone || p.heldByID(a.Lease) != nil || len(p.ls.held) >= MaxLeases {
		ol.retryAt = now + minRetry
		return
	}
	if ol.cur != nil {
		p.retire(ol, now)
	}
	l := &heldLease{id: a.Lease, key: c.key, org: a.Org, ver: a.ContentVersion, grants: a.Grants,
		calls: a.Calls, sentAt: c.sentAt, valid: a.ValidMs, headers: leaseHeaders(a.Headers), limits: a.RateLimits}
	ol.cur = l
	p.ls.held = append(p.ls.held, l)
}

// leaseHeaders are a lease's fixed 304 fields as a gated 304 would show
// them: canonical names (the host reads the origin's 204 through
// net/http), and none of the fields the edge sets per request or never
// shows a client.
func leaseHeaders(in [][2]string) []Header {
	h := make([]Header, 0, len(in))
	for _, kv := range in {
		name := canonicalName(kv[0])
		switch {
		case internal(name), hopByHop(name, nil), name == "Etag", name == "Ratelimit", name == "X-Request-Id",
			name == "Content-Length", name == "Date":
			continue
		}
		h = append(h, Header{name, kv[1]})
	}
	return h
}

// canonicalName is name as net/http's CanonicalHeaderKey writes it.
func canonicalName(name string) string {
	b := []byte(name)
	upper := true
	for i, c := range b {
		switch {
		case upper && 'a' <= c && c <= 'z':
			b[i] = c - ('a' - 'A')
		case !upper && 'A' <= c && c <= 'Z':
			b[i] = c + ('a' - 'A')
		}
		upper = c == '-'
	}
	return string(b)
}

func (p *Pipeline) heldByID(id string) *heldLease {
	for _, l := range p.ls.held {
		if l.id == id {
			return l
		}
	}
	return nil
}

// revokeLeases drops the named leases (or, with keep, only reports them)
// and returns their reports: final for a dropped one, its current usage
// for a kept one. A lease not held is left out; its id is remembered all
// the same, so that a grant of it still on its way is refused. After it
// no dropped lease answers a 304. A dropped lease's final report stays
// queued until a usage or lease call acknowledges it: the origin may not
// have received this answer (it then waits for the lease's expiry), and a
// report repeated changes nothing (reports are cumulative).
func (p *Pipeline) revokeLeases(r lease.Revoke, now int64) []lease.Report {
	out := []lease.Report{}
	for _, id := range r.Leases {
		l := p.heldByID(id)
		if l == nil {
			// Not held, kept or not: the origin closes it at what was
			// reported, so its grant, if still on its way, must never
			// serve (a settle push can race a renewal).
			p.ls.revoked.set(strings.Clone(id), struct{}{})
			continue
		}
		if r.Keep {
			out = append(out, lease.Report{Lease: id, Used: l.used})
			continue
		}
		p.ls.revoked.set(strings.Clone(id), struct{}{})
		if ol := p.ls.orgs[l.key]; ol != nil && ol.cur == l {
			p.retire(ol, now)
		}
		l.final = true
		if l.since == 0 {
			l.since = now
		}
		out = append(out, l.report())
	}
	return out
}

// ControlMsg is a message of the host's own (docs/edge.md, control):
// flush the reports, or revoke leases.
type ControlMsg struct {
	Op   string // "flush" or "revoke"
	Now  int64
	Body []byte // revoke: a lease.Revoke
}

// Control runs a host's control message. flush answers a subrequest
// posting every report not yet acknowledged (resume its handle with the
// answer), or done with handle 0 when there is none; revoke answers done
// with the reports as its body, or 400 for a malformed revoke.
func (p *Pipeline) Control(c ControlMsg) Output {
	if c.Now <= 0 {
		return p.internal(0, p.requestID("", nil), "The edge received a control message without a clock reading.")
	}
	switch c.Op {
	case "flush":
		if !p.ls.on {
			return Output{Kind: Done}
		}
		p.sweepLeases(c.Now) // retires the expired, whose reports are then final
		bg, ok := p.usageCall(c.Now)
		if !ok {
			return Output{Kind: Done}
		}
		return Output{Kind: Subrequest, Handle: bg.Handle, Method: bg.Method, URL: bg.URL, Headers: bg.Headers, Body: bg.Body, Signatures: bg.Signatures}
	case "revoke":
		r, err := lease.ParseRevoke(c.Body)
		if err != nil {
			return p.errorResponse(0, p.requestID("", nil), apierr.New(apierr.BadRequest, "The revoke body is malformed: "+err.Error()+"."))
		}
		return Output{Kind: Done, Body: lease.AppendReports(nil, p.revokeLeases(r, c.Now))}
	}
	return p.internal(0, p.requestID("", nil), "The edge received a control message of an unknown op.")
}
