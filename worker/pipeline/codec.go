package pipeline

import (
	"errors"
	"unsafe"

	"github.com/lectern-api/lectern/shared/jsonenc"
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
//	 "secret": "...", "resourceMetadata": "..."}
//
// Every member but resourceMetadata is required.
func ParseConfig(b []byte) (Config, error) {
	var cfg Config
	if len(b) > MaxMessage {
		return cfg, errTooLarge
	}
	names := []string{"origin", "jwksUrl", "issuer", "audience", "secret", "resourceMetadata"}
	dsts := []*string{&cfg.Origin, &cfg.JWKSURL, &cfg.Issuer, &cfg.Audience, &cfg.Secret, &cfg.ResourceMetadata}
	var v [6]raw
	escaped, ok := members(b, names, v[:])
	if !ok {
		return cfg, errMalformed
	}
	a := newArena(b, escaped)
	for i, name := range names {
		sp, ok := a.str(b, v[i])
		if !ok {
			return cfg, errors.New("pipeline: config member " + name + " is not a string")
		}
		if sp.empty() && name != "resourceMetadata" {
			return cfg, errors.New("pipeline: config member " + name + " is missing")
		}
		*dsts[i] = sp.of(a.string())
	}
	return cfg, nil
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
	req, err := decodeRequest(b)
	if err == errTooLarge {
		out := p.errorResponse(p.newHandle(), p.requestID(""), tooLarge())
		return out.AppendJSON(nil)
	}
	if err != nil {
		out := p.internal(p.newHandle(), p.requestID(""), "The edge could not read the request.")
		return out.AppendJSON(nil)
	}
	out := p.Start(req)
	return p.encode(&out)
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

// maxKeptOutput bounds the output buffer kept between calls.
const maxKeptOutput = 64 << 10

// HandleResume is Resume over JSON; its output, like HandleStart's, is
// valid until the next call of either. A message it cannot read but whose
// handle it can is a failed subrequest of that handle (status 0); without
// a handle it is answered with 500 INTERNAL.
func (p *Pipeline) HandleResume(b []byte) []byte {
	in, err := decodeResume(b)
	if err != nil {
		if in.Handle == 0 {
			out := p.internal(0, p.requestID(""), "The edge could not read the host's message.")
			return out.AppendJSON(nil)
		}
		in = ResumeMsg{Handle: in.Handle, Now: in.Now, Wake: in.Wake, Error: err.Error()}
	}
	out := p.Resume(in)
	return p.encode(&out)
}

// The members of the start and resume messages, in the order of their
// raw values in members' vals.
var (
	requestMembers = []string{"method", "path", "query", "headers", "now"}
	resumeMembers  = []string{"handle", "now", "wake", "status", "headers", "body", "error"}
)

func decodeRequest(b []byte) (Request, error) {
	var r Request
	if len(b) > MaxMessage {
		return r, errTooLarge
	}
	var v [5]raw
	escaped, ok := members(b, requestMembers, v[:])
	if !ok {
		return r, errMalformed
	}
	// Every string of the request lies in one allocation.
	a := newArena(b, escaped)
	method, ok0 := a.str(b, v[0])
	path, ok1 := a.str(b, v[1])
	query, ok2 := a.str(b, v[2])
	hs, ok3 := a.headers(b, v[3])
	now, ok4 := integer(b, v[4])
	if !ok0 || !ok1 || !ok2 || !ok3 || !ok4 || method.empty() || path.empty() {
		return r, errMalformed
	}
	all := a.string()
	r.Method, r.Path, r.Query, r.Now = method.of(all), path.of(all), query.of(all), now
	r.Headers = make([]Header, len(hs))
	for i, h := range hs {
		r.Headers[i] = Header{h[0].of(all), h[1].of(all)}
	}
	return r, nil
}

// arena holds the strings of one message: a copy of the message made in
// one move, in which each string value is unescaped in place (an escape is
// longer than what it stands for), so a string is a span of the copy, read
// back (of) from the arena's string. A message without escapes, the common
// case, needs no work after the copy. (Not a strings.Builder: TinyGo
// allocates every Builder on the heap, as it points to itself.)
type arena struct {
	b       []byte
	escaped bool
}

type span struct{ from, to int }

func (s span) empty() bool          { return s.from == s.to }
func (s span) of(all string) string { return all[s.from:s.to] }

// newArena copies message b; escaped is what members said of it.
func newArena(b []byte, escaped bool) arena {
	return arena{append(make([]byte, 0, len(b)), b...), escaped}
}

// string is the arena's bytes as a string, without a copy: the arena is
// not written to afterwards.
func (a *arena) string() string { return unsafe.String(unsafe.SliceData(a.b), len(a.b)) }

// decodeResume reads a resume message. On error the handle, now and wake
// are still filled in when they could be read.
func decodeResume(b []byte) (ResumeMsg, error) {
	var in ResumeMsg
	if len(b) > MaxMessage {
		return in, errTooLarge
	}
	var v [7]raw
	escaped, ok := members(b, resumeMembers, v[:])
	if !ok {
		return in, errMalformed
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
	a := newArena(b, escaped)
	hs, okh := a.headers(b, v[4])
	errSpan, oke := a.str(b, v[6])
	if !okh || !oke {
		return in, errMalformed
	}
	all := a.string()
	in.Headers = make([]Header, len(hs))
	for i, h := range hs {
		in.Headers[i] = Header{h[0].of(all), h[1].of(all)}
	}
	in.Error = errSpan.of(all)
	if len(in.Headers) > MaxHeaders || headerBytes(in.Headers) > MaxHeaderBytes {
		return in, errTooLarge
	}
	if v[5].present() {
		if v[5].k != kString {
			return in, errMalformed
		}
		sp, _ := a.str(b, v[5])
		if sp.to-sp.from > MaxBody {
			return in, errTooLarge
		}
		in.Body = a.b[sp.from:sp.to:sp.to]
	}
	return in, nil
}

// AppendJSON appends the output message of docs/edge.md:
//
//	{"kind":"response","handle":1,"status":401,"headers":[[n,v],...],"body":"..."}
//	{"kind":"response","handle":2,"status":200,"headers":[...],"passthrough":true}
//	{"kind":"subrequest","handle":3,"method":"GET","url":"...","headers":[...],"forward":false}
//	{"kind":"park","handle":4}
//
// each with "wake":[...] when it wakes parked requests.
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
	case Subrequest:
		dst = jsonenc.Key(dst, "method")
		dst = jsonenc.String(dst, o.Method)
		dst = jsonenc.Key(dst, "url")
		dst = jsonenc.String(dst, o.URL)
		dst = appendHeaders(dst, o.Headers)
		dst = jsonenc.Key(dst, "forward")
		dst = jsonenc.Bool(dst, o.Forward)
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

func appendHeaders(dst []byte, h []Header) []byte {
	dst = jsonenc.Key(dst, "headers")
	dst = append(dst, '[')
	for i, kv := range h {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		dst = jsonenc.String(dst, kv.Name)
		dst = append(dst, ',')
		dst = jsonenc.String(dst, kv.Value)
		dst = append(dst, ']')
	}
	return append(dst, ']')
}
