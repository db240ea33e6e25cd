package pipeline

import (
	"crypto/rand"
	"encoding/binary"
	"io"
	"strings"
	"time"
	"unsafe"

	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/etag"
	"github.com/lectern-api/lectern/shared/front"
	"github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/shared/link"
	"github.com/lectern-api/lectern/shared/reqid"
	"github.com/lectern-api/lectern/shared/token"
)

// Bounds on what the pipeline holds. Every one is far above what a real
// request needs; they keep a broken or hostile host or client from
// costing more than a fixed amount of memory.
const (
	MaxPending      = 4096     // requests waiting on a subrequest
	MaxPendingBytes = 32 << 20 // their retained headers, in bytes
	maxRounds       = 3        // JWKS waits (fetch or park) of one request
)

// protectedResource is the one path outside /v1 that the origin answers
// (RFC 9728 metadata); the edge forwards it untouched.
const protectedResource = "/.well-known/oauth-protected-resource"

// Config configures a Pipeline (docs/edge.md, configure).
type Config struct {
	Origin string // the origin's base URL, e.g. http://127.0.0.1:8080
	// Origins are every origin's base URL, Origin first, when the host
	// spreads subrequests over several (docs/edge.md, Several origins):
	// each call to the origin is then signed once for each of them.
	Origins          []string
	JWKSURL          string // the identity provider's JWKS
	Issuer           string // iss every token must carry
	Audience         string // aud every token must hold
	Secret           string // LECTERN_SECRET; only its edge subkey is kept
	ResourceMetadata string // URL named in every 401 challenge
	// URLKeys check the signed download links (LECTERN_URL_KEYS); the
	// zero Keys stands for the key derived from Secret (link.Derived).
	URLKeys link.Keys
	// SecretAccept is LECTERN_SECRET_ACCEPT, the secret accepted beside
	// Secret while it is rotated: the links of the key derived from it
	// verify (URLKeys); nothing is signed with it.
	SecretAccept string
	// Leases turns the edge's leases on (docs/edge.md, "Leases"): off,
	// every matching revalidation costs a gate call, as before leases.
	Leases bool
	// Revoke is the URL where the host takes the origin's revoke push,
	// sent with every lease request; "" when it can take none.
	Revoke string
	// ReportEvery is how many unacknowledged uses of a lease make a usage
	// report due, besides its oldest being lease.ReportInterval old: 0
	// is lease.ReportEvery (the bound of a host that keeps no usage log),
	// ReportByInterval reports by interval only (a host with a usage log,
	// whose log holds what is unreported: a report per ReportEvery uses
	// would only cost the origin).
	ReportEvery int64
	// SignV2 signs by the previous release's rule (edgesig v2), which
	// leaves If-None-Match and the other answer-changing fields unsigned:
	// only for an edge upgraded while origins of that release still run
	// (docs/upgrading.md). Off, the v3 rule.
	SignV2 bool
	// Random, when set, replaces crypto/rand as the source of request
	// ids. Tests use it; the reactor leaves it nil (WASI random_get backs
	// crypto/rand in both toolchains).
	Random io.Reader
}

// ReportByInterval is Config.ReportEvery for reports by
// lease.ReportInterval only (configure "reportEvery": 0).
const ReportByInterval = -1

// Pipeline is one edge instance's state: the JWKS, the verified-token
// cache, the per-organisation ETag inputs and the requests in flight.
type Pipeline struct {
	origin           string
	jwksURL          string
	resourceMetadata string
	signer           *edgesig.Signer
	hosts            []string // each origin's host[:port], the first Origin's
	urlKeys          link.Keys
	verifier         token.Verifier
	random           io.Reader

	keys    token.Cache
	fetcher Handle   // the request, or background refresh, whose JWKS fetch is in flight; 0 if none
	refresh Handle   // the last background refresh's handle, until answered or replaced
	ask     bool     // refresh began in this call: its output asks the host for it
	parked  []Handle // requests waiting for that fetch
	tokens  tokenCache
	orgs    orgCache
	out     []byte // the codec's last output message, reused
	// resumeHeaders is the array of the last resume's header fields,
	// reused: they and the output made of them live until the next call.
	resumeHeaders []Header
	scratch       []byte                  // candidate's working bytes, reused
	rnd           [reqid.RandomBytes]byte // the random bytes of a request id
	gateURL       string

	signed [8]edgesig.Field // a signed message's Fields, reused

	ls       leaseState
	leaseOut []Header // a leased 304's header fields, reused

	pending      map[Handle]*pending
	pendingBytes int
	next         Handle
	free         []*pending // ended requests of the codec, for reuse
	dropped      []*pending // those that ended in the current codec call
}

