package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/lectern-api/lectern/origin/corpus/gen"
)

// The admin API's reload while serving: the version moves, ETags move and
// cursors minted under the old version expire (spec: Versioning §2–3,
// States and transitions). Reloads one at a time, and a reload whose
// client left, are origin/corpus/follow's tests.
func TestCorpusReload(t *testing.T) {
	s := newStack(t)
	id, secret := s.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read")
	tok := s.token(id, secret, "content.read")

	before := s.get("GET", "/v1/subjects?limit=2", tok)
	var page struct {
		NextCursor     string `json:"nextCursor"`
		ContentVersion string `json:"contentVersion"`
	}
	json.Unmarshal(before.body, &page)
	if page.NextCursor == "" {
		t.Fatalf("no cursor: %s", before.body)
	}
	tag := before.header.Get("ETag")
	if r := s.get("GET", "/v1/subjects?limit=2", tok, "If-None-Match", tag); r.status != 304 {
		t.Fatalf("revalidation before the reload: %d", r.status)
	}

	dir := filepath.Join(t.TempDir(), "corpus2")
	sum, err := gen.Write(dir, gen.Options{Seed: 2, Small: true})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{"dir": dir})
	code, m := s.admin("POST", "/admin/v1/corpus/reload", string(b))
	if code != 200 || m["contentVersion"] != sum.ContentVersion || sum.ContentVersion == page.ContentVersion {
		t.Fatalf("reload: %d %v (old %s)", code, m, page.ContentVersion)
	}

	var lic struct{ ContentVersion string }
	json.Unmarshal(s.get("GET", "/v1/license", tok).body, &lic)
	if lic.ContentVersion != sum.ContentVersion {
		t.Errorf("licence reports %s, want %s", lic.ContentVersion, sum.ContentVersion)
	}
	after := s.get("GET", "/v1/subjects?limit=2", tok, "If-None-Match", tag)
	if after.status != 200 || after.header.Get("ETag") == tag || after.header.Get("X-Service-Content-Version") != sum.ContentVersion {
		t.Errorf("after the reload: %d ETag %q (old %q) version %q", after.status, after.header.Get("ETag"), tag, after.header.Get("X-Service-Content-Version"))
	}
	s.expect(s.get("GET", "/v1/subjects?limit=2&cursor="+page.NextCursor, tok), 400, "CURSOR_EXPIRED")

	code, _ = s.admin("POST", "/admin/v1/corpus/reload", `{"dir":"`+filepath.Join(t.TempDir(), "missing")+`"}`)
	if code != 400 {
		t.Errorf("reload of a missing corpus: %d, want 400", code)
	}
	json.Unmarshal(s.get("GET", "/v1/license", tok).body, &lic)
	if lic.ContentVersion != sum.ContentVersion {
		t.Errorf("a failed reload changed the version to %s", lic.ContentVersion)
	}
}
