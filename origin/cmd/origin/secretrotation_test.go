package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/httpsig"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/link"
)

// The secrets and link keys of the rotation tests.
const (
	oldSecret = "the-old-secret-of-the-rotation-0123456789"
	newSecret = "the-new-secret-of-the-rotation-0123456789"
	newURLKey = "new=the-new-url-key-of-the-rotation-0123456789"
)

// rotation is a deployment whose origin is restarted, one child process
// after another on the same database, with the settings of each step of
// a rotation (docs/operations.md, Rotating keys).
type rotation struct {
	t     *testing.T
	dir   string
	media string // a media id of the corpus
	s     *testStack
	stop  func()
}

func newRotation(t *testing.T) *rotation {
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"))
	c, err := corpus.Load(filepath.Join(dir, "corpus"))
	if err != nil {
		t.Fatal(err)
	}
	return &rotation{t: t, dir: dir, media: c.Lessons[0].Media[0].ID}
}

// step stops the running origin, if any, and starts one with over
// (NAME=value) on the database: a rolling restart's step, as an operator
// takes it. The issuer is set, so that tokens outlive the restarts'
// ports.
func (r *rotation) step(over ...string) {
	r.t.Helper()
	if r.stop != nil {
		r.stop()
	}
	env := killEnv(r.dir, filepath.Join(r.dir, "lectern.db"), append([]string{"LECTERN_ISSUER=https://auth.test"}, over...)...)
	p, urls, err := startChild(r.t, "origin", env, nil)
	if err != nil {
		r.t.Fatalf("start with %v: %v", over, err)
	}
	r.s, r.stop = childStack(r.t, urls), p.Kill
}

// mint mints a link to r.media with tok and returns its path and query.
func (r *rotation) mint(tok string) string {
	r.t.Helper()
	b, _ := json.Marshal(map[string]any{"mediaIds": []string{r.media}})
	resp := r.s.post("/v1/media/urls", tok, string(b))
	var a struct{ Items []struct{ URL string } }
	if err := json.Unmarshal(resp.body, &a); resp.status != 200 || err != nil || len(a.Items) != 1 {
		r.t.Fatalf("mint: %d %s", resp.status, resp.body)
	}
	_, rest, _ := strings.Cut(a.Items[0].URL, link.Prefix)
	return link.Prefix + rest
}

// downloads checks that each link downloads (200) through the running
// origin.
func (r *rotation) downloads(what string, links ...string) {
	r.t.Helper()
	for i, l := range links {
		if got := r.s.get("GET", l, ""); got.status != 200 {
			r.t.Errorf("%s: link %d (kid %s): %d %s", what, i, kidOf(l), got.status, got.body)
		}
	}
}

// kidOf is a link's key id.
func kidOf(path string) string {
	p, q, _ := strings.Cut(path, "?")
	l, err := link.Parse(p, q)
	if err != nil {
		return "?"
	}
	return l.KeyID
}

// TestURLKeysFromTheDerivedKey (#34, point 3): a deployment without
// LECTERN_URL_KEYS moves to a list by the documented three steps, the
// entry "derived" naming the key it signed with, and no link stops
// downloading: one minted seconds before the first step downloads at
// every step, as do those minted at each step after.
func TestURLKeysFromTheDerivedKey(t *testing.T) {
	r := newRotation(t)
	r.step() // no LECTERN_URL_KEYS: the derived key, kid s
	id, sec := r.s.org(`{"orgId":"acme","contentGrants":`+allTiers+`,"longUrls":true}`, "media.download")
	tok := r.s.token(id, sec, "media.download")
	before := r.mint(tok)
	if kidOf(before) != link.DerivedID {
		t.Fatalf("without LECTERN_URL_KEYS a link of kid %q, want %q", kidOf(before), link.DerivedID)
	}

	r.step("LECTERN_URL_KEYS=derived," + newURLKey) // 1: both verify, the derived key signs
	r.downloads("step 1 (derived,new)", before)
	first := r.mint(tok)
	if kidOf(first) != link.DerivedID {
		t.Errorf("step 1 signs with kid %q, want the derived key's %q (origins not yet at step 1 verify only it)", kidOf(first), link.DerivedID)
	}

	r.step("LECTERN_URL_KEYS=" + newURLKey + ",derived") // 2: the new key signs
	r.downloads("step 2 (new,derived)", before, first)
	second := r.mint(tok)
	if kidOf(second) != "new" {
		t.Errorf("step 2 signs with kid %q, want new", kidOf(second))
	}

	// An origin still at step 1 (a rolling restart) verifies step 2's links.
	r.step("LECTERN_URL_KEYS=derived," + newURLKey)
	r.downloads("an origin at step 1 while others are at step 2", before, first, second)

	r.step("LECTERN_URL_KEYS=" + newURLKey) // 3: the derived key dropped
	r.downloads("step 3 (new)", second)
	r.s.expect(r.s.get("GET", before, ""), 404, "NOT_FOUND")
}

