// Package edgesig authenticates the calls between the edge and the origin,
// in both directions: every request the edge forwards, its gate, lease and
// usage calls, and the origin's revoke pushes to an edge host carry
//
//	X-Lectern-Edge: v3=<unix ms>.<nonce: 16 hex>.<signed fields>.<HMAC-SHA256: 64 hex>
//
// over one rule (Message): the purpose, the method, the receiving host, the
// request target, the SHA-256 of the body, the signed header fields' names
// (lower case, ';'-separated, ascending, as AWS SigV4's SignedHeaders) and
// each one's value (its field lines joined by ", "; "" when absent), the
// nonce and the time, keyed with the purpose's own key (Keys), derived from
// the deployment secret. Every purpose has a list of fields the rule
// requires (Signed): the ones whose value changes its receiver's answer or
// bill. A receiver (Receiver) checks the host is its own, the time is
// within Window of its clock, that the signed names hold every field the
// purpose requires, the MAC, and that it has not accepted the same
// signature before (Seen). The origin never trusts the edge beyond this:
// it re-verifies tokens and re-reads entitlements itself.
//
// The v2 rule, the previous release's (no field list: Authorization,
// X-Lectern-Usage and the request id only, so If-None-Match, Range and
// the others were not signed), is still written by a Signer with V2 set
// and read by a Receiver with AcceptV2 set: both only for a rolling
// upgrade's window (docs/upgrading.md).
package edgesig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"strconv"
	"strings"

	"github.com/lectern-api/lectern/shared/subkey"
)

// The edge protocol's header fields (docs/edge.md). Every one begins with
// HeaderPrefix: the edge never takes such a field from a client nor shows
// one to it.
const (
	HeaderPrefix = "X-Lectern-"
	Header       = "X-Lectern-Edge"   // the signature
	TargetHeader = "X-Lectern-Target" // a gate call's: the conditional GET's request target
	OrgHeader    = "X-Lectern-Org"    // on answers to the edge: the organisation
	GrantsHeader = "X-Lectern-Grants" // on answers to the edge: its grants digest (etag.GrantsDigest)
	UsageHeader  = "X-Lectern-Usage"  // usage reports on a forward or gate call (shared/lease)
)

// Window bounds the difference between the signing and the checking clock,
// either way, in milliseconds. Both tiers' hosts keep UTC by NTP (a few
// milliseconds apart); what the window must cover is the time a signed
// call may take to be sent: a failover tries up to three origins, each
// bounded at 3 s to connect (docs/edge.md, Several origins). 30 s covers
// that with room for a host clock a few seconds off, and bounds what the
// replay cache must hold.
const Window = 30_000

// GatePath is the origin's gate endpoint, outside /v1: the edge asks it
// whether a conditional request is a 304 (docs/edge.md, Origin protocol).
const GatePath = "/internal/gate"

// The purposes a signature is made for, each under a key of its own.
const (
	Forward = "forward" // a client request forwarded unchanged
	Gate    = "gate"    // POST /internal/gate: may this conditional request be a 304?
	Lease   = "lease"   // POST /internal/lease: a lease, with usage reports (shared/lease)
	Usage   = "usage"   // POST /internal/usage: usage reports only
	Revoke  = "revoke"  // POST /internal/revoke, origin to edge host: drop or settle leases
)

var purposes = [...]string{Forward, Gate, Lease, Usage, Revoke}

