package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/pgschema"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/worker/wazero"
	"golang.org/x/oauth2/clientcredentials"
)

// Issue #34: release N works beside N−1 during a rolling upgrade and
// honours what N−1 minted. The previous release is the commit
// docs/previous-release names, built from this repository's history
// (git archive) and kept in the build cache by its commit, so a warm run
// costs seconds. Skipped without git history (a shallow clone) or with
// -short.

// previous is the previous release's built commands.
type previous struct {
	commit      string
	origin      string // its origin command
	edge        string // its edge command
	module      string // its edge module (standard Go's build)
	buildFailed error
}

var (
	previousOnce sync.Once
	previousRel  previous
)

// repoRoot is the module's root, from this package's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// previousRelease builds (once, then from the cache) the previous
// release's origin, edge and edge module.
func previousRelease(t *testing.T) previous {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the upgrade test builds the previous release and runs it beside this one (make test runs it)")
	}
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "docs", "previous-release"))
	if err != nil {
		t.Fatal(err)
	}
	commit := strings.TrimSpace(string(b))
	if err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").Run(); err != nil {
		t.Skipf("the previous release %s is not in this checkout's history (a shallow clone?): %v", commit, err)
	}
	previousOnce.Do(func() { previousRel = buildPrevious(root, commit) })
	if previousRel.buildFailed != nil {
		t.Fatalf("build the previous release %s: %v", commit, previousRel.buildFailed)
	}
	return previousRel
}

// buildPrevious builds commit's commands into the cache
// (LECTERN_BUILD_CACHE, else the user's cache directory), under the
// commit: a release never changes, so its build is kept as it is.
func buildPrevious(root, commit string) previous {
	p := previous{commit: commit}
	cache := os.Getenv("LECTERN_BUILD_CACHE")
	if cache == "" || cache == "off" {
		d, err := os.UserCacheDir()
		if err != nil {
			p.buildFailed = err
			return p
		}
		cache = filepath.Join(d, "lectern", "builds")
	}
	dir := filepath.Join(cache, "release-"+commit)
	p.origin, p.edge, p.module = filepath.Join(dir, "origin"), filepath.Join(dir, "edge"), filepath.Join(dir, "worker.wasm")
	if _, err := os.Stat(p.module); err == nil {
		return p
	}
	src, err := os.MkdirTemp("", "lectern-release-")
	if err != nil {
		p.buildFailed = err
		return p
	}
	defer os.RemoveAll(src)
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		p.buildFailed = fmt.Errorf("git archive: %v: %s", err, out)
		return p
	}
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		p.buildFailed = err
		return p
	}
	for _, c := range [][]string{
		{"go", "build", "-o", filepath.Join(tmp, "origin"), "./origin/cmd/origin"},
		{"go", "build", "-o", filepath.Join(tmp, "edge"), "./worker/cmd/edge"},
		{"go", "build", "-buildmode=c-shared", "-o", filepath.Join(tmp, "worker.wasm"), "./worker/wasm"},
	} {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Dir = src
		cmd.Env = os.Environ()
		if strings.HasSuffix(c[len(c)-1], "wasm") {
			cmd.Env = append(cmd.Env, "GOOS=wasip1", "GOARCH=wasm")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			p.buildFailed = fmt.Errorf("%s: %v: %s", strings.Join(c, " "), err, out)
			return p
		}
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		p.buildFailed = err
	}
	return p
}

// freeAddr is a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// oldOrigin is the previous release's origin as a child process.
type oldOrigin struct {
	*testStack
	cmd    *exec.Cmd
	log    *lockedBuffer
	exited chan struct{} // closed once its one Wait returned
}

