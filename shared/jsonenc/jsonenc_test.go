package jsonenc

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote`, `back\slash`, "nl\n\r\t", "\x00\x1f\x7f", "café ✓", "\u2028\u2029", "bad\xffutf8"} {
		b := String(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q → %s: %v", s, b, err)
		}
		want := s
		if !utf8.ValidString(s) {
			want = string([]rune(s)) // invalid bytes become U+FFFD
		}
		if got != want {
			t.Errorf("%q → %s → %q", s, b, got)
		}
	}
}

// FuzzString: whatever the input, the output is JSON that decodes to the
// input (with invalid UTF-8 replaced).
func FuzzString(f *testing.F) {
	f.Add("a\"b\\c\u2028\x00")
	f.Fuzz(func(t *testing.T, s string) {
		var got string
		if err := json.Unmarshal(String(nil, s), &got); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if got != string([]rune(s)) {
			t.Fatalf("%q decoded as %q", s, got)
		}
	})
}

func TestOthers(t *testing.T) {
	b := []byte{'{'}
	b = Key(b, "a")
	b = Strings(b, []string{"x", "y"})
	b = Key(b, "n")
	b = Int(b, -7)
	b = Key(b, "t")
	b = Bool(b, true)
	b = Key(b, "e")
	b = Strings(b, nil)
	b = append(b, '}')
	if got, want := string(b), `{"a":["x","y"],"n":-7,"t":true,"e":[]}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestPlain(t *testing.T) {
	for s, want := range map[string]int{"": 0, "plain ~\x7f": 8, `ab"c`: 2, `a\b`: 1, "a\x1fb": 1, "a\tb": 1, "aé": 1, "\x80": 0} {
		if got := Plain(s); got != want {
			t.Errorf("Plain(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestPairs(t *testing.T) {
	got := Pairs(nil, [][2]string{{"A", `q"`}, {"B", ""}}, func(kv [2]string) (string, string) { return kv[0], kv[1] })
	if want := `[["A","q\""],["B",""]]`; string(got) != want {
		t.Errorf("Pairs = %s, want %s", got, want)
	}
	if got := Pairs(nil, []int(nil), func(int) (string, string) { return "", "" }); string(got) != "[]" {
		t.Errorf("no pairs: %s", got)
	}
}
