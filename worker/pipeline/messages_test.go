package pipeline

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMessagesSchema: the codec reads the members of start, resume (and
// wake) and control that shared/testdata/edge-messages.txt lists, no
// others, and each kind of output it writes, every member set, holds
// members the file lists for output and its objects, which together are
// every one of them (worker/wazero's test of the same name holds the
// host's types to the file).
func TestMessagesSchema(t *testing.T) {
	if guest(t) { // the file is outside the guest's sandbox
		return
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "shared", "testdata", "edge-messages.txt")) // this module's shared/testdata
	if err != nil {
		t.Fatal(err)
	}
	msgs := map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if name, spec, ok := strings.Cut(line, "----"); ok && !strings.HasPrefix(line, "#") {
			for _, m := range strings.Fields(spec) {
				n, _, _ := strings.Cut(m, ":")
				msgs[strings.TrimSpace(name)] = append(msgs[strings.TrimSpace(name)], n)
			}
		}
	}
	sorted := func(names ...[]string) []string {
		all := slices.Concat(names...)
		slices.Sort(all)
		return slices.Compact(all)
	}
	for _, tc := range []struct {
		name      string
		got, want []string
	}{
		{"start", requestMembers, msgs["start"]},
		{"resume and wake", resumeMembers, sorted(msgs["resume"], msgs["wake"])},
		{"control", controlMembers, msgs["control"]},
	} {
		if got, want := sorted(tc.got), sorted(tc.want); !slices.Equal(got, want) {
			t.Errorf("%s: the codec reads %v, the file lists %v", tc.name, got, want)
		}
	}

	// configure: each member the file lists is read, of its type: a
	// valid message with that member of another type is refused.
	valid := map[string]any{"origin": "http://o", "jwksUrl": "http://o/j", "issuer": "i", "audience": "a",
		"secret": "0123456789abcdef0123456789abcdef", "resourceMetadata": "", "urlKeys": "", "leases": true, "revoke": "",
		"reportEvery": 0, "origins": "http://o", "secretAccept": "", "signV2": false}
	if b, _ := json.Marshal(valid); !slices.Equal(sorted(slices.Collect(maps.Keys(valid))), sorted(msgs["configure"])) {
		t.Errorf("configure: the test's message has %v, the file lists %v", sorted(slices.Collect(maps.Keys(valid))), sorted(msgs["configure"]))
	} else if _, err := ParseConfig(b); err != nil {
		t.Fatalf("configure %s: %v", b, err)
	}
	for _, name := range msgs["configure"] {
		m := maps.Clone(valid)
		if _, ok := m[name].(string); ok {
			m[name] = 1
		} else {
			m[name] = "x"
		}
		if b, _ := json.Marshal(m); func() bool { _, err := ParseConfig(b); return err == nil }() {
			t.Errorf("configure: %s of another type was not refused: the codec does not read it", name)
		}
	}

	// Every kind of output, each field set, members gathered by object.
	full := Output{Handle: 1, Status: 200, Headers: []Header{{"A", "1"}}, Body: []byte("b"), Lease: LeaseUse{ID: "L", Used: 1},
		Method: "POST", URL: "http://o/x", Signatures: []string{"s", "t"}, Wake: []Handle{2}, Refresh: Refresh{Handle: 3, URL: "http://o/jwks"},
		Background: Background{Handle: 4, Method: "POST", URL: "http://o/y", Headers: []Header{{"B", "2"}}, Body: []byte("{}"), Signatures: []string{"s", "t"}}}
	got := map[string][]string{}
	for _, kind := range []Kind{Response, Subrequest, Park, Done} {
		for _, passthrough := range []bool{false, true} {
			o := full
			o.Kind, o.Passthrough = kind, passthrough
			var m map[string]json.RawMessage
			if err := json.Unmarshal(o.AppendJSON(nil), &m); err != nil {
				t.Fatal(err)
			}
			for k, v := range m {
				got["output"] = append(got["output"], k)
				if obj := map[string]any{}; k != "headers" && json.Unmarshal(v, &obj) == nil {
					got[k] = append(got[k], slices.Collect(maps.Keys(obj))...)
				}
			}
		}
	}
	var cfg map[string]any
	json.Unmarshal(ConfigResult(errMalformed), &cfg)
	got["configured"] = slices.Collect(maps.Keys(cfg))
	for _, name := range []string{"output", "refresh", "background", "lease", "configured"} {
		if g, w := sorted(got[name]), sorted(msgs[name]); !slices.Equal(g, w) {
			t.Errorf("%s: the codec writes %v, the file lists %v", name, g, w)
		}
	}
}
