package edgesig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
)

const secret = "a-test-secret-of-at-least-32-characters"

func message() Message {
	return Message{Purpose: Forward, Method: "POST", Host: "origin-1.internal:8080", Target: "/v1/media/urls?x=1",
		Body: BodyHash([]byte(`{"ids":["a"]}`)), Auth: "Bearer abc", Usage: "L1=3", RequestID: "req-1",
		Fields: []Field{{"if-none-match", `"abc"`}, {"accept-encoding", "gzip"}}}
}

// TestVerify: a signature verifies for the message it was made for, and
// for no message that differs in any covered part, under no other key,
// outside the window.
func TestVerify(t *testing.T) {
	keys := KeysOf([]byte(secret))
	const now = 1_790_000_000_000
	m := message()
	sig := NewSigner(keys, 7).Sign(&m, now)
	if _, err := Verify(&keys, sig, &m, now+Window); err != nil {
		t.Fatalf("a fresh signature: %v", err)
	}
	upper := m
	upper.Host = "ORIGIN-1.internal:8080"
	if _, err := Verify(&keys, sig, &upper, now); err != nil {
		t.Errorf("host in another case: %v", err)
	}
	other := KeysOf([]byte("another secret of at least 32 chars!!"))
	for name, c := range map[string]struct {
		keys  *Keys
		value string
		edit  func(*Message)
		now   int64
		want  error
	}{
		"purpose":   {edit: func(m *Message) { m.Purpose = Gate }},
		"method":    {edit: func(m *Message) { m.Method = "PUT" }},
		"host":      {edit: func(m *Message) { m.Host = "origin-2.internal:8080" }},
		"target":    {edit: func(m *Message) { m.Target = "/v1/media/urls?x=2" }},
		"body":      {edit: func(m *Message) { m.Body = BodyHash([]byte(`{"ids":["b"]}`)) }},
		"no body":   {edit: func(m *Message) { m.Body = "" }},
		"auth":      {edit: func(m *Message) { m.Auth = "Bearer abd" }},
		"no auth":   {edit: func(m *Message) { m.Auth = "" }},
		"usage":     {edit: func(m *Message) { m.Usage = "L1=4" }},
		"request":   {edit: func(m *Message) { m.RequestID = "req-2" }},
		"inm":       {edit: func(m *Message) { m.Fields = []Field{{"if-none-match", `"abd"`}, {"accept-encoding", "gzip"}} }},
		"no inm":    {edit: func(m *Message) { m.Fields = m.Fields[1:] }},
		"range":     {edit: func(m *Message) { m.Header = func(string) string { return "bytes=0-1" } }},
		"too old":   {now: now + Window + 1, want: ErrStale},
		"too new":   {now: now - Window - 1, want: ErrStale},
		"other key": {keys: &other},
		"no keys":   {keys: &Keys{}},
		"nonce":     {value: strings.Replace(sig, ".", ".1", 1)[:len(sig)], want: ErrMalformed},
		"tampered":  {value: sig[:len(sig)-1] + "0"},
		"v1":        {value: "v1" + sig[2:], want: ErrMalformed},
		"v2 of v3":  {value: "v2" + sig[2:], want: ErrMalformed},
	} {
		k, v, mm, at := &keys, sig, m, int64(now)
		if c.keys != nil {
			k = c.keys
		}
		if c.value != "" {
			v = c.value
		}
		if c.edit != nil {
			c.edit(&mm)
		}
		if c.now != 0 {
			at = c.now
		}
		want := c.want
		if want == nil {
			want = ErrInvalid
		}
		if _, err := Verify(k, v, &mm, at); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
}

// TestPurposeKeys: each purpose signs under a key of its own, derived
// from the secret, so no signature made for one purpose is another's.
func TestPurposeKeys(t *testing.T) {
	keys := KeysOf([]byte(secret))
	seen := map[string]bool{}
	for _, p := range purposes {
		k := hex.EncodeToString(keys.key(p))
		if len(k) != 64 || seen[k] {
			t.Errorf("purpose %s: key %q", p, k)
		}
		seen[k] = true
	}
	if keys.key("other") != nil || KeysOf(nil).key(Forward) != nil {
		t.Error("a key for an unknown purpose or an empty secret")
	}
	m := message()
	m.Purpose = "other"
	if _, err := Verify(&keys, NewSigner(keys, 0).Sign(&m, 1), &m, 1); err == nil {
		t.Error("an unknown purpose's signature verifies")
	}
}

// TestSignerFormat: the signed string is the length-prefixed fields, in
// the order the package doc gives, the host in lower case, the signed
// names then each one's value; the nonce counts up from the seed; a
// reused Signer signs as a fresh one would. With V2, the previous
// release's rule.
func TestSignerFormat(t *testing.T) {
	keys := KeysOf([]byte(secret))
	m := message()
	m.Host = "Origin-1.Internal:8080"
	names := "accept-encoding;authorization;content-type;if-match;if-none-match;if-range;range;x-lectern-usage;x-request-id"
	mac := hmac.New(sha256.New, keys.key(Forward))
	mac.Write([]byte("2:v37:forward4:POST22:origin-1.internal:808018:/v1/media/urls?x=164:" + m.Body +
		"109:" + names + "4:gzip10:Bearer abc0:0:5:\"abc\"0:0:4:L1=35:req-116:00000000000000ff13:1790000000000"))
	want := "v3=1790000000000.00000000000000ff." + names + "." + hex.EncodeToString(mac.Sum(nil))
	s := NewSigner(keys, 0xfd)
	s.Sign(&Message{Purpose: Gate, Method: "GET", Target: "/v1/a-much-longer-target?with=a&query=string"}, 1)
	if got := s.Sign(&m, 1_790_000_000_000); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := string(s.Append([]byte("x"), &m, 1_790_000_000_000)); !strings.HasPrefix(got, "xv3=1790000000000.0000000000000100."+names+".") {
		t.Errorf("Append: got %s", got)
	}

	mac = hmac.New(sha256.New, keys.key(Forward))
	mac.Write([]byte("2:v27:forward4:POST22:origin-1.internal:808018:/v1/media/urls?x=164:" + m.Body +
		"10:Bearer abc4:L1=35:req-116:00000000000000ff13:1790000000000"))
	want = "v2=1790000000000.00000000000000ff." + hex.EncodeToString(mac.Sum(nil))
	s2 := NewSigner(keys, 0xfe)
	s2.V2 = true
	if got := s2.Sign(&m, 1_790_000_000_000); got != want {
		t.Errorf("v2: got  %s\nwant %s", got, want)
	}
}

func TestDigits(t *testing.T) {
	for _, n := range []int64{0, 9, 10, 1_790_000_000, -1, -10, 1<<63 - 1, -1 << 63} {
		if got, want := digits(n), len(strconv.FormatInt(n, 10)); got != want {
			t.Errorf("digits(%d) = %d, want %d", n, got, want)
		}
	}
}

// TestSignerAllocations: a signature appended to room the caller has
// costs nothing (the edge makes one for every request it passes on).
func TestSignerAllocations(t *testing.T) {
	s := NewSigner(KeysOf([]byte(secret)), 1)
	dst := make([]byte, 0, 256)
	m := Message{Purpose: Gate, Method: "POST", Host: "127.0.0.1:8080", Target: "/v1/lessons/high/algebra-1/3?detail=full",
		Auth: "Bearer " + strings.Repeat("x", 600), RequestID: "req_0123456789abcdef01234567"}
	s.Append(dst, &m, 1_790_000_000_000)
	if n := testing.AllocsPerRun(100, func() { s.Append(dst, &m, 1_790_000_000_000) }); n != 0 {
		t.Errorf("%.1f allocations per signature, want 0", n)
	}
}

// TestReceiver: a signature is accepted once, by the host it was made
// for; a replay, to it or to a peer, is refused.
func TestReceiver(t *testing.T) {
	keys := KeysOf([]byte(secret))
	s := NewSigner(keys, 1)
	m := message()
	const now = 1_790_000_000_000
	sig := s.Sign(&m, now)
	r := &Receiver{Keys: keys, Hosts: []string{"origin-1.internal:8080"}}
	if err := r.Accept(sig, &m, now+5); err != nil {
		t.Fatalf("first: %v", err)
	}
	if err := r.Accept(sig, &m, now+6); !errors.Is(err, ErrReplayed) {
		t.Errorf("replayed: %v", err)
	}
	if err := r.Accept(s.Sign(&m, now), &m, now+7); err != nil {
		t.Errorf("the same message signed again (a retry): %v", err)
	}
	peer := &Receiver{Keys: keys, Hosts: []string{"origin-2.internal:8080"}}
	if err := peer.Accept(sig, &m, now+8); !errors.Is(err, ErrHost) {
		t.Errorf("replayed to a peer naming the first host: %v", err)
	}
	anyHost := &Receiver{Keys: keys}
	m2 := m
	m2.Host = "origin-2.internal:8080"
	if err := anyHost.Accept(sig, &m2, now+9); !errors.Is(err, ErrInvalid) {
		t.Errorf("replayed to a peer under its own host: %v", err)
	}
}

// TestReceiverAccepted (#34, point 3): while the secret is rotated, a
// receiver takes signatures made with its secret or the accepted one,
// each once, and no other.
func TestReceiverAccepted(t *testing.T) {
	newK, oldK := KeysOf([]byte(secret)), KeysOf([]byte("the-previous-secret-0123456789abcdef"))
	m := message()
	const now = 1_790_000_000_000
	r := &Receiver{Keys: newK, Accepted: oldK}
	for name, keys := range map[string]Keys{"new": newK, "accepted": oldK} {
		sig := NewSigner(keys, 1).Sign(&m, now)
		if err := r.Accept(sig, &m, now); err != nil {
			t.Errorf("a signature of the %s secret: %v", name, err)
		}
		if err := r.Accept(sig, &m, now); !errors.Is(err, ErrReplayed) {
			t.Errorf("the %s secret's signature replayed: %v", name, err)
		}
	}
	other := NewSigner(KeysOf([]byte("a-third-secret-0123456789abcdef0123")), 1).Sign(&m, now)
	if err := r.Accept(other, &m, now); !errors.Is(err, ErrInvalid) {
		t.Errorf("a third secret's signature: %v, want ErrInvalid", err)
	}
	if err := (&Receiver{Keys: newK}).Accept(NewSigner(oldK, 9).Sign(&m, now), &m, now); !errors.Is(err, ErrInvalid) {
		t.Errorf("without Accepted, the old secret's signature: %v, want ErrInvalid", err)
	}
	if !(Keys{}).IsZero() || newK.IsZero() {
		t.Error("IsZero")
	}
}

// TestSeenBegin: a receiver that starts refuses what was signed before
// it started (its last run may have accepted it), and takes what comes
// after.
func TestSeenBegin(t *testing.T) {
	var s Seen
	s.Begin(1000)
	for at, want := range map[int64]bool{998: false, 999: false, 1000: true, 1001: true} {
		if got := s.Add(Signature{Time: at, MAC: [32]byte{byte(at)}}, 1001); got != want {
			t.Errorf("signed at %d after a start at 1000: accepted %v, want %v", at, got, want)
		}
	}
}

// TestSeenBound: a full Seen forgets its oldest entry and refuses what
// was made at or before it from then on; entries that left the window
// are dropped as new ones come.
func TestSeenBound(t *testing.T) {
	sig := func(i int, at int64) Signature {
		var s Signature
		s.Time = at
		s.MAC[0], s.MAC[1] = byte(i), byte(i>>8)
		return s
	}
	s := Seen{Max: 4}
	for i := range 4 {
		if !s.Add(sig(i, int64(100+i)), 200) {
			t.Fatalf("entry %d refused", i)
		}
	}
	if !s.Add(sig(4, 104), 200) { // forgets entry 0 (time 100)
		t.Fatal("entry 4 refused")
	}
	if s.Add(sig(0, 100), 200) || s.Add(sig(9, 100), 200) {
		t.Error("a signature made at the forgotten entry's time accepted")
	}
	if s.Add(sig(2, 102), 200) {
		t.Error("a held entry accepted again")
	}
	if !s.Add(sig(5, 104+Window), 104+Window) { // 101, 102 and 103 left the window
		t.Fatal("entry 5 refused")
	}
	if n := s.Len(); n != 2 {
		t.Errorf("%d held, want 2 (104 and the new one)", n)
	}
}

// FuzzParse: the parser never panics, and what it accepts is exactly
// what a Signer writes.
func FuzzParse(f *testing.F) {
	keys := KeysOf([]byte(secret))
	m := message()
	f.Add(NewSigner(keys, 3).Sign(&m, 1_790_000_000_000))
	v2 := NewSigner(keys, 3)
	v2.V2 = true
	f.Add(v2.Sign(&m, 1_790_000_000_000))
	f.Add("v2=1.0000000000000000." + strings.Repeat("0", 64))
	f.Add("v2=..")
	f.Add("v1=1790000000.abc")
	f.Add("v2=-1.0000000000000000." + strings.Repeat("A", 64))
	f.Add(NewSigner(keys, 4).Sign(&Message{Purpose: Gate}, 1_790_000_000_000))
	f.Add("v3=1.0000000000000000.a;b." + strings.Repeat("0", 64))
	f.Add("v3=1.0000000000000000.b;a." + strings.Repeat("0", 64))
	f.Fuzz(func(t *testing.T, v string) {
		sig, err := Parse(v)
		if err != nil {
			return
		}
		again := "v" + strconv.Itoa(sig.Version) + "=" + strconv.FormatInt(sig.Time, 10) + "." + string(appendNonce(nil, sig.Nonce)) + "."
		if sig.Version == 3 {
			again += sig.Names + "."
		}
		again += hex.EncodeToString(sig.MAC[:])
		if again != v {
			t.Errorf("Parse(%q) accepted a value it would write as %q", v, again)
		}
		Verify(&keys, v, &m, sig.Time)
	})
}