// TestSecretRotation (#34, point 3): LECTERN_SECRET rotated by the
// documented steps with LECTERN_SECRET_ACCEPT, one origin restarted at
// each step on one database. No origin refuses to start (the signing
// seeds sealed under either secret open), and what the old secret made
// before the rotation, a token, a cursor, a link of the derived key and
// an edge signature, is still accepted until the old secret is dropped;
// then the origin started with the new secret alone opens the seeds,
// which an origin of step 2 sealed again.
func TestSecretRotation(t *testing.T) {
	r := newRotation(t)
	r.step("LECTERN_SECRET=" + oldSecret)
	id, sec := r.s.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read", "media.download")
	tok := r.s.token(id, sec, "content.read", "media.download")
	cursor := func() string {
		t.Helper()
		resp := r.s.get("GET", "/v1/subjects?limit=2", tok)
		var page struct{ NextCursor string }
		if json.Unmarshal(resp.body, &page); resp.status != 200 || page.NextCursor == "" {
			t.Fatalf("a page with a cursor: %d %s", resp.status, resp.body)
		}
		return page.NextCursor
	}
	oldCursor, oldLink := cursor(), r.mint(tok)
	// accepts reports whether the running origin takes each of the
	// old secret's: the token, the cursor, the link, an edge signature.
	accepts := func(step string, cursors ...string) {
		t.Helper()
		if got := r.s.get("GET", "/v1/tiers", tok); got.status != 200 {
			t.Errorf("%s: a token issued before: %d %s", step, got.status, got.body)
		}
		for i, c := range cursors {
			if got := r.s.get("GET", "/v1/subjects?limit=2&cursor="+c, tok); got.status != 200 {
				t.Errorf("%s: cursor %d: %d %s", step, i, got.status, got.body)
			}
		}
		r.downloads(step, oldLink)
		for _, secret := range []string{oldSecret, newSecret} {
			if got := r.gate(secret, tok); got != http.StatusPreconditionFailed {
				t.Errorf("%s: a gate call signed with the %s secret: %d, want 412 (authentic, not a 304)", step,
					map[string]string{oldSecret: "old", newSecret: "new"}[secret], got)
			}
		}
	}

	r.step("LECTERN_SECRET="+oldSecret, "LECTERN_SECRET_ACCEPT="+newSecret) // 1: the new one accepted
	accepts("step 1", oldCursor)

	r.step("LECTERN_SECRET="+newSecret, "LECTERN_SECRET_ACCEPT="+oldSecret) // 2: the new one signs
	accepts("step 2", oldCursor)
	newCursor := cursor()
	newTok := r.s.token(id, sec, "content.read")
	if got := r.s.get("GET", "/v1/tiers", newTok); got.status != 200 {
		t.Errorf("step 2: a new token: %d %s", got.status, got.body)
	}

	// An origin still at step 1 (its turn in the rolling restart not
	// come) takes what step 2 made, and opens the seeds step 2 sealed.
	r.step("LECTERN_SECRET="+oldSecret, "LECTERN_SECRET_ACCEPT="+newSecret)
	accepts("an origin at step 1 after one at step 2", oldCursor, newCursor)
	if got := r.s.get("GET", "/v1/tiers", newTok); got.status != 200 {
		t.Errorf("an origin at step 1: step 2's token: %d %s", got.status, got.body)
	}

	r.step("LECTERN_SECRET="+newSecret, "LECTERN_SECRET_ACCEPT="+oldSecret) // its turn at step 2

	r.step("LECTERN_SECRET=" + newSecret) // 3: the old one dropped
	if got := r.s.get("GET", "/v1/tiers", tok); got.status != 200 {
		t.Errorf("step 3: a token issued under the old secret: %d %s", got.status, got.body)
	}
	if got := r.s.get("GET", "/v1/subjects?limit=2&cursor="+newCursor, tok); got.status != 200 {
		t.Errorf("step 3: a cursor of the new secret: %d %s", got.status, got.body)
	}
	r.s.expect(r.s.get("GET", "/v1/subjects?limit=2&cursor="+oldCursor, tok), 400, "BAD_REQUEST")
	if got := r.gate(oldSecret, tok); got != http.StatusNotFound {
		t.Errorf("step 3: a gate call signed with the old secret: %d, want 404", got)
	}
}

// gate makes a gate call signed with secret's edge keys for a GET of
// /v1/tiers whose If-None-Match matches nothing, and returns its status:
// 412 when the signature is taken, 404 when it is not.
func (r *rotation) gate(secret, tok string) int {
	r.t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), "POST", r.s.OriginURL+edgesig.GatePath, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("If-None-Match", `"no-such-etag"`)
	req.Header.Set(edgesig.TargetHeader, "/v1/tiers")
	req.Header.Set("X-Request-Id", "rotation-gate-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	httpsig.Sign(edgesig.KeysOf([]byte(secret)), edgesig.Gate, req, nil, time.Now())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