// New returns a Pipeline for cfg.
func New(cfg Config) *Pipeline {
	r := cfg.Random
	if r == nil {
		r = rand.Reader
	}
	origin := strings.TrimRight(cfg.Origin, "/")
	hosts := []string{hostOf(origin)}
	for _, o := range cfg.Origins[min(1, len(cfg.Origins)):] {
		hosts = append(hosts, hostOf(o))
	}
	var seed [8]byte
	io.ReadFull(r, seed[:]) // nonces need only differ: the zero bytes would do
	keys := cfg.URLKeys
	if keys.IsZero() {
		keys = link.Derived([]byte(cfg.Secret), []byte(cfg.SecretAccept))
	}
	signer := edgesig.NewSigner(edgesig.KeysOf([]byte(cfg.Secret)), binary.LittleEndian.Uint64(seed[:]))
	signer.V2 = cfg.SignV2
	return &Pipeline{
		urlKeys:          keys,
		origin:           origin,
		gateURL:          origin + edgesig.GatePath,
		jwksURL:          cfg.JWKSURL,
		resourceMetadata: cfg.ResourceMetadata,
		signer:           signer,
		hosts:            hosts,
		verifier:         token.Verifier{Issuer: cfg.Issuer, Audience: cfg.Audience, Leeway: token.DefaultLeeway},
		random:           r,
		tokens:           newTokenCache(MaxTokens),
		orgs:             newOrgCache(MaxOrgs),
		pending:          map[Handle]*pending{},
		ls:               newLeaseState(cfg, origin),
	}
}

// stage is where a pending request waits.
type stage uint8

const (
	stageJWKS    stage = iota + 1 // its JWKS subrequest is out
	stageParked                   // waiting for another request's JWKS fetch
	stageGate                     // its gate subrequest is out
	stageForward                  // it has been forwarded to the origin
)

// pending is a request waiting on a subrequest.
type pending struct {
	handle Handle
	stage  stage
	id     string // X-Request-Id
	req    Request
	size   int    // bytes of req counted in pendingBytes
	rounds int    // JWKS waits so far
	orgKey orgKey // per-organisation cache key, once authenticated
	inm    string // If-None-Match, its field lines combined; set once the front passed

	// The front's Authenticator is the request itself (Authenticate).
	p     *Pipeline
	now   int64   // unix ms of the run in progress
	wait  suspend // set by Authenticate when the request must wait for the JWKS
	since int64   // unix ms of the last output for it

	sub  [6]Header // the gate subrequest's fields
	text text      // the strings made for it: request id, target, signature

	// A request the codec started (HandleStart) is reused once it ends,
	// with its message's copy (arena) and the array of its header fields:
	// an edge 304 then allocates nothing (see recycle).
	pooled bool
	arena  []byte
	fields []Header
}

// text is where a pending request keeps the strings made for it, in the
// same allocation as the request: each is appended to the free space and
// never written again, and one that does not fit goes to the heap. (Under
// TinyGo every allocation costs a search of the heap and brings the next
// collection closer; a gated 304 made about twenty.)
type text struct {
	n int
	b [320]byte
}

// free is the room left, for appending to; nil t has none.
func (t *text) free() []byte {
	if t == nil {
		return nil
	}
	return t.b[t.n:t.n:len(t.b)]
}

