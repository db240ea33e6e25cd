package pipeline

import (
	"errors"
	"strconv"
	"strings"

	"github.com/lectern-api/lectern/shared/jsonenc"
	"github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/shared/link"
)

// The JSON codec of docs/edge.md, which the reactor exports. Decoding is
// strict about the members it reads (their types, the shape of header
// pairs) and ignores others.

// MaxMessage bounds every message from the host.
const MaxMessage = 1 << 20

// maxDepth bounds the nesting of a message: the deepest the codec reads is
// a header pair (object, array, array). It keeps the scanner's recursion
// shallow on TinyGo's small stack.
const maxDepth = 8

var (
	errMalformed = errors.New("pipeline: malformed message")
	errTooLarge  = errors.New("pipeline: message too large")
)

// ParseConfig reads the configure message:
//
//	{"origin": "...", "jwksUrl": "...", "issuer": "...", "audience": "...",
//	 "secret": "...", "resourceMetadata": "...", "urlKeys": "...",
//	 "leases": true, "revoke": "http://.../internal/revoke", "reportEvery": 0,
//	 "origins": "http://10.0.0.1:8080,http://10.0.0.2:8080", "secretAccept": "...",
//	 "signV2": false}
//
// Every member but resourceMetadata, urlKeys, leases, revoke, reportEvery,
// origins, secretAccept and signV2 is required. signV2 (absent: false)
// signs by the previous release's rule, v2, for an edge upgraded before
// the origins (docs/upgrading.md). secretAccept is
// LECTERN_SECRET_ACCEPT, the secret accepted beside secret while it is
// rotated: links of the key derived from it still verify. origins, with several origins, lists them all
// (origin first, comma-separated): each call to the origin is then signed
// for each (Output.Signatures). urlKeys is LECTERN_URL_KEYS
// (shared/link.ParseKeys); without it the link key is the one derived
// from the secret. leases (absent: false) turns the edge's leases on;
// revoke is where the host takes the origin's revoke push ("" or absent:
// nowhere); reportEvery (an integer, 0 to lease.MaxCalls; absent:
// lease.ReportEvery) is how many unacknowledged uses of a lease make a
// usage report due, 0 for reports by interval only.
func ParseConfig(b []byte) (Config, error) {
	var cfg Config
	var urlKeys string
	var origins string
	names := []string{"origin", "jwksUrl", "issuer", "audience", "secret", "resourceMetadata", "urlKeys", "revoke", "origins", "secretAccept", "leases", "reportEvery", "signV2"}
	dsts := []*string{&cfg.Origin, &cfg.JWKSURL, &cfg.Issuer, &cfg.Audience, &cfg.Secret, &cfg.ResourceMetadata, &urlKeys, &cfg.Revoke, &origins, &cfg.SecretAccept}
	var v [13]raw
	a, err := open(b, names, v[:], false, nil)
	if err != nil {
		return cfg, err
	}
	for i, dst := range dsts {
		name := names[i]
		s, ok := a.str(b, v[i])
		if !ok {
			return cfg, errors.New("pipeline: config member " + name + " is not a string")
		}
		if s == "" && name != "resourceMetadata" && name != "urlKeys" && name != "revoke" && name != "origins" && name != "secretAccept" {
			return cfg, errors.New("pipeline: config member " + name + " is missing")
		}
		*dst = s
	}
	var ok bool
	if cfg.Leases, ok = boolean(v[10]); !ok {
		return cfg, errors.New("pipeline: config member leases is not a boolean")
	}
	if cfg.SignV2, ok = boolean(v[12]); !ok {
		return cfg, errors.New("pipeline: config member signV2 is not a boolean")
	}
	if len(cfg.Revoke) > 2048 {
		return cfg, errors.New("pipeline: config member revoke is too long")
	}
	if cfg.ReportEvery, err = reportEvery(b, v[11]); err != nil {
		return cfg, err
	}
	if cfg.Origins, err = parseOrigins(origins, cfg.Origin); err != nil {
		return cfg, err
	}
	if cfg.URLKeys, err = link.Configured(urlKeys, []byte(cfg.Secret), []byte(cfg.SecretAccept)); err != nil {
		return cfg, errors.New("pipeline: config member urlKeys: " + err.Error())
	}
	return cfg, nil
}

