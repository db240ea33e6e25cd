package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/store"
)

// Issue #14, point 6: a corpus reload reaches every origin on the
// database (corpus.go), a restart keeps the reloaded corpus, and while
// origins differ, /v1/license, ETags and cursors behave as
// docs/operations.md says.

// unusedLoopbackAddr is a loopback address nothing listens on.
func unusedLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// reloadPair is two origins on one PostgreSQL schema, their settings, and
// a token both accept.
type reloadPair struct {
	a, b       *testStack
	envA, envB func(string) string
	tok        string
}

// startReloadPair starts origins A and B, in that order, on one fresh
// PostgreSQL schema, with LECTERN_CORPUS corpusA and corpusB and the same
// secret and issuer (A's identity provider, whose tokens both accept);
// editB changes B's configuration. A has an organisation with every tier;
// tok is a token of its client.
func startReloadPair(t *testing.T, corpusA, corpusB string, editB func(*config)) *reloadPair {
	t.Helper()
	db := pgDSN(t, "the test of several origins on one PostgreSQL database")
	idpAddr := unusedLoopbackAddr(t)
	env := func(corpus string) map[string]string {
		return map[string]string{"LECTERN_DB": db, "LECTERN_CORPUS": corpus,
			"LECTERN_SECRET": "a-test-secret-of-at-least-32-characters", "LECTERN_ISSUER": "http://" + idpAddr}
	}
	withA := env(corpusA)
	withA["LECTERN_IDP_ADDR"] = idpAddr
	o := &reloadPair{envA: testEnv(t.TempDir(), withA), envB: testEnv(t.TempDir(), env(corpusB))}
	o.a = bootStack(t, o.envA, nil)
	t.Cleanup(func() { o.a.Close() })
	o.b = bootStack(t, o.envB, editB)
	t.Cleanup(func() { o.b.Close() })
	id, secret := o.a.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read")
	o.tok = o.a.token(id, secret, "content.read")
	return o
}

// licenseVersion is the contentVersion s's /v1/license reports.
func (s *testStack) licenseVersion(tok string) string {
	s.t.Helper()
	r := s.get("GET", "/v1/license", tok)
	var l struct{ ContentVersion string }
	if err := json.Unmarshal(r.body, &l); err != nil || r.status != 200 {
		s.t.Fatalf("license: %d %s", r.status, r.body)
	}
	return l.ContentVersion
}

// reloadTo reloads s's corpus from dir through its admin API and returns
// the new version.
func (s *testStack) reloadTo(dir string) string {
	s.t.Helper()
	b, _ := json.Marshal(map[string]string{"dir": dir})
	code, m := s.admin("POST", "/admin/v1/corpus/reload", string(b))
	v, _ := m["contentVersion"].(string)
	if code != 200 || v == "" {
		s.t.Fatalf("reload %s: %d %v", dir, code, m)
	}
	return v
}

// writeCorpus2 generates a small corpus of another version into dir.
func writeCorpus2(t *testing.T, dir string) string {
	t.Helper()
	sum, err := gen.Write(dir, gen.Options{Seed: 2, Small: true})
	if err != nil {
		t.Fatal(err)
	}
	return sum.ContentVersion
}

