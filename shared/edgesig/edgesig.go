// Package edgesig authenticates the edge to the origin: every request the
// edge forwards, and its gate calls, carry
//
//	X-Lectern-Edge: v1=<unix seconds>.<hex HMAC-SHA256>
//
// over the purpose, the method, the request target (path and query), the
// request id and the time, keyed with a key both tiers derive from the
// deployment secret. The origin never trusts the edge beyond this: it
// re-verifies tokens and re-reads entitlements itself.
package edgesig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// Header is the signature's header.
const Header = "X-Lectern-Edge"

// MaxSkew bounds the difference between the signing and checking clocks.
const MaxSkew = 300 // seconds

// The purposes a signature is made for.
const (
	Forward = "forward" // a client request forwarded unchanged
	Gate    = "gate"    // POST /internal/gate: may this conditional request be a 304?
)

// Key derives the edge key from the deployment secret (LECTERN_SECRET).
func Key(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("lectern/gate"))
	return m.Sum(nil)
}

func mac(key []byte, purpose, method, target, requestID string, unix int64) []byte {
	m := hmac.New(sha256.New, key)
	for _, f := range []string{"v1", purpose, method, target, requestID, strconv.FormatInt(unix, 10)} {
		m.Write([]byte(strconv.Itoa(len(f))))
		m.Write([]byte{':'})
		m.Write([]byte(f))
	}
	return m.Sum(nil)
}

// Sign returns the header value for a request at unix seconds.
func Sign(key []byte, purpose, method, target, requestID string, unix int64) string {
	return "v1=" + strconv.FormatInt(unix, 10) + "." + hex.EncodeToString(mac(key, purpose, method, target, requestID, unix))
}

// Verify checks a header value made by Sign at most MaxSkew seconds from
// now. An empty key never verifies.
func Verify(key []byte, value, purpose, method, target, requestID string, now int64) bool {
	if len(key) == 0 {
		return false
	}
	rest, ok := strings.CutPrefix(value, "v1=")
	if !ok {
		return false
	}
	ts, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return false
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || unix < now-MaxSkew || unix > now+MaxSkew {
		return false
	}
	got, err := hex.DecodeString(sig)
	if err != nil {
		return false
	}
	return hmac.Equal(got, mac(key, purpose, method, target, requestID, unix))
}
