package cursor

import (
	"encoding/base64"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/shared/apierr"
)

var (
	key     = []byte("0123456789abcdef0123456789abcdef")
	version = "2026-11-01+3f2a9c"
	bind    = Binding{Route: 3, Query: "detail=brief&limit=25&tier=high", Org: "org-acme", Grants: "0123456789abcdef"}
)

var urlSafe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		version string
		offset  int
		b       Binding
	}{
		{"first page", version, 0, bind},
		{"page two", version, 25, bind},
		{"uvarint boundary", version, 128, bind},
		{"largest offset", version, MaxOffset, bind},
		{"empty binding", "", 7, Binding{}},
		{"long version and query", strings.Repeat("v", 500), 100, Binding{Route: 11, Query: strings.Repeat("q=x&", 100), Org: "o"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Seal(key, tt.version, tt.offset, tt.b)
			if len(c) > 51 || !urlSafe.MatchString(c) {
				t.Errorf("got cursor %q (%d chars), want at most 51 base64url characters", c, len(c))
			}
			got, _, err := Open(key, c, tt.version, tt.b)
			if err != nil || got != tt.offset {
				t.Fatalf("Open(Seal(%d)) = %d, %v; want %d, nil", tt.offset, got, err, tt.offset)
			}
		})
	}
}

// TestExpired: spec, States and transitions: a cursor minted under an older
// contentVersion answers 400 CURSOR_EXPIRED and the walk restarts from page 1.
func TestExpired(t *testing.T) {
	c := Seal(key, version, 50, bind)
	_, why, err := Open(key, c, "2026-11-02+77aa01", bind)
	if err == nil || why != OtherVersion {
		t.Fatalf("got %v (%d), want CURSOR_EXPIRED (OtherVersion)", err, why)
	}
	if err.Code != apierr.CursorExpired || err.Status() != 400 || err.Parameter != "cursor" {
		t.Errorf("got %s %d parameter %q, want CURSOR_EXPIRED 400 parameter cursor", err.Code, err.Status(), err.Parameter)
	}
	if !strings.Contains(err.Hint, "page 1") {
		t.Errorf("got hint %q, want it to say to restart from page 1", err.Hint)
	}
	// The cursor may be of a newer version than the answer's (origins
	// converging on a reload): the message says "another" and names the
	// answer's version, which is no secret (every answer carries it).
	if want := "issued for another contentVersion; this answer is from contentVersion 2026-11-02+77aa01"; !strings.Contains(err.Message, want) {
		t.Errorf("got message %q, want it to contain %q", err.Message, want)
	}
}

// TestGrantsChanged: an authentic cursor opened under other grants of its
// organisation is 400 CURSOR_EXPIRED saying the grants changed (not that
// the client altered it); a moved version as well is said as the
// version's.
func TestGrantsChanged(t *testing.T) {
	c := Seal(key, version, 50, bind)
	other := bind
	other.Grants = "fedcba9876543210"
	_, why, err := Open(key, c, version, other)
	if err == nil || why != OtherGrants || err.Code != apierr.CursorExpired || err.Status() != 400 || err.Parameter != "cursor" {
		t.Fatalf("got %v (%d), want CURSOR_EXPIRED 400 on cursor (OtherGrants)", err, why)
	}
	if want := "the organisation's content grants changed since this cursor was issued; restart from page 1"; err.Message != want {
		t.Errorf("got message %q, want %q", err.Message, want)
	}
	if !strings.Contains(err.Hint, "page 1") || strings.Contains(err.Hint, "verbatim") {
		t.Errorf("got hint %q, want it to say to restart from page 1, not that the cursor was altered", err.Hint)
	}
	if _, why, err := Open(key, c, "2026-11-02+77aa01", other); why != OtherVersion || !strings.Contains(err.Message, "contentVersion") {
		t.Errorf("version and grants moved: got %v (%d), want the version's CURSOR_EXPIRED", err, why)
	}
	if off, _, err := Open(key, c, version, bind); err != nil || off != 50 {
		t.Errorf("the grants it was minted under: got %d, %v", off, err)
	}
}

