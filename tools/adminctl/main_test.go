package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/version"
	"github.com/lectern-api/lectern/origin/admin"
	"github.com/lectern-api/lectern/origin/clock"
	"github.com/lectern-api/lectern/origin/forensic"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/sqlitemeter"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/store/sqlitestore"
	"github.com/lectern-api/lectern/shared/link"
	"github.com/lectern-api/lectern/shared/scope"
)

const token = "t0ken"

// The forensic and link keys the test admin API reads leaks with.
var (
	tagKey      = []byte("the test tag key of thirty-two b")
	linkKeys, _ = link.ParseKeys("k1=0123456789abcdef0123456789abcdef")
)

// serve runs the real admin API on a real listener over a real store, and
// returns a getenv that points adminctl at it.
func serve(t *testing.T) func(string) string {
	env, _, _ := serveStores(t)
	return env
}

// serveStores is serve, and returns its stores too.
func serveStores(t *testing.T) (func(string) string, store.Store, meter.Store) {
	t.Helper()
	st, err := sqlitestore.New(context.Background(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m, err := sqlitemeter.New(context.Background(), filepath.Join(t.TempDir(), "meter.db"), sqlitemeter.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	wall := time.Date(2030, 3, 10, 12, 0, 0, 0, time.UTC)
	srv := httptest.NewServer(admin.Handler(admin.Config{
		Token: token, Store: st, Clock: clock.New(func() time.Time { return wall }), TestClock: true,
		CreateClient: func(_ context.Context, orgID string, scopes, grants, redirects []string) (string, string, error) {
			return "c1", "s1", nil
		},
		Reload:    func(_ context.Context, dir string) (string, error) { return "v-" + filepath.Base(dir), nil },
		Meters:    m,
		Forensics: &admin.Forensics{Keys: forensic.Keys{Tag: tagKey, Canary: tagKey}, Links: linkKeys},
	}))
	t.Cleanup(srv.Close)
	env := map[string]string{"LECTERN_ADMIN_ADDR": strings.TrimPrefix(srv.URL, "http://"), "LECTERN_ADMIN_TOKEN": token}
	return func(k string) string { return env[k] }, st, m
}

// adminctl runs one command line and returns stdout and the error.
func adminctl(t *testing.T, getenv func(string) string, line ...string) (map[string]any, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), line, getenv, &stdout, &stderr)
	var out map[string]any
	if err == nil && stdout.Len() > 0 {
		if jerr := json.Unmarshal(stdout.Bytes(), &out); jerr != nil {
			t.Fatalf("%v: output is not JSON: %v\n%s", line, jerr, stdout.String())
		}
	}
	return out, stdout.String(), err
}

func TestCommands(t *testing.T) {
	env := serve(t)
	out, text, err := adminctl(t, env, "org", "create", "-id", "acme", "-name", "Acme", "-grants", "high,college/calculus",
		"-json", `{"orgName":"ignored","longUrls":true}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "\n  \"orgId\": \"acme\",\n") {
		t.Errorf("output is not pretty-printed:\n%s", text)
	}
	if out["orgName"] != "Acme" || out["longUrls"] != true || len(out["contentGrants"].([]any)) != 2 {
		t.Errorf("org create: %s", text)
	}

	tests := []struct {
		line []string
		key  string
		want any
	}{
		{[]string{"health"}, "status", "ok"},
		{[]string{"org", "get", "acme"}, "orgName", "Acme"},
		{[]string{"org", "suspend", "acme"}, "status", "suspended"},
		{[]string{"org", "get", "acme"}, "status", "suspended"},
		{[]string{"org", "reinstate", "acme"}, "status", "active"},
		{[]string{"org", "patch", "acme", "-json", `{"tier":"gold"}`}, "tier", "gold"},
		{[]string{"org", "patch", "-json", `{"eclaVersion":4}`, "acme"}, "eclaVersion", 4.0},
		{[]string{"client", "create", "acme", "-scopes", "content.read,service-api/media.download"}, "clientSecret", "s1"},
		{[]string{"corpus", "reload", "some/dir"}, "contentVersion", "v-dir"},
		{[]string{"clock", "advance", "3600"}, "offsetSeconds", 3600.0},
		{[]string{"clock", "set", "2030-04-01T00:00:00Z"}, "now", "2030-04-01T00:00:00Z"},
		{[]string{"clock", "get"}, "now", "2030-04-01T00:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.line, " "), func(t *testing.T) {
			out, text, err := adminctl(t, env, tt.line...)
			if err != nil {
				t.Fatal(err)
			}
			if out[tt.key] != tt.want {
				t.Errorf("%s = %v, want %v\n%s", tt.key, out[tt.key], tt.want, text)
			}
		})
	}

	// delete prints nothing; the org is then gone, and that is an error
	// naming the code and the API's message.
	if _, text, err := adminctl(t, env, "org", "delete", "acme"); err != nil || text != "" {
		t.Errorf("org delete: %q, %v", text, err)
	}
	_, text, err = adminctl(t, env, "org", "get", "acme")
	if err == nil || !strings.Contains(err.Error(), "404 NOT_FOUND: No organisation with id acme.") || text != "" {
		t.Errorf("org get of a deleted org: %q, %v", text, err)
	}
	_, _, err = adminctl(t, env, "clock", "set", "2000-01-01T00:00:00Z")
	if err == nil || !strings.Contains(err.Error(), "400 BAD_REQUEST") || !strings.Contains(err.Error(), "parameter now") {
		t.Errorf("clock set in the past: %v", err)
	}
}

func TestFlagsOverrideEnv(t *testing.T) {
	env := serve(t)
	_, _, err := adminctl(t, env, "-token", "wrong", "health")
	if err == nil || !strings.Contains(err.Error(), "401 invalid_token") {
		t.Errorf("-token wrong: %v", err)
	}
	noToken := func(k string) string {
		if k == "LECTERN_ADMIN_TOKEN" {
			return ""
		}
		return env(k)
	}
	if _, _, err := adminctl(t, noToken, "health"); err == nil || !strings.Contains(err.Error(), "no admin token") {
		t.Errorf("no token: %v", err)
	}
	if _, _, err := adminctl(t, noToken, "-token", token, "-addr", "http://"+env("LECTERN_ADMIN_ADDR"), "health"); err != nil {
		t.Errorf("-token and -addr: %v", err)
	}
}

func TestUsageErrors(t *testing.T) {
	env := serve(t)
	for _, line := range [][]string{
		{},
		{"frobnicate"},
		{"org"},
		{"org", "get"},
		{"org", "get", "a", "b"},
		{"org", "patch", "acme"},
		{"org", "patch", "acme", "-json", "{"},
		{"org", "create", "-json", "[1]"},
		{"client", "create", "acme", "-scopes", ""},
		{"client", "create", "acme", "-scopes", " , "},
		{"clock", "advance", "-5"},
		{"clock", "advance", "soon"},
		{"health", "now"},
		{"org", "create", "-bogus"},
		{"ledger"},
		{"ledger", "a", "b"},
		{"ledger", "acme", "-bogus", "1"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), line, env, &stdout, &stderr)
		if !errors.Is(err, errUsage) {
			t.Errorf("%q: err = %v, want a usage error", line, err)
		}
		if !strings.Contains(stderr.String(), "usage: adminctl") {
			t.Errorf("%q: no usage on stderr", line)
		}
	}
}

// ledger lists an organisation's ledger a page at a time; the API
// validates the paging flags.
func TestLedger(t *testing.T) {
	env, st, m := serveStores(t)
	if _, _, err := adminctl(t, env, "org", "create", "-id", "acme"); err != nil {
		t.Fatal(err)
	}
	o, err := st.GetOrg(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	var entries []meter.Entry
	for _, target := range []string{"img-1", "img-2", "img-1"} {
		entries = append(entries, meter.Entry{Kind: meter.KindMedia, Target: target, Format: "url", Client: "c1",
			ContentVersion: "v1", RequestID: "r1", Expires: time.Date(2030, 3, 10, 12, 15, 0, 0, time.UTC), KeyID: "k1"})
	}
	res, err := m.Apply(context.Background(), meter.Op{Org: meter.Key(o), Now: time.Date(2030, 3, 10, 12, 0, 0, 0, time.UTC),
		Stages: []meter.Stage{{{Meter: meter.MonthCalls, N: 1}}}, Ledger: entries})
	if err != nil {
		t.Fatal(err)
	}
	ids := res.LedgerIDs
	out, text, err := adminctl(t, env, "ledger", "acme", "-limit", "2")
	if err != nil {
		t.Fatal(err)
	}
	items, _ := out["items"].([]any)
	if len(items) != 2 || out["nextAfter"] != float64(ids[1]) || items[1].(map[string]any)["target"] != "img-2" {
		t.Fatalf("ledger acme -limit 2:\n%s", text)
	}
	out, text, err = adminctl(t, env, "ledger", "-after", strconv.FormatInt(ids[1], 10), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if items, _ := out["items"].([]any); len(items) != 1 || out["nextAfter"] != nil || items[0].(map[string]any)["id"] != float64(ids[2]) {
		t.Errorf("ledger -after %d acme:\n%s", ids[1], text)
	}
	if _, _, err := adminctl(t, env, "ledger", "acme", "-limit", "0"); err == nil || !strings.Contains(err.Error(), "400 BAD_REQUEST") ||
		!strings.Contains(err.Error(), "parameter limit") {
		t.Errorf("ledger -limit 0: %v", err)
	}
	if _, _, err := adminctl(t, env, "ledger", "nobody"); err == nil || !strings.Contains(err.Error(), "404 NOT_FOUND") {
		t.Errorf("ledger of an unknown org: %v", err)
	}
}

// forensic posts a leaked file, or a link given as the argument, and
// prints what the API names.
func TestForensic(t *testing.T) {
	env, st, m := serveStores(t)
	for _, id := range []string{"acme", "globex"} {
		if _, _, err := adminctl(t, env, "org", "create", "-id", id); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	doc, _ := json.Marshal(map[string]any{"lessonId": "high/algebra/3", "cards": []map[string]string{{"body": "A sentence."}},
		"_license": forensic.Envelope{Lic: forensic.Licence("globex", 1), Tag: forensic.Tag(tagKey, "globex", scope.Of(scope.ContentRead))}})
	lesson := filepath.Join(dir, "leak.json")
	garbage := filepath.Join(dir, "garbage.bin")
	os.WriteFile(lesson, doc, 0o600)
	os.WriteFile(garbage, []byte("not a leak at all"), 0o600)

	out, text, err := adminctl(t, env, "forensic", lesson, "-orgs", "acme,globex")
	if err != nil || out["orgId"] != "globex" || out["scopes"] != "service-api/content.read" {
		t.Fatalf("forensic FILE: %v\n%s", err, text)
	}
	// Without the candidates the tag names no one.
	if _, _, err := adminctl(t, env, "forensic", "-orgs", "acme", lesson); err == nil || !strings.Contains(err.Error(), "404 NOT_FOUND") {
		t.Errorf("forensic FILE -orgs acme: %v", err)
	}
	if _, _, err := adminctl(t, env, "forensic", garbage); err == nil || !strings.Contains(err.Error(), "404 NOT_FOUND: Not recognised") {
		t.Errorf("forensic of garbage: %v", err)
	}

	o, err := st.GetOrg(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	expires := time.Date(2030, 3, 10, 12, 15, 0, 0, time.UTC)
	res, err := m.Apply(context.Background(), meter.Op{Org: meter.Key(o), Now: time.Date(2030, 3, 10, 12, 0, 0, 0, time.UTC),
		Stages: []meter.Stage{{{Meter: meter.MonthCalls, N: 1}}}, Ledger: []meter.Entry{{Kind: meter.KindMedia, Target: "img-1",
			Format: "url", Client: "c7", ContentVersion: "v1", RequestID: "r1", Expires: expires, KeyID: "k1"}}})
	if err != nil {
		t.Fatal(err)
	}
	signed := linkKeys.Sign(link.Link{Kind: link.Media, Expires: expires.Unix(), Row: res.LedgerIDs[0], Name: "img.png", Media: "img-1", Org: "acme"})
	for _, arg := range []string{"https://lectern.example" + signed, signed} {
		out, text, err = adminctl(t, env, "forensic", arg)
		if err != nil || out["orgId"] != "acme" {
			t.Errorf("forensic %s: %v\n%s", arg, err, text)
		}
	}
	altered := strings.Replace(signed, "/img.png", "/img2.png", 1)
	if _, _, err := adminctl(t, env, "forensic", altered); err == nil || !strings.Contains(err.Error(), "Not authentic") {
		t.Errorf("forensic of an altered link: %v", err)
	}
	for _, line := range [][]string{{"forensic"}, {"forensic", "a", "b"}, {"forensic", filepath.Join(dir, "missing")}} {
		if _, _, err := adminctl(t, env, line...); err == nil {
			t.Errorf("%v: no error", line)
		}
	}
}

// TestHelp: help, help COMMAND and COMMAND -h explain on stdout and
// succeed; -h lists the commands (main exits 0 on flag.ErrHelp); an
// unknown topic fails.
func TestHelp(t *testing.T) {
	env := func(string) string { return "" }
	for _, tc := range []struct {
		line []string
		want []string // on stdout
	}{
		{[]string{"help"}, []string{"usage: adminctl", "org create", "clock set RFC3339", "help [COMMAND]"}},
		{[]string{"help", "client", "create"}, []string{"adminctl client create ORG", "content.read means service-api/content.read", "progress.write"}},
		{[]string{"help", "org"}, []string{"org create", "org delete ID"}},
		{[]string{"org", "create", "-h"}, []string{"adminctl org create [-id ID]"}},
		{[]string{"ledger", "acme", "--help"}, []string{"adminctl ledger ORG"}},
		{[]string{"-version"}, []string{"adminctl " + version.Release + " ("}},
	} {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), tc.line, env, &stdout, &stderr); err != nil {
			t.Errorf("%v: %v", tc.line, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%v: stdout lacks %q:\n%s", tc.line, w, stdout.String())
			}
		}
		if strings.Contains(stdout.String(), "org get") && tc.line[0] != "help" {
			t.Errorf("%v: printed more than its command:\n%s", tc.line, stdout.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, env, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) || !strings.Contains(stdout.String(), "commands:") {
		t.Errorf("-h: %v, stdout %q", err, stdout.String())
	}
	if err := run(context.Background(), []string{"help", "nope"}, env, &stdout, &stderr); err == nil {
		t.Error("help nope: no error")
	}
	for _, c := range commands {
		if !help(io.Discard, strings.Fields(commandName(c.synopsis))) {
			t.Errorf("help %q finds nothing", commandName(c.synopsis))
		}
	}
}

// issue #35, point 9: a client created without -scopes can run lectern
// sync (content.read for the listings, content.export for the exports);
// media.download, for sync -media, is asked for by name. Before, client
// create without -scopes was a usage error.
func TestClientCreateDefaultScopes(t *testing.T) {
	for _, tt := range []struct {
		line []string
		want string
	}{
		{[]string{"client", "create", "acme"}, `{"scopes":["content.read","content.export"]}`},
		{[]string{"client", "create", "-grant-types", "client_credentials", "acme"},
			`{"grantTypes":["client_credentials"],"scopes":["content.read","content.export"]}`},
		{[]string{"client", "create", "acme", "-scopes", "content.read,content.export,media.download"},
			`{"scopes":["content.read","content.export","media.download"]}`},
	} {
		c, err := parse(tt.line)
		if err != nil {
			t.Errorf("%q: %v", tt.line, err)
			continue
		}
		if c.method != "POST" || c.path != "/admin/v1/orgs/acme/clients" || string(c.body) != tt.want {
			t.Errorf("%q: %s %s %s, want POST /admin/v1/orgs/acme/clients %s", tt.line, c.method, c.path, c.body, tt.want)
		}
	}
	var out bytes.Buffer
	if !help(&out, []string{"client", "create"}) || !strings.Contains(out.String(), "Without -scopes the client gets content.read,content.export") {
		t.Errorf("client create's help does not say its default scopes:\n%s", out.String())
	}
}