// EmptyBody is the hex SHA-256 of no bytes: a Message's Body when the
// request has none.
const EmptyBody = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// BodyHash returns the hex SHA-256 of b, a Message's Body.
func BodyHash(b []byte) string {
	if len(b) == 0 {
		return EmptyBody
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Message is what a signature covers.
type Message struct {
	Purpose string
	Method  string
	// Host is the receiver's host and port as the sender's URL names it
	// (the request's Host field); compared without regard to case.
	Host   string
	Target string // the request target: path, and ?query when there is one
	// Body is BodyHash of the body as sent; "" is taken as EmptyBody.
	Body string
	// The values of the signed header fields (each its field lines joined
	// by ", ", as the origin reads them; "" when absent): Authorization,
	// X-Lectern-Usage and X-Request-Id, signed for every purpose, then
	// Fields for the others a purpose signs (Signed), and Header for any
	// field neither names (a receiver's: a signer of a later release may
	// sign more fields than this one requires).
	Auth      string // the Authorization field
	Usage     string // the X-Lectern-Usage field
	RequestID string // the X-Request-Id field
	Fields    []Field
	Header    func(name string) string
}

// Field is one signed header field: its name in lower case, its value.
type Field struct{ Name, Value string }

// value is the value m signs for the field name (lower case).
func (m *Message) value(name string) string {
	switch name {
	case "authorization":
		return m.Auth
	case "x-lectern-usage":
		return m.Usage
	case "x-request-id":
		return m.RequestID
	}
	for _, f := range m.Fields {
		if f.Name == name {
			return f.Value
		}
	}
	if m.Header != nil {
		return m.Header(name)
	}
	return ""
}

// The header fields each purpose signs, in the v3 rule: every field whose
// value changes what the receiver answers or bills for that purpose, the
// absent ones signed as "" (so that adding one is caught as altering it).
// A receiver refuses a signature whose names lack one of its purpose's
// (ErrUnsigned). docs/edge.md, "The signature rule", says why each is
// there; a field added to a list is signed by the module, required by the
// origin and altered by the origin's tests (TestSignedFieldAltered) with
// no other change.
var (
	// Every purpose: the token (the caller, its organisation, what is
	// billed to whom), the usage reports a call carries (bills), the
	// request id (the once key of the bill, the logs).
	common = []string{"authorization", "x-lectern-usage", "x-request-id"}
	// A forward: besides, what the origin's answer is made of.
	// Accept-Encoding: the answer's coding; Content-Type: how the body is
	// read (the token endpoint's form); If-None-Match: a 304 (one call)
	// or a full read; If-Match and If-Range, Range: a download's 412, 206
	// or 200 and its bytes (http.ServeContent).
	forward = []string{"accept-encoding", "authorization", "content-type", "if-match", "if-none-match",
		"if-range", "range", "x-lectern-usage", "x-request-id"}
	// A gate call: besides, If-None-Match, which decides its 204 (a 304,
	// one call billed) or 412; its X-Lectern-Target is the message's
	// Target. The origin runs the gate on these fields alone.
	gate = []string{"authorization", "if-none-match", "x-lectern-usage", "x-request-id"}
)

// Signed returns the names of the header fields the rule signs for
// purpose (lower case, ascending); nil for an unknown purpose. The slice
// is shared: do not modify it.
func Signed(purpose string) []string {
	switch purpose {
	case Forward:
		return forward
	case Gate:
		return gate
	case Lease, Usage, Revoke:
		return common
	}
	return nil
}

// signedList is Signed(purpose) joined by ';', as a v3 value carries it.
func signedList(purpose string) string {
	switch purpose {
	case Forward:
		return forwardList
	case Gate:
		return gateList
	case Lease, Usage, Revoke:
		return commonList
	}
	return ""
}

var (
	forwardList = strings.Join(forward, ";")
	gateList    = strings.Join(gate, ";")
	commonList  = strings.Join(common, ";")
)

// MaxSigned bounds the names a v3 value may carry.
const MaxSigned = 32

// Keys are the purposes' keys.
type Keys struct{ k [len(purposes)][]byte }

// KeysOf derives the purposes' keys from the deployment secret
// (subkey.Edge, then the purpose). An empty secret gives no keys: nothing
// verifies.
func KeysOf(secret []byte) Keys {
	var k Keys
	if len(secret) == 0 {
		return k
	}
	for i, p := range purposes {
		k.k[i] = subkey.Derive(secret, subkey.Edge+"/"+p)
	}
	return k
}

// IsZero reports whether k has no keys (KeysOf an empty secret).
func (k Keys) IsZero() bool { return k.k[0] == nil }

// key returns purpose's key, nil for an unknown purpose or no keys.
func (k Keys) key(purpose string) []byte {
	for i, p := range purposes {
		if p == purpose {
			return k.k[i]
		}
	}
	return nil
}

// Signer signs with one set of keys and reuses its HMAC states and
// buffers, so a signature costs no allocation but its string (under
// TinyGo too: TestGate304Allocations). Its nonces are a counter from a
// random start, so that two signatures of the same message in the same
// millisecond differ. It is not safe for concurrent use: the edge's
// pipeline, which signs every request it passes on, is single-threaded.
type Signer struct {
	// V2 makes it sign by the previous release's rule, which that
	// release's origins read (an edge upgraded before the origins:
	// docs/upgrading.md). Its If-None-Match, Range and the others are
	// not signed.
	V2    bool
	macs  [len(purposes)]hash.Hash
	nonce uint64
	buf   []byte
	sum   [sha256.Size]byte
}

// NewSigner returns a Signer of keys whose nonces start at seed (random).
func NewSigner(keys Keys, seed uint64) *Signer {
	s := &Signer{nonce: seed}
	for i, k := range keys.k {
		if k != nil {
			s.macs[i] = hmac.New(sha256.New, k)
		}
	}
	return s
}

// Sign returns the header value for m at unix milliseconds.
func (s *Signer) Sign(m *Message, unixMilli int64) string {
	return string(s.Append(nil, m, unixMilli))
}

// Append appends Sign's header value to dst. A purpose without a key
// appends a value that never verifies.
func (s *Signer) Append(dst []byte, m *Message, unixMilli int64) []byte {
	s.nonce++
	names := ""
	if s.V2 {
		dst = append(dst, "v2="...)
	} else {
		dst = append(dst, "v3="...)
		names = signedList(m.Purpose)
	}
	dst = strconv.AppendInt(dst, unixMilli, 10)
	dst = append(dst, '.')
	dst = appendNonce(dst, s.nonce)
	dst = append(dst, '.')
	if !s.V2 {
		dst = append(append(dst, names...), '.')
	}
	mac := s.mac(m.Purpose)
	if mac == nil {
		return append(dst, zeroMAC...)
	}
	if s.V2 {
		s.buf = signedV2(s.buf[:0], m, s.nonce, unixMilli)
	} else {
		s.buf = signed(s.buf[:0], m, names, s.nonce, unixMilli)
	}
	mac.Reset()
	mac.Write(s.buf)
	return hex.AppendEncode(dst, mac.Sum(s.sum[:0]))
}

const zeroMAC = "0000000000000000000000000000000000000000000000000000000000000000"

func (s *Signer) mac(purpose string) hash.Hash {
	for i, p := range purposes {
		if p == purpose {
			return s.macs[i]
		}
	}
	return nil
}

func appendNonce(b []byte, n uint64) []byte {
	const digits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, digits[n>>uint(shift)&0xf])
	}
	return b
}

