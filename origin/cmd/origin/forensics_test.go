package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/admin"
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

	lesson := s.Content().Lessons[0]
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
	for _, l := range s.Content().Lessons {
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

// TestForensicsBodyLimits: on the stack's admin listener a leak is read
// up to admin.MaxLeak, not the 1 MiB of the other listeners' bodies; the
// token comes first (401, the body unread, whatever its length), then
// the size (413 over MaxLeak, a declared length refused unread).
func TestForensicsBodyLimits(t *testing.T) {
	s := newStack(t)
	s.org(`{"orgId":"leaker","contentGrants":`+allTiers+`}`, "content.read")
	id, sec := s.org(`{"orgId":"leaker2","contentGrants":`+allTiers+`}`, "content.read")
	tok := s.token(id, sec, "content.read")
	forensics := func(body io.Reader, tok string) response {
		t.Helper()
		req, _ := http.NewRequest("POST", s.AdminURL+"/admin/v1/forensics?orgs=leaker,leaker2", body)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		return s.send(req)
	}
	doc := s.get("GET", "/v1/lessons/"+s.Content().Lessons[0].ID, tok)
	s.expect(doc, 200, "")

	// A 1.1 MB leak: the served document and a megabyte of whitespace.
	leak := append(bytes.Clone(doc.body), bytes.Repeat([]byte(" \n"), 550_000)...)
	r := forensics(bytes.NewReader(leak), s.AdminToken)
	var a struct{ OrgID string }
	if err := json.Unmarshal(r.body, &a); r.status != 200 || err != nil || a.OrgID != "leaker2" {
		t.Fatalf("a %d-byte leak: %d %s", len(leak), r.status, r.body)
	}
	// Over MaxLeak, sent chunked (no declared length): 413.
	over := io.MultiReader(bytes.NewReader(leak), io.LimitReader(neverEnding(' '), admin.MaxLeak+1-int64(len(leak))))
	s.expect(forensics(over, s.AdminToken), 413, "PAYLOAD_TOO_LARGE")

	// Declared lengths, nothing of the body sent: answered at once, so
	// the body was not waited for.
	for _, tc := range []struct {
		name, auth string
		length     int64
		status     int
		code       string
	}{
		{"no token, 1 GiB", "", 1 << 30, 401, "invalid_token"},
		{"wrong token, 1 GiB", "Authorization: Bearer wrong\r\n", 1 << 30, 401, "invalid_token"},
		{"no token, 1.1 MB", "", 1_100_000, 401, "invalid_token"},
		{"MaxLeak+1", "Authorization: Bearer " + s.AdminToken + "\r\n", admin.MaxLeak + 1, 413, "PAYLOAD_TOO_LARGE"},
	} {
		status, code := rawHead(t, s.AdminURL, "POST /admin/v1/forensics HTTP/1.1\r\nHost: a\r\n"+tc.auth+
			"Content-Length: "+strconv.FormatInt(tc.length, 10)+"\r\n\r\n")
		if status != tc.status || code != tc.code {
			t.Errorf("%s: got %d %s, want %d %s", tc.name, status, code, tc.status, tc.code)
		}
	}
}

// neverEnding reads as an endless run of its byte.
type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// rawHead sends head on a new connection to base, no body after it, and
// returns the answer's status and error code; it fails the test if no
// answer comes within a second (the server waited for the body).
func rawHead(t *testing.T, base, head string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	io.WriteString(c, head)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%.60q: no answer: %v", head, err)
	}
	defer resp.Body.Close()
	var e struct{ Error struct{ Code string } }
	json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Error.Code
}
