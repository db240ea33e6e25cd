package encoding

import (
	"strings"
	"testing"

	"github.com/lectern-api/lectern/shared/vectorstest"
)

func name(c Coding) string {
	if c == Identity {
		return "identity"
	}
	return c.String()
}

func TestNegotiateVectors(t *testing.T) {
	for _, v := range vectorstest.Read(t, "testdata/negotiate.txt", 2) {
		if got := name(Negotiate(v.Fields[0])); got != v.Fields[1] {
			t.Errorf("negotiate.txt:%d: Negotiate(%q) = %s, want %s", v.Line, v.Fields[0], got, v.Fields[1])
		}
	}
}

func TestNegotiate(t *testing.T) {
	tests := []struct {
		name, header string
		want         Coding
	}{
		{"absent header", "", Identity},
		{"only whitespace", " \t ", Identity},
		{"tabs", "\tbr\t;\tq=0.9\t,\tgzip", Gzip},
		{"CR is not whitespace", "gzip\r", Identity},
		{"NUL in a name", "gz\x00ip", Identity},
		{"non-ASCII name", "gzíp, br", Br},
		{"br needs its exact name", "brotli", Identity},
		{"q=1. is a qvalue", "gzip;q=0.9, br;q=1.", Br},
		{"q=0. is a refusal", "gzip;q=0.", Identity},
		{"q=1.000 is the maximum", "br;q=1.000", Br},
		{"q=1.001 is malformed", "br;q=1.001, gzip;q=0.1", Gzip},
		{"long list", strings.Repeat("deflate;q=0.9, ", 1000) + "gzip;q=0.1", Gzip},
		{"hostile commas", strings.Repeat(",", 1<<20), Identity},
		{"hostile semicolons", "gzip" + strings.Repeat(";", 1<<20), Gzip},
		{"hostile parameters", "br" + strings.Repeat(";q=1", 1<<18), Br},
	}
	for _, tt := range tests {
		if got := Negotiate(tt.header); got != tt.want {
			t.Errorf("%s: Negotiate(%.40q) = %s, want %s", tt.name, tt.header, name(got), name(tt.want))
		}
	}
}

func TestString(t *testing.T) {
	for c, want := range map[Coding]string{Identity: "", Gzip: "gzip", Br: "br", Coding(9): ""} {
		if got := c.String(); got != want {
			t.Errorf("Coding(%d).String() = %q, want %q", c, got, want)
		}
	}
}

// TestCompressible: spec, Transport: "Bodies under 384 bytes (errors,
// progress acknowledgements, 304s) are sent uncompressed".
func TestCompressible(t *testing.T) {
	tests := []struct {
		n    int
		want bool
	}{{0, false}, {1, false}, {383, false}, {384, true}, {385, true}, {6 << 20, true}, {-1, false}}
	for _, tt := range tests {
		if got := Compressible(tt.n); got != tt.want {
			t.Errorf("Compressible(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
}

func TestParseQ(t *testing.T) {
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"0", 0, true}, {"1", 1000, true}, {"0.5", 500, true}, {"0.05", 50, true},
		{"0.005", 5, true}, {"0.999", 999, true}, {"1.0", 1000, true}, {"1.000", 1000, true},
		{"0.", 0, true}, {"1.", 1000, true},
		{"", 0, false}, {"2", 0, false}, {"1.5", 0, false}, {"0.0001", 0, false},
		{".5", 0, false}, {"+0.5", 0, false}, {"0,5", 0, false}, {"0.5a", 0, false}, {"01", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseQ(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseQ(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzNegotiate(f *testing.F) {
	for _, v := range vectorstest.Read(f, "testdata/negotiate.txt", 2) {
		f.Add(v.Fields[0])
	}
	f.Fuzz(func(t *testing.T, h string) {
		c := Negotiate(h)
		switch c {
		case Identity, Gzip:
		case Br:
			if !strings.Contains(strings.ToLower(h), "br") {
				t.Fatalf("Negotiate(%q) = br, want br only when named", h)
			}
		default:
			t.Fatalf("Negotiate(%q) = Coding(%d), want one of identity, gzip, br", h, c)
		}
		// Empty elements are nothing; names and "q" ignore ASCII case.
		if got := Negotiate(", " + h + " ,"); got != c {
			t.Fatalf("Negotiate(%q) = %d, Negotiate(%q) = %d; want empty elements ignored", h, c, ", "+h+" ,", got)
		}
		if got := Negotiate(asciiUpper(h)); got != c {
			t.Fatalf("Negotiate(%q) = %d, upper-cased %d; want case ignored", h, c, got)
		}
	})
}

func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - ('a' - 'A')
		}
	}
	return string(b)
}

func BenchmarkNegotiate(b *testing.B) {
	h := "gzip, deflate, br;q=0.9, *;q=0.1"
	b.ReportAllocs()
	for b.Loop() {
		if Negotiate(h) != Gzip {
			b.Fatal("want gzip")
		}
	}
}
