package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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

// Issue #35, point 8: a reload whose corpus declares the contentVersion
// served but holds other content is refused (400 BAD_REQUEST naming dir,
// saying the version must move) and changes nothing: every client goes
// by the version, so mirrors would keep the old text, billed nothing,
// while the API served the new one. The same content again (a copy, the
// same version) is accepted.
func TestReloadSameVersionOtherContent(t *testing.T) {
	s := newStack(t)
	id, secret := s.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read")
	tok := s.token(id, secret, "content.read")
	var lic struct{ ContentVersion string }
	json.Unmarshal(s.get("GET", "/v1/license", tok).body, &lic)
	served := lic.ContentVersion
	tiers := s.get("GET", "/v1/tiers", tok)

	dir := filepath.Join(t.TempDir(), "copy")
	sum, err := gen.Write(dir, gen.Options{Seed: 1, Small: true})
	if err != nil || sum.ContentVersion != served {
		t.Fatalf("copy: %v, version %s (served %s)", err, sum.ContentVersion, served)
	}
	b, _ := json.Marshal(map[string]string{"dir": dir})
	if code, m := s.admin("POST", "/admin/v1/corpus/reload", string(b)); code != 200 || m["contentVersion"] != served {
		t.Fatalf("reload of the same content: %d %v, want 200 %s", code, m, served)
	}

	// The same directory edited in place, corpus.json untouched.
	p := filepath.Join(dir, "tiers.json")
	old, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(old, []byte(`"label": "Topics"`), []byte(`"label": "Topics, revised"`), 1)
	if bytes.Equal(edited, old) {
		t.Fatalf("no Topics label in %s", old)
	}
	if err := os.WriteFile(p, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	code, m := s.admin("POST", "/admin/v1/corpus/reload", string(b))
	e, _ := m["error"].(map[string]any)
	msg, _ := e["message"].(string)
	if code != 400 || e["code"] != "BAD_REQUEST" || e["parameter"] != "dir" ||
		!strings.Contains(msg, "contentVersion must move") || !strings.Contains(msg, served) || !strings.Contains(msg, "nothing was changed") {
		t.Fatalf("reload of other content under %s: %d %v; want 400 BAD_REQUEST on dir, the version must move", served, code, m)
	}
	json.Unmarshal(s.get("GET", "/v1/license", tok).body, &lic)
	if after := s.get("GET", "/v1/tiers", tok); lic.ContentVersion != served || !bytes.Equal(after.body, tiers.body) {
		t.Errorf("after the refused reload: version %s (want %s), tiers %s (want %s)", lic.ContentVersion, served, after.body, tiers.body)
	}

	// With its version moved it loads.
	mp := filepath.Join(dir, "corpus.json")
	man, err := os.ReadFile(mp)
	if err != nil {
		t.Fatal(err)
	}
	moved := served[:strings.Index(served, "+")] + "+revised1"
	if err := os.WriteFile(mp, bytes.Replace(man, []byte(served), []byte(moved), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, m := s.admin("POST", "/admin/v1/corpus/reload", string(b)); code != 200 || m["contentVersion"] != moved {
		t.Errorf("reload with the version moved: %d %v, want 200 %s", code, m, moved)
	}
}
