package ows

import "testing"

func TestTrim(t *testing.T) {
	for in, want := range map[string]string{
		"":             "",
		" \t ":         "",
		"gzip":         "gzip",
		" \tgzip\t ":   "gzip",
		"a b":          "a b",
		"\t a \t b \t": "a \t b",
		"\r\ngzip\r\n": "\r\ngzip\r\n", // CR and LF are not OWS
		"\u00a0gzip":   "\u00a0gzip",
	} {
		if got := Trim(in); got != want {
			t.Errorf("Trim(%q) = %q, want %q", in, got, want)
		}
	}
}