// parseOrigins reads configure's origins: "" (the one origin), or the
// comma-separated base URLs of every origin, origin's first.
func parseOrigins(s, origin string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var list []string
	for _, o := range strings.Split(s, ",") {
		o = strings.TrimRight(strings.TrimSpace(o), "/")
		if !strings.HasPrefix(o, "http://") && !strings.HasPrefix(o, "https://") || hostOf(o) == "" {
			return nil, errors.New("pipeline: config member origins: " + strconv.Quote(o) + " is not an http or https base URL")
		}
		list = append(list, o)
	}
	if list[0] != strings.TrimRight(origin, "/") {
		return nil, errors.New("pipeline: config member origins does not begin with origin")
	}
	return list, nil
}

// reportEvery reads configure's reportEvery as Config.ReportEvery: absent
// is the default (0), 0 is ReportByInterval.
func reportEvery(b []byte, v raw) (int64, error) {
	if !v.present() {
		return 0, nil
	}
	n, ok := integer(b, v)
	switch {
	case !ok || n < 0 || n > lease.MaxCalls:
		return 0, errors.New("pipeline: config member reportEvery is not an integer from 0 to 1024")
	case n == 0:
		return ReportByInterval, nil
	}
	return n, nil
}

// ConfigResult is the output of configure: {"kind":"configured"}, or
// {"kind":"error","error":"..."}.
func ConfigResult(err error) []byte {
	if err == nil {
		return []byte(`{"kind":"configured"}`)
	}
	b := append([]byte(nil), `{"kind":"error","error":`...)
	b = jsonenc.String(b, err.Error())
	return append(b, '}')
}

// HandleStart is Start over JSON: a start message in, an output out,
// valid until the next HandleStart or HandleResume. A message it cannot
// read is answered with 500 INTERNAL.
func (p *Pipeline) HandleStart(b []byte) []byte {
	st := p.reuse()
	req, err := decodeRequest(b, st)
	if err != nil {
		p.release(st) // never started
	}
	if err == errTooLarge {
		out := p.errorResponse(p.newHandle(), p.requestID("", nil), tooLarge())
		return out.AppendJSON(nil)
	}
	if err != nil {
		out := p.internal(p.newHandle(), p.requestID("", nil), "The edge could not read the request.")
		return out.AppendJSON(nil)
	}
	out := p.start(st, req)
	b = p.encode(&out)
	if p.pending[st.handle] != st {
		p.dropped = append(p.dropped, st) // answered at once
	}
	p.recycle()
	return b
}

// encode writes out into the codec's output buffer: the message returned
// by HandleStart and HandleResume is valid until the next call of either.
func (p *Pipeline) encode(out *Output) []byte {
	b := out.AppendJSON(p.out[:0])
	p.out = b
	if cap(b) > maxKeptOutput {
		p.out = nil // a large body's buffer is not kept for the next call
	}
	return b
}

// maxKeptOutput bounds the output buffer kept between calls, and
// maxKeptHeaders a header array kept for reuse (the next resume's, or an
// ended request's).
const (
	maxKeptOutput  = 64 << 10
	maxKeptHeaders = 64
)