// TestBinding: a cursor is bound to its route, query and organisation; a
// replay elsewhere is a bad cursor, not an expired one.
func TestBinding(t *testing.T) {
	c := Seal(key, version, 25, bind)
	tests := []struct {
		name string
		key  []byte
		b    Binding
	}{
		{"another route", key, Binding{Route: 5, Query: bind.Query, Org: bind.Org}},
		{"another query", key, Binding{Route: bind.Route, Query: "detail=brief&limit=50&tier=high", Org: bind.Org}},
		{"another organisation", key, Binding{Route: bind.Route, Query: bind.Query, Org: "org-beta"}},
		{"query/org boundary moved", key, Binding{Route: bind.Route, Query: bind.Query + "o", Org: "rg-acme"}},
		{"another key", []byte("another key of thirty-two bytes!"), bind},
		{"no key", nil, bind},
	}
	for _, tt := range tests {
		_, why, err := Open(tt.key, c, version, tt.b)
		wantBad(t, tt.name, why, err)
	}
	// Even under a moved version, a foreign cursor is bad, not expired: the
	// MAC is checked first.
	_, why, err := Open(key, c, "2026-11-02+77aa01", Binding{Route: 5})
	wantBad(t, "foreign and stale", why, err)
	// Nor under other grants.
	_, why, err = Open(key, c, version, Binding{Route: 5, Query: bind.Query, Org: bind.Org, Grants: "other"})
	wantBad(t, "foreign, other grants", why, err)
}

func TestGarbage(t *testing.T) {
	good := Seal(key, version, 25, bind)
	raw, _ := base64.RawURLEncoding.DecodeString(good)
	tests := []struct{ name, in string }{
		{"empty", ""},
		{"not base64", "!!!!"},
		{"padded", good + "=="},
		{"standard alphabet", strings.NewReplacer("-", "+", "_", "/").Replace(good) + "+/"},
		{"truncated by one", good[:len(good)-1]},
		{"truncated to the payload", base64.RawURLEncoding.EncodeToString(raw[:len(raw)-tagLen])},
		{"one character appended", good + "A"},
		{"too long", strings.Repeat("A", MaxLen+1)},
		{"longest allowed but too long for a cursor", strings.Repeat("A", MaxLen)},
		{"whitespace", " " + good},
		{"all zero bytes", base64.RawURLEncoding.EncodeToString(make([]byte, len(raw)))},
		{"unknown format", base64.RawURLEncoding.EncodeToString(append([]byte{3}, raw[1:]...))},
		{"format 1", base64.RawURLEncoding.EncodeToString(append([]byte{1}, raw[1:]...))},
	}
	for _, tt := range tests {
		_, why, err := Open(key, tt.in, version, bind)
		wantBad(t, tt.name, why, err)
	}
}

// TestTamper: changing any byte of a cursor fails verification, including
// its version bytes (which must not turn into CURSOR_EXPIRED).
func TestTamper(t *testing.T) {
	good := Seal(key, version, 25, bind)
	raw, _ := base64.RawURLEncoding.DecodeString(good)
	for i := range raw {
		for _, bit := range []byte{0x01, 0x80} {
			b := []byte(string(raw))
			b[i] ^= bit
			_, why, err := Open(key, base64.RawURLEncoding.EncodeToString(b), version, bind)
			wantBad(t, "byte "+strconv.Itoa(i)+" flipped", why, err)
		}
	}
}