// A reload through origin A's admin API reaches origin B, which polls the
// record, within a bounded wait; B restarted comes up on the reloaded
// corpus at once, although its LECTERN_CORPUS names the old one.
func TestCorpusReloadReachesEveryOrigin(t *testing.T) {
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus1"))
	o := startReloadPair(t, filepath.Join(dir, "corpus1"), filepath.Join(dir, "corpus1"), nil)
	v1 := o.a.licenseVersion(o.tok)
	if got := o.b.licenseVersion(o.tok); got != v1 {
		t.Fatalf("before the reload A serves %s, B %s", v1, got)
	}

	writeCorpus2(t, filepath.Join(dir, "corpus2"))
	v2 := o.a.reloadTo(filepath.Join(dir, "corpus2"))
	if v2 == v1 {
		t.Fatal("the reload did not move the version")
	}
	if got := o.a.licenseVersion(o.tok); got != v2 {
		t.Fatalf("A after its reload: %s, want %s", got, v2)
	}
	deadline := time.Now().Add(10 * time.Second)
	for o.b.licenseVersion(o.tok) != v2 {
		if time.Now().After(deadline) {
			t.Fatalf("B still serves %s 10 s after A's reload to %s", o.b.licenseVersion(o.tok), v2)
		}
		time.Sleep(100 * time.Millisecond)
	}

	if err := o.b.Close(); err != nil {
		t.Fatal(err)
	}
	o.b = bootStack(t, o.envB, nil)
	if got := o.b.content.Load().ContentVersion; got != v2 {
		t.Errorf("B restarted serves %s, want the recorded %s (its LECTERN_CORPUS holds %s)", got, v2, v1)
	}
	if got := o.b.licenseVersion(o.tok); got != v2 {
		t.Errorf("B restarted reports %s on /v1/license, want %s", got, v2)
	}
}

// The first origin on a new database records its LECTERN_CORPUS: an
// origin started after it with another LECTERN_CORPUS serves the first
// one's corpus from its start, so origins agree whatever each was given.
func TestFirstOriginRecordsItsCorpus(t *testing.T) {
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus1"))
	v2 := writeCorpus2(t, filepath.Join(dir, "corpus2"))
	o := startReloadPair(t, filepath.Join(dir, "corpus1"), filepath.Join(dir, "corpus2"), func(c *config) { c.CorpusSync = time.Hour })
	v1 := o.a.content.Load().ContentVersion
	if v1 == v2 {
		t.Fatal("the two corpora have one version")
	}
	if got := o.b.content.Load().ContentVersion; got != v1 {
		t.Errorf("B, started with %s, serves %s; want A's recorded %s", v2, got, v1)
	}
	rec, err := o.b.store.Corpus(t.Context())
	if err != nil || rec.Dir != filepath.Join(dir, "corpus1") || rec.ContentVersion != v1 {
		t.Errorf("the record: %+v, %v; want A's corpus1 at %s", rec, err, v1)
	}
}

