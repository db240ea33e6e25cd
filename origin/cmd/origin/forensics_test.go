package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestForensicsStack: the running stack's admin API names the
// organisation of a lesson it served (by the tag, under the deployment's
// tag key) and of a link it minted (by the link's ledger row, under the
// deployment's link keys), and refuses the link altered.
func TestForensicsStack(t *testing.T) {
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"))
	s := bootStack(t, testEnv(dir, map[string]string{"LECTERN_TEST_CLOCK": "1"}), nil)
	defer s.Close()
	s.org(`{"orgId":"bystander","contentGrants":`+allTiers+`}`, "content.read")
	id, sec := s.org(`{"orgId":"leaker","contentGrants":`+allTiers+`}`, "content.read", "media.download")
	tok := s.token(id, sec, "content.read", "media.download")
	forensics := func(query, body string) response {
		t.Helper()
		req, _ := http.NewRequest("POST", s.AdminURL+"/admin/v1/forensics"+query, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+s.AdminToken)
		return s.send(req)
	}
	var a struct {
		OrgID, Scopes string
		Matched       []map[string]any
	}

	lesson := s.content.Load().Lessons[0]
	doc := s.get("GET", "/v1/lessons/"+lesson.ID, tok)
	s.expect(doc, 200, "")
	r := forensics("?orgs=bystander,leaker", string(doc.body))
	if err := json.Unmarshal(r.body, &a); r.status != 200 || err != nil || a.OrgID != "leaker" ||
		a.Scopes != "service-api/content.read service-api/media.download" || a.Matched[0]["by"] != "tag" {
		t.Fatalf("served lesson: %d %s", r.status, r.body)
	}

	m := s.post("/v1/media/urls", tok, `{"mediaIds":["`+lesson.Media[0].ID+`"]}`)
	var minted struct{ Items []struct{ URL string } }
	if err := json.Unmarshal(m.body, &minted); m.status != 200 || err != nil || len(minted.Items) != 1 {
		t.Fatalf("mint: %d %s", m.status, m.body)
	}
	url := minted.Items[0].URL
	r = forensics("", url)
	a.Matched = nil
	if err := json.Unmarshal(r.body, &a); r.status != 200 || err != nil || a.OrgID != "leaker" || a.Matched[0]["by"] != "ledger" ||
		a.Matched[0]["row"].(map[string]any)["clientId"] != id {
		t.Fatalf("minted link: %d %s", r.status, r.body)
	}
	altered := strings.Replace(url, "/files/m/", "/files/m/x", 1)
	s.expect(forensics("", altered), 404, "NOT_FOUND")
}