// TestNoLeak: every verification failure reads the same, so a client cannot
// tell which check failed.
func TestNoLeak(t *testing.T) {
	good := Seal(key, version, 25, bind)
	_, _, e1 := Open(key, "!!", version, bind)
	_, _, e2 := Open(key, good, version, Binding{Route: 4})
	_, _, e3 := Open([]byte("k"), good, version, bind)
	if e1.Message != e2.Message || e2.Message != e3.Message || e1.Hint != e2.Hint {
		t.Errorf("got messages %q, %q, %q; want one message for every failure", e1.Message, e2.Message, e3.Message)
	}
	for _, word := range []string{"MAC", "HMAC", "base64", "format", "hash", "key"} {
		if strings.Contains(e1.Message+e1.Hint, word) {
			t.Errorf("got message %q hint %q, want no mention of %q", e1.Message, e1.Hint, word)
		}
	}
}

func TestSealRejectsBadOffset(t *testing.T) {
	for _, off := range []int{-1, MaxOffset + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Seal(offset %d) did not panic, want a panic for a caller bug", off)
				}
			}()
			Seal(key, version, off, bind)
		}()
	}
}

func wantBad(t *testing.T, name string, why Refusal, err *apierr.Error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: got ok, want 400 BAD_REQUEST on cursor", name)
		return
	}
	if err.Code != apierr.BadRequest || err.Status() != 400 || err.Parameter != "cursor" || why != Invalid {
		t.Errorf("%s: got %s %d parameter %q (%d), want BAD_REQUEST 400 parameter cursor (Invalid)", name, err.Code, err.Status(), err.Parameter, why)
	}
}

func FuzzCursor(f *testing.F) {
	f.Add(Seal(key, version, 25, bind), version, 25, 3, bind.Query, bind.Org, uint16(0))
	f.Add("", "", 0, 0, "", "", uint16(7))
	f.Add("!!!!", "v", -5, -1, "q", "o", uint16(0xffff))
	f.Add(strings.Repeat("A", 40), "2026-11-02+77aa01", MaxOffset, 15, "section=math", "org-beta", uint16(300))
	f.Fuzz(func(t *testing.T, s, version string, offset, route int, query, org string, flip uint16) {
		b := Binding{Route: route, Query: query, Org: org, Grants: org + "/grants"}

		// Anything a client sends: never a panic, only the two answers.
		if off, _, err := Open(key, s, version, b); err != nil {
			if err.Parameter != "cursor" || err.Code != apierr.BadRequest && err.Code != apierr.CursorExpired {
				t.Fatalf("Open(%q) = %v on %q, want BAD_REQUEST or CURSOR_EXPIRED on cursor", s, err, err.Parameter)
			}
		} else if off < 0 || off > MaxOffset {
			t.Fatalf("Open(%q) = %d, want an offset in [0, MaxOffset]", s, off)
		}

		// Round trip.
		offset &= MaxOffset
		c := Seal(key, version, offset, b)
		if got, _, err := Open(key, c, version, b); err != nil || got != offset {
			t.Fatalf("Open(Seal(%d)) = %d, %v", offset, got, err)
		}
		if len(c) > 51 {
			t.Fatalf("Seal made %d characters, want at most 51", len(c))
		}
		if _, why, err := Open(key, c, version+"+", b); err == nil || err.Code != apierr.CursorExpired || why != OtherVersion {
			t.Fatalf("Open under a moved version = %v, want CURSOR_EXPIRED", err)
		}
		moved := b
		moved.Grants += "+"
		if _, why, err := Open(key, c, version, moved); err == nil || err.Code != apierr.CursorExpired || why != OtherGrants {
			t.Fatalf("Open under other grants = %v, want CURSOR_EXPIRED", err)
		}

		// Any flipped bit fails as a bad cursor.
		raw, _ := base64.RawURLEncoding.DecodeString(c)
		raw[int(flip)%len(raw)] ^= byte(flip>>8) | 1
		if _, _, err := Open(key, base64.RawURLEncoding.EncodeToString(raw), version, b); err == nil || err.Code != apierr.BadRequest {
			t.Fatalf("Open of a tampered cursor = %v, want BAD_REQUEST", err)
		}
	})
}

func BenchmarkOpen(b *testing.B) {
	c := Seal(key, version, 25, bind)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Open(key, c, version, bind); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSeal(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Seal(key, version, 25, bind)
	}
}