// While B still serves the old version (its poll held off), clients see
// what docs/operations.md, "What clients see during a rolling reload",
// says: each origin's /v1/license reports its own version; an ETag of one
// version revalidated on the other answers 200 with that origin's body,
// never 304; a cursor of one version on the other answers 400
// CURSOR_EXPIRED saying it was issued for another contentVersion. Once B
// follows the record, it answers A's ETags with 304 and continues A's
// cursors.
func TestRollingReloadWindow(t *testing.T) {
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus1"))
	o := startReloadPair(t, filepath.Join(dir, "corpus1"), filepath.Join(dir, "corpus1"), func(c *config) { c.CorpusSync = time.Hour })
	v1 := o.b.licenseVersion(o.tok)
	v2dir := filepath.Join(dir, "corpus2")
	writeCorpus2(t, v2dir)
	v2 := o.a.reloadTo(v2dir)
	if got := o.b.licenseVersion(o.tok); got != v1 {
		t.Fatalf("B, held, serves %s; want %s", got, v1)
	}

	const list = "/v1/subjects?limit=2"
	onA, onB := o.a.get("GET", list, o.tok), o.b.get("GET", list, o.tok)
	tagA, tagB := onA.header.Get("ETag"), onB.header.Get("ETag")
	if tagA == "" || tagA == tagB {
		t.Fatalf("ETags of the two versions: A %q, B %q", tagA, tagB)
	}
	for _, c := range []struct {
		name    string
		s       *testStack
		tag     string
		version string
	}{{"A's ETag on B", o.b, tagA, v1}, {"B's ETag on A", o.a, tagB, v2}} {
		r := c.s.get("GET", list, o.tok, "If-None-Match", c.tag)
		if r.status != 200 || r.header.Get("X-Service-Content-Version") != c.version || len(r.body) == 0 {
			t.Errorf("%s: %d version %q, want 200 with the answering origin's %s", c.name, r.status,
				r.header.Get("X-Service-Content-Version"), c.version)
		}
	}

	cursorOf := func(r response) string {
		var p struct{ NextCursor string }
		if json.Unmarshal(r.body, &p); p.NextCursor == "" {
			t.Fatalf("no cursor: %s", r.body)
		}
		return p.NextCursor
	}
	curA, curB := cursorOf(onA), cursorOf(onB)
	for _, c := range []struct {
		name    string
		s       *testStack
		cursor  string
		serving string
	}{{"A's (newer) cursor on B", o.b, curA, v1}, {"B's (older) cursor on A", o.a, curB, v2}} {
		r := c.s.get("GET", list+"&cursor="+url.QueryEscape(c.cursor), o.tok)
		c.s.expect(r, 400, "CURSOR_EXPIRED")
		if want := "issued for another contentVersion; this answer is from contentVersion " + c.serving; !strings.Contains(r.err.Message, want) {
			t.Errorf("%s: message %q, want it to contain %q", c.name, r.err.Message, want)
		}
	}

	o.b.syncCorpus(t.Context()) // B's poll, now
	if got := o.b.licenseVersion(o.tok); got != v2 {
		t.Fatalf("B after following the record: %s, want %s", got, v2)
	}
	if r := o.b.get("GET", list, o.tok, "If-None-Match", tagA); r.status != 304 {
		t.Errorf("A's ETag on B, converged: %d, want 304", r.status)
	}
	if r := o.b.get("GET", list+"&cursor="+url.QueryEscape(curA), o.tok); r.status != 200 {
		t.Errorf("A's cursor on B, converged: %d %s", r.status, r.body)
	}
}

