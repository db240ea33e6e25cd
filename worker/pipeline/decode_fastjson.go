//go:build stdscan

package pipeline

import (
	"errors"
	"unsafe"

	"github.com/lectern-api/lectern/shared/jsoncheck"
	"github.com/valyala/fastjson"
)

// The codec's readers of the host's messages over fastjson, which
// `-tags stdscan` measures against the scanner of scan.go (tools/bench
// -variants): the depth bounded (jsoncheck.Shallow), the syntax checked
// in full (fastjson.ValidateBytes: fastjson's parser alone lets invalid
// escapes, control characters and numbers such as "01" through), then
// parsed. Unlike the scanner, fastjson keeps a lone surrogate's escape
// as written rather than making it U+FFFD.

// parser reads every message; the reactor is single-threaded, and what
// it parses lives only until the next message (a start's strings are
// copied into the request's arena).
var parser fastjson.Parser

// ParseConfig reads the configure message:
//
//	{"origin": "...", "jwksUrl": "...", "issuer": "...", "audience": "...",
//	 "secret": "...", "resourceMetadata": "..."}
//
// Every member but resourceMetadata is required.
func ParseConfig(b []byte) (Config, error) {
	var cfg Config
	names := []string{"origin", "jwksUrl", "issuer", "audience", "secret", "resourceMetadata"}
	dsts := []*string{&cfg.Origin, &cfg.JWKSURL, &cfg.Issuer, &cfg.Audience, &cfg.Secret, &cfg.ResourceMetadata}
	o, err := parse(b)
	if err != nil {
		return cfg, err
	}
	a := &arena{make([]byte, 0, len(b))}
	for i, name := range names {
		s, ok := a.str(o.Get(name))
		if !ok {
			return cfg, errors.New("pipeline: config member " + name + " is not a string")
		}
		if s == "" && name != "resourceMetadata" {
			return cfg, errors.New("pipeline: config member " + name + " is missing")
		}
		*dsts[i] = s
	}
	return cfg, nil
}

// decodeRequest reads a start message. Its strings are copied into one
// arena and its header fields into an array: st's (a pending request of
// the codec kept for reuse), or new ones when st is nil.
func decodeRequest(b []byte, st *pending) (Request, error) {
	var r Request
	o, err := parse(b)
	if err != nil {
		return r, err
	}
	var buf []byte
	var fields []Header
	if st != nil {
		buf, fields = st.arena, st.fields
	}
	if cap(buf) < len(b) { // every string of the message fits in len(b)
		buf = make([]byte, 0, len(b))
	}
	a := &arena{buf[:0]}
	var ok [5]bool
	r.Method, ok[0] = a.str(o.Get("method"))
	r.Path, ok[1] = a.str(o.Get("path"))
	r.Query, ok[2] = a.str(o.Get("query"))
	r.Headers, ok[3] = a.headers(fields, o.Get("headers"))
	if st != nil {
		st.arena, st.fields = a.b, r.Headers
	}
	r.Now, ok[4] = integer(o.Get("now"))
	if ok != [5]bool{true, true, true, true, true} || r.Method == "" {
		return Request{}, errMalformed
	}
	return r, nil
}

// decodeResume reads a resume message, whose strings stay in the
// parser's buffer (nothing of a resume outlives its call), and whose
// header fields are appended to dst. On error the handle, now and wake
// are still filled in when they could be read.
func decodeResume(b []byte, dst []Header) (ResumeMsg, error) {
	var in ResumeMsg
	o, err := parse(b)
	if err != nil {
		return in, err
	}
	h, ok := integer(o.Get("handle"))
	if !ok || h <= 0 || h > 1<<32-1 {
		return in, errMalformed
	}
	in.Handle = Handle(h)
	if in.Now, ok = integer(o.Get("now")); !ok {
		return in, errMalformed
	}
	if in.Wake, ok = boolean(o.Get("wake")); !ok {
		return in, errMalformed
	}
	status, ok := integer(o.Get("status"))
	if !ok || status < 0 || status > 999 {
		return in, errMalformed
	}
	in.Status = int(status)
	var a *arena // the parser's buffer
	hs, okh := a.headers(dst, o.Get("headers"))
	errText, oke := a.str(o.Get("error"))
	if !okh || !oke {
		return in, errMalformed
	}
	in.Headers, in.Error = hs, errText
	if len(in.Headers) > MaxHeaders || headerBytes(in.Headers) > MaxHeaderBytes {
		return in, errTooLarge
	}
	if v := o.Get("body"); v != nil {
		body, err := v.StringBytes()
		if err != nil {
			return in, errMalformed
		}
		if len(body) > MaxBody {
			return in, errTooLarge
		}
		in.Body = body[:len(body):len(body)]
	}
	return in, nil
}

// parse checks message b and parses it as one object.
func parse(b []byte) (*fastjson.Object, error) {
	if len(b) > MaxMessage {
		return nil, errTooLarge
	}
	if !jsoncheck.Shallow(b, maxDepth) || fastjson.ValidateBytes(b) != nil {
		return nil, errMalformed
	}
	v, err := parser.ParseBytes(b)
	if err != nil {
		return nil, errMalformed
	}
	o, err := v.Object()
	if err != nil {
		return nil, errMalformed
	}
	return o, nil
}

// arena holds the strings of one message, copied out of the parser's
// buffer; its capacity, at least the message's length, is never
// exceeded, so the strings read from it stay put. A nil arena leaves
// them in the parser's buffer.
type arena struct{ b []byte }

// str is the string v; absent is empty.
func (a *arena) str(v *fastjson.Value) (string, bool) {
	if v == nil {
		return "", true
	}
	s, err := v.StringBytes()
	if err != nil {
		return "", false
	}
	if len(s) == 0 {
		return "", true
	}
	if a != nil {
		from := len(a.b)
		a.b = append(a.b, s...)
		s = a.b[from:]
	}
	return unsafe.String(&s[0], len(s)), true
}

// headers appends to dst[:0] the [[name, value], ...] pairs of v; absent
// is none. A name may not be empty.
func (a *arena) headers(dst []Header, v *fastjson.Value) ([]Header, bool) {
	out := dst[:0]
	if v == nil {
		return out, true
	}
	arr, err := v.Array()
	if err != nil {
		return nil, false
	}
	if out == nil {
		out = make([]Header, 0, 16) // the common case in one allocation
	}
	for _, e := range arr {
		pair, err := e.Array()
		if err != nil || len(pair) != 2 {
			return nil, false
		}
		name, ok1 := a.str(pair[0])
		value, ok2 := a.str(pair[1])
		if !ok1 || !ok2 || name == "" {
			return nil, false
		}
		out = append(out, Header{name, value})
	}
	return out, true
}

// integer reads an integer fitting an int64; absent is 0.
func integer(v *fastjson.Value) (int64, bool) {
	if v == nil {
		return 0, true
	}
	n, err := v.Int64()
	return n, err == nil
}

// boolean reads true or false; absent is false.
func boolean(v *fastjson.Value) (bool, bool) {
	if v == nil {
		return false, true
	}
	switch v.Type() {
	case fastjson.TypeTrue:
		return true, true
	case fastjson.TypeFalse:
		return false, true
	}
	return false, false
}
