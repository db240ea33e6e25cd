// Package httpsig applies the edge signature rule (shared/edgesig) to
// net/http requests: the origin's side, the wazero host's and tests'.
// The module, which has no net/http, builds its edgesig.Message itself.
package httpsig

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/lease"
)

// Message is what a signature on r covers, for purpose, r's body having
// hex SHA-256 body (edgesig.BodyHash; "" for none). The host is r.Host,
// or r.URL's host for a request being sent; a gate call's target is its
// edgesig.TargetHeader, the conditional GET it asks about. A header
// field's value is its field lines joined by ", " (Value), as the origin
// reads If-None-Match and X-Lectern-Usage: a line added to a signed field
// alters it.
func Message(purpose string, r *http.Request, body string) edgesig.Message {
	host := r.Host
	if host == "" && r.URL != nil {
		host = r.URL.Host
	}
	target := r.URL.RequestURI()
	if purpose == edgesig.Gate {
		target = r.Header.Get(edgesig.TargetHeader)
	}
	h := r.Header
	return edgesig.Message{Purpose: purpose, Method: r.Method, Host: host, Target: target, Body: body,
		Auth: Value(h, "Authorization"), Usage: Value(h, lease.UsageHeader), RequestID: Value(h, "X-Request-Id"),
		Header: func(name string) string { return Value(h, name) }}
}

// Value is the field name of h as a signature covers it: its lines
// joined by ", ", "" when there is none.
func Value(h http.Header, name string) string {
	vs := h.Values(name)
	switch len(vs) {
	case 0:
		return ""
	case 1:
		return vs[0]
	}
	return strings.Join(vs, ", ")
}

// Sign sets r's edgesig.Header for purpose at now, body being what r
// sends. Each call makes a Signer (about 5 µs), so it is safe for
// concurrent use: for calls made now and then, and tests.
//
// A forward without Accept-Encoding is given "identity" first, as the
// module gives it (what none means to the origin): net/http's Transport
// would add its own, unsigned.
func Sign(keys edgesig.Keys, purpose string, r *http.Request, body []byte, now time.Time) {
	if purpose == edgesig.Forward && len(r.Header.Values("Accept-Encoding")) == 0 {
		r.Header.Set("Accept-Encoding", "identity")
	}
	sign(keys, purpose, r, body, now, false)
}

// SignV2 is Sign by the previous release's rule (edgesig v2), the only
// one that release's receivers read, for a purpose whose v2 rule signs
// every field its list holds (edgesig.V2Covers: lease, usage and revoke
// calls), so that nothing a receiver reads is left unsigned. For another
// purpose it signs nothing and returns ErrV2Uncovered: a forward's or
// gate call's v2 signature leaves If-None-Match, Range and others out,
// and only the module signs those v2 (its signV2 setting).
func SignV2(keys edgesig.Keys, purpose string, r *http.Request, body []byte, now time.Time) error {
	if !edgesig.V2Covers(purpose) {
		return fmt.Errorf("%w: %s", ErrV2Uncovered, purpose)
	}
	sign(keys, purpose, r, body, now, true)
	return nil
}

// ErrV2Uncovered is SignV2 of a purpose whose v2 rule leaves fields the
// receiver reads unsigned.
var ErrV2Uncovered = errors.New("httpsig: the v2 rule does not sign every field of this purpose")

func sign(keys edgesig.Keys, purpose string, r *http.Request, body []byte, now time.Time, v2 bool) {
	var seed [8]byte
	rand.Read(seed[:])
	m := Message(purpose, r, edgesig.BodyHash(body))
	s := edgesig.NewSigner(keys, binary.LittleEndian.Uint64(seed[:]))
	s.V2 = v2
	r.Header.Set(edgesig.Header, s.Sign(&m, now.UnixMilli()))
}
