package pipeline

import (
	"slices"

	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/ows"
)

// Handle names one request in flight (docs/edge.md: "state is kept per
// handle"). Zero is never a request's handle.
type Handle uint32

// Header is one header field, in the order the sender gave it.
type Header struct{ Name, Value string }

// Bounds on a request or a subrequest's response (headers and body).
const (
	MaxHeaders     = 256
	MaxHeaderBytes = 256 << 10
	MaxBody        = 256 << 10 // resume bodies: the JWKS (64 KiB at most) and gate answers
)

// Request is a new request (docs/edge.md, start). The body never enters
// the pipeline: the host keeps it and sends it with a forward.
type Request struct {
	Method  string
	Path    string // escaped, without the query
	Query   string // raw, without '?'
	Headers []Header
	Now     int64 // unix milliseconds
	// BodySHA256 is the hex SHA-256 of the body the host will forward
	// (edgesig.BodyHash); "" when the request has none.
	BodySHA256 string
}

// bounded reports whether the request's header fields are within
// MaxHeaders and MaxHeaderBytes.
func (r *Request) bounded() bool {
	return len(r.Headers) <= MaxHeaders && headerBytes(r.Headers) <= MaxHeaderBytes
}

func headerBytes(h []Header) int {
	n := 0
	for _, kv := range h {
		n += len(kv.Name) + len(kv.Value)
	}
	return n
}

// size is what the request holds, in bytes, for the pending table.
func (r *Request) size() int {
	return len(r.Method) + len(r.Path) + len(r.Query) + headerBytes(r.Headers)
}

// ResumeMsg is the response to a subrequest, or a wake-up (docs/edge.md,
// resume).
type ResumeMsg struct {
	Handle  Handle
	Status  int // 0: the subrequest failed, and Error says why
	Headers []Header
	Body    []byte // JWKS and gate answers only; never a forward's
	Error   string
	Wake    bool // the JWKS fetch this request was parked on has ended
	Now     int64
}

// Kind is the kind of an Output.
type Kind uint8

// The kinds of output.
const (
	Response   Kind = iota + 1 // the final answer
	Subrequest                 // perform this request, then Resume
	Park                       // wait for a wake
	Done                       // a background call ended, or a control message was run: nothing to send
)

func (k Kind) String() string {
	switch k {
	case Response:
		return "response"
	case Subrequest:
		return "subrequest"
	case Park:
		return "park"
	case Done:
		return "done"
	}
	return "invalid"
}

// Output is what the pipeline asks of the host.
type Output struct {
	Kind   Kind
	Handle Handle
	// Response: the status and headers, and either Body or, with
	// Passthrough, the body of the origin's response just resumed. A
	// subrequest that is no forward (a flush's) may have a Body too, and
	// so may a done (a revoke's reports).
	Status      int
	Headers     []Header // of the response, or of the subrequest
	Body        []byte   // nil: no body
	Passthrough bool
	// Lease, when its ID is set, is the lease a 304 was answered with
	// and its usage after it: the host logs it before the response.
	Lease LeaseUse
	// Subrequest: with Forward, the client's request to send with its
	// body, using Headers in place of the client's.
	Method  string
	URL     string
	Forward bool
	// Signatures, with several origins, are a subrequest to the origin's
	// X-Lectern-Edge values, one per origin in Config.Origins' order: the
	// host sends the one of the origin it sends to.
	Signatures []string
	// Wake lists parked requests to resume with Wake set. Any output may
	// carry it.
	Wake []Handle
	// Refresh, when its Handle is set, asks the host to fetch the JWKS in
	// the background and resume that handle with the answer. Any output
	// may carry it.
	Refresh Refresh
	// Background, when its Handle is set, is a lease-protocol call for
	// the host to make without holding anything up, resuming that handle
	// with its answer. Any output may carry one.
	Background Background
}

// Refresh is a background JWKS fetch (docs/edge.md): GET URL, then
// resume Handle, which is no request's.
type Refresh struct {
	Handle Handle
	URL    string
}

// Retry is the module's mark on every subrequest, background call and
// refresh (its "retry" member): which of the host's attempts that failed
// without a response may be sent to the next origin, with several
// (docs/edge.md, "Several origins"). The hosts apply the mark; the rule
// is the module's alone.
type Retry uint8

const (
	// RetryUnsent: only an attempt the host knows was never sent (it got
	// no connection). A host that cannot tell (workerd) sends it to no
	// other origin.
	RetryUnsent Retry = iota
	// RetryAny: any attempt without a response, whatever happened to its
	// connection.
	RetryAny
)