// startOldOrigin starts the previous release's origin on db with the
// corpus in corpusDir, as an operator runs it (its settings those of the
// peers: the secret, the issuer), and waits until its admin API answers.
func startOldOrigin(t *testing.T, p previous, db, corpusDir string, over ...string) *oldOrigin {
	t.Helper()
	api, idp, admin := freeAddr(t), freeAddr(t), freeAddr(t)
	cmd := exec.Command(p.origin)
	cmd.Dir = t.TempDir()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LECTERN_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, "LECTERN_ORIGIN_ADDR="+api, "LECTERN_IDP_ADDR="+idp, "LECTERN_ADMIN_ADDR="+admin,
		"LECTERN_ADMIN_TOKEN=admin-token-for-tests", "LECTERN_DB="+db, "LECTERN_CORPUS="+corpusDir,
		"LECTERN_SECRET=a-test-secret-of-at-least-32-characters", "LECTERN_ISSUER=https://idp.lectern.test",
		"LECTERN_BUNDLE_DIR="+filepath.Join(cmd.Dir, "bundles"), "LECTERN_LOG_LEVEL=warn"), over...)
	o := &oldOrigin{cmd: cmd, log: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = o.log, o.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := o.exited
	go func() { cmd.Wait(); close(exited) }() // the only Wait: a second one may take its output's end and hang
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	})
	o.testStack = &testStack{t: t, stack: &stack{OriginURL: "http://" + api, IdPURL: "http://" + idp, AdminURL: "http://" + admin, AdminToken: "admin-token-for-tests"}}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		req, _ := http.NewRequest("GET", o.AdminURL+"/admin/v1/health", nil)
		req.Header.Set("Authorization", "Bearer admin-token-for-tests")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return o
			}
		}
		select {
		case <-exited:
			t.Fatalf("the previous release's origin exited:\n%s", o.log.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the previous release's origin was not ready in 2 minutes:\n%s", o.log.String())
		}
	}
}

// stop stops it as an operator does (SIGTERM: it drains and flushes its
// meters).
func (o *oldOrigin) stop(t *testing.T) {
	t.Helper()
	o.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-o.exited:
	case <-time.After(time.Minute):
		t.Fatalf("the previous release's origin did not stop in a minute")
	}
}

// lockedBuffer is a process's output, read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// artefacts are what a client of the previous release holds: its
// credentials, a token, signed links, a list cursor.
type artefacts struct {
	clientID   string
	secret     string
	tok        string
	learner    string // a learner's token (progress.read, progress.write)
	progress   []byte // the learner's record as GET /v1/progress answered it
	mediaLink  string // path and query
	exportLink string
	cursorPath string // the next page of a list
	meters     map[string]any
}

// mintArtefacts creates an organisation through s and has it mint a
// media link and an export link and start a list walk.
func mintArtefacts(t *testing.T, s *testStack, corpusDir string) artefacts {
	return mintArtefactsOf(t, s, corpusDir, "acme")
}

