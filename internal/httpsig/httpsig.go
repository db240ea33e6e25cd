// Package httpsig applies the edge signature rule (shared/edgesig) to
// net/http requests: the origin's side, the wazero host's and tests'.
// The module, which has no net/http, builds its edgesig.Message itself.
package httpsig

import (
	"crypto/rand"
	"encoding/binary"
	"net/http"
	"time"

	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/lease"
)

// Message is what a signature on r covers, for purpose, r's body having
// hex SHA-256 body (edgesig.BodyHash; "" for none). The host is r.Host,
// or r.URL's host for a request being sent; a gate call's target is its
// edgesig.TargetHeader, the conditional GET it asks about.
func Message(purpose string, r *http.Request, body string) edgesig.Message {
	host := r.Host
	if host == "" && r.URL != nil {
		host = r.URL.Host
	}
	target := r.URL.RequestURI()
	if purpose == edgesig.Gate {
		target = r.Header.Get(edgesig.TargetHeader)
	}
	return edgesig.Message{Purpose: purpose, Method: r.Method, Host: host, Target: target, Body: body,
		Auth: r.Header.Get("Authorization"), Usage: r.Header.Get(lease.UsageHeader), RequestID: r.Header.Get("X-Request-Id")}
}

// Sign sets r's edgesig.Header for purpose at now, body being what r
// sends. Each call makes a Signer (about 5 µs), so it is safe for
// concurrent use: for calls made now and then, and tests.
func Sign(keys edgesig.Keys, purpose string, r *http.Request, body []byte, now time.Time) {
	var seed [8]byte
	rand.Read(seed[:])
	m := Message(purpose, r, edgesig.BodyHash(body))
	r.Header.Set(edgesig.Header, edgesig.NewSigner(keys, binary.LittleEndian.Uint64(seed[:])).Sign(&m, now.UnixMilli()))
}