// keep returns b, appended to t.free(), as a string: held in t if it fit,
// else in the array append moved it to. Neither is written again.
func (t *text) keep(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if t != nil && t.n < len(t.b) && unsafe.SliceData(b) == &t.b[t.n] {
		t.n += len(b)
	}
	return view(b)
}

// Start runs a new request through the pipeline. It keeps req's header
// fields until the request ends, and does not write to them.
func (p *Pipeline) Start(req Request) Output {
	return p.start(&pending{}, req)
}

// start is Start with st, a pending request not in use.
func (p *Pipeline) start(st *pending, req Request) Output {
	st.handle, st.req = p.newHandle(), req
	st.id = p.requestID(headerValue(req.Headers, "X-Request-Id"), &st.text)
	if req.Now <= 0 {
		return p.internal(st.handle, st.id, "The edge received a request without a clock reading.")
	}
	if !req.bounded() {
		return p.errorResponse(st.handle, st.id, tooLarge())
	}
	return p.finish(p.run(st, req.Now), req.Now)
}

// Resume continues the request in.Handle with the response to its
// subrequest, or wakes it (in.Wake) after a JWKS fetch it was parked on.
// An unknown handle, or a message that does not fit the handle's stage,
// is answered with 500 INTERNAL, never a panic. The output's header
// fields are in.Headers' array, reused: the caller gives it up.
func (p *Pipeline) Resume(in ResumeMsg) Output {
	st := p.pending[in.Handle]
	if c := p.ls.bg[in.Handle]; st == nil && c != nil && !in.Wake {
		if in.Now <= 0 {
			in.Status, in.Now = 0, c.sentAt // no clock: a failure, timed at its sending
		}
		return p.finish(p.backgroundDone(c, in), in.Now)
	}
	if st == nil && in.Handle != 0 && in.Handle == p.refresh && !in.Wake {
		return p.refreshDone(in) // the background refresh's answer
	}
	if st == nil {
		return p.internal(in.Handle, p.requestID("", nil), "The edge has no request with this handle.")
	}
	now := in.Now
	if now <= 0 {
		p.drop(st)
		return p.internal(st.handle, st.id, "The edge received a response without a clock reading.")
	}
	if in.Wake != (st.stage == stageParked) {
		p.drop(st)
		return p.internal(st.handle, st.id, "The edge received a message that does not fit the request's state.")
	}
	if in.Status != 0 && (in.Status < 100 || in.Status > 599) {
		in.Status = 0 // not an HTTP status: the subrequest failed
	}
	var out Output
	switch st.stage {
	case stageJWKS:
		ended := p.endFetch(st.handle, in)
		out = p.run(st, now)
		if ended {
			out.Wake = append(out.Wake, p.takeParked()...)
		}
	case stageParked:
		out = p.run(st, now)
	case stageGate:
		out = p.gateDone(st, in)
	case stageForward:
		out = p.forwardDone(st, in)
	}
	return p.finish(out, now)
}

// run passes st through the front and decides what follows: an error
// answered here, a JWKS wait, a gate call or a forward. It is run again
// from the top after a JWKS wait; routing and validation are cheap and
// deterministic, and a verified token is then found in the cache.
func (p *Pipeline) run(st *pending, now int64) Output {
	if st.req.Path == protectedResource {
		return p.forward(st, now)
	}
	if strings.HasPrefix(st.req.Path, link.Prefix) {
		return p.download(st, now)
	}
	st.p, st.now, st.wait = p, now, 0
	passed, ferr := front.Run(front.Request{
		Method:         st.req.Method,
		Path:           st.req.Path,
		RawQuery:       st.req.Query,
		Authorization:  headerValue(st.req.Headers, "Authorization"),
		Authorizations: headerCount(st.req.Headers, "Authorization"),
	}, st)
	switch {
	case st.wait != 0:
		return p.wait(st, st.wait, now)
	case ferr != nil:
		p.drop(st)
		return p.errorResponse(st.handle, st.id, ferr)
	}
	st.orgKey = orgKeyOf(passed.Claims)
	st.inm = combinedValue(st.req.Headers, "If-None-Match", &st.text)
	if tag, ok := p.candidate(st, passed); ok && etag.Match(st.inm, tag) {
		out, ok := p.leased(st, tag, now)
		if !ok {
			out = p.gate(st, now)
		}
		if out.Kind != Response || out.Status == 304 {
			out.Background = p.askLease(st, now)
		}
		return out
	}
	return p.forward(st, now)
}

