package main

import (
	"net"
	"path/filepath"
	"testing"
)

// issue #13: the test clock's offset is stored, so a restart keeps it and
// a token minted before the restart (its iat in the moved clock's time)
// stays valid. Without the test clock the origin runs on the wall clock,
// whatever offset the database holds.
func TestTestClockSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"))
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
		return bootStack(t, testEnv(dir, map[string]string{"LECTERN_IDP_ADDR": idpAddr, "LECTERN_TEST_CLOCK": testClock}), nil)
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
