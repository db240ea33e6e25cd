package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/cmdline"
	"github.com/lectern-api/lectern/internal/version"
	"github.com/lectern-api/lectern/worker/wasmbuild"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseConfig(t *testing.T) {
	c, err := parseConfig(nil, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:8787" || !slices.Equal(c.Origins, []string{"http://127.0.0.1:8080"}) || c.Issuer != "http://127.0.0.1:9090" ||
		c.JWKSURL != "http://127.0.0.1:9090/.well-known/jwks.json" || c.Audience != "lectern-api" || c.Wasm != "build/worker.wasm" {
		t.Errorf("defaults: %+v", c)
	}
	c, err = parseConfig([]string{"-origin-url", "http://o.example/", "-instances", "3"},
		env(map[string]string{"LECTERN_ISSUER": "https://idp.example", "LECTERN_EDGE_ADDR": ":9999"}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Origins, []string{"http://o.example"}) || c.Instances != 3 || c.JWKSURL != "https://idp.example/.well-known/jwks.json" || c.Addr != ":9999" {
		t.Errorf("settings: %+v", c)
	}
	c, err = parseConfig(nil, env(map[string]string{"LECTERN_ORIGIN_URL": "http://a.example:8080/, https://b.example/base"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"http://a.example:8080", "https://b.example/base"}; !slices.Equal(c.Origins, want) {
		t.Errorf("a list of origins: %q, want %q", c.Origins, want)
	}
	if !c.Leases || c.UsageLog != "" || c.RevokeURL != "" {
		t.Errorf("leases default: %+v", c)
	}
	c, err = parseConfig([]string{"-leases", "off", "-revoke-url", "http://edge-1.internal:8787/internal/revoke"},
		env(map[string]string{"LECTERN_EDGE_USAGE_LOG": "/tmp/u.log"}))
	if err != nil || c.Leases || c.UsageLog != "/tmp/u.log" || c.RevokeURL != "http://edge-1.internal:8787/internal/revoke" {
		t.Errorf("leases settings: %+v, %v", c, err)
	}
	const keys = "k2=an-edge-url-key-0123456789abcdef0123456789,k1=another-edge-url-key-0123456789abcdef01"
	if c, err = parseConfig(nil, env(map[string]string{"LECTERN_URL_KEYS": keys})); err != nil || c.URLKeys != keys {
		t.Errorf("LECTERN_URL_KEYS: %q, %v", c.URLKeys, err)
	}
	for _, bad := range [][]string{{"-instances", "0"}, {"-test-clock", "1"}, {"stray"},
		{"-origin-url", "http://a.example,"}, {"-origin-url", "http://a.example,http://a.example/"},
		{"-origin-url", "a.example:8080"}, {"-origin-url", "http://a.example,ftp://b.example"},
		{"-url-keys", "k1=short"}, {"-url-keys", "k1"}, {"-leases", "true"}, {"-leases", ""}, {"-revoke-url", "edge:8787/internal/revoke"}} {
		if _, err := parseConfig(bad, env(nil)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := loadSecret("short"); err == nil {
		t.Error("a short secret was accepted")
	}
}

// TestRun serves a standard Go build of the module and answers at the
// edge what needs no origin; the printout names the toolchain and address.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: builds the module")
	}
	wasm := filepath.Join(t.TempDir(), "worker.wasm")
	if err := wasmbuild.BuildModule(".", "", wasm, "github.com/lectern-api/lectern/worker/wasm"); err != nil {
		t.Fatalf("build the module: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-wasm", wasm, "-instances", "1"},
			env(map[string]string{"LECTERN_SECRET": "a-test-secret-of-at-least-32-characters",
				"LECTERN_EDGE_USAGE_LOG": filepath.Join(t.TempDir(), "usage.log")}), pw)
		pw.Close()
	}()
	var base, printout string
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		line := sc.Text()
		printout += line + "\n"
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "API (edge)"); ok {
			base = strings.TrimSuffix(strings.TrimSpace(rest), "/v1")
		}
		if strings.Contains(line, "origin ") {
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if base == "" || !strings.Contains(printout, "standard Go") {
		t.Fatalf("printout:\n%s", printout)
	}
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{{"/v1/teachers", 404, "NOT_FOUND"}, {"/v1/tiers", 401, "invalid_token"}} {
		resp, err := http.Get(base + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Error struct{ Code string } }
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != tc.status || e.Error.Code != tc.code {
			t.Errorf("GET %s: %d %s, want %d %s", tc.path, resp.StatusCode, e.Error.Code, tc.status, tc.code)
		}
		if ch := resp.Header.Get("WWW-Authenticate"); tc.status == 401 && !strings.Contains(ch, base+"/.well-known/oauth-protected-resource") {
			t.Errorf("challenge %q does not name the edge's resource metadata", ch)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}

// TestHelpAndVersion: `edge -h` and `edge -version` (the release) answer
// on stdout and start nothing.
func TestHelpAndVersion(t *testing.T) {
	for arg, want := range map[string]string{"-h": "$LECTERN_EDGE_WASM", "-version": "edge " + version.Release + " ("} {
		var out bytes.Buffer
		err := run(context.Background(), []string{arg}, env(nil), &out)
		if !errors.Is(err, cmdline.ErrDone) || !strings.Contains(out.String(), want) {
			t.Errorf("%s: %v\n%s", arg, err, out.String())
		}
	}
	c, err := parseConfig(nil, env(map[string]string{"LECTERN_TEST_CLOCK": "true", "LECTERN_ADMIN_TOKEN": "t"}))
	if err != nil || !c.TestClock {
		t.Errorf("LECTERN_TEST_CLOCK=true: %v %v", err, c.TestClock)
	}
}