// download checks a signed download link as the origin does (shared/link:
// GET or HEAD, authentic, of a known key, not expired) and forwards a
// valid one with no token and nothing else checked: the origin decides
// what it serves. A refusal is the origin's answer, without a forward.
func (p *Pipeline) download(st *pending, now int64) Output {
	if _, e := p.urlKeys.Check(st.req.Method, st.req.Path, st.req.Query, time.UnixMilli(now)); e != nil {
		p.drop(st)
		return p.errorResponse(st.handle, st.id, e)
	}
	return p.forward(st, now)
}

// Authenticate is front.Authenticator for st's run: the pipeline's
// authenticate, with a wait for the JWKS recorded in st.wait.
func (st *pending) Authenticate(authorization string) (token.Claims, *apierr.Error) {
	c, e, w := st.p.authenticate(st, authorization, time.UnixMilli(st.now))
	st.wait = w
	return c, e
}

// candidate is the ETag the origin would give the request, from the
// organisation's cached version and grants digest (docs/edge.md, Origin
// protocol); ok is false when there is nothing to compare, or when the
// request's 304 is not decided before any work, so the gate call cannot
// decide it (route.Route.DerivedETag: an export's zip_url has no ETag).
// The tag is valid until the next call.
func (p *Pipeline) candidate(st *pending, passed front.Passed) (string, bool) {
	if st.req.Method != "GET" || !passed.Route.DerivedETag(passed.Params.Get("format")) || st.orgKey.id == "" || st.inm == "" {
		return "", false
	}
	o, ok := p.orgs.get(st.orgKey)
	if !ok || o.version == "" || o.grants == "" {
		return "", false
	}
	// The target, the canonical query and the tag, one after another in
	// the scratch bytes; each is read as a string of bytes not written
	// again while it is read (an append that grows b leaves them behind).
	b := passed.Vars.Append(p.scratch[:0])
	nt := len(b)
	b = passed.Params.AppendCanonical(b)
	nq := len(b)
	b = etag.AppendDerive(b, etag.Input{
		Version: o.version,
		Route:   int(passed.Route.ID),
		Target:  view(b[:nt]),
		Params:  view(b[nt:nq]),
		Org:     o.org,
		Grants:  o.grants,
	})
	p.scratch = b
	return view(b[nq:]), true
}

// view is b as a string, for bytes not written while it is in use.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// orgKey is the per-organisation cache key of a token: its org claim, or
// else its client (whose organisation the origin looks up); client tells
// an organisation id and a client id apart. The zero key is none.
type orgKey struct {
	client bool
	id     string
}

func orgKeyOf(c token.Claims) orgKey {
	switch {
	case c.Org != "":
		return orgKey{id: c.Org}
	case c.ClientID != "":
		return orgKey{client: true, id: c.ClientID}
	}
	return orgKey{}
}

// target is the request target the origin sees: path, then ?query when
// there is one, as net/url's RequestURI writes it; kept in st's text.
func (st *pending) target() string {
	if st.req.Query == "" {
		return st.req.Path
	}
	b := append(st.text.free(), st.req.Path...)
	b = append(b, '?')
	return st.text.keep(append(b, st.req.Query...))
}

// hostOf is the host[:port] of base URL u (scheme://authority[/...]).
func hostOf(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
	}
	if i := strings.IndexAny(u, "/?#"); i >= 0 {
		u = u[:i]
	}
	return u
}

