package etag

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/shared/vectorstest"
)

var weakShape = regexp.MustCompile(`^W/"[0-9a-f]{16}"$`)

var base = Input{
	Version: "2026-11-01+3f2a9c",
	Route:   6,
	Target:  "topics/algebra/3",
	Params:  "detail=standard",
	Org:     "org-acme",
	Grants:  GrantsDigest([]string{"topics"}),
}

func TestDeriveVectors(t *testing.T) {
	for _, v := range vectorstest.Read(t, "testdata/derive.txt", 7) {
		route, err := strconv.Atoi(v.Fields[1])
		if err != nil {
			t.Fatalf("derive.txt:%d: route %q: %v", v.Line, v.Fields[1], err)
		}
		in := Input{Version: v.Fields[0], Route: route, Target: v.Fields[2], Params: v.Fields[3], Org: v.Fields[4], Grants: v.Fields[5]}
		if got, want := Derive(in), v.Fields[6]; got != want {
			t.Errorf("derive.txt:%d: Derive(%+v) = %s, want %s", v.Line, in, got, want)
		}
		if got, want := string(AppendDerive([]byte("x"), in)), "x"+v.Fields[6]; got != want {
			t.Errorf("derive.txt:%d: AppendDerive(x, %+v) = %s, want %s", v.Line, in, got, want)
		}
	}
}

func TestGrantsDigestVectors(t *testing.T) {
	for _, v := range vectorstest.Read(t, "testdata/grants.txt", 2) {
		var grants []string
		if v.Fields[0] != "" {
			grants = strings.Split(v.Fields[0], ",")
		}
		if got, want := GrantsDigest(grants), v.Fields[1]; got != want {
			t.Errorf("grants.txt:%d: GrantsDigest(%q) = %s, want %s", v.Line, grants, got, want)
		}
	}
}

func TestDeriveShape(t *testing.T) {
	for _, in := range []Input{base, {}, {Route: -1, Target: strings.Repeat("x", 1<<16)}} {
		if got := Derive(in); !weakShape.MatchString(got) {
			t.Errorf("Derive(%.40v) = %q, want W/\"<16 lowercase hex>\"", in, got)
		}
	}
	if got := FromBytes([]byte("{}")); !weakShape.MatchString(got) {
		t.Errorf("FromBytes = %q, want W/\"<16 lowercase hex>\"", got)
	}
}

// TestDeriveInputs: spec rule 1, tags are derived from contentVersion, route,
// parameters, organisation and grants; rule 2, when contentVersion moves
// every tag moves. Each input alone must move the tag.
func TestDeriveInputs(t *testing.T) {
	if Derive(base) != Derive(base) {
		t.Fatal("Derive is not deterministic")
	}
	tests := []struct {
		name   string
		change func(*Input)
	}{
		{"contentVersion moves", func(in *Input) { in.Version = "2026-11-02+77aa01" }},
		{"another route", func(in *Input) { in.Route = 7 }},
		{"another lesson", func(in *Input) { in.Target = "topics/algebra/4" }},
		{"another query", func(in *Input) { in.Params = "detail=full" }},
		{"another organisation", func(in *Input) { in.Org = "org-beta" }},
		{"grants changed", func(in *Input) { in.Grants = GrantsDigest([]string{"topics", "high/algebra"}) }},
	}
	for _, tt := range tests {
		in := base
		tt.change(&in)
		if got, old := Derive(in), Derive(base); got == old {
			t.Errorf("%s: got the same tag %s, want it to move", tt.name, got)
		}
	}
}

// TestDeriveUnambiguous: moving bytes across a field boundary is a different
// input and must be a different tag.
func TestDeriveUnambiguous(t *testing.T) {
	pairs := []struct {
		name string
		a, b Input
	}{
		{"target/params boundary", Input{Target: "a", Params: "bc"}, Input{Target: "ab", Params: "c"}},
		{"version/target boundary", Input{Version: "v1", Target: "x"}, Input{Version: "v1x"}},
		{"org/grants boundary", Input{Org: "o", Grants: "g"}, Input{Org: "og"}},
		{"NUL inside a field", Input{Target: "a\x00", Params: "b"}, Input{Target: "a", Params: "\x00b"}},
		{"empty fields shifted", Input{Org: "x"}, Input{Grants: "x"}},
		{"route is not text", Input{Route: 1, Version: ""}, Input{Route: 0, Version: "1"}},
	}
	for _, p := range pairs {
		if Derive(p.a) == Derive(p.b) {
			t.Errorf("%s: Derive(%+v) == Derive(%+v), want different tags", p.name, p.a, p.b)
		}
	}
}

func TestGrantsDigest(t *testing.T) {
	a := []string{"topics", "high/algebra", "middle"}
	b := []string{"middle", "topics", "high/algebra", "topics"}
	if GrantsDigest(a) != GrantsDigest(b) {
		t.Errorf("got different digests for %q and %q, want order and duplicates ignored", a, b)
	}
	if GrantsDigest(a) == GrantsDigest(a[:2]) {
		t.Errorf("got the same digest after dropping a grant, want it to move")
	}
	if GrantsDigest([]string{"ab", "c"}) == GrantsDigest([]string{"a", "bc"}) {
		t.Errorf("got the same digest for [ab c] and [a bc], want different")
	}
	if GrantsDigest(nil) != GrantsDigest([]string{}) {
		t.Errorf("got different digests for nil and empty grants")
	}
	before := slices.Clone(b)
	GrantsDigest(b)
	if !slices.Equal(b, before) {
		t.Errorf("GrantsDigest reordered its argument: got %q, want %q", b, before)
	}
	if got := GrantsDigest(a); !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(got) {
		t.Errorf("GrantsDigest = %q, want 16 lowercase hex", got)
	}
}

