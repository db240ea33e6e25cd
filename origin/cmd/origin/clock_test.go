package main

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/lectern-api/lectern/tools/corpusgen/gen"
)

// issue #13: the test clock's offset is stored, so a restart keeps it and
// a token minted before the restart (its iat in the moved clock's time)
// stays valid. Without the test clock the origin runs on the wall clock,
// whatever offset the database holds.
func TestTestClockSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	if _, err := gen.Write(filepath.Join(dir, "corpus"), gen.Options{Seed: 1, Small: true}); err != nil {
		t.Fatal(err)
	}
	// Tokens name their issuer, http://<identity provider address>: the
	// restarted identity provider keeps its port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	idpAddr := ln.Addr().String()
	ln.Close()
	boot := func(testClock string) *testStack {
		t.Helper()
		cfg, err := parseConfig(nil, func(k string) string {
			return map[string]string{
				"LECTERN_ORIGIN_ADDR": "127.0.0.1:0", "LECTERN_IDP_ADDR": idpAddr, "LECTERN_ADMIN_ADDR": "127.0.0.1:0",
				"LECTERN_ADMIN_TOKEN": "admin-token-for-tests", "LECTERN_DB": filepath.Join(dir, "lectern.db"),
				"LECTERN_CORPUS": filepath.Join(dir, "corpus"), "LECTERN_TEST_CLOCK": testClock,
				"LECTERN_SECRET": "a-test-secret-of-at-least-32-characters",
			}[k]
		})
		if err != nil {
			t.Fatal(err)
		}
		out := new(bytes.Buffer)
		st, err := start(context.Background(), cfg, out)
		if err != nil {
			t.Fatal(err)
		}
		return &testStack{stack: st, t: t, out: out}
	}

	s := boot("1")
	id, secret := s.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read")
	const days = 3 * 24 * 3600
	if code, m := s.admin("POST", "/admin/v1/clock", `{"advanceSeconds":259200}`); code != 200 || m["offsetSeconds"] != float64(days) {
		t.Fatalf("advance: %d %v", code, m)
	}
	tok := s.token(id, secret, "content.read")
	s.expect(s.get("GET", "/v1/tiers", tok), 200, "")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	for i := range 2 { // the second start finds what the first left
		s = boot("1")
		if code, m := s.admin("GET", "/admin/v1/clock", ""); code != 200 || m["offsetSeconds"] != float64(days) {
			t.Errorf("start %d: the clock after a restart: %d %v, want offsetSeconds %d", i, code, m, days)
		}
		s.expect(s.get("GET", "/v1/tiers", tok), 200, "")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// Without LECTERN_TEST_CLOCK the stored offset does not apply: the
	// token, issued three days ahead of the wall clock, is not valid yet.
	s = boot("")
	defer s.Close()
	s.expect(s.get("GET", "/v1/tiers", tok), 401, "invalid_token")
}