// A recorded corpus missing on an origin's machine: the origin logs an
// error and keeps serving what it serves, at start (LECTERN_CORPUS) and
// when following the record, tries again after corpusRetry rather than on
// every read, and loads it once it is there. SQLite: one origin,
// restarted; a restart with the recorded directory in place serves it.
func TestRecordedCorpusMissing(t *testing.T) {
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"))
	env := testEnv(dir, map[string]string{})
	hold := func(c *config) { c.CorpusSync = time.Hour }
	s := bootStack(t, env, hold)
	v1 := s.content.Load().ContentVersion
	v2dir, away := filepath.Join(dir, "corpus2"), filepath.Join(dir, "moved")
	v2 := writeCorpus2(t, v2dir)
	if got := s.reloadTo(v2dir); got != v2 {
		t.Fatalf("reload: %s, want %s", got, v2)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A restart serves the recorded corpus, not LECTERN_CORPUS.
	s = bootStack(t, env, hold)
	if got := s.content.Load().ContentVersion; got != v2 {
		t.Errorf("restarted after the reload: serving %s, want the recorded %s", got, v2)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A restart without the recorded directory serves LECTERN_CORPUS.
	if err := os.Rename(v2dir, away); err != nil {
		t.Fatal(err)
	}
	s = bootStack(t, env, hold)
	t.Cleanup(func() { s.Close() })
	if got := s.content.Load().ContentVersion; got != v1 {
		t.Fatalf("restarted without the recorded corpus: serving %s, want LECTERN_CORPUS's %s", got, v1)
	}
	if out := s.out.String(); !strings.Contains(out, `"level":"ERROR"`) || !strings.Contains(out, v2dir) {
		t.Errorf("no error naming the recorded corpus in the log:\n%s", out)
	}
	// Back in place, it is not loaded before corpusRetry has passed...
	if err := os.Rename(away, v2dir); err != nil {
		t.Fatal(err)
	}
	s.syncCorpus(t.Context())
	if got := s.content.Load().ContentVersion; got != v1 {
		t.Fatalf("the failed record was loaded again at once: %s", got)
	}
	// ...and is then.
	s.reloading.Lock()
	s.failed.at = s.failed.at.Add(-corpusRetry)
	s.reloading.Unlock()
	s.syncCorpus(t.Context())
	if got := s.content.Load().ContentVersion; got != v2 {
		t.Fatalf("after corpusRetry: serving %s, want the recorded %s", got, v2)
	}

	// A record whose directory holds another version here is not loaded:
	// the origin keeps its version rather than serve a third.
	if err := s.store.RecordCorpus(t.Context(), store.CorpusRecord{Dir: filepath.Join(dir, "corpus"),
		ContentVersion: "2099-01-01+0000", LoadedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	s.syncCorpus(t.Context())
	if got := s.content.Load().ContentVersion; got != v2 {
		t.Errorf("a record of another version than its directory holds: serving %s, want %s kept", got, v2)
	}
	if out := s.out.String(); !strings.Contains(out, "holds contentVersion "+v1+" here, not 2099-01-01+0000") {
		t.Errorf("no error naming the versions in the log:\n%s", out)
	}
}

// failingRecord is a store whose corpus records fail.
type failingRecord struct{ store.Store }

func (failingRecord) RecordCorpus(context.Context, store.CorpusRecord) error {
	return errors.New("the database is down")
}

// A reload whose record cannot be written changes nothing: 500 INTERNAL,
// the origin keeps its version (a swap without a record would be undone
// by the origin's next read of the record).
func TestReloadUnrecordedChangesNothing(t *testing.T) {
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"))
	// Held off the record, nothing but a reload reads s.store.
	s := bootStack(t, testEnv(dir, nil), func(c *config) { c.CorpusSync = time.Hour })
	t.Cleanup(func() { s.Close() })
	v1 := s.content.Load().ContentVersion
	s.store = failingRecord{s.store}
	v2dir := filepath.Join(t.TempDir(), "corpus2")
	writeCorpus2(t, v2dir)
	b, _ := json.Marshal(map[string]string{"dir": v2dir})
	code, m := s.admin("POST", "/admin/v1/corpus/reload", string(b))
	if e, _ := m["error"].(map[string]any); code != 500 || e["code"] != "INTERNAL" {
		t.Errorf("an unrecorded reload: %d %v, want 500 INTERNAL", code, m)
	}
	if got := s.content.Load().ContentVersion; got != v1 {
		t.Errorf("an unrecorded reload swapped in %s", got)
	}
}

// A reload whose admin client disconnects while the corpus loads still
// completes: the corpus is recorded and swapped in (the record is not
// written under the request's context, which net/http cancels).
func TestReloadCompletesAfterClientLeaves(t *testing.T) {
	s := newStack(t)
	src := filepath.Join(t.TempDir(), "corpus2")
	v2 := writeCorpus2(t, src)
	held := holdCorpus(t, src)
	t.Cleanup(held.feed)
	ctx, cancel := context.WithCancel(context.Background())
	body, _ := json.Marshal(map[string]string{"dir": held.dir})
	req, _ := http.NewRequestWithContext(ctx, "POST", s.AdminURL+"/admin/v1/corpus/reload", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.AdminToken)
	done := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	held.waitOpened(t)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the reload request ended with %v, want context.Canceled", err)
	}
	// net/http cancels the handler's context once it sees the connection
	// close; the load waits on the FIFO meanwhile.
	time.Sleep(200 * time.Millisecond)
	held.feed()
	deadline := time.Now().Add(10 * time.Second)
	for s.content.Load().ContentVersion != v2 {
		if time.Now().After(deadline) {
			t.Fatalf("the reload its client left never swapped in %s", v2)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if rec, err := s.store.Corpus(t.Context()); err != nil || rec.Dir != held.dir || rec.ContentVersion != v2 {
		t.Errorf("the record: %+v, %v; want %s at %s", rec, err, held.dir, v2)
	}
}