// signed appends to b what the v3 rule signs: the length-prefixed
// fields, names being the signed fields' names joined by ';'.
func signed(b []byte, m *Message, names string, nonce uint64, unixMilli int64) []byte {
	b = field(b, "v3")
	b = head(b, m)
	b = field(b, names)
	for names != "" {
		var name string
		if i := strings.IndexByte(names, ';'); i >= 0 {
			name, names = names[:i], names[i+1:]
		} else {
			name, names = names, ""
		}
		b = field(b, m.value(name))
	}
	return tail(b, nonce, unixMilli)
}

// signedV2 appends to b what the v2 rule signs.
func signedV2(b []byte, m *Message, nonce uint64, unixMilli int64) []byte {
	b = field(b, "v2")
	b = head(b, m)
	for _, f := range [...]string{m.Auth, m.Usage, m.RequestID} {
		b = field(b, f)
	}
	return tail(b, nonce, unixMilli)
}

// head appends the purpose, method, host (lower case), target and body
// hash, each length-prefixed.
func head(b []byte, m *Message) []byte {
	body := m.Body
	if body == "" {
		body = EmptyBody
	}
	b = field(b, m.Purpose)
	b = field(b, m.Method)
	b = strconv.AppendInt(b, int64(len(m.Host)), 10)
	b = append(b, ':')
	for i := 0; i < len(m.Host); i++ {
		c := m.Host[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	b = field(b, m.Target)
	return field(b, body)
}

// tail appends the nonce and the time, length-prefixed.
func tail(b []byte, nonce uint64, unixMilli int64) []byte {
	b = append(b, "16:"...)
	b = appendNonce(b, nonce)
	b = strconv.AppendInt(b, int64(digits(unixMilli)), 10)
	b = append(b, ':')
	return strconv.AppendInt(b, unixMilli, 10)
}

// digits is the length of n in decimal.
func digits(n int64) int {
	d, u := 1, uint64(n)
	if n < 0 {
		d, u = 2, uint64(-(n+1))+1
	}
	for ; u >= 10; u /= 10 {
		d++
	}
	return d
}

// field appends f length-prefixed: "<len>:<f>".
func field(b []byte, f string) []byte {
	b = strconv.AppendInt(b, int64(len(f)), 10)
	b = append(b, ':')
	return append(b, f...)
}

// Signature is a parsed header value.
type Signature struct {
	Version int   // 2 or 3
	Time    int64 // unix milliseconds
	Nonce   uint64
	// Names are the signed fields' names joined by ';' (v3; "" for v2).
	Names string
	MAC   [sha256.Size]byte
}

// ErrMalformed, ErrStale, ErrInvalid, ErrHost, ErrUnsigned, ErrVersion
// and ErrReplayed say why a signature was refused (Receiver.Accept); a
// receiver answers all of them alike.
var (
	ErrMalformed = errors.New("edgesig: malformed signature")
	ErrStale     = errors.New("edgesig: signature outside the time window")
	ErrInvalid   = errors.New("edgesig: signature does not match")
	ErrHost      = errors.New("edgesig: signed for another host")
	ErrUnsigned  = errors.New("edgesig: a field the rule requires is not signed")
	ErrVersion   = errors.New("edgesig: a v2 signature, not accepted")
	ErrReplayed  = errors.New("edgesig: signature already accepted")
)

// Reason names err, a refusal of Receiver.Accept, for a metric's label:
// malformed, stale, mismatch, host, unsigned, version or replayed
// ("other" for anything else).
func Reason(err error) string {
	switch err {
	case ErrMalformed:
		return "malformed"
	case ErrStale:
		return "stale"
	case ErrInvalid:
		return "mismatch"
	case ErrHost:
		return "host"
	case ErrUnsigned:
		return "unsigned"
	case ErrVersion:
		return "version"
	case ErrReplayed:
		return "replayed"
	}
	return "other"
}

// Parse reads a header value: "v3=" (or "v2="), the time (decimal, at
// most 15 digits, no leading zero), '.', the nonce (16 lower-case hex
// digits), '.', for v3 the signed names (1 to MaxSigned names of
// [a-z0-9-], strictly ascending, ';'-separated) and '.', the MAC (64
// lower-case hex digits), nothing else.
func Parse(value string) (Signature, error) {
	var sig Signature
	rest, ok := strings.CutPrefix(value, "v3=")
	sig.Version = 3
	if !ok {
		if rest, ok = strings.CutPrefix(value, "v2="); !ok {
			return sig, ErrMalformed
		}
		sig.Version = 2
	}
	if len(rest) < 1+1+16+1+64 {
		return sig, ErrMalformed
	}
	ts, rest, _ := strings.Cut(rest, ".")
	if len(ts) == 0 || len(ts) > 15 || ts[0] == '0' || len(rest) < 16+1+64 || rest[16] != '.' {
		return sig, ErrMalformed
	}
	for i := 0; i < len(ts); i++ {
		if ts[i] < '0' || ts[i] > '9' {
			return sig, ErrMalformed
		}
		sig.Time = sig.Time*10 + int64(ts[i]-'0')
	}
	for i := 0; i < 16; i++ {
		d, ok := lowerHex(rest[i])
		if !ok {
			return sig, ErrMalformed
		}
		sig.Nonce = sig.Nonce<<4 | uint64(d)
	}
	rest = rest[17:]
	if sig.Version == 3 {
		i := strings.IndexByte(rest, '.')
		if i < 0 || !validNames(rest[:i]) {
			return sig, ErrMalformed
		}
		sig.Names, rest = rest[:i], rest[i+1:]
	}
	if len(rest) != 64 {
		return sig, ErrMalformed
	}
	for i := range sig.MAC {
		hi, ok1 := lowerHex(rest[2*i])
		lo, ok2 := lowerHex(rest[2*i+1])
		if !ok1 || !ok2 {
			return sig, ErrMalformed
		}
		sig.MAC[i] = hi<<4 | lo
	}
	return sig, nil
}

// validNames reports whether names is 1 to MaxSigned names of [a-z0-9-],
// strictly ascending, ';'-separated: the one way a set can be written.
func validNames(names string) bool {
	prev, n := "", 0
	for {
		name, rest, more := strings.Cut(names, ";")
		if name == "" || (n > 0 && name <= prev) {
			return false
		}
		for i := 0; i < len(name); i++ {
			c := name[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
		if n++; n > MaxSigned {
			return false
		}
		if !more {
			return true
		}
		prev, names = name, rest
	}
}

// covers reports whether the ascending names hold every one of want
// (ascending).
func covers(names string, want []string) bool {
	for _, w := range want {
		for {
			if names == "" {
				return false
			}
			name, rest, _ := strings.Cut(names, ";")
			names = rest
			if name == w {
				break
			}
			if name > w {
				return false
			}
		}
	}
	return true
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// Verify checks a header value against m at nowMilli: well formed, made
// within Window of now, by m's purpose key over m and, for v3, signing
// every field Signed(m.Purpose) names. It takes v2 values too: whether to
// is the receiver's (Receiver.AcceptV2). It does not remember it:
// Receiver.Accept does.
func Verify(keys *Keys, value string, m *Message, nowMilli int64) (Signature, error) {
	sig, err := Parse(value)
	if err != nil {
		return sig, err
	}
	if sig.Time < nowMilli-Window || sig.Time > nowMilli+Window {
		return sig, ErrStale
	}
	if sig.Version == 3 && !covers(sig.Names, Signed(m.Purpose)) {
		return sig, ErrUnsigned
	}
	key := keys.key(m.Purpose)
	if key == nil {
		return sig, ErrInvalid
	}
	h := hmac.New(sha256.New, key)
	if sig.Version == 2 {
		h.Write(signedV2(nil, m, sig.Nonce, sig.Time))
	} else {
		h.Write(signed(nil, m, sig.Names, sig.Nonce, sig.Time))
	}
	if !hmac.Equal(h.Sum(nil), sig.MAC[:]) {
		return sig, ErrInvalid
	}
	return sig, nil
}

// V2Covers reports whether the v2 rule signed every field purpose's list
// holds (lease, usage and revoke calls: the token, the usage field and
// the request id): a receiver takes their v2 signatures for one release
// without AcceptV2, as nothing unsigned changes their answer. A forward's
// or gate call's v2 signature left If-None-Match and the others out.
func V2Covers(purpose string) bool {
	return covers(commonList, Signed(purpose))
}

// Receiver checks the signatures a host receives.
type Receiver struct {
	Keys Keys
	// Accepted are the keys of the secret accepted beside the
	// deployment's while it is rotated (LECTERN_SECRET_ACCEPT): a
	// signature made with either verifies. Zero: none.
	Accepted Keys
	// Hosts are the names (host[:port], as the senders' URLs write them)
	// this receiver answers to; a signature made for another host is
	// refused, so one captured on its way to a peer cannot be replayed
	// here. Empty: the request's own Host field is taken as it is.
	Hosts []string
	// AcceptV2 takes forwards and gate calls signed by the previous
	// release's rule (v2), whose If-None-Match, Range and other fields
	// are not signed: only while a rolling upgrade mixes releases
	// (LECTERN_EDGE_ACCEPT_V2, docs/upgrading.md). Off, such a v2 value
	// is refused (ErrVersion); one of a purpose the v2 rule covered
	// whole (V2Covers) is taken either way.
	AcceptV2 bool
	Seen     Seen
}

// Accept checks value against m (m.Host is the request's Host field) at
// nowMilli and remembers it: a signature is accepted once.
func (r *Receiver) Accept(value string, m *Message, nowMilli int64) error {
	if len(r.Hosts) > 0 && !r.ownHost(m.Host) {
		return ErrHost
	}
	if !r.AcceptV2 && strings.HasPrefix(value, "v2=") && !V2Covers(m.Purpose) {
		return ErrVersion
	}
	sig, err := Verify(&r.Keys, value, m, nowMilli)
	if err == ErrInvalid && !r.Accepted.IsZero() {
		sig, err = Verify(&r.Accepted, value, m, nowMilli)
	}
	if err != nil {
		return err
	}
	if !r.Seen.Add(sig, nowMilli) {
		return ErrReplayed
	}
	return nil
}

func (r *Receiver) ownHost(host string) bool {
	for _, h := range r.Hosts {
		if strings.EqualFold(h, host) {
			return true
		}
	}
	return false
}
