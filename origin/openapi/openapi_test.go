package openapi_test

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/admin"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/openapi"
	"github.com/lectern-api/lectern/origin/openapi/openapitest"
	"github.com/lectern-api/lectern/shared/link"
)

// Enums come from the loaded corpus, not from the spec's lists: a corpus
// with two tiers and one test describes exactly those.
func TestOpenAPIEnumsFromCorpus(t *testing.T) {
	c := &corpus.Corpus{ContentVersion: "2026-01-02+abc",
		Tiers: []*corpus.Tier{{Name: "high"}, {Name: "primary"}},
		Tests: []*corpus.Test{{ID: "act", Sections: []*corpus.Section{{ID: "science"}, {ID: "math"}}}}}
	d, err := openapi.Build(c).Render(openapi.Conf{Issuer: "https://auth.example"})
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	json.Unmarshal(d.Body, &doc)
	for _, c := range []struct {
		path []string
		want []string
	}{
		{[]string{"paths", "/v1/subjects", "get"}, []string{"high", "primary"}},
		{[]string{"paths", "/v1/lessons/{tier}/{subjectSlug}/{classNum}", "get"}, []string{"high", "primary"}},
		{[]string{"paths", "/v1/testprep/{test}/items", "get"}, []string{"act", "science", "math"}},
	} {
		var got []string
		for _, p := range openapitest.Params(openapitest.At(doc, c.path...).(map[string]any)) {
			if n := openapitest.At(p, "name"); n == "tier" || n == "test" || n == "section" {
				got = append(got, openapitest.Strs(openapitest.At(p, "schema", "enum"))...)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%v: enums %v, want %v", c.path, got, c.want)
		}
	}
	if got := openapitest.At(doc, "paths", "/v1/testprep", "get", "x-service-sections"); openapitest.Must(json.Marshal(got)) == nil ||
		string(openapitest.Must(json.Marshal(got))) != `{"act":["science","math"]}` {
		t.Errorf("x-service-sections %v", got)
	}
	if openapitest.At(doc, "info", "x-content-version") != "2026-01-02+abc" {
		t.Errorf("x-content-version %v", openapitest.At(doc, "info", "x-content-version"))
	}
}

// The signed download links are described from the links shared/link
// signs: a path item per kind, whose parameters are exactly the fields of
// a signed link (required unless only some links carry them), GET and
// HEAD without a token, and the assets' MIME types from the corpus.
func TestOpenAPIDownloads(t *testing.T) {
	lesson := &corpus.Lesson{ID: "high/algebra/1"}
	lesson.Media = []*corpus.Media{{ID: "high/algebra/1#c1#video", MIME: "video/mp4"}, {ID: "high/algebra/1#c1#image", MIME: "image/png"}, {ID: "high/algebra/1#c2#video", MIME: "video/mp4"}}
	c := &corpus.Corpus{ContentVersion: "2026-01-02+abc", Tiers: []*corpus.Tier{{Name: "high"}}, Lessons: []*corpus.Lesson{lesson}}
	d, err := openapi.Build(c).Render(openapi.Conf{Issuer: "https://auth.example"})
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	json.Unmarshal(d.Body, &doc)
	keys, err := link.ParseKeys("k1=openapi-test-key-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	subject := link.Bundle{Scopes: "service-api/content.export", ContentVersion: c.ContentVersion, Tier: "high", Slug: "algebra"}
	class := subject
	class.Class = 2
	links := map[string][]string{ // path item: its links, the first with only the required fields
		link.Prefix + "m/{name}": {keys.Sign(link.Link{Kind: link.Media, Expires: 1, Row: 2, Name: "a.mp4", Media: lesson.Media[0].ID, Org: "acme"})},
		link.Prefix + "e/{name}": {keys.Sign(link.Link{Kind: link.Export, Expires: 1, Row: 2, Name: "a.zip", Org: "acme", Export: subject}),
			keys.Sign(link.Link{Kind: link.Export, Expires: 1, Row: 2, Name: "a.zip", Org: "acme", Export: class})},
	}
	for path, ls := range links {
		item, _ := openapitest.At(doc, "paths", path).(map[string]any)
		if item == nil {
			t.Fatalf("%s is not described", path)
		}
		described := map[string]bool{} // query name: required
		for _, p := range openapitest.Params(item) {
			if openapitest.At(p, "in") == "query" {
				described[openapitest.At(p, "name").(string)] = openapitest.At(p, "required") == true
			} else if openapitest.At(p, "in") != "path" || openapitest.At(p, "name") != "name" || openapitest.At(p, "required") != true {
				t.Errorf("%s: parameter %v", path, p)
			}
		}
		carried := map[string]int{}
		for _, l := range ls {
			u, err := url.Parse(l)
			if err != nil {
				t.Fatal(err)
			}
			for k := range u.Query() {
				carried[k]++
			}
		}
		for k, n := range carried {
			if req, ok := described[k]; !ok || req != (n == len(ls)) {
				t.Errorf("%s: the link field %s is described %v (required %v), carried by %d of %d links", path, k, ok, req, n, len(ls))
			}
		}
		for k := range described {
			if carried[k] == 0 {
				t.Errorf("%s: %s is described but no link carries it", path, k)
			}
		}
		for _, m := range []string{"get", "head"} {
			op, _ := openapitest.At(item, m).(map[string]any)
			if op == nil {
				t.Errorf("%s: no %s", path, m)
				continue
			}
			if sec, ok := op["security"].([]any); !ok || len(sec) != 0 {
				t.Errorf("%s %s: security %v, want none", path, m, op["security"])
			}
			if tags := openapitest.Strs(op["tags"]); !slices.Equal(tags, []string{"Downloads"}) {
				t.Errorf("%s %s: tags %v", path, m, tags)
			}
			if codes := openapitest.Strs(openapitest.At(op, "responses", "404", "content", "application/json", "schema", "properties", "error", "properties", "code", "enum")); !slices.Equal(codes, []string{"NOT_FOUND"}) {
				t.Errorf("%s %s: 404 codes %v", path, m, codes)
			}
		}
		for m := range item {
			if m == "post" || m == "put" || m == "delete" || m == "patch" {
				t.Errorf("%s: %s is described; links are GET and HEAD only", path, m)
			}
		}
	}
	assets := openapitest.At(doc, "paths", link.Prefix+"m/{name}", "get", "responses", "200", "content").(map[string]any)
	var mimes []string
	for k := range assets {
		mimes = append(mimes, k)
	}
	slices.Sort(mimes)
	if !slices.Equal(mimes, []string{"image/png", "video/mp4"}) {
		t.Errorf("asset MIME types %v, want the corpus's [image/png video/mp4]", mimes)
	}
	if openapitest.At(doc, "paths", link.Prefix+"m/{name}", "head", "responses", "200", "content") != nil {
		t.Errorf("HEAD's 200 has content")
	}
	if _, ok := openapitest.At(doc, "paths", link.Prefix+"e/{name}", "get", "responses", "200", "content", "application/zip").(map[string]any); !ok {
		t.Errorf("the export download is not application/zip")
	}
	for _, id := range []string{"downloadMedia", "headMedia", "downloadExport", "headExport"} {
		found := 0
		for _, item := range doc["paths"].(map[string]any) {
			for _, op := range item.(map[string]any) {
				if openapitest.At(op, "operationId") == id {
					found++
				}
			}
		}
		if found != 1 {
			t.Errorf("operationId %s: %d operations", id, found)
		}
	}
}

// redoclyVersion is the pinned @redocly/cli that lints the description.
const redoclyVersion = "1.34.5"

// TestOpenAPILint runs a real OpenAPI linter, Redocly's recommended
// ruleset, over the description when CI asks for it
// (LECTERN_OPENAPI_LINT=1) and Node is present; .ci/run installs the
// pinned CLI. The admin API's description (origin/admin/openapi.json) is
// linted in the same run.
func TestOpenAPILint(t *testing.T) {
	if os.Getenv("LECTERN_OPENAPI_LINT") != "1" {
		t.Skip("OpenAPI lint skipped: set LECTERN_OPENAPI_LINT=1 with redocly or npx on PATH (.ci/run does)")
	}
	var cmd []string
	if p, err := exec.LookPath("redocly"); err == nil {
		cmd = []string{p, "lint"}
	} else if p, err := exec.LookPath("npx"); err == nil {
		cmd = []string{p, "--yes", "@redocly/cli@" + redoclyVersion, "lint"}
	} else {
		t.Skip("OpenAPI lint skipped: neither redocly nor npx is on PATH")
	}
	dir := t.TempDir()
	if _, err := gen.Write(filepath.Join(dir, "corpus"), gen.Options{Seed: 1, Small: true}); err != nil {
		t.Fatal(err)
	}
	cp, err := corpus.Load(filepath.Join(dir, "corpus"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := openapi.Build(cp).Render(openapi.Conf{Issuer: "https://auth.lectern.example", LicenseURL: "https://lectern.example/licence"})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "openapi.json")
	if err := os.WriteFile(file, d.Body, 0o644); err != nil {
		t.Fatal(err)
	}
	adminFile := filepath.Join(dir, "admin-openapi.json")
	if err := os.WriteFile(adminFile, admin.OpenAPI(), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := filepath.Abs(filepath.Join("testdata", "redocly.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, cmd[0], append(cmd[1:], "--format=stylish", "--config="+cfg, file, adminFile)...)
	c.Dir = dir
	c.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_COLOR=1")
	out, err := c.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("redocly lint: %v", err)
	}
}
