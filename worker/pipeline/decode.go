//go:build !stdscan

package pipeline

import "errors"

// The codec's readers of the host's messages, over the scanner of
// scan.go. (`-tags stdscan` reads them with fastjson instead:
// decode_fastjson.go, which tools/bench -variants measures against this.)

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
	var v [6]raw
	a, err := open(b, names, v[:], false, nil)
	if err != nil {
		return cfg, err
	}
	for i, name := range names {
		s, ok := a.str(b, v[i])
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

// The members of the start and resume messages, in the order of their
// raw values in members' vals.
var (
	requestMembers = []string{"method", "path", "query", "headers", "now"}
	resumeMembers  = []string{"handle", "now", "wake", "status", "headers", "body", "error"}
)

// decodeRequest reads a start message. Its strings are in a copy of b,
// and its header fields in an array: st's (a pending request of the codec
// kept for reuse), or new ones when st is nil.
func decodeRequest(b []byte, st *pending) (Request, error) {
	var r Request
	var v [5]raw
	var buf []byte
	var fields []Header
	if st != nil {
		buf, fields = st.arena, st.fields
	}
	a, err := open(b, requestMembers, v[:], false, buf) // every string of the request in one allocation, or none
	if err != nil {
		return r, err
	}
	var ok [5]bool
	r.Method, ok[0] = a.str(b, v[0])
	r.Path, ok[1] = a.str(b, v[1])
	r.Query, ok[2] = a.str(b, v[2])
	r.Headers, ok[3] = a.headers(fields, b, v[3])
	if st != nil {
		st.arena, st.fields = a.b, r.Headers
	}
	r.Now, ok[4] = integer(b, v[4])
	// An empty path is read, not refused: it is "/" (RFC 9110 §4.2.3), a
	// path no route has, and the front answers 404 NOT_FOUND as the
	// origin does (a CONNECT's authority-form target has no path).
	if ok != [5]bool{true, true, true, true, true} || r.Method == "" {
		return Request{}, errMalformed
	}
	return r, nil
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
