package pipeline

import (
	"errors"

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

// AppendJSON appends the output message of docs/edge.md:
//
//	{"kind":"response","handle":1,"status":401,"headers":[[n,v],...],"body":"..."}
//	{"kind":"response","handle":2,"status":200,"headers":[...],"passthrough":true}
//	{"kind":"subrequest","handle":3,"method":"GET","url":"...","headers":[...],"forward":false}
//	{"kind":"park","handle":4}
//	{"kind":"done","handle":5}
//
// each with "wake":[...] when it wakes parked requests, and with
// "refresh":{"handle":5,"url":"..."} when it begins a background refresh.
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
	if o.Refresh.Handle != 0 {
		dst = jsonenc.Key(dst, "refresh")
		dst = append(dst, '{')
		dst = jsonenc.Key(dst, "handle")
		dst = jsonenc.Int(dst, int64(o.Refresh.Handle))
		dst = jsonenc.Key(dst, "url")
		dst = jsonenc.String(dst, o.Refresh.URL)
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

func appendHeaders(dst []byte, h []Header) []byte {
	dst = jsonenc.Key(dst, "headers")
	return jsonenc.Pairs(dst, h, func(h Header) (string, string) { return h.Name, h.Value })
}