// signAll signs m (its Host aside) for the first origin and, with
// several, for each of them (all, in Config.Origins' order; the first's
// header value is all[0] then). With one origin it allocates nothing but
// the signature's string.
func (p *Pipeline) signAll(m *edgesig.Message, now int64) (first string, all []string) {
	if len(p.hosts) == 1 {
		m.Host = p.hosts[0]
		return p.signer.Sign(m, now), nil
	}
	all = make([]string, len(p.hosts))
	for i, h := range p.hosts {
		m.Host = h
		all[i] = p.signer.Sign(m, now)
	}
	return all[0], all
}

// signText is signAll with the first signature in st's text (no
// allocation with one origin).
func (p *Pipeline) signText(st *pending, m *edgesig.Message, now int64) (first string, all []string) {
	if len(p.hosts) > 1 {
		return p.signAll(m, now)
	}
	m.Host = p.hosts[0]
	return st.text.keep(p.signer.Append(st.text.free(), m, now)), nil
}

// gate asks the origin whether the conditional request is a 304. The
// signature covers the fields the origin decides on (edgesig.Signed):
// the token, If-None-Match, the usage reports and the request id.
func (p *Pipeline) gate(st *pending, now int64) Output {
	target := st.target()
	auth := headerValue(st.req.Headers, "Authorization")
	usage := p.usageHeader()
	p.signed[0] = edgesig.Field{Name: "if-none-match", Value: st.inm}
	m := edgesig.Message{Purpose: edgesig.Gate, Method: "POST", Target: target, Auth: auth, Usage: usage, RequestID: st.id,
		Fields: p.signed[:1]}
	sig, all := p.signText(st, &m, now)
	h := append(st.sub[:0],
		Header{"Authorization", auth},
		Header{"If-None-Match", st.inm},
		Header{"X-Request-Id", st.id},
		Header{edgesig.TargetHeader, target},
		Header{edgesig.Header, sig},
	)
	if usage != "" {
		h = append(h, Header{lease.UsageHeader, usage})
	}
	if !p.keep(st, stageGate, now) {
		return p.busy(st)
	}
	return Output{Kind: Subrequest, Handle: st.handle, Method: "POST", URL: p.gateURL, Headers: h, Signatures: all}
}

// gateDone reads the gate's answer: 204 is a 304, 412 a forward, any other
// status the origin's own answer.
func (p *Pipeline) gateDone(st *pending, in ResumeMsg) Output {
	p.learn(st.orgKey, in.Headers)
	switch in.Status {
	case 0:
		p.drop(st)
		return p.unreachable(st)
	case 412:
		return p.forward(st, in.Now)
	case 204:
		p.drop(st)
		h := responseHeaders(in.Headers, true)
		h = setHeader(h, "X-Request-Id", st.id)
		sortHeaders(h)
		return Output{Kind: Response, Handle: st.handle, Status: 304, Headers: h}
	}
	p.drop(st)
	h := responseHeaders(in.Headers, true)
	h = setHeader(h, "Content-Length", itoa(len(in.Body)))
	sortHeaders(h)
	return Output{Kind: Response, Handle: st.handle, Status: in.Status, Headers: h, Body: in.Body}
}