func mintArtefactsOf(t *testing.T, s *testStack, corpusDir, org string) artefacts {
	t.Helper()
	c, err := corpus.Load(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	var lesson *corpus.Lesson
	for _, l := range c.Lessons {
		if strings.HasPrefix(l.ID, "high/") && len(l.Media) > 0 {
			lesson = l
			break
		}
	}
	id, secret := s.org(`{"orgId":"`+org+`","contentGrants":["high"]}`, "content.read", "content.export", "media.download")
	a := artefacts{clientID: id, secret: secret, tok: s.token(id, secret, "content.read", "content.export", "media.download")}
	pathOf := func(u string) string {
		i := strings.Index(u, "/files/")
		if i < 0 {
			t.Fatalf("not a link: %q", u)
		}
		return u[i:]
	}
	r := s.post("/v1/media/urls", a.tok, `{"mediaIds":["`+lesson.Media[0].ID+`"]}`)
	if r.status != 200 {
		t.Fatalf("mint: %d %s", r.status, r.body)
	}
	var minted struct{ Items []struct{ URL string } }
	json.Unmarshal(r.body, &minted)
	a.mediaLink = pathOf(minted.Items[0].URL)
	r = s.get("GET", "/v1/exports/classes/"+lesson.ID, a.tok)
	if r.status != 200 {
		t.Fatalf("export: %d %s", r.status, r.body)
	}
	var exp struct{ URL string }
	json.Unmarshal(r.body, &exp)
	a.exportLink = pathOf(exp.URL)
	r = s.get("GET", "/v1/subjects?tier=high&limit=1", a.tok)
	var page struct {
		NextCursor string
		HasMore    bool
	}
	json.Unmarshal(r.body, &page)
	if r.status != 200 || !page.HasMore {
		t.Fatalf("a page of subjects: %d %s", r.status, r.body)
	}
	a.cursorPath = "/v1/subjects?tier=high&limit=1&cursor=" + page.NextCursor
	a.learner = s.learnerToken(org, "learner-1", "progress.read", "progress.write")
	if r := s.put("/v1/progress/"+lesson.ID, a.learner, `{"score":80}`); r.status != 200 {
		t.Fatalf("progress write: %d %s", r.status, r.body)
	}
	r = s.get("GET", "/v1/progress", a.learner)
	if r.status != 200 {
		t.Fatalf("progress read: %d %s", r.status, r.body)
	}
	a.progress = r.body
	for _, l := range []string{a.mediaLink, a.exportLink} {
		if r := s.get("GET", l, ""); r.status != 200 {
			t.Fatalf("download %s from the release that minted it: %d", l, r.status)
		}
	}
	return a
}

// sameJSON reports whether a and b hold the same JSON value.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// meters is org's meters as s's admin API reads them.
func meters(t *testing.T, s *testStack, org string) map[string]any {
	t.Helper()
	code, m := s.admin("GET", "/admin/v1/orgs/"+org, "")
	if code != 200 {
		t.Fatalf("admin read: %d %v", code, m)
	}
	out := map[string]any{}
	for _, period := range []string{"month", "hour"} {
		for k, v := range m["meters"].(map[string]any)[period].(map[string]any) {
			out[period+"."+k] = v
		}
	}
	return out
}

// checkArtefacts holds s to what the previous release minted: the links
// download, the token reads, the cursor walks on (or is refused
// CURSOR_EXPIRED without a bill), and the meters are as they were plus
// what these calls bill (a call each; the cursor's page a call).
func checkArtefacts(t *testing.T, s *testStack, a artefacts) {
	t.Helper()
	before := meters(t, s, "acme")
	for _, l := range []string{a.mediaLink, a.exportLink} {
		if r := s.get("GET", l, ""); r.status != 200 {
			t.Errorf("a link the previous release minted: %d %.200s", r.status, r.body)
		}
	}
	if r := s.get("GET", "/v1/tiers", a.tok); r.status != 200 {
		t.Errorf("a token the previous release issued: %d %.200s", r.status, r.body)
	}
	// The learner's record reads the same (with the learner's token of
	// the previous release).
	if r := s.get("GET", "/v1/progress", a.learner); r.status != 200 || !sameJSON(r.body, a.progress) {
		t.Errorf("the progress the previous release recorded: %d %s, was %s", r.status, r.body, a.progress)
	}
	calls := 2.0 // the tiers and the progress read
	switch r := s.get("GET", a.cursorPath, a.tok); {
	case r.status == 200:
		calls++
	case r.status == 400 && r.err.Code == "CURSOR_EXPIRED":
		// Refused, and free: checked below.
	default:
		t.Errorf("a cursor the previous release minted: %d %.200s", r.status, r.body)
	}
	after := meters(t, s, "acme")
	for k, v := range before {
		want := v.(float64)
		if k == "month.calls" || k == "hour.calls" {
			want += calls
		}
		if after[k] != want {
			t.Errorf("%s: %v after, %v before: want %v", k, after[k], v, want)
		}
	}
}

// TestUpgradeFromPreviousRelease (issue #34, point 4 (a)): the previous
// release runs on a PostgreSQL database, an organisation mints links and
// starts a list walk; it is stopped and this release started on the same
// database: everything the previous one minted still works, billing
// exact. Then from SQLite, the single-origin path.
func TestUpgradeFromPreviousRelease(t *testing.T) {
	p := previousRelease(t)
	corpusDir := peerCorpus(t, "")
	t.Run("postgres", func(t *testing.T) {
		db := newPeerDB(t)
		old := startOldOrigin(t, p, db.dsn, corpusDir)
		a := mintArtefacts(t, old.testStack, corpusDir)
		old.stop(t)
		ps := startPeers(t, db, corpusDir)
		checkArtefacts(t, ps[0].testStack, a)
	})
	t.Run("sqlite", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "lectern.db")
		old := startOldOrigin(t, p, db, corpusDir)
		a := mintArtefacts(t, old.testStack, corpusDir)
		old.stop(t)
		env := killEnv(t.TempDir(), db, "LECTERN_CORPUS="+corpusDir, "LECTERN_ISSUER=https://idp.lectern.test")
		_, urls := killChild(t, env)()
		checkArtefacts(t, childStack(t, urls), a)
	})
}

