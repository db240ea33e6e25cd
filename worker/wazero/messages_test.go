package wazero

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// messagesFile is the one definition of the module's messages
// (docs/edge.md, "Module ABI"), which both hosts are held to.
var messagesFile = filepath.Join("..", "..", "shared", "testdata", "edge-messages.txt") // from this package's folder

// member is one JSON member of a message in messagesFile.
type member struct {
	typ      string // string, int, bool, pairs, strings, ints, or a message's name
	optional bool
}

// readMessages reads messagesFile: each message's members by name, and
// the hostErrorId pattern.
func readMessages(t *testing.T) (map[string]map[string]member, *regexp.Regexp) {
	t.Helper()
	b, err := os.ReadFile(messagesFile)
	if err != nil {
		t.Fatal(err)
	}
	msgs := map[string]map[string]member{}
	var id *regexp.Regexp
	for _, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == "" || line == "#" || strings.HasPrefix(line, "# ") {
			continue
		}
		name, spec, _ := strings.Cut(line, "----")
		name, spec = strings.TrimSpace(name), strings.TrimSpace(spec)
		if name == "hostErrorId" {
			id = regexp.MustCompile(spec)
			continue
		}
		msgs[name] = map[string]member{}
		for _, m := range strings.Fields(spec) {
			n, typ, _ := strings.Cut(m, ":")
			msgs[name][n] = member{strings.TrimSuffix(typ, "?"), strings.HasSuffix(typ, "?")}
		}
	}
	return msgs, id
}

// TestMessagesSchema: the host's message types hold exactly the members
// messagesFile lists for their message, of its types (a field named as
// the member, case aside, or by its json tag); the messages the host
// writes carry them under those names; worker.mjs, the other host, is
// held to the same file by messages_check.mjs when node is installed.
func TestMessagesSchema(t *testing.T) {
	msgs, _ := readMessages(t)
	body := "b"
	every := int64(3)
	for _, tc := range []struct {
		name string
		v    any
	}{
		{"configure", ConfigMessage{}},
		{"start", StartMessage{}},
		{"resume", ResumeMessage{}},
		{"wake", wakeMessage{}},
		{"control", controlMessage{}},
		{"output", Output{}},
		// configured, configure's answer, is read by configure() alone.
	} {
		checkType(t, msgs, tc.name, reflect.TypeOf(tc.v))
	}

	// What the host writes, every member set.
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"start", StartMessage{Method: "GET", Path: "/v1/tiers", Query: "a=1", Headers: [][2]string{{"A", "1"}}, Now: 1, BodySHA256: "00"}.AppendJSON(nil)},
		{"resume", ResumeMessage{Handle: 1, Status: 200, Headers: [][2]string{{"A", "1"}}, Body: &body, Error: "e", Now: 1}.AppendJSON(nil)},
		{"wake", wakeMessage{Handle: 1, Wake: true, Now: 1}.AppendJSON(nil)},
		{"control", controlMessage{Op: "revoke", Now: 1, Body: "{}"}.AppendJSON(nil)},
		{"configure", mustMarshal(t, ConfigMessage{Origin: "o", JWKSURL: "j", Issuer: "i", Audience: "a", Secret: "s", ResourceMetadata: "r",
			URLKeys: "k", Leases: true, Revoke: "v", ReportEvery: &every, Origins: "o", SecretAccept: "s", SignV2: true})},
	} {
		var m map[string]any
		if err := json.Unmarshal(tc.b, &m); err != nil {
			t.Fatalf("%s: %v: %s", tc.name, err, tc.b)
		}
		got := slices.Sorted(maps.Keys(m))
		want := slices.Sorted(maps.Keys(msgs[tc.name]))
		if !slices.Equal(got, want) {
			t.Errorf("%s written with every member set: %v, want the file's %v", tc.name, got, want)
		}
	}

	node, err := exec.LookPath("node")
	if err != nil {
		t.Log("node not installed: worker.mjs is not checked against the file")
		return
	}
	out, err := exec.Command(node, "../cloudflare/messages_check.mjs", "../cloudflare/worker.mjs").CombinedOutput()
	if err != nil {
		t.Errorf("messages_check.mjs (worker.mjs against %s): %v\n%s", messagesFile, err, out)
	}
}

// TestHostRequestID: the host's own answers' ids are of the form
// messagesFile gives (hostErrorId), the one worker.mjs's are held to.
func TestHostRequestID(t *testing.T) {
	_, want := readMessages(t)
	if id := hostRequestID(); !want.MatchString(id) {
		t.Errorf("hostRequestID() = %q, want the form %s", id, want)
	}
}

// checkType holds type typ (a struct, or a pointer to one) to message
// name: one exported field per member, of the member's type.
func checkType(t *testing.T, msgs map[string]map[string]member, name string, typ reflect.Type) {
	t.Helper()
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	members, ok := msgs[name]
	if !ok {
		t.Errorf("%s: no message %q in %s", typ, name, messagesFile)
		return
	}
	seen := map[string]bool{}
	for f := range typ.Fields() {
		if !f.IsExported() {
			continue
		}
		jname := f.Name
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != "" {
			jname = tag
		}
		var m member
		var found bool
		for n, mm := range members {
			if strings.EqualFold(n, jname) {
				jname, m, found = n, mm, true
			}
		}
		if !found {
			t.Errorf("%s.%s: %s has no member %s", typ.Name(), f.Name, name, jname)
			continue
		}
		seen[jname] = true
		if !fits(t, msgs, m.typ, f.Type) {
			t.Errorf("%s.%s is %s, but %s.%s is %s in %s", typ.Name(), f.Name, f.Type, name, jname, m.typ, messagesFile)
		}
	}
	for n := range members {
		if !seen[n] {
			t.Errorf("%s has no field for %s.%s", typ.Name(), name, n)
		}
	}
}

// fits reports whether a Go field of type typ can hold a member of type
// want (an object member's type is checked as its own message).
func fits(t *testing.T, msgs map[string]map[string]member, want string, typ reflect.Type) bool {
	if typ.Kind() == reflect.Pointer && want != "" {
		typ = typ.Elem()
	}
	switch k := typ.Kind(); want {
	case "string":
		return k == reflect.String
	case "bool":
		return k == reflect.Bool
	case "int":
		return k >= reflect.Int && k <= reflect.Uint64
	case "pairs":
		return typ == reflect.TypeOf([][2]string(nil))
	case "strings":
		return typ == reflect.TypeOf([]string(nil))
	case "ints":
		return k == reflect.Slice && typ.Elem().Kind() >= reflect.Int && typ.Elem().Kind() <= reflect.Uint64
	}
	if typ.Kind() != reflect.Struct {
		return false
	}
	checkType(t, msgs, want, typ)
	return true
}

func mustMarshal(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
