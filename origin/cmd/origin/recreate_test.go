package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"golang.org/x/oauth2/clientcredentials"
)

// TestRecreatedOrg (issue #13; docs/operations.md, the admin API: DELETE removes the
// organisation and its clients, whose tokens then get 403 NO_ORGANIZATION,
// also after an organisation with the same id is created again, and a new
// organisation starts with no meters): over the real listeners, an
// organisation's meters and enumeration count move; it is deleted and
// created again under the same id, in the same second of the test clock;
// the new one reads no meter or count of the old, its licence status
// shows nothing used, the old client's token is refused everywhere and
// bills nothing, and a new client's token works.
func TestRecreatedOrg(t *testing.T) {
	s := newStack(t)
	sub := s.Content().Corpus.Subjects[0]
	lesson := fmt.Sprintf("/v1/lessons/%s/%s/1", sub.Tier, sub.Slug)
	body := `{"orgId":"acme","contentGrants":` + allTiers + `}`

	id, secret := s.org(body, "content.read")
	old := s.token(id, secret, "content.read")
	for _, p := range []string{"/v1/tiers", lesson} {
		if r := s.get("GET", p, old); r.status != 200 {
			t.Fatalf("GET %s: %d %s", p, r.status, r.body)
		}
	}
	s.checkReading("before the delete", map[string]float64{"month.calls": 2, "hour.calls": 2, "hour.lessonreads": 1}, 1)

	if code, m := s.admin("DELETE", "/admin/v1/orgs/acme", ""); code != 204 {
		t.Fatalf("delete: %d %v", code, m)
	}
	s.expect(s.get("GET", "/v1/tiers", old), 403, "NO_ORGANIZATION")

	id2, secret2 := s.org(body, "content.read")
	s.checkReading("after re-creating", map[string]float64{}, 0)

	// The old token: refused on content routes and on the licence status
	// (which answers any state of an organisation that exists), billing
	// nothing to the new organisation.
	for _, p := range []string{"/v1/tiers", lesson, "/v1/license"} {
		s.expect(s.get("GET", p, old), 403, "NO_ORGANIZATION")
	}
	s.checkReading("after the old token's tries", map[string]float64{}, 0)
	// Its client went with the organisation: no new token for it.
	cc := clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: s.IdPURL + "/oauth2/token"}
	if _, err := cc.Token(t.Context()); err == nil {
		t.Error("the deleted organisation's client still gets tokens")
	}

	tok := s.token(id2, secret2, "content.read")
	r := s.get("GET", "/v1/license", tok)
	var l struct {
		Quota map[string]struct{ Used int64 }
	}
	if err := json.Unmarshal(r.body, &l); r.status != 200 || err != nil {
		t.Fatalf("license with the new client's token: %d %s", r.status, r.body)
	}
	for _, m := range []string{"calls", "downloads", "exports", "testprepitems"} {
		if q, ok := l.Quota[m]; !ok || q.Used != 0 {
			t.Errorf("license quota %s: %+v (present %v), want used 0", m, q, ok)
		}
	}
	if r := s.get("GET", lesson, tok); r.status != 200 {
		t.Fatalf("GET %s with the new client's token: %d %s", lesson, r.status, r.body)
	}
	s.checkReading("after the new token's read", map[string]float64{"month.calls": 1, "hour.calls": 1, "hour.lessonreads": 1}, 1)
}

// checkReading checks acme's admin reading: every meter is 0 but those in
// want ("month.calls": 2), and the enumeration count is lessonsRead.
func (s *testStack) checkReading(step string, want map[string]float64, lessonsRead float64) {
	s.t.Helper()
	code, m := s.admin("GET", "/admin/v1/orgs/acme", "")
	if code != 200 {
		s.t.Fatalf("%s: get org: %d %v", step, code, m)
	}
	meters, _ := m["meters"].(map[string]any)
	for period, names := range map[string][]string{
		"month": {"calls", "downloads", "exports", "testprepitems"},
		"hour":  {"calls", "lessonreads", "mints"},
	} {
		got, _ := meters[period].(map[string]any)
		for _, n := range names {
			if v, ok := got[n].(float64); !ok || v != want[period+"."+n] {
				s.t.Errorf("%s: meters.%s.%s = %v, want %v", step, period, n, got[n], want[period+"."+n])
			}
		}
	}
	enum, _ := m["enumeration"].(map[string]any)
	if got, ok := enum["lessonsRead"].(float64); !ok || got != lessonsRead {
		s.t.Errorf("%s: enumeration.lessonsRead = %v, want %v", step, enum["lessonsRead"], lessonsRead)
	}
}
