// Package encoding negotiates the response's content coding from
// Accept-Encoding (spec: Transport; RFC 9110 §12.5.3 and §12.4.2) and says
// which bodies are worth compressing.
//
// The spec's rules, in the order Negotiate applies them:
//
//   - "br is used only when named": br is never reached through "*".
//   - "Accept-Encoding: * resolves to gzip": "*" stands for gzip when gzip
//     (or x-gzip) is not listed itself.
//   - "identity and gzip;q=0 are honoured as refusals": q=0 refuses a
//     coding, and a listed identity that outranks every compressed coding
//     wins.
//   - "q-values are negotiated properly": the highest q wins; on a tie br
//     beats gzip and both beat identity.
//
// No header, an empty one, or one that leaves nothing acceptable answers
// Identity: the server can always send the body as it is.
package encoding

import "github.com/lectern-api/lectern/shared/ows"

// Coding is a response content coding.
type Coding uint8

// The codings the API sends.
const (
	Identity Coding = iota // no Content-Encoding header
	Gzip
	Br
)

// String returns the Content-Encoding header value: "gzip", "br", or "" for
// Identity, which is sent without the header.
func (c Coding) String() string {
	switch c {
	case Gzip:
		return "gzip"
	case Br:
		return "br"
	}
	return ""
}

// MinSize is the smallest body that is compressed (spec: Transport, Limits:
// "bodies under 384 bytes are not compressed").
const MinSize = 384

// Compressible reports whether a body of bodyLen bytes is compressed when
// the client accepts a coding. Smaller bodies (errors, progress
// acknowledgements, 304s) go out as they are, with no Content-Encoding.
func Compressible(bodyLen int) bool { return bodyLen >= MinSize }

// slots of the codings Negotiate tracks.
const (
	slotGzip = iota
	slotBr
	slotIdentity
	slotStar
	nslots
)

// Negotiate picks the coding for a response from the request's
// Accept-Encoding value. Elements are comma-separated, names are matched
// case-insensitively, x-gzip is gzip, whitespace (SP, HTAB) is optional
// around every delimiter, and a malformed element (a name that is not a
// token, a q that is not an RFC 9110 qvalue: 0 to 1 with at most three
// decimals) is ignored. When a coding is listed twice its first element
// counts. Parameters other than q are ignored. It runs in one pass and
// never panics.
func Negotiate(acceptEncoding string) Coding {
	var q [nslots]int // in thousandths; -1 is "not listed"
	for i := range q {
		q[i] = -1
	}
	for s := acceptEncoding; s != ""; {
		var elem string
		elem, s = cutByte(s, ',')
		name, weight, ok := parseElement(elem)
		if !ok {
			continue
		}
		slot := -1
		switch {
		case equalFold(name, "gzip"), equalFold(name, "x-gzip"):
			slot = slotGzip
		case equalFold(name, "br"):
			slot = slotBr
		case equalFold(name, "identity"):
			slot = slotIdentity
		case name == "*":
			slot = slotStar
		}
		if slot >= 0 && q[slot] < 0 {
			q[slot] = weight
		}
	}

	gzip := q[slotGzip]
	if gzip < 0 {
		gzip = q[slotStar] // "*" resolves to gzip, never to br
	}
	best, bestQ := Identity, 0
	if q[slotBr] > 0 {
		best, bestQ = Br, q[slotBr]
	}
	if gzip > bestQ { // strictly: on a tie br stays
		best, bestQ = Gzip, gzip
	}
	if q[slotIdentity] > bestQ {
		best = Identity
	}
	return best
}

// parseElement parses one list element: OWS coding *( OWS ";" OWS param ) OWS.
// It returns the coding name and its q in thousandths (1000 when absent).
func parseElement(elem string) (name string, q int, ok bool) {
	name, rest := cutByte(elem, ';')
	name = ows.Trim(name)
	if !isToken(name) {
		return "", 0, false
	}
	q, seenQ := 1000, false
	for rest != "" {
		var param string
		param, rest = cutByte(rest, ';')
		k, v := cutByte(param, '=')
		k = ows.Trim(k)
		if k == "" && ows.Trim(v) == "" {
			continue // empty parameter, as in "gzip;"
		}
		if !equalFold(k, "q") {
			continue // RFC 9110 defines no other parameter here
		}
		w, okq := parseQ(ows.Trim(v))
		if !okq {
			return "", 0, false
		}
		if !seenQ {
			q, seenQ = w, true
		}
	}
	return name, q, true
}

// parseQ parses an RFC 9110 §12.4.2 qvalue into thousandths:
//
//	qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
func parseQ(s string) (int, bool) {
	if s == "" || len(s) > 5 || s[0] != '0' && s[0] != '1' {
		return 0, false
	}
	n := int(s[0]-'0') * 1000
	if len(s) == 1 {
		return n, true
	}
	if s[1] != '.' {
		return 0, false
	}
	scale := 100
	for i := 2; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n += int(c-'0') * scale
		scale /= 10
	}
	if n > 1000 {
		return 0, false
	}
	return n, true
}

// cutByte is strings.Cut for one byte, without the found flag.
func cutByte(s string, sep byte) (before, after string) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// isToken reports whether s is an RFC 9110 §5.6.2 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		switch c {
		case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
			continue
		}
		return false
	}
	return true
}

// equalFold reports whether s equals lower (an ASCII lower-case name) when
// ASCII case is ignored.
func equalFold(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