// TestFromBytes: route 1 is hashed from its own bytes (spec rule 1).
func TestFromBytes(t *testing.T) {
	doc := []byte(`{"openapi":"3.1.0","info":{"version":"1.0.0"}}`)
	if FromBytes(doc) != FromBytes(slices.Clone(doc)) {
		t.Errorf("got different tags for equal bytes")
	}
	other := slices.Clone(doc)
	other[len(other)-2] = ' '
	if FromBytes(doc) == FromBytes(other) {
		t.Errorf("got the same tag for different bytes, want it to move")
	}
}

func TestMatchVectors(t *testing.T) {
	for _, v := range vectorstest.Read(t, "testdata/match.txt", 3) {
		header, current, want := v.Fields[0], v.Fields[1], v.Fields[2]
		if want != "match" && want != "nomatch" {
			t.Fatalf("match.txt:%d: expectation %q, want match or nomatch", v.Line, want)
		}
		if got := Match(header, current); got != (want == "match") {
			t.Errorf("match.txt:%d: Match(%q, %q) = %v, want %s", v.Line, header, current, got, want)
		}
	}
}

func TestMatch(t *testing.T) {
	cur := Derive(base)
	strong := strings.TrimPrefix(cur, "W/")
	tests := []struct {
		name, header, current string
		want                  bool
	}{
		{"stored tag sent back", cur, cur, true},
		{"strong form of our weak tag", strong, cur, true},
		{"star matches whatever is current", "*", cur, true},
		{"star, no current tag", "*", "", false},
		{"no header", "", cur, false},
		{"tabs around elements", "\t" + cur + "\t", cur, true},
		{"obs-text inside a tag", "\"caf\xe9\", " + cur, cur, true},
		{"obs-text tags compare bytewise", "\"caf\xe9\"", "\"caf\xe9\"", true},
		{"control character ends the element", "\"a\x01b\", " + cur, cur, true},
		{"control character in the only element", "\"a\x01" + strong[1:], cur, false},
		{"CR LF are not whitespace", "\r\n" + cur, cur, false},
		{"star in the middle of a list", `W/"x", *, W/"y"`, cur, true},
		{"many elements, last matches", strings.Repeat(`W/"0000000000000000", `, 1000) + cur, cur, true},
		{"current is not an entity-tag", "*", "abc", false},
		{"current with junk after it", cur, cur + "x", false},
		{"lone quote", `"`, cur, false},
		{"lone W/", `W/`, cur, false},
		{"empty opaque tag", `""`, `""`, true},
		{"empty opaque tag vs ours", `""`, cur, false},
	}
	for _, tt := range tests {
		if got := Match(tt.header, tt.current); got != tt.want {
			t.Errorf("%s: Match(%q, %q) = %v, want %v", tt.name, tt.header, tt.current, got, tt.want)
		}
	}
}

// TestMatchHostileInput: long malformed values end (linear time), without
// panicking.
func TestMatchHostileInput(t *testing.T) {
	cur := Derive(base)
	for _, h := range []string{
		strings.Repeat(",", 1<<20),
		strings.Repeat("W/", 1<<19),
		strings.Repeat(`"`, 1<<20),
		`"` + strings.Repeat("a", 1<<20),
		strings.Repeat(`W/"a"x`, 1<<17),
		strings.Repeat("* ", 1<<19),
	} {
		if Match(h, cur) {
			t.Errorf("Match(%.20q..., %q) = true, want false", h, cur)
		}
	}
}

func FuzzMatch(f *testing.F) {
	for _, v := range vectorstest.Read(f, "testdata/match.txt", 3) {
		f.Add(v.Fields[0], v.Fields[1])
	}
	f.Add("*", Derive(base))
	f.Fuzz(func(t *testing.T, header, current string) {
		got := Match(header, current)
		if current == "" && got {
			t.Fatalf("Match(%q, \"\") = true, want false: no tag, nothing to match", header)
		}
		if opaque(current) == "" {
			if got {
				t.Fatalf("Match(%q, %q) = true for a current value that is no entity-tag", header, current)
			}
			return
		}
		if !Match(current, current) {
			t.Fatalf("Match(%q, %q) = false, want a header equal to the tag to match", current, current)
		}
		if !Match("*", current) {
			t.Fatalf("Match(\"*\", %q) = false, want * to match a current tag", current)
		}
		if !Match(header+","+current, current) && !strings.Contains(header, `"`) {
			t.Fatalf("Match(%q, %q) = false, want a list ending in the tag to match", header+","+current, current)
		}
	})
}

func BenchmarkDerive(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Derive(base)
	}
}

func BenchmarkMatch(b *testing.B) {
	cur := Derive(base)
	header := `W/"0000000000000000", ` + cur
	b.ReportAllocs()
	for b.Loop() {
		if !Match(header, cur) {
			b.Fatal("no match")
		}
	}
}