// forward sends the client's request to the origin, signed over the
// fields the origin's answer and bill depend on (edgesig.Signed), as they
// are sent.
func (p *Pipeline) forward(st *pending, now int64) Output {
	target := st.target()
	usage := p.usageHeader()
	// A copy: the client's fields are the caller's (Start).
	h := append(make([]Header, 0, len(st.req.Headers)+4), st.req.Headers...)
	// Host is the origin's, from the URL: the signature names it. The
	// host has read the body already: Expect (100-continue) was the
	// client's business with the edge, not the origin's.
	h = filterHeaders(h, func(name string) bool {
		return internal(name) || equalFold(name, "X-Request-Id") || equalFold(name, "Host") || equalFold(name, "Expect")
	})
	// Accept-Encoding is sent, and signed, always: a transport adds its
	// own to a request without one (Node's and workerd's fetch do), which
	// would alter a signed field. identity is what none means to the
	// origin (encoding.Negotiate).
	if headerCount(h, "Accept-Encoding") == 0 {
		h = append(h, Header{"Accept-Encoding", "identity"})
	}
	m := edgesig.Message{Purpose: edgesig.Forward, Method: st.req.Method, Target: target, Body: st.req.BodySHA256,
		Auth: combinedValue(h, "Authorization", &st.text), Usage: usage, RequestID: st.id, Fields: p.signed[:0]}
	for _, name := range edgesig.Signed(edgesig.Forward) {
		switch name {
		case "authorization", "x-lectern-usage", "x-request-id":
		default:
			m.Fields = append(m.Fields, edgesig.Field{Name: name, Value: combinedValue(h, name, &st.text)})
		}
	}
	sig, all := p.signText(st, &m, now)
	h = append(h, Header{"X-Request-Id", st.id}, Header{edgesig.Header, sig})
	if usage != "" {
		h = append(h, Header{lease.UsageHeader, usage})
	}
	url := st.text.keep(append(append(st.text.free(), p.origin...), target...))
	method := st.req.Method
	st.req.Headers = nil // not needed again; free them
	if !p.keep(st, stageForward, now) {
		return p.busy(st)
	}
	return Output{Kind: Subrequest, Handle: st.handle, Method: method, URL: url, Headers: h, Forward: true, Signatures: all}
}

// forwardDone answers the client with the origin's response.
func (p *Pipeline) forwardDone(st *pending, in ResumeMsg) Output {
	p.drop(st)
	if in.Status == 0 {
		return p.unreachable(st)
	}
	p.learn(st.orgKey, in.Headers)
	return Output{Kind: Response, Handle: st.handle, Status: in.Status, Headers: responseHeaders(in.Headers, false), Passthrough: true}
}

// learn keeps what the origin told an edge-signed request about the
// organisation: its id, grants digest and content version.
func (p *Pipeline) learn(key orgKey, h []Header) {
	if key.id == "" {
		return
	}
	org, grants := headerValue(h, edgesig.OrgHeader), headerValue(h, edgesig.GrantsHeader)
	if org == "" || grants == "" {
		return
	}
	p.orgs.put(key, org, grants, headerValue(h, "X-Service-Content-Version"))
}

// unreachable is the answer when a subrequest to the origin failed. The
// spec has no 502; INTERNAL says what the client may do: retry once.
func (p *Pipeline) unreachable(st *pending) Output {
	return p.errorResponse(st.handle, st.id, apierr.New(apierr.Internal,
		"The origin could not be reached; it is safe to retry once. Quote the requestId if it persists."))
}

// tooLarge refuses a request whose header fields exceed MaxHeaders or
// MaxHeaderBytes. The spec has no 431; the client's fault is a 400.
func tooLarge() *apierr.Error {
	return &apierr.Error{Code: apierr.BadRequest, Parameter: "headers", Message: "The request's header fields are too large."}
}

// busy is the answer when the pending table is full.
func (p *Pipeline) busy(st *pending) Output {
	return p.internal(st.handle, st.id, "The edge has too many requests in flight; it is safe to retry once.")
}

// internal is a 500 INTERNAL answered by the edge itself.
func (p *Pipeline) internal(h Handle, id, message string) Output {
	return p.errorResponse(h, id, apierr.New(apierr.Internal, message+" Quote the requestId if it persists."))
}

// errorResponse is the origin's error response for e (origin/server
// writeError): the same status, headers and body.
func (p *Pipeline) errorResponse(h Handle, id string, e *apierr.Error) Output {
	body := e.AppendJSON(nil, id)
	hs := make([]Header, 0, 8)
	hs = append(hs,
		Header{"X-Request-Id", id},
		Header{"Cache-Control", "private"},
		Header{"Vary", "Authorization, Accept-Encoding"},
	)
	for _, kv := range e.Headers() {
		hs = append(hs, Header{kv.Name, kv.Value})
	}
	if c := token.ChallengeFor(e, token.Realm, p.resourceMetadata); c != "" {
		hs = append(hs, Header{"Www-Authenticate", c})
	}
	hs = append(hs, Header{"Content-Type", "application/json"}, Header{"Content-Length", itoa(len(body))})
	sortHeaders(hs)
	return Output{Kind: Response, Handle: h, Status: e.Status(), Headers: hs, Body: body}
}

