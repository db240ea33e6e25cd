package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/corpus/gen"
)

// The admin API's reload while serving: the version moves, ETags move and
// cursors minted under the old version expire (spec: Versioning §2–3,
// States and transitions).
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

// Reloads run one at a time (issue #13: four at once took the origin from
// 0.8 to 2.8 GB): while one runs, another answers 409 WRITE_CONFLICT with
// Retry-After and changes nothing; once it ends, the next one runs. The
// running reload is held on a FIFO in place of its corpus.json, which the
// test feeds when it is done.
func TestCorpusReloadOneAtATime(t *testing.T) {
	s := newStack(t)
	src := filepath.Join(t.TempDir(), "corpus2")
	sum, err := gen.Write(src, gen.Options{Seed: 2, Small: true})
	if err != nil {
		t.Fatal(err)
	}
	held := holdCorpus(t, src)
	type result struct {
		code int
		m    map[string]any
	}
	first := make(chan result, 1)
	body, _ := json.Marshal(map[string]string{"dir": held.dir})
	go func() {
		code, m := s.admin("POST", "/admin/v1/corpus/reload", string(body))
		first <- result{code, m}
	}()
	held.waitOpened(t)
	t.Cleanup(held.feed) // runs before the stack's cleanup, which waits for the reload

	other, _ := json.Marshal(map[string]string{"dir": src})
	req, _ := http.NewRequest("POST", s.AdminURL+"/admin/v1/corpus/reload", bytes.NewReader(other))
	req.Header.Set("Authorization", "Bearer "+s.AdminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var e struct{ Error struct{ Code string } }
	if json.Unmarshal(b, &e); res.StatusCode != 409 || e.Error.Code != "WRITE_CONFLICT" {
		t.Errorf("a reload while one runs: %d %s, want 409 WRITE_CONFLICT", res.StatusCode, b)
	}
	if ra := res.Header.Get("Retry-After"); ra != strconv.Itoa(reloadRetryAfter) {
		t.Errorf("Retry-After %q, want %d", ra, reloadRetryAfter)
	}

	held.feed()
	if r := <-first; r.code != 200 || r.m["contentVersion"] != sum.ContentVersion {
		t.Fatalf("the held reload: %d %v", r.code, r.m)
	}
	// The lock is let go, on success and on failure alike.
	if code, m := s.admin("POST", "/admin/v1/corpus/reload", `{"dir":"`+filepath.Join(t.TempDir(), "missing")+`"}`); code != 400 {
		t.Errorf("a reload after it: %d %v, want 400 for a missing corpus", code, m)
	}
	if code, m := s.admin("POST", "/admin/v1/corpus/reload", string(other)); code != 200 {
		t.Errorf("a reload after a failed one: %d %v", code, m)
	}
}

// heldCorpus is a copy of a corpus whose corpus.json is a FIFO: a load of
// it waits inside the load until feed writes the manifest.
type heldCorpus struct {
	dir      string
	fifo     string
	manifest []byte
	w        *os.File
	feed     func() // writes the manifest, once; then the load goes on
}

// holdCorpus copies the corpus in src into a held one; the test is
// skipped where there are no FIFOs.
func holdCorpus(t *testing.T, src string) *heldCorpus {
	t.Helper()
	manifest, err := os.ReadFile(filepath.Join(src, "corpus.json"))
	if err != nil {
		t.Fatal(err)
	}
	h := &heldCorpus{dir: filepath.Join(t.TempDir(), "held"), manifest: manifest}
	if err := os.CopyFS(h.dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	h.fifo = filepath.Join(h.dir, "corpus.json")
	if err := os.Remove(h.fifo); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(h.fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	h.feed = sync.OnceFunc(func() {
		if h.w != nil {
			h.w.Write(h.manifest)
			h.w.Close()
		}
	})
	return h
}

// waitOpened returns once a load has opened the held corpus.json: opening
// the FIFO for writing without blocking succeeds once a reader has it.
func (h *heldCorpus) waitOpened(t *testing.T) {
	t.Helper()
	for i := 0; ; i++ {
		f, err := os.OpenFile(h.fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		switch {
		case err == nil:
			h.w = f
			return
		case i == 3000:
			t.Fatalf("no load opened the held corpus.json: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
