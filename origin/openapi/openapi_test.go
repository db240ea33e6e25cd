package openapi_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/openapi"
	"github.com/lectern-api/lectern/origin/openapi/openapitest"
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

// redoclyVersion is the pinned @redocly/cli that lints the description.
const redoclyVersion = "1.34.5"

// TestOpenAPILint runs a real OpenAPI linter, Redocly's recommended
// ruleset, over the description when CI asks for it
// (LECTERN_OPENAPI_LINT=1) and Node is present; .ci/run installs the
// pinned CLI.
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
	cfg, err := filepath.Abs(filepath.Join("testdata", "redocly.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, cmd[0], append(cmd[1:], "--format=stylish", "--config="+cfg, file)...)
	c.Dir = dir
	c.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_COLOR=1")
	out, err := c.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("redocly lint: %v", err)
	}
}
