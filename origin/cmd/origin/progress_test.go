package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/lectern-api/lectern/origin/idp/idptest"
)

// TestProgressStack (issue #17) runs the progress routes in the stack as
// an operator starts it, on both stores (PostgreSQL when LECTERN_TEST_PG
// is set): learner tokens from the dev identity provider, a saved write
// and its harmless retry, the 304 until the next saved write, the streak
// across UTC days by the admin test clock, and concurrent writers of one
// learner, each answered 200 or 409, the record consistent afterwards.
func TestProgressStack(t *testing.T) {
	onBothStores(t, "the progress routes", progressStack)
}

// learnerToken registers a learner app of org through the admin API and
// returns the token the identity provider issues it for learner
// (authorization_code with PKCE S256; login_hint names the learner).
func (s *testStack) learnerToken(org, learner string, scopes ...string) string {
	s.t.Helper()
	const redirect = "https://app.test/callback"
	b, _ := json.Marshal(map[string]any{"scopes": scopes, "grantTypes": []string{"authorization_code"}, "redirectUris": []string{redirect}})
	code, m := s.admin("POST", "/admin/v1/orgs/"+org+"/clients", string(b))
	if code != 201 {
		s.t.Fatalf("create learner app: %d %v", code, m)
	}
	tok, err := idptest.LearnerToken(context.Background(), idptest.LearnerApp(s.IdPURL, m["clientId"].(string), m["clientSecret"].(string), redirect, scopes...), learner)
	if err != nil {
		s.t.Fatal(err)
	}
	return tok.AccessToken
}

// put sends a progress write.
func (s *testStack) put(path, tok, body string) response {
	s.t.Helper()
	req, _ := http.NewRequest("PUT", s.OriginURL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	return s.send(req)
}

type stackStreak struct {
	Current, Longest int64
	LastDay          *string
}

type stackProgress struct {
	Items []struct {
		LessonID         string
		Score, BestScore *float64
	}
	Total  int
	XP     int64
	Streak stackStreak
}

func progressStack(t *testing.T, s *testStack) {
	const org = "progress"
	s.org(`{"orgId":"`+org+`","contentGrants":`+allTiers+`}`, "content.read")
	tok := s.learnerToken(org, "ana", "progress.read", "progress.write")
	lessons := s.Content().Lessons
	path := func(i int) string { return "/v1/progress/" + lessons[i].ID }
	streakOf := func(r response) stackStreak {
		t.Helper()
		var a struct{ Streak stackStreak }
		if r.status != 200 || json.Unmarshal(r.body, &a) != nil {
			t.Fatalf("got %d %s, want 200", r.status, r.body)
		}
		return a.Streak
	}

	w := s.put(path(0), tok, `{"score":80}`)
	if st := streakOf(w); st.Current != 1 || w.header.Get("ETag") != "" || w.header.Get("X-Service-Content-Version") == "" {
		t.Fatalf("first write: %v %s", w.header, w.body)
	}
	g := s.get("GET", "/v1/progress", tok)
	tag := g.header.Get("ETag")
	if g.status != 200 || tag == "" {
		t.Fatalf("GET: %d %s", g.status, g.body)
	}
	// The retry changes nothing: still 304.
	if r := s.put(path(0), tok, `{"score":80}`); r.status != 200 || string(r.body) != string(w.body) {
		t.Errorf("retry: %d %s, want the first answer %s", r.status, r.body, w.body)
	}
	if r := s.get("GET", "/v1/progress", tok, "If-None-Match", tag); r.status != 304 {
		t.Errorf("after the retry: %d, want 304", r.status)
	}
	// The next UTC day: the streak grows; two days later it has lapsed.
	s.advance(86400)
	tok = s.learnerToken(org, "ana", "progress.read", "progress.write") // the clock outran the last token
	if st := streakOf(s.put(path(1), tok, `{}`)); st.Current != 2 || st.Longest != 2 {
		t.Errorf("next day: streak %+v, want 2/2", st)
	}
	if r := s.get("GET", "/v1/progress", tok, "If-None-Match", tag); r.status != 200 {
		t.Errorf("after a saved write: %d, want 200", r.status)
	}
	s.advance(2 * 86400)
	tok = s.learnerToken(org, "ana", "progress.read", "progress.write")
	var p stackProgress
	if r := s.get("GET", "/v1/progress", tok); r.status != 200 || json.Unmarshal(r.body, &p) != nil {
		t.Fatalf("GET: %d %s", r.status, r.body)
	}
	if p.Streak.Current != 0 || p.Streak.Longest != 2 || p.Total != 2 || p.XP != 18+10 {
		t.Errorf("after a missed day: %+v", p)
	}

	// Concurrent writers of one learner over 4 classes: 200 or 409 each,
	// every answer billed, the record consistent.
	before := s.calls(org)
	const n = 16
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = s.put(path(2+i%4), tok, fmt.Sprintf(`{"score":%d}`, 50+i)).status
		}()
	}
	wg.Wait()
	saved := 0
	for i, st := range statuses {
		switch st {
		case 200:
			saved++
		case 409:
		default:
			t.Errorf("writer %d: %d", i, st)
		}
	}
	if saved == 0 {
		t.Error("no concurrent write was saved")
	}
	if got := s.calls(org) - before; got != n {
		t.Errorf("%v calls billed for %d writes", got, n)
	}
	p = stackProgress{}
	if r := s.get("GET", "/v1/progress?limit=100", tok); r.status != 200 || json.Unmarshal(r.body, &p) != nil {
		t.Fatalf("GET: %d %s", r.status, r.body)
	}
	var xp int64
	for _, it := range p.Items {
		xp += 10
		if it.BestScore != nil {
			xp += int64(math.Floor(*it.BestScore / 10))
		}
	}
	if p.XP != xp || p.Total < 2+min(saved, 1) || p.Total > 6 {
		t.Errorf("after %d saved concurrent writes: %d classes, xp %d (items say %d)", saved, p.Total, p.XP, xp)
	}
}
