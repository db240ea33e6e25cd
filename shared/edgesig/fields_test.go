package edgesig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"testing"
)

// headers is a request's header fields by lower-case name, a Message's
// Header.
type headers map[string]string

func (h headers) get(name string) string { return h[name] }

// TestSignedFieldAltered (#36, point 4): for every purpose, each field of
// its list (Signed) is covered: altered after signing, or given a second
// line, or removed, it no longer verifies. A field added to a list is
// tested here with no other change.
func TestSignedFieldAltered(t *testing.T) {
	keys := KeysOf([]byte(secret))
	const now = 1_790_000_000_000
	for _, p := range purposes {
		if len(Signed(p)) == 0 {
			t.Fatalf("purpose %s signs no field", p)
		}
		h := headers{}
		for i, name := range Signed(p) {
			h[name] = "value-" + strconv.Itoa(i)
		}
		m := Message{Purpose: p, Method: "POST", Host: "o:1", Target: "/t", Auth: h["authorization"], Usage: h["x-lectern-usage"],
			RequestID: h["x-request-id"], Header: h.get}
		sig := NewSigner(keys, 1).Sign(&m, now)
		if _, err := Verify(&keys, sig, &m, now); err != nil {
			t.Fatalf("%s: as signed: %v", p, err)
		}
		for _, name := range Signed(p) {
			for what, v := range map[string]string{"altered": h[name] + "x", "a second line": h[name] + ", x", "removed": ""} {
				alt := headers{}
				for k, v := range h {
					alt[k] = v
				}
				alt[name] = v
				am := m
				am.Auth, am.Usage, am.RequestID, am.Header = alt["authorization"], alt["x-lectern-usage"], alt["x-request-id"], alt.get
				if _, err := Verify(&keys, sig, &am, now); !errors.Is(err, ErrInvalid) {
					t.Errorf("%s: %s %s: %v, want ErrInvalid", p, name, what, err)
				}
			}
		}
	}
}

// TestSignedLists: the forward signs what the origin's answer and bill
// depend on, the gate its 304 decision's fields; each list is ascending
// and holds the three of every purpose.
func TestSignedLists(t *testing.T) {
	for _, want := range [][2]string{{Forward, "if-none-match"}, {Forward, "range"}, {Forward, "if-range"}, {Forward, "if-match"},
		{Forward, "accept-encoding"}, {Forward, "content-type"}, {Gate, "if-none-match"}} {
		if !covers(signedList(want[0]), []string{want[1]}) {
			t.Errorf("%s does not sign %s", want[0], want[1])
		}
	}
	for _, p := range purposes {
		if !validNames(signedList(p)) || !covers(signedList(p), common) {
			t.Errorf("%s's list %q", p, signedList(p))
		}
	}
}

// signWith is a v3 value over m listing names, made by hand: a signer
// that lists what it likes.
func signWith(keys Keys, m *Message, names string, nonce uint64, at int64) string {
	mac := hmac.New(sha256.New, keys.key(m.Purpose))
	mac.Write(signed(nil, m, names, nonce, at))
	return "v3=" + strconv.FormatInt(at, 10) + "." + string(appendNonce(nil, nonce)) + "." + names + "." + hex.EncodeToString(mac.Sum(nil))
}

// TestUnsignedRefused: a signature whose list lacks a field its purpose
// requires is refused, however valid its MAC (a gate call signed without
// If-None-Match); one that lists more than required (a later release's
// signer) verifies, the extra fields covered too.
func TestUnsignedRefused(t *testing.T) {
	keys := KeysOf([]byte(secret))
	const now = 1_790_000_000_000
	h := headers{"if-none-match": `"a"`, "x-extra": "1"}
	m := Message{Purpose: Gate, Method: "POST", Host: "o:1", Target: "/v1/t", Auth: "Bearer t", RequestID: "r", Header: h.get}
	if _, err := Verify(&keys, signWith(keys, &m, "authorization;x-lectern-usage;x-request-id", 1, now), &m, now); !errors.Is(err, ErrUnsigned) {
		t.Errorf("a gate call signed without If-None-Match: %v, want ErrUnsigned", err)
	}
	more := "authorization;if-none-match;x-extra;x-lectern-usage;x-request-id"
	sig := signWith(keys, &m, more, 2, now)
	if _, err := Verify(&keys, sig, &m, now); err != nil {
		t.Errorf("a list with one more field: %v", err)
	}
	h["x-extra"] = "2"
	if _, err := Verify(&keys, sig, &m, now); !errors.Is(err, ErrInvalid) {
		t.Errorf("the extra field altered: %v, want ErrInvalid", err)
	}
	for _, bad := range []string{"", "b;a", "a;a", "A", "a;;b", "a.b"} {
		if validNames(bad) {
			t.Errorf("names %q taken", bad)
		}
	}
}

// TestReceiverV2: the previous release's rule is refused for forwards and
// gate calls (If-None-Match unsigned) unless the receiver takes it
// (AcceptV2, an upgrade's window); lease, usage and revoke calls, whose
// fields it signed whole, are taken either way.
func TestReceiverV2(t *testing.T) {
	keys := KeysOf([]byte(secret))
	const now = 1_790_000_000_000
	s := NewSigner(keys, 1)
	s.V2 = true
	for _, p := range purposes {
		m := message()
		m.Purpose = p
		strict, window := &Receiver{Keys: keys}, &Receiver{Keys: keys, AcceptV2: true}
		sig := s.Sign(&m, now)
		err := strict.Accept(sig, &m, now)
		switch p {
		case Forward, Gate:
			if !errors.Is(err, ErrVersion) {
				t.Errorf("%s: a v2 signature: %v, want ErrVersion", p, err)
			}
		default:
			if err != nil {
				t.Errorf("%s: a v2 signature: %v", p, err)
			}
		}
		if err := window.Accept(sig, &m, now); err != nil {
			t.Errorf("%s: a v2 signature with AcceptV2: %v", p, err)
		}
	}
}