func (r Retry) String() string {
	if r == RetryAny {
		return "any"
	}
	return "unsent"
}

// retryOf is the mark of a subrequest of method: RetryAny when the method
// is idempotent (RFC 9110 §9.2.2), so that a request that may have
// reached an origin can be sent again with the same effect; RetryUnsent
// otherwise: a POST (the gate call, which meters; the media mint; the
// lease and usage calls) is never applied twice.
func retryOf(method string) Retry {
	switch method {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return RetryAny
	}
	return RetryUnsent
}

// headerValue is the first value of the field called name, as net/http's
// Header.Get gives it (field names are case-insensitive).
func headerValue(h []Header, name string) string {
	for _, kv := range h {
		if equalFold(kv.Name, name) {
			return kv.Value
		}
	}
	return ""
}

// headerCount is how many fields called name h has.
func headerCount(h []Header, name string) int {
	n := 0
	for _, kv := range h {
		if equalFold(kv.Name, name) {
			n++
		}
	}
	return n
}

// combinedValue is the values of the fields called name joined by ", ",
// as a recipient may combine a list field's lines (RFC 9110 §5.3) and as
// the origin combines them: the one value itself when there is one (no
// copy), else kept in t.
func combinedValue(h []Header, name string, t *text) string {
	if headerCount(h, name) < 2 {
		return headerValue(h, name)
	}
	b := t.free()
	first := true
	for _, kv := range h {
		if equalFold(kv.Name, name) {
			if !first {
				b = append(b, ", "...)
			}
			b, first = append(b, kv.Value...), false
		}
	}
	return t.keep(b)
}

// setHeader replaces every field called name with one holding value.
func setHeader(h []Header, name, value string) []Header {
	out := h[:0]
	for _, kv := range h {
		if !equalFold(kv.Name, name) {
			out = append(out, kv)
		}
	}
	return append(out, Header{name, value})
}

// sortHeaders orders fields by name, stably, as net/http writes them.
func sortHeaders(h []Header) {
	slices.SortStableFunc(h, func(a, b Header) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
}

// internal reports whether name is one of the edge protocol's own fields
// (X-Lectern-*): never taken from a client, never shown to one.
func internal(name string) bool {
	const p = edgesig.HeaderPrefix
	return len(name) >= len(p) && equalFold(name[:len(p)], p)
}

// hopByHop reports whether name is a hop-by-hop field (RFC 9110 §7.6.1),
// including any that the message's Connection field names, or Host, which
// the host sets from the URL.
func hopByHop(name string, h []Header) bool {
	for _, n := range [...]string{"Connection", "Keep-Alive", "Transfer-Encoding", "TE", "Upgrade", "Host", "Trailer"} {
		if equalFold(name, n) {
			return true
		}
	}
	if len(name) >= len("Proxy-") && equalFold(name[:len("Proxy-")], "Proxy-") {
		return true
	}
	for _, kv := range h {
		if equalFold(kv.Name, "Connection") && listHas(kv.Value, name) {
			return true
		}
	}
	return false
}

// listHas reports whether the comma-separated list holds name.
func listHas(list, name string) bool {
	for len(list) > 0 {
		var elem string
		if i := indexByte(list, ','); i >= 0 {
			elem, list = list[:i], list[i+1:]
		} else {
			elem, list = list, ""
		}
		if equalFold(ows.Trim(elem), name) {
			return true
		}
	}
	return false
}

// responseHeaders are the fields of an origin response fit for the
// client: no X-Lectern-* and no hop-by-hop fields. An answer the edge
// writes itself (own) also loses the framing and Date fields, which the
// host writes for the body it sends. h is reused.
func responseHeaders(h []Header, own bool) []Header {
	if own {
		return filterHeaders(h, func(name string) bool {
			return internal(name) || equalFold(name, "Content-Length") || equalFold(name, "Date")
		})
	}
	return filterHeaders(h, internal)
}

// filterHeaders drops from h the hop-by-hop fields and those drop names,
// in place: no field's fate depends on another's, unless a Connection
// field names some, and then the result is a new slice.
func filterHeaders(h []Header, drop func(name string) bool) []Header {
	out := h[:0]
	for _, kv := range h {
		if equalFold(kv.Name, "Connection") {
			out = make([]Header, 0, len(h)+2)
			break
		}
	}
	for _, kv := range h {
		if hopByHop(kv.Name, h) || drop(kv.Name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}
