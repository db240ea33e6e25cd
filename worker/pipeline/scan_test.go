package pipeline

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/lectern-api/lectern/shared/jsoncheck"
)

// FuzzScan holds the scanner to encoding/json: it accepts exactly the
// JSON objects no deeper than maxDepth, finds the first occurrence of each
// member, and reads strings and integers as encoding/json does.
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		`{"method":"GET","path":"/v1/tiers","query":"a=1","headers":[["A","b"],["C","\u00e9\ud83d\ude00\n\"\\\/"]],"now":17}`,
		`{"handle":3,"status":204,"headers":[],"body":"x\u0000y","error":"","wake":false,"now":-0}`,
		` { "a" : [ 1.5e3 , null , true , { "b" : [ ] } ] , "method" : "" } `,
		`{"method":"\ud800\u0041"}`, `{"method":"\udc00"}`, `{"path":1e2}`, `{"now":9223372036854775808}`,
		`{"now":-9223372036854775808}`, `{"a":[[[[[[[[1]]]]]]]]}`, `{"a":[[[[[[[1]]]]]]]}`, `{}`, `[]`, `{"a":1,}`, `{"a" 1}`,
		`{"a":"\x01"}`, `{"a":01}`, `{"a":-}`, `{"a":1.}`, `{"a":"\u12"}`, `{"method":"x"} x`, `null`, ` null `,
	} {
		f.Add([]byte(s))
	}
	names := []string{"method", "path", "query", "headers", "now"}
	f.Fuzz(func(t *testing.T, b []byte) {
		var vals [5]raw
		escaped, ok := members(b, names, vals[:])
		var m map[string]json.RawMessage
		want := json.Valid(b) && jsoncheck.Shallow(b, maxDepth) && json.Unmarshal(b, &m) == nil && m != nil // null decodes to a nil map
		if ok != want {
			t.Fatalf("members(%q) = %v, encoding/json says %v", b, ok, want)
		}
		if !ok {
			return
		}
		// In valid JSON a backslash is only ever an escape in a string.
		if escaped != bytes.Contains(b, []byte{'\\'}) {
			t.Fatalf("members(%q): escaped = %v", b, escaped)
		}
		if utf8.Valid(b) { // encoding/json replaces invalid bytes; the codec keeps them
			checkRequest(t, b, m)
		}
		for i, name := range names {
			v := vals[i]
			// encoding/json keeps the last of repeated names; the scanner
			// the first: compare only names that occur once.
			if !v.present() {
				if _, there := m[name]; there {
					t.Fatalf("%s: not found in %q", name, b)
				}
				continue
			}
			got := b[v.from:v.to]
			if raw, there := m[name]; there && string(raw) != string(got) && count(b, name) == 1 {
				t.Fatalf("%s: got %q, encoding/json %q", name, got, raw)
			}
			if v.k == kString && utf8.Valid(got) {
				a, _ := open(b, names, make([]raw, len(names)), false, nil)
				str, _ := a.str(b, v)
				var s string
				if err := json.Unmarshal(got, &s); err != nil || str != s {
					t.Fatalf("%s: unescaped %q, encoding/json %q (%v)", name, str, s, err)
				}
			}
			if v.k == kNumber {
				n, isInt := integer(b, v)
				var want int64
				err := json.Unmarshal(got, &want)
				if isInt != (err == nil) || isInt && n != want {
					t.Fatalf("%s: integer %q = %d, %v; encoding/json %d, %v", name, got, n, isInt, want, err)
				}
			}
		}
	})
}

// checkRequest holds decodeRequest to encoding/json's reading of the
// members that occur once.
func checkRequest(t *testing.T, b []byte, m map[string]json.RawMessage) {
	r, err := decodeRequest(b, nil)
	if err != nil {
		return
	}
	for name, got := range map[string]string{"method": r.Method, "path": r.Path, "query": r.Query} {
		var want string
		if raw, there := m[name]; there && count(b, name) == 1 && (json.Unmarshal(raw, &want) != nil || got != want) {
			t.Fatalf("%s: decoded %q, encoding/json %q in %q", name, got, want, b)
		}
	}
	raw, there := m["headers"]
	if !there || count(b, "headers") != 1 {
		return
	}
	var want [][]string
	if err := json.Unmarshal(raw, &want); err != nil || len(want) != len(r.Headers) {
		t.Fatalf("headers: decoded %q, encoding/json %q (%v)", r.Headers, want, err)
	}
	for i, h := range r.Headers {
		if len(want[i]) != 2 || want[i][0] != h.Name || want[i][1] != h.Value {
			t.Fatalf("header %d: decoded %q, encoding/json %q", i, h, want[i])
		}
	}
}

// FuzzDecode holds decodeResume and ParseConfig to encoding/json: the
// headers, body and error of a resume, every member of a configuration.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"handle":3,"status":200,"headers":[["A","\u00e9\ud83d\ude00"],["B","\\\"x"]],"body":"a\"b\\c\u0000\ud800\ud800\udc00\udc00","error":"e\n"}`,
		`{"handle":3,"status":204,"headers":[["Etag","W/\"0\""],["A","é€😀"]],"body":"","error":""}`,
		`{"origin":"a\"b","jwksUrl":"\u00e9\ud83d\ude00","issuer":"x\\y","audience":"\/","secret":"\ud800z","resourceMetadata":""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !utf8.Valid(b) || json.Unmarshal(b, new(map[string]json.RawMessage)) != nil {
			return // encoding/json replaces invalid bytes; the codec keeps them
		}
		var m map[string]json.RawMessage
		json.Unmarshal(b, &m)
		once := func(name string) (json.RawMessage, bool) {
			raw, there := m[name]
			return raw, there && count(b, name) == 1
		}
		if in, err := decodeResume(bytes.Clone(b), nil); err == nil { // decoded in place
			var body, errText string
			if raw, ok := once("body"); ok && (json.Unmarshal(raw, &body) != nil || string(in.Body) != body) {
				t.Fatalf("body %q, encoding/json %q in %q", in.Body, body, b)
			}
			if raw, ok := once("error"); ok && (json.Unmarshal(raw, &errText) != nil || in.Error != errText) {
				t.Fatalf("error %q, encoding/json %q in %q", in.Error, errText, b)
			}
			var hs [][]string
			if raw, ok := once("headers"); ok {
				if json.Unmarshal(raw, &hs) != nil || len(hs) != len(in.Headers) {
					t.Fatalf("headers %q, encoding/json %q in %q", in.Headers, hs, b)
				}
				for i, h := range in.Headers {
					if len(hs[i]) != 2 || hs[i][0] != h.Name || hs[i][1] != h.Value {
						t.Fatalf("header %d %q, encoding/json %q in %q", i, h, hs[i], b)
					}
				}
			}
		}
		if cfg, err := ParseConfig(b); err == nil {
			for name, got := range map[string]string{"origin": cfg.Origin, "jwksUrl": cfg.JWKSURL, "issuer": cfg.Issuer,
				"audience": cfg.Audience, "secret": cfg.Secret, "resourceMetadata": cfg.ResourceMetadata} {
				var want string
				if raw, ok := once(name); ok && (json.Unmarshal(raw, &want) != nil || got != want) {
					t.Fatalf("%s: %q, encoding/json %q in %q", name, got, want, b)
				}
			}
		}
	})
}

// count is how many members named name b has at its top level, roughly:
// occurrences of the quoted name followed by a colon.
func count(b []byte, name string) int {
	q := `"` + name + `"`
	n := 0
	for i := 0; i+len(q) <= len(b); i++ {
		if string(b[i:i+len(q)]) == q {
			n++
		}
	}
	return n
}
