package pipeline

import (
	"errors"
	"strings"

	"github.com/lectern-api/lectern/shared/jsoncheck"
	"github.com/lectern-api/lectern/shared/jsonenc"
	"github.com/valyala/fastjson"
)

// The JSON codec of docs/edge.md, which the reactor exports. Decoding is
// strict about the members it reads (their types, the shape of header
// pairs) and ignores others.

// MaxMessage bounds every message from the host.
const MaxMessage = 1 << 20

// maxDepth bounds the nesting of a message: the deepest is a header pair
// (object, array, array). It keeps fastjson's recursive descent shallow on
// TinyGo's small stack.
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
	var parser fastjson.Parser
	v, err := parse(&parser, b)
	if err != nil {
		return cfg, err
	}
	for _, m := range [...]struct {
		name     string
		dst      *string
		required bool
	}{
		{"origin", &cfg.Origin, true}, {"jwksUrl", &cfg.JWKSURL, true}, {"issuer", &cfg.Issuer, true},
		{"audience", &cfg.Audience, true}, {"secret", &cfg.Secret, true},
		{"resourceMetadata", &cfg.ResourceMetadata, false},
	} {
		s, ok := str(v, m.name)
		if !ok {
			return cfg, errors.New("pipeline: config member " + m.name + " is not a string")
		}
		if s == "" && m.required {
			return cfg, errors.New("pipeline: config member " + m.name + " is missing")
		}
		*m.dst = s
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
	req, err := decodeRequest(&p.parser, b)
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
	in, err := decodeResume(&p.parser, b)
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

func decodeRequest(parser *fastjson.Parser, b []byte) (Request, error) {
	var r Request
	v, err := parse(parser, b)
	if err != nil {
		return r, err
	}
	// Every string of the request is copied out of the parser's buffer
	// into one allocation (the message's length bounds them all).
	var a arena
	a.b.Grow(len(b))
	method, ok0 := a.member(v, "method")
	path, ok1 := a.member(v, "path")
	query, ok2 := a.member(v, "query")
	if !ok0 || !ok1 || !ok2 || method.empty() || path.empty() {
		return r, errMalformed
	}
	hs, err := a.headers(v.Get("headers"))
	if err != nil {
		return r, err
	}
	if r.Now, err = integer(v.Get("now")); err != nil {
		return r, err
	}
	all := a.b.String()
	r.Method, r.Path, r.Query = method.of(all), path.of(all), query.of(all)
	r.Headers = make([]Header, len(hs))
	for i, h := range hs {
		r.Headers[i] = Header{h[0].of(all), h[1].of(all)}
	}
	return r, nil
}

// arena collects the strings of one message in one buffer; a span is a
// string's place in it, read back (of) once the buffer is complete.
type arena struct{ b strings.Builder }

type span struct{ from, to int }

func (s span) empty() bool          { return s.from == s.to }
func (s span) of(all string) string { return all[s.from:s.to] }
func (a *arena) add(b []byte) span  { from := a.b.Len(); a.b.Write(b); return span{from, a.b.Len()} }

// member is an optional string member; ok is false when it has another
// type.
func (a *arena) member(v *fastjson.Value, name string) (span, bool) {
	m := v.Get(name)
	if m == nil {
		return span{}, true
	}
	b, err := m.StringBytes()
	if err != nil {
		return span{}, false
	}
	return a.add(b), true
}

// headers reads [[name, value], ...]; absent is none.
func (a *arena) headers(v *fastjson.Value) ([][2]span, error) {
	if v == nil {
		return nil, nil
	}
	arr, err := v.Array()
	if err != nil {
		return nil, errMalformed
	}
	out := make([][2]span, 0, len(arr))
	for _, e := range arr {
		pair, err := e.Array()
		if err != nil || len(pair) != 2 {
			return nil, errMalformed
		}
		name, err1 := pair[0].StringBytes()
		value, err2 := pair[1].StringBytes()
		if err1 != nil || err2 != nil || len(name) == 0 {
			return nil, errMalformed
		}
		out = append(out, [2]span{a.add(name), a.add(value)})
	}
	return out, nil
}

// decodeResume reads a resume message. On error the handle, now and wake
// are still filled in when they could be read.
func decodeResume(parser *fastjson.Parser, b []byte) (ResumeMsg, error) {
	var in ResumeMsg
	v, err := parse(parser, b)
	if err != nil {
		return in, err
	}
	h, err := integer(v.Get("handle"))
	if err != nil || h <= 0 || h > 1<<32-1 {
		return in, errMalformed
	}
	in.Handle = Handle(h)
	if in.Now, err = integer(v.Get("now")); err != nil {
		return in, err
	}
	if w := v.Get("wake"); w != nil {
		if w.Type() != fastjson.TypeTrue && w.Type() != fastjson.TypeFalse {
			return in, errMalformed
		}
		in.Wake = w.Type() == fastjson.TypeTrue
	}
	if s := v.Get("status"); s != nil {
		n, err := integer(s)
		if err != nil || n < 0 || n > 999 {
			return in, errMalformed
		}
		in.Status = int(n)
	}
	var a arena
	a.b.Grow(min(len(b), 4<<10)) // the headers, not the body
	hs, err := a.headers(v.Get("headers"))
	if err != nil {
		return in, err
	}
	all := a.b.String()
	in.Headers = make([]Header, len(hs))
	for i, h := range hs {
		in.Headers[i] = Header{h[0].of(all), h[1].of(all)}
	}
	if len(in.Headers) > MaxHeaders || headerBytes(in.Headers) > MaxHeaderBytes {
		return in, errTooLarge
	}
	if bv := v.Get("body"); bv != nil {
		bb, err := bv.StringBytes()
		if err != nil {
			return in, errMalformed
		}
		if len(bb) > MaxBody {
			return in, errTooLarge
		}
		in.Body = append([]byte{}, bb...)
	}
	var ok bool
	if in.Error, ok = str(v, "error"); !ok {
		return in, errMalformed
	}
	return in, nil
}

// parse parses one bounded JSON object.
func parse(parser *fastjson.Parser, b []byte) (*fastjson.Value, error) {
	if len(b) > MaxMessage {
		return nil, errTooLarge
	}
	if !jsoncheck.Shallow(b, maxDepth) {
		return nil, errMalformed
	}
	v, err := parser.ParseBytes(b)
	if err != nil || v.Type() != fastjson.TypeObject {
		return nil, errMalformed
	}
	return v, nil
}

// str reads an optional string member; ok is false when it has another
// type. The string is copied out of the parser's buffer.
func str(v *fastjson.Value, name string) (string, bool) {
	m := v.Get(name)
	if m == nil {
		return "", true
	}
	b, err := m.StringBytes()
	if err != nil {
		return "", false
	}
	return string(b), true
}

// integer reads an integer member; absent is 0.
func integer(v *fastjson.Value) (int64, error) {
	if v == nil {
		return 0, nil
	}
	n, err := v.Int64()
	if err != nil {
		return 0, errMalformed
	}
	return n, nil
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