// HandleResume is Resume over JSON; its output, like HandleStart's, is
// valid until the next call of either. It decodes b in place: b is the
// codec's until the call returns, and its bytes are changed. A message it
// cannot read but whose handle it can is a failed subrequest of that
// handle (status 0); without a handle it is answered with 500 INTERNAL.
func (p *Pipeline) HandleResume(b []byte) []byte {
	in, err := decodeResume(b, p.resumeHeaders[:0])
	if c := cap(in.Headers); c > 0 && c <= maxKeptHeaders {
		p.resumeHeaders = in.Headers[:0]
	}
	// Once this call's output is written, the array lets go of this
	// message's strings (the host may free or reuse the message).
	defer clear(p.resumeHeaders[:cap(p.resumeHeaders)])
	if err != nil {
		if in.Handle == 0 {
			out := p.internal(0, p.requestID("", nil), "The edge could not read the host's message.")
			return out.AppendJSON(nil)
		}
		in = ResumeMsg{Handle: in.Handle, Now: in.Now, Wake: in.Wake, Error: err.Error()}
	}
	out := p.Resume(in)
	b = p.encode(&out)
	p.recycle()
	return b
}

// HandleControl is Control over JSON: a control message in,
//
//	{"op": "flush", "now": <unix ms>}
//	{"op": "revoke", "now": <unix ms>, "body": "<lease.Revoke JSON>"}
//
// an output out, valid until the next call. A message it cannot read is
// answered with 500 INTERNAL under handle 0.
func (p *Pipeline) HandleControl(b []byte) []byte {
	var v [3]raw
	a, err := open(b, controlMembers, v[:], true, nil)
	var c ControlMsg
	var ok [3]bool
	if err == nil {
		c.Op, ok[0] = a.str(b, v[0])
		c.Now, ok[1] = integer(b, v[1])
		var body string
		body, ok[2] = a.str(b, v[2])
		c.Body = []byte(body)
	}
	if err != nil || ok != [3]bool{true, true, true} {
		out := p.internal(0, p.requestID("", nil), "The edge could not read the host's control message.")
		return out.AppendJSON(nil)
	}
	out := p.Control(c)
	return p.encode(&out)
}

// The members of the start, resume and control messages, in the order of
// their raw values in members' vals.
var (
	requestMembers = []string{"method", "path", "query", "headers", "now", "bodySha256"}
	resumeMembers  = []string{"handle", "now", "wake", "status", "headers", "body", "error"}
	controlMembers = []string{"op", "now", "body"}
)

// decodeRequest reads a start message. Its strings are in a copy of b,
// and its header fields in an array: st's (a pending request of the codec
// kept for reuse), or new ones when st is nil.
func decodeRequest(b []byte, st *pending) (Request, error) {
	var r Request
	var v [6]raw
	var buf []byte
	var fields []Header
	if st != nil {
		buf, fields = st.arena, st.fields
	}
	a, err := open(b, requestMembers, v[:], false, buf) // every string of the request in one allocation, or none
	if err != nil {
		return r, err
	}
	var ok [6]bool
	r.Method, ok[0] = a.str(b, v[0])
	r.Path, ok[1] = a.str(b, v[1])
	r.Query, ok[2] = a.str(b, v[2])
	r.Headers, ok[3] = a.headers(fields, b, v[3])
	if st != nil {
		st.arena, st.fields = a.b, r.Headers
	}
	r.Now, ok[4] = integer(b, v[4])
	if r.BodySHA256, ok[5] = a.str(b, v[5]); ok[5] && r.BodySHA256 != "" {
		ok[5] = isSHA256(r.BodySHA256)
	}
	// An empty path is read, not refused: it is "/" (RFC 9110 §4.2.3), a
	// path no route has, and the front answers 404 NOT_FOUND as the
	// origin does (a CONNECT's authority-form target has no path).
	if ok != [6]bool{true, true, true, true, true, true} || r.Method == "" {
		return Request{}, errMalformed
	}
	return r, nil
}

