package main

import (
	"encoding/json"
	"strconv"
	"testing"
)

// spec: States and transitions (the enumeration alarm, reinstatement) and
// the admin API (docs/operations.md), through the whole stack: the read that
// takes an organisation past 40% of its granted lessons in a UTC day is
// served and suspends it, which /v1/license and the admin API report
// while the stored status is untouched; PATCH status "active" reinstates
// it, and access resumes on the next call.
func TestEnumerationAlarm(t *testing.T) {
	s := newStack(t)
	sub := s.Content().Subject("topics", "photography")
	if sub == nil {
		t.Fatal("the small corpus has no topics/photography")
	}
	granted := len(sub.Lessons)
	crossing := granted*2/5 + 1
	id, secret := s.org(`{"orgId":"acme","contentGrants":["topics/photography"]}`, "content.read")
	tok := s.token(id, secret, "content.read")
	lesson := func(n int) string { return "/v1/lessons/topics/photography/" + strconv.Itoa(n) }
	license := func(step, want string) {
		t.Helper()
		r := s.get("GET", "/v1/license", tok)
		var l struct{ Status string }
		json.Unmarshal(r.body, &l)
		if r.status != 200 || l.Status != want {
			t.Errorf("%s: /v1/license %d %s, want status %s", step, r.status, r.body, want)
		}
	}
	for n := 1; n <= crossing; n++ {
		if r := s.get("GET", lesson(n), tok); r.status != 200 {
			t.Fatalf("lesson %d of %d (crossing at %d): %d %s", n, granted, crossing, r.status, r.body)
		}
		if n == crossing-1 {
			license("before the crossing read", "active")
		}
	}
	license("after the crossing read", "suspended")
	s.expect(s.get("GET", lesson(1), tok), 403, "ORG_SUSPENDED")
	s.expect(s.get("GET", "/v1/tiers", tok), 403, "ORG_SUSPENDED")

	code, m := s.admin("GET", "/admin/v1/orgs/acme", "")
	enum, _ := m["enumeration"].(map[string]any)
	alarm, _ := enum["alarm"].(map[string]any)
	if code != 200 || m["status"] != "suspended" || enum["lessonsRead"] != float64(crossing) || enum["grantedLessons"] != float64(granted) ||
		alarm["lessonsRead"] != float64(crossing) || alarm["grantedLessons"] != float64(granted) || alarm["day"] != enum["day"] {
		t.Errorf("admin GET after the trip: %d %v", code, m)
	}
	if month := m["meters"].(map[string]any)["month"].(map[string]any); month["calls"] != float64(crossing) {
		t.Errorf("month calls %v, want %d: the refused calls bill nothing", month["calls"], crossing)
	}

	// The operator's reinstatement.
	if code, m := s.admin("PATCH", "/admin/v1/orgs/acme", `{"status":"active"}`); code != 200 || m["status"] != "active" {
		t.Fatalf("PATCH status active: %d %v", code, m)
	}
	if r := s.get("GET", lesson(1), tok); r.status != 200 {
		t.Errorf("a read after reinstatement: %d %s", r.status, r.body)
	}
	if r := s.get("GET", lesson(crossing+1), tok); r.status != 200 {
		t.Errorf("a new lesson after reinstatement: %d %s", r.status, r.body)
	}
	license("after reinstatement", "active")
	code, m = s.admin("GET", "/admin/v1/orgs/acme", "")
	if enum, _ := m["enumeration"].(map[string]any); code != 200 || m["status"] != "active" || enum["alarm"] != nil || enum["lessonsRead"] != float64(crossing+1) {
		t.Errorf("admin GET after reinstatement: %d %v", code, m)
	}
}