// TestRollingUpgrade (issue #34, point 4 (b)): one origin of the
// previous release and one of this one on a PostgreSQL database, behind
// an edge of each release listing both, under load: what either release
// minted works through either edge (no 404 on a valid link, no billed
// error on a cursor), no internal call is refused (edge signatures either
// way, gate calls, usage reports), and billing is exact. The previous
// release's edge runs with leases off: with several origins its usage
// reports carry the first origin's signature only (fixed in this
// release), so the others refuse them; its leases behind one origin of
// this release are TestRollingUpgradeRevokesOldEdgeLeases's. Client
// secrets stay in bcrypt, the one form the previous release checks
// (LECTERN_CLIENT_SECRET_HASH=bcrypt): a client created on either
// origin, whose tokens either origin issued, gets tokens from both.
func TestRollingUpgrade(t *testing.T) {
	p := previousRelease(t)
	db := newPeerDB(t)
	corpusDir := peerCorpus(t, "")
	old := startOldOrigin(t, p, db.dsn, corpusDir)
	// The upgrade's window (docs/upgrading.md): this release's origin
	// takes the previous edge's v2 forwards and gate calls
	// (LECTERN_EDGE_ACCEPT_V2), and this release's edge signs v2, which
	// the previous origin reads (SignV2, LECTERN_EDGE_SIGN_V2). This
	// release's origin stores new client secrets in bcrypt and leaves
	// bcrypt hashes as they are (LECTERN_CLIENT_SECRET_HASH=bcrypt).
	proc, urls, err := startChild(t, "origin", killEnv(t.TempDir(), pgschemaApp(db.dsn, "lectern-new"),
		"LECTERN_CORPUS="+corpusDir, "LECTERN_ISSUER=https://idp.lectern.test", "LECTERN_EDGE_ACCEPT_V2=1",
		"LECTERN_CLIENT_SECRET_HASH=bcrypt"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cur := childStack(t, urls)
	oldArt := mintArtefactsOf(t, old.testStack, corpusDir, "acme")
	newArt := mintArtefactsOf(t, cur, corpusDir, "beta")
	// acme's client, created on the previous origin, gets a token from
	// this one (which replaces a bcrypt hash without the setting); beta's
	// was created and used on this one. Both then get tokens from the
	// previous origin.
	for _, c := range []struct {
		name string
		a    artefacts
		on   []*testStack
	}{
		{"created on the previous origin", oldArt, []*testStack{cur, old.testStack}},
		{"created on this origin", newArt, []*testStack{old.testStack}},
	} {
		for _, s := range c.on {
			if err := clientToken(s.IdPURL, c.a.clientID, c.a.secret); err != nil {
				t.Errorf("a client %s: a token from %s: %v", c.name, s.IdPURL, err)
			}
		}
	}
	jwks := cur.IdPURL + "/.well-known/jwks.json"

	// This release's edge, in-process, leases on.
	h, newEdge := peerEdge(t, []string{old.OriginURL, cur.OriginURL}, cur.IdPURL, func(c *wazero.Config) {
		c.Leases, c.UsageLog, c.SignV2 = true, filepath.Join(t.TempDir(), "usage.log"), true
	})
	// The previous release's edge, a child process.
	oldEdge, _ := startOldEdge(t, p, freeAddr(t), old.OriginURL+","+cur.OriginURL, jwks, "LECTERN_EDGE_LEASES=off")

	// The load: 6 clients for 5 s, each request through either edge,
	// with either organisation's token and artefacts.
	type tally struct{ calls, failures atomic.Int64 }
	var acme, beta tally
	var downloads, limited atomic.Int64
	var failMu sync.Mutex
	var fails []string
	stop := time.Now().Add(5 * time.Second)
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 20 * time.Second}
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			etags := map[string]string{}
			for i := 0; time.Now().Before(stop); i++ {
				edge := []string{oldEdge, newEdge.URL}[(w+i)%2]
				a, tl := oldArt, &acme
				if (w/2+i)%2 == 1 {
					a, tl = newArt, &beta
				}
				var path, tok string
				billed := false
				switch i % 5 {
				case 0, 1:
					path, tok, billed = "/v1/tiers", a.tok, true
				case 2:
					path = a.mediaLink
				case 3:
					path = a.exportLink
				case 4:
					path, tok, billed = a.cursorPath, a.tok, true
				}
				req, _ := http.NewRequest("GET", edge+path, nil)
				if tok != "" {
					req.Header.Set("Authorization", "Bearer "+tok)
				}
				if e := etags[edge+a.tok]; e != "" && path == "/v1/tiers" && i%5 == 1 {
					req.Header.Set("If-None-Match", e)
				}
				resp, err := client.Do(req)
				if err != nil {
					tl.failures.Add(1)
					failMu.Lock()
					fails = append(fails, fmt.Sprintf("%s %s: %v", edge, path, err))
					failMu.Unlock()
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if path == "/v1/tiers" && resp.StatusCode == 200 {
					etags[edge+a.tok] = resp.Header.Get("ETag")
				}
				if tok == "" && resp.StatusCode == http.StatusTooManyRequests {
					limited.Add(1)
					continue // a download over the organisation's download rate: designed, not billed
				}
				if tok == "" && resp.StatusCode == 200 {
					downloads.Add(1)
				}
				if resp.StatusCode != 200 && resp.StatusCode != 304 {
					tl.failures.Add(1)
					failMu.Lock()
					fails = append(fails, fmt.Sprintf("%s %s: %d", edge, path, resp.StatusCode))
					failMu.Unlock()
					continue
				}
				if billed {
					tl.calls.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if err := h.Flush(context.Background()); err != nil {
		t.Errorf("the edge's usage reports: %v", err)
	}
	for _, f := range fails[:min(len(fails), 20)] {
		t.Error(f)
	}
	for org, tl := range map[string]*tally{"acme": &acme, "beta": &beta} {
		m := meters(t, cur, org)
		// Each organisation's calls before the load: mintArtefacts bills
		// a mint, an export, a page and a progress write and read.
		if got, want := m["month.calls"], float64(tl.calls.Load()+5); got != want {
			t.Errorf("%s: billed %v calls, answered %v", org, got, want)
		}
	}
	refusedOld := strings.Count(old.log.String(), "signature refused")
	refusedNew := strings.Count(proc.Stderr.String(), "signature refused")
	t.Logf("%d billed requests answered, %d downloads (%d more over the download rate, 429); internal calls refused: %d by the previous release's origin, %d by this one's",
		acme.calls.Load()+beta.calls.Load(), downloads.Load(), limited.Load(), refusedOld, refusedNew)
	if refusedOld+refusedNew > 0 {
		t.Errorf("internal calls refused: %d by the previous release's origin, %d by this one's\n%s\n%s", refusedOld, refusedNew, old.log.String(), proc.Stderr.String())
	}
}

// startOldEdge starts the previous release's edge (worker/cmd/edge) on
// addr in front of origins (LECTERN_ORIGIN_URL), its keys from jwks, as
// an operator runs it; over adds settings. It returns its base URL and
// its output once it answers /healthz, and is killed when the test ends.
func startOldEdge(t *testing.T, p previous, addr, origins, jwks string, over ...string) (string, *lockedBuffer) {
	t.Helper()
	cmd := exec.Command(p.edge)
	cmd.Dir = t.TempDir()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LECTERN_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, "LECTERN_EDGE_ADDR="+addr, "LECTERN_ORIGIN_URL="+origins,
		"LECTERN_ISSUER=https://idp.lectern.test", "LECTERN_JWKS_URL="+jwks, "LECTERN_SECRET=a-test-secret-of-at-least-32-characters",
		"LECTERN_EDGE_WASM="+p.module, "LECTERN_EDGE_INSTANCES=2", "LECTERN_LOG_LEVEL=warn"), over...)
	log := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	base := "http://" + addr
	waitHealthy(t, base, log)
	return base, log
}

// TestRollingUpgradeRevokesOldEdgeLeases (#36 point 4, review): an edge
// of the previous release with leases on, listed in LECTERN_EDGE_URLS of
// an origin of this release in the upgrade's window
// (LECTERN_EDGE_ACCEPT_V2=1). That edge reads v2 signatures only, so the
// origin signs its revoke pushes v2: a corpus reload and an
// organisation's suspension take the edge's leases back by push (none
// waited out until it expires, no push refused), the reload answers 200,
// and the suspended organisation's revalidations are no longer answered
// 304 from a lease.
func TestRollingUpgradeRevokesOldEdgeLeases(t *testing.T) {
	p := previousRelease(t)
	db := newPeerDB(t)
	corpusDir := peerCorpus(t, "")
	edgeAddr := freeAddr(t) // listed before the origin starts
	proc, urls, err := startChild(t, "origin", killEnv(t.TempDir(), pgschemaApp(db.dsn, "lectern-new"),
		"LECTERN_CORPUS="+corpusDir, "LECTERN_ISSUER=https://idp.lectern.test", "LECTERN_EDGE_ACCEPT_V2=1",
		"LECTERN_EDGE_URLS=http://"+edgeAddr), nil)
	if err != nil {
		t.Fatal(err)
	}
	cur := childStack(t, urls)
	id, secret := cur.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read")
	tok := cur.token(id, secret, "content.read")
	edge, edgeLog := startOldEdge(t, p, edgeAddr, cur.OriginURL, cur.IdPURL+"/.well-known/jwks.json")

	get := func(etag string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", edge+"/v1/tiers", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err := peerClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("ETag")
	}
	const granted = `lectern_edge_calls_total{http_response_status_code="200",kind="lease"}`
	// leased revalidates until the edge holds a lease it did not before.
	leased := func() {
		t.Helper()
		before := metric(t, cur, granted)
		code, etag := get("")
		if code != 200 {
			t.Fatalf("GET /v1/tiers through the previous edge: %d\n%s", code, edgeLog.String())
		}
		for i := 0; metric(t, cur, granted) == before; i++ {
			if i == 100 {
				t.Fatalf("the previous edge took no lease in 100 revalidations\n%s\n%s", edgeLog.String(), proc.Stderr.String())
			}
			if code, _ := get(etag); code != 304 {
				t.Fatalf("revalidation %d: %d, want 304", i, code)
			}
			time.Sleep(20 * time.Millisecond) // the lease comes in the background
		}
	}
	const (
		byPush   = `lectern_lease_revoke_duration_seconds_count{waited="push"}`
		byExpiry = `lectern_lease_revoke_duration_seconds_count{waited="expiry"}`
	)

	leased()
	dir := filepath.Join(t.TempDir(), "corpus2")
	writeCorpus2(t, dir)
	b, _ := json.Marshal(map[string]string{"dir": dir})
	start := time.Now()
	code, m := cur.admin("POST", "/admin/v1/corpus/reload", string(b))
	t.Logf("reload: %d in %v", code, time.Since(start).Round(time.Millisecond))
	if code != 200 {
		t.Errorf("reload: %d %v, want 200", code, m)
	}

	leased()
	_, etag := get("")
	if code, m := cur.admin("PATCH", "/admin/v1/orgs/acme", `{"status":"suspended"}`); code != 200 {
		t.Fatalf("suspend: %d %v", code, m)
	}
	if code, _ := get(etag); code == 304 || code == 200 {
		t.Errorf("a revalidation of the suspended organisation through the previous edge: %d", code)
	}

	if push, expiry := metric(t, cur, byPush), metric(t, cur, byExpiry); push != 2 || expiry != 0 {
		t.Errorf("revocations: %d by push, %d waited until the leases expired; want 2 and 0", push, expiry)
	}
	if n := strings.Count(edgeLog.String(), "revoke push refused"); n > 0 {
		t.Errorf("the previous edge refused %d revoke pushes:\n%s", n, edgeLog.String())
	}
}

// clientToken asks the identity provider at idp for a client_credentials
// token of the client; nil when it answers 200.
func clientToken(idp, clientID, secret string) error {
	cc := clientcredentials.Config{ClientID: clientID, ClientSecret: secret, TokenURL: idp + "/oauth2/token"}
	_, err := cc.Token(context.Background())
	return err
}

// waitHealthy waits until base answers GET /healthz 200.
func waitHealthy(t *testing.T, base string, log *lockedBuffer) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not healthy in a minute:\n%s", base, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pgschemaApp names the sessions of dsn (PostgreSQL's application_name).
func pgschemaApp(dsn, name string) string { return pgschema.WithParam(dsn, "application_name", name) }