// isSHA256 reports whether s is a hex SHA-256: 64 lower-case hex digits.
func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// open checks message b (its size and syntax), finds the values of names
// in vals (members) and copies b into an arena for its strings, buf's
// array when it has room; or, when inPlace, makes b itself the arena: its
// strings are then unescaped in b and live only as long as the caller
// leaves b alone.
func open(b []byte, names []string, vals []raw, inPlace bool, buf []byte) (arena, error) {
	if len(b) > MaxMessage {
		return arena{}, errTooLarge
	}
	escaped, ok := members(b, names, vals)
	if !ok {
		return arena{}, errMalformed
	}
	if inPlace {
		return arena{b, escaped}, nil
	}
	if cap(buf) < len(b) {
		buf = make([]byte, 0, len(b))
	}
	return arena{append(buf[:0], b...), escaped}, nil
}

// arena holds the strings of one message: a copy of the message made in
// one move (or, for a resume, the message itself), in which each string
// value is unescaped in place (an escape is longer than what it stands
// for) and then read as a string of those bytes, which are not written
// again. A message without escapes, the common case, needs no work after
// the copy. (Not a strings.Builder: TinyGo allocates
// every Builder on the heap, as it points to itself.)
type arena struct {
	b       []byte
	escaped bool // what members said of the message
}

// decodeResume reads a resume message, whose strings are b's bytes,
// unescaped in place, and whose header fields are appended to dst:
// nothing of a resume outlives its call (what the caches keep they copy),
// so it needs no copy. On error the handle, now and wake are still filled
// in when they could be read.
func decodeResume(b []byte, dst []Header) (ResumeMsg, error) {
	var in ResumeMsg
	var v [7]raw
	a, err := open(b, resumeMembers, v[:], true, nil)
	if err != nil {
		return in, err
	}
	h, ok := integer(b, v[0])
	if !ok || h <= 0 || h > 1<<32-1 {
		return in, errMalformed
	}
	in.Handle = Handle(h)
	if in.Now, ok = integer(b, v[1]); !ok {
		return in, errMalformed
	}
	if in.Wake, ok = boolean(v[2]); !ok {
		return in, errMalformed
	}
	status, ok := integer(b, v[3])
	if !ok || status < 0 || status > 999 {
		return in, errMalformed
	}
	in.Status = int(status)
	hs, okh := a.headers(dst, b, v[4])
	errText, oke := a.str(b, v[6])
	if !okh || !oke {
		return in, errMalformed
	}
	in.Headers, in.Error = hs, errText
	if len(in.Headers) > MaxHeaders || headerBytes(in.Headers) > MaxHeaderBytes {
		return in, errTooLarge
	}
	if v[5].present() {
		if v[5].k != kString {
			return in, errMalformed
		}
		from, to := a.unescape(b, v[5])
		if to-from > MaxBody {
			return in, errTooLarge
		}
		in.Body = a.b[from:to:to]
	}
	return in, nil
}

