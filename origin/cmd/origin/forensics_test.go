package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/shared/link"
)

// TestForensicsStack: the running stack's admin API names the
// organisation of a lesson it served (by the tag, under the deployment's
// tag key), of links it minted and exported (by the link's ledger row,
// under the deployment's link keys), of the exported zip (its tag) and of
// a class file from it with the tag stripped and the JSON re-serialised
// (its canaries, under the deployment's canary key), and refuses a link
// altered.
func TestForensicsStack(t *testing.T) {
	onBothStores(t, "forensics", forensicsStack)
}

func forensicsStack(t *testing.T, s *testStack) {
	s.org(`{"orgId":"bystander","contentGrants":`+allTiers+`}`, "content.read")
	id, sec := s.org(`{"orgId":"leaker","contentGrants":`+allTiers+`}`, "content.read", "media.download", "content.export")
	tok := s.token(id, sec, "content.read", "media.download", "content.export")
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
		a.Scopes != "service-api/content.read service-api/content.export service-api/media.download" || a.Matched[0]["by"] != "tag" {
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

	var lt *corpus.Lesson
	for _, l := range s.content.Load().Lessons {
		if l.HasTranscript {
			lt = l
			break
		}
	}
	x := s.get("GET", fmt.Sprintf("/v1/exports/classes/%s/%s/%d", lt.Subject.Tier, lt.Subject.Slug, lt.Number), tok)
	var exported struct{ URL string }
	if err := json.Unmarshal(x.body, &exported); x.status != 200 || err != nil || exported.URL == "" {
		t.Fatalf("export: %d %s", x.status, x.body)
	}
	r = forensics("", exported.URL)
	a.Matched = nil
	if err := json.Unmarshal(r.body, &a); r.status != 200 || err != nil || a.OrgID != "leaker" || a.Matched[0]["by"] != "ledger" ||
		a.Matched[0]["row"].(map[string]any)["kind"] != "export" {
		t.Fatalf("export link: %d %s", r.status, r.body)
	}
	_, rest, _ := strings.Cut(exported.URL, link.Prefix)
	z := s.get("GET", link.Prefix+rest, "")
	s.expect(z, 200, "")
	r = forensics("?orgs=bystander,leaker", string(z.body))
	a.Matched = nil
	if err := json.Unmarshal(r.body, &a); r.status != 200 || err != nil || a.OrgID != "leaker" || a.Matched[0]["by"] != "tag" {
		t.Fatalf("exported zip: %d %s", r.status, r.body)
	}
	zr, err := zip.NewReader(bytes.NewReader(z.body), int64(len(z.body)))
	if err != nil {
		t.Fatal(err)
	}
	f, err := zr.Open(fmt.Sprintf("class-%d.json", lt.Number))
	if err != nil {
		t.Fatal(err)
	}
	class, _ := io.ReadAll(f)
	var v map[string]any
	if err := json.Unmarshal(class, &v); err != nil {
		t.Fatal(err)
	}
	delete(v, "_license")
	stripped, _ := json.MarshalIndent(v, "", "    ")
	r = forensics("?orgs=bystander,leaker", string(stripped))
	a.Matched = nil
	if err := json.Unmarshal(r.body, &a); r.status != 200 || err != nil || a.OrgID != "leaker" || a.Scopes != "" ||
		a.Matched[0]["by"] != "canary" || a.Matched[0]["bits"].(float64) < 64 {
		t.Fatalf("class file, tag stripped: %d %s", r.status, r.body)
	}
}
