package reqid

import (
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