// newHandle returns an unused non-zero handle.
func (p *Pipeline) newHandle() Handle {
	for {
		p.next++
		if p.next != 0 && p.pending[p.next] == nil && p.next != p.refresh && p.ls.bg[p.next] == nil {
			return p.next
		}
	}
}

// keep records st as waiting at stage; false when the table is full even
// after dropping requests stuck for longer than staleAfter.
func (p *Pipeline) keep(st *pending, s stage, now int64) bool {
	st.stage, st.since = s, now
	size := st.req.size()
	if cur := p.pending[st.handle]; cur == st {
		p.pendingBytes += size - st.size
		st.size = size
		return true
	}
	if len(p.pending) >= MaxPending || p.pendingBytes+size > MaxPendingBytes {
		p.sweep(now)
		if len(p.pending) >= MaxPending || p.pendingBytes+size > MaxPendingBytes {
			return false
		}
	}
	st.size = size
	p.pending[st.handle] = st
	p.pendingBytes += size
	return true
}

// staleAfter is how long a request may wait before a full table drops
// it: a host must answer every subrequest, so such a request is lost.
const staleAfter = 10 * 60 * 1000 // ms

func (p *Pipeline) sweep(now int64) {
	for _, st := range p.pending {
		if now-st.since > staleAfter {
			p.drop(st)
		}
	}
}

// drop ends st's wait. A pooled st joins dropped before it leaves the
// table: st is often a pointer read out of the table, which TinyGo's
// collector does not see, and the append may allocate (see
// backgroundDone).
func (p *Pipeline) drop(st *pending) {
	if p.pending[st.handle] == st {
		if st.pooled {
			p.dropped = append(p.dropped, st)
		}
		delete(p.pending, st.handle)
		p.pendingBytes -= st.size
		st.size = 0
	}
}

// Bounds on what the codec keeps for reuse: ended requests, and the size
// of a message copy kept with one.
const (
	maxFree      = 64
	maxKeptArena = 8 << 10
)

// reuse returns an ended request of the codec's, or a new one, for
// HandleStart.
func (p *Pipeline) reuse() *pending {
	if n := len(p.free); n > 0 {
		st := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		return st
	}
	return &pending{pooled: true}
}

// recycle makes the requests that ended in this codec call reusable. It
// runs after the call's output is written, which is the last use of
// their strings; and a request is reused only if it is not waiting
// again (drop, then keep, in the same call).
func (p *Pipeline) recycle() {
	for i, st := range p.dropped {
		p.dropped[i] = nil
		if st.handle != 0 && p.pending[st.handle] != st { // not recycled already (listed twice), not waiting again
			p.release(st)
		}
	}
	p.dropped = p.dropped[:0]
}

// release resets st, a request of the codec's that nothing refers to any
// more, and keeps it for reuse if there is room.
func (p *Pipeline) release(st *pending) {
	if len(p.free) == maxFree {
		return
	}
	arena, fields := st.arena[:0], st.fields[:0]
	if cap(arena) > maxKeptArena {
		arena = nil
	}
	clear(fields[:cap(fields)])
	if cap(fields) > maxKeptHeaders {
		fields = nil
	}
	*st = pending{pooled: true, arena: arena, fields: fields}
	p.free = append(p.free, st)
}

// requestID keeps a well-formed incoming X-Request-Id and otherwise makes
// one, by the rule both tiers follow: reqid.Keep, but with the
// pipeline's random source (Config.Random), the new id kept in t (nil: on
// the heap).
func (p *Pipeline) requestID(in string, t *text) string {
	if reqid.Valid(in) {
		return in
	}
	clear(p.rnd[:])
	io.ReadFull(p.random, p.rnd[:]) // on failure the zero bytes still make a valid id
	return t.keep(reqid.Append(t.free(), &p.rnd))
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