// AppendJSON appends the output message of docs/edge.md:
//
//	{"kind":"response","handle":1,"status":401,"headers":[[n,v],...],"body":"..."}
//	{"kind":"response","handle":2,"status":200,"headers":[...],"passthrough":true}
//	{"kind":"subrequest","handle":3,"method":"GET","url":"...","headers":[...],"forward":false,"retry":"any"}
//	{"kind":"park","handle":4}
//	{"kind":"done","handle":5}
//
// each with "wake":[...] when it wakes parked requests, with
// "refresh":{"handle":5,"url":"...","retry":"any"} when it begins a
// background refresh, and with "background":{"handle":6,"method":"POST",
// "url":"...","headers":[...],"retry":"unsent","body":"..."} when it asks
// for a lease-protocol call (the retry marks: Retry). A
// leased 304 carries "lease":{"id":"L1","used":17}; a subrequest that is
// no forward, and a done, carry "body" when they have one (a flush's
// reports; a revoke's answer).
func (o *Output) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	dst = jsonenc.Key(dst, "kind")
	dst = jsonenc.String(dst, o.Kind.String())
	dst = jsonenc.Key(dst, "handle")
	dst = jsonenc.Int(dst, int64(o.Handle))
	switch o.Kind {
	case Response:
		dst = jsonenc.Key(dst, "status")
		dst = jsonenc.Int(dst, int64(o.Status))
		dst = appendHeaders(dst, o.Headers)
		if o.Passthrough {
			dst = jsonenc.Key(dst, "passthrough")
			dst = jsonenc.Bool(dst, true)
		} else if o.Body != nil {
			dst = jsonenc.Key(dst, "body")
			dst = jsonenc.String(dst, string(o.Body))
		}
		if o.Lease.ID != "" {
			dst = jsonenc.Key(dst, "lease")
			dst = append(dst, '{')
			dst = jsonenc.Key(dst, "id")
			dst = jsonenc.String(dst, o.Lease.ID)
			dst = jsonenc.Key(dst, "used")
			dst = jsonenc.Int(dst, o.Lease.Used)
			dst = append(dst, '}')
		}
	case Done:
		if o.Body != nil {
			dst = jsonenc.Key(dst, "body")
			dst = jsonenc.String(dst, string(o.Body))
		}
	case Subrequest:
		dst = jsonenc.Key(dst, "method")
		dst = jsonenc.String(dst, o.Method)
		dst = jsonenc.Key(dst, "url")
		dst = jsonenc.String(dst, o.URL)
		dst = appendHeaders(dst, o.Headers)
		dst = jsonenc.Key(dst, "forward")
		dst = jsonenc.Bool(dst, o.Forward)
		dst = appendSignatures(dst, o.Signatures)
		dst = appendRetry(dst, o.Method)
		if o.Body != nil && !o.Forward {
			dst = jsonenc.Key(dst, "body")
			dst = jsonenc.String(dst, string(o.Body))
		}
	}
	if bg := &o.Background; bg.Handle != 0 {
		dst = jsonenc.Key(dst, "background")
		dst = append(dst, '{')
		dst = jsonenc.Key(dst, "handle")
		dst = jsonenc.Int(dst, int64(bg.Handle))
		dst = jsonenc.Key(dst, "method")
		dst = jsonenc.String(dst, bg.Method)
		dst = jsonenc.Key(dst, "url")
		dst = jsonenc.String(dst, bg.URL)
		dst = appendHeaders(dst, bg.Headers)
		dst = appendSignatures(dst, bg.Signatures)
		dst = appendRetry(dst, bg.Method)
		dst = jsonenc.Key(dst, "body")
		dst = jsonenc.String(dst, string(bg.Body))
		dst = append(dst, '}')
	}
	if o.Refresh.Handle != 0 {
		dst = jsonenc.Key(dst, "refresh")
		dst = append(dst, '{')
		dst = jsonenc.Key(dst, "handle")
		dst = jsonenc.Int(dst, int64(o.Refresh.Handle))
		dst = jsonenc.Key(dst, "url")
		dst = jsonenc.String(dst, o.Refresh.URL)
		dst = appendRetry(dst, "GET")
		dst = append(dst, '}')
	}
	if len(o.Wake) > 0 {
		dst = jsonenc.Key(dst, "wake")
		dst = append(dst, '[')
		for i, h := range o.Wake {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonenc.Int(dst, int64(h))
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

// appendSignatures appends "signatures": the values of X-Lectern-Edge
// for each origin, when there are several.
func appendSignatures(dst []byte, sigs []string) []byte {
	if len(sigs) == 0 {
		return dst
	}
	dst = jsonenc.Key(dst, "signatures")
	dst = append(dst, '[')
	for i, s := range sigs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonenc.String(dst, s)
	}
	return append(dst, ']')
}

// appendRetry appends "retry", the mark of a subrequest of method
// (retryOf).
func appendRetry(dst []byte, method string) []byte {
	dst = jsonenc.Key(dst, "retry")
	return jsonenc.String(dst, retryOf(method).String())
}

func appendHeaders(dst []byte, h []Header) []byte {
	dst = jsonenc.Key(dst, "headers")
	return jsonenc.Pairs(dst, h, func(h Header) (string, string) { return h.Name, h.Value })
}
