package reqid

import (
	"regexp"
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	for in, want := range map[string]bool{
		"":                             false,
		"abcdefg":                      false, // 7
		"abcdefgh":                     true,
		"req_0123456789abcdef01234567": true,
		"edge-req-0007":                true,
		"A.b_C-d.0":                    true,
		strings.Repeat("a", 64):        true,
		strings.Repeat("a", 65):        false,
		"bad id!!":                     false,
		"has space":                    false,
		"semi;colon":                   false,
		"slash/slash":                  false,
		"non-ascii-é":                  false,
	} {
		if got := Valid(in); got != want {
			t.Errorf("Valid(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestAppend(t *testing.T) {
	r := [RandomBytes]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x00, 0xff, 0x10, 0x9a}
	got := string(Append([]byte("x"), &r))
	if want := "xreq_0123456789abcdef00ff109a"; got != want {
		t.Errorf("Append = %q, want %q", got, want)
	}
	if id := got[1:]; !Valid(id) {
		t.Errorf("a new id %q is not Valid", id)
	}
}

func TestNew(t *testing.T) {
	a, b := New(), New()
	for _, id := range []string{a, b} {
		if !regexp.MustCompile(`^req_[0-9a-f]{24}$`).MatchString(id) || !Valid(id) {
			t.Errorf("New = %q, want req_ and 24 lowercase hex digits", id)
		}
	}
	if a == b {
		t.Errorf("New made %q twice", a)
	}
}

func TestKeep(t *testing.T) {
	if got := Keep("edge-req-0007"); got != "edge-req-0007" {
		t.Errorf("Keep of a valid id = %q, want it kept", got)
	}
	for _, in := range []string{"", "short", "bad id!!"} {
		if got := Keep(in); got == in || !strings.HasPrefix(got, Prefix) || !Valid(got) {
			t.Errorf("Keep(%q) = %q, want a new id", in, got)
		}
	}
}

func TestNewOf(t *testing.T) {
	for _, c := range []struct {
		prefix string
		n      int
		want   string
	}{
		{"", 8, `^[0-9a-f]{16}$`},
		{"edge_", RandomBytes, `^edge_[0-9a-f]{24}$`},
	} {
		if got := NewOf(c.prefix, c.n); !regexp.MustCompile(c.want).MatchString(got) {
			t.Errorf("NewOf(%q, %d) = %q, want %s", c.prefix, c.n, got, c.want)
		}
	}
}
