package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lectern-api/lectern/internal/pgschema"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/internal/pgsession"
	"github.com/lectern-api/lectern/worker/wazero"
)

// Issue #14: several origins on one PostgreSQL database, each a process
// of its own (the test binary in TestMain's child mode), as an operator
// runs them. Skipped without LECTERN_TEST_PG; CI sets it.

// peerDB is a fresh schema of the LECTERN_TEST_PG database, dropped when
// the test ends; dsn selects it. The test skips without LECTERN_TEST_PG.
type peerDB struct {
	dsn  string
	pool *pgxpool.Pool // the test's own, for looking at sessions
}

func newPeerDB(t *testing.T) *peerDB {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped in -short: runs origins as child processes")
	}
	dsn, pool := testPG(t, "the several-origins suite (issue #14)")
	return &peerDB{dsn: dsn, pool: pool}
}

// peerCorpus generates the small corpus dated date into a new directory.
func peerCorpus(t *testing.T, date string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "corpus")
	if _, err := gen.Write(dir, gen.Options{Seed: 1, Small: true, Date: date}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// peer is one origin process.
type peer struct {
	*testStack
	cmd  *exec.Cmd
	name string
}

// startPeer starts an origin named name (its PostgreSQL sessions carry it
// as application_name) on db with the corpus in dir. Every peer of a test
// shares the deployment settings: the secret and the issuer. Each has a
// bundle directory of its own.
func startPeer(t *testing.T, db *peerDB, name, corpusDir string) (*peer, error) {
	env := killEnv(t.TempDir(), pgschema.WithParam(db.dsn, "application_name", name),
		"LECTERN_CORPUS="+corpusDir, "LECTERN_ISSUER=https://idp.lectern.test")
	proc, urls, err := startChild(t, name, env, nil)
	if err != nil {
		return nil, err
	}
	p := &peer{cmd: proc.Cmd, name: name}
	p.testStack = &testStack{t: t, stack: &stack{OriginURL: urls[0], IdPURL: urls[1], AdminURL: urls[2], AdminToken: "admin-token-for-tests"}}
	return p, nil
}

// startPeers starts n origins at once on db, as a deployment does.
func startPeers(t *testing.T, db *peerDB, dirs ...string) []*peer {
	t.Helper()
	ps := make([]*peer, len(dirs))
	errs := make([]error, len(dirs))
	var wg sync.WaitGroup
	for i, dir := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ps[i], errs[i] = startPeer(t, db, fmt.Sprintf("lectern-peer-%d", i), dir)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return ps
}

// peerEdge is an edge (the module under the wazero host, as
// worker/cmd/edge runs it) in front of origins, on a real listener, its
// keys from the identity provider at idp (every peer's serves the same);
// adjust, when set, changes its configuration. Both end with the test.
func peerEdge(t *testing.T, origins []string, idp string, adjust func(*wazero.Config)) (*wazero.Host, *httptest.Server) {
	t.Helper()
	cfg := wazero.Config{
		Origins: origins, Issuer: "https://idp.lectern.test", JWKSURL: idp + "/.well-known/jwks.json", Audience: "lectern-api",
		Secret: "a-test-secret-of-at-least-32-characters", ResourceMetadata: "http://edge.test/.well-known/oauth-protected-resource",
		Instances: 2,
	}
	if adjust != nil {
		adjust(&cfg)
	}
	h, err := wazero.New(context.Background(), edgeModule(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close(context.Background()) })
	return h, srv
}

// peerClient is an HTTP client whose requests give up after 20 s.
var peerClient = &http.Client{Timeout: 20 * time.Second}

// call sends GET path to base with tok and returns the status and the
// error code of the body, if any.
func call(base, path, tok string) (int, string, error) {
	req, _ := http.NewRequest("GET", base+path, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := peerClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	code := ""
	if resp.StatusCode >= 400 {
		if i := strings.Index(string(body), `"code":"`); i >= 0 {
			code = string(body[i+8:])
			code = code[:strings.IndexByte(code, '"')]
		}
	}
	return resp.StatusCode, code, nil
}

// lessonIDs are the lesson ids of the corpus in dir.
func lessonIDs(t *testing.T, dir string) []string {
	t.Helper()
	c, err := corpus.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(c.Lessons))
	for i, l := range c.Lessons {
		ids[i] = l.ID
	}
	return ids
}

// enumeration is the admin reading of org's alarm record through p.
func (p *peer) enumeration(org string) (status string, read, granted int) {
	p.t.Helper()
	code, m := p.admin("GET", "/admin/v1/orgs/"+org, "")
	if code != 200 {
		p.t.Fatalf("%s: get org: %d %v", p.name, code, m)
	}
	e := m["enumeration"].(map[string]any)
	return m["status"].(string), int(e["lessonsRead"].(float64)), int(e["grantedLessons"].(float64))
}

// alarmAt is the number of distinct lessons read in a day that trips the
// alarm: the least n with n > 40% of granted.
func alarmAt(granted int) int { return granted*2/5 + 1 }

// Concurrent first starts on an empty database agree on one signing key:
// each origin accepts the tokens of the other's identity provider.
func TestPeersAgreeOnSigningKey(t *testing.T) {
	db := newPeerDB(t)
	dir := peerCorpus(t, "")
	ps := startPeers(t, db, dir, dir)
	id, secret := ps[0].org(`{"orgId":"acme","contentGrants":["high"]}`, "content.read")
	for i, p := range ps {
		tok := p.token(id, secret, "content.read")
		for _, q := range ps {
			if code, ecode, err := call(q.OriginURL, "/v1/tiers", tok); err != nil || code != 200 {
				t.Errorf("token of peer %d's identity provider at %s: %d %s %v", i, q.name, code, ecode, err)
			}
		}
	}
}

// Monthly quotas stay exact with 32 clients spread over two origins.
func TestPeersQuotaExact(t *testing.T) {
	db := newPeerDB(t)
	dir := peerCorpus(t, "")
	ps := startPeers(t, db, dir, dir)
	const quota = 300
	id, secret := ps[0].org(fmt.Sprintf(`{"orgId":"acme","contentGrants":["high"],"quota":{"calls":%d}}`, quota), "content.read")
	tok := ps[0].token(id, secret, "content.read")
	var ok, refused, other atomic.Int64
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 15 {
				code, ecode, err := call(ps[w%2].OriginURL, "/v1/tiers", tok)
				switch {
				case err == nil && code == 200:
					ok.Add(1)
				case code == 429 && ecode == "QUOTA_EXCEEDED":
					refused.Add(1)
				default:
					other.Add(1)
					t.Errorf("unexpected answer %d %s %v", code, ecode, err)
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() != quota || refused.Load() != 32*15-quota {
		t.Errorf("served %d and refused %d of %d calls; want %d served", ok.Load(), refused.Load(), 32*15, quota)
	}
	for _, p := range ps {
		if n := p.calls("acme"); n != quota {
			t.Errorf("%s: calls meter %v, want %d", p.name, n, quota)
		}
	}
}

// readAll reads every lesson of ids once through the peers, with workers
// concurrent clients, and returns how many were served and how many were
// refused ORG_SUSPENDED.
func readAll(t *testing.T, ps []*peer, tok string, ids []string, workers int) (served, suspended int64) {
	t.Helper()
	next := make(chan string)
	go func() {
		for _, id := range ids {
			next <- id
		}
		close(next)
	}()
	var s, r atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range next {
				code, ecode, err := call(ps[w%len(ps)].OriginURL, "/v1/lessons/"+id, tok)
				switch {
				case err == nil && code == 200:
					s.Add(1)
				case code == 403 && ecode == "ORG_SUSPENDED":
					r.Add(1)
				default:
					t.Errorf("lesson %s: unexpected answer %d %s %v", id, code, ecode, err)
				}
			}
		}()
	}
	wg.Wait()
	return s.Load(), r.Load()
}

// checkAlarm checks that every peer reads org as suspended with the same
// record: want distinct lessons read of granted.
func checkAlarm(t *testing.T, ps []*peer, org string, want, granted int) {
	t.Helper()
	for _, p := range ps {
		status, read, g := p.enumeration(org)
		if status != "suspended" || read != want || g != granted {
			t.Errorf("%s reads %s as %s with %d of %d lessons read; want suspended, %d of %d", p.name, org, status, read, g, want, granted)
		}
	}
}

// The enumeration alarm is exact to the lesson with 32 clients spread over
// two origins: the read that takes the day past 40% is served and every
// read committed after it answers ORG_SUSPENDED.
func TestPeersAlarmExact(t *testing.T) {
	db := newPeerDB(t)
	dir := peerCorpus(t, "")
	ps := startPeers(t, db, dir, dir)
	id, secret := ps[0].org(`{"orgId":"acme","contentGrants":["topics","college","high","middle","primary"]}`, "content.read")
	tok := ps[0].token(id, secret, "content.read")
	ids := lessonIDs(t, dir)
	_, _, granted := ps[1].enumeration("acme")
	if granted != len(ids) {
		t.Fatalf("granted lessons %d, corpus has %d", granted, len(ids))
	}
	served, suspended := readAll(t, ps, tok, ids, 32)
	want := alarmAt(granted)
	if served != int64(want) || suspended != int64(len(ids)-want) {
		t.Errorf("served %d lessons and refused %d of %d granted; want exactly %d served", served, suspended, granted, want)
	}
	checkAlarm(t, ps, "acme", want, granted)
	if code, ecode, _ := call(ps[1].OriginURL, "/v1/tiers", tok); code != 403 || ecode != "ORG_SUSPENDED" {
		t.Errorf("a list call after the alarm: %d %s, want 403 ORG_SUSPENDED", code, ecode)
	}
	// Reinstatement by the operator, through either origin, reopens
	// access on the next call.
	if code, m := ps[1].admin("PATCH", "/admin/v1/orgs/acme", `{"status":"active"}`); code != 200 {
		t.Fatalf("reinstate: %d %v", code, m)
	}
	if code, ecode, _ := call(ps[0].OriginURL, "/v1/lessons/"+ids[0], tok); code != 200 {
		t.Errorf("a read after reinstatement: %d %s, want 200", code, ecode)
	}
}

// Origins on two corpus versions (a rolling reload caught half way) keep
// one record of the day: reading through both alternately trips the alarm
// at the same lesson as through one.
func TestPeersAlarmAcrossVersions(t *testing.T) {
	db := newPeerDB(t)
	older, newer := peerCorpus(t, "2026-11-01"), peerCorpus(t, "2026-11-20")
	ids := lessonIDs(t, older)
	// The first origin records the older corpus as the deployment's; the
	// directory then goes away, so the second cannot load it and serves
	// its own, newer one (and keeps trying the recorded one each minute):
	// two versions at once, as in a reload that reached one origin only.
	a, err := startPeer(t, db, "lectern-peer-0", older)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(older, older+".gone"); err != nil {
		t.Fatal(err)
	}
	b, err := startPeer(t, db, "lectern-peer-1", newer)
	if err != nil {
		t.Fatal(err)
	}
	ps := []*peer{a, b}
	id, secret := ps[0].org(`{"orgId":"acme","contentGrants":["topics","college","high","middle","primary"]}`, "content.read")
	tok := ps[0].token(id, secret, "content.read")
	var versions [2]string
	for i, p := range ps {
		r := p.get("GET", "/v1/license", tok)
		versions[i] = r.header.Get("X-Service-Content-Version")
	}
	if versions[0] == versions[1] {
		t.Fatalf("both origins serve contentVersion %s; the test needs two", versions[0])
	}
	_, _, granted := ps[0].enumeration("acme")
	want := alarmAt(granted)
	served, suspended := readAll(t, ps, tok, ids, 1) // one client, alternating origins
	if served != int64(want) || suspended != int64(len(ids)-want) {
		t.Errorf("versions %v: served %d lessons and refused %d of %d; want exactly %d served", versions, served, suspended, granted, want)
	}
	checkAlarm(t, ps, "acme", want, granted)
}

// A client that gives up on the read crossing the threshold cannot
// separate it from the alarm: whatever the origin counted, the record and
// the suspension agree, on both origins.
func TestPeersAlarmCancelledCrossing(t *testing.T) {
	db := newPeerDB(t)
	dir := peerCorpus(t, "")
	ps := startPeers(t, db, dir, dir)
	ids := lessonIDs(t, dir)
	for attempt := range 4 {
		org := fmt.Sprintf("acme-%d", attempt)
		id, secret := ps[0].org(`{"orgId":"`+org+`","contentGrants":["topics","college","high","middle","primary"]}`, "content.read")
		tok := ps[0].token(id, secret, "content.read")
		_, _, granted := ps[0].enumeration(org)
		want := alarmAt(granted)
		for i := range want - 1 {
			if code, ecode, err := call(ps[i%2].OriginURL, "/v1/lessons/"+ids[i], tok); code != 200 {
				t.Fatalf("read %d: %d %s %v", i, code, ecode, err)
			}
		}
		// The crossing read: the request is sent and the connection
		// dropped after a delay that varies per attempt, before or
		// while the origin works on it.
		conn, err := net.Dial("tcp", strings.TrimPrefix(ps[1].OriginURL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET /v1/lessons/%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", ids[want-1], tok)
		time.Sleep(time.Duration(attempt) * 300 * time.Microsecond)
		conn.Close()
		time.Sleep(200 * time.Millisecond) // the origin finishes what it started
		status, read, _ := ps[0].enumeration(org)
		if read >= want && status != "suspended" {
			t.Errorf("%s: %d lessons read (alarm at %d) but status %s", org, read, want, status)
		}
		if read < want && status != "active" {
			t.Errorf("%s: %d lessons read (alarm at %d) and status %s", org, read, want, status)
		}
		code, ecode, _ := call(ps[0].OriginURL, "/v1/lessons/"+ids[want], tok)
		switch {
		case read >= want && (code != 403 || ecode != "ORG_SUSPENDED"):
			t.Errorf("%s: the read after the cancelled crossing: %d %s, want 403 ORG_SUSPENDED", org, code, ecode)
		case read < want && code != 200:
			t.Errorf("%s: the cancelled read was not counted, so the next one crosses and is served; got %d %s", org, code, ecode)
		}
		t.Logf("%s: cancelled crossing read counted: %v", org, read >= want)
	}
}

// A stopped origin (SIGSTOP) caught inside a meter transaction holds the
// rows of an organisation that the other origin also bills; the other
// origin still answers, within the stated bound: the lock wait, then
// PostgreSQL ends the stopped peer's idle transaction.
func TestPeersStalledPeer(t *testing.T) {
	db := newPeerDB(t)
	dir := peerCorpus(t, "")
	ps := startPeers(t, db, dir, dir)
	id, secret := ps[0].org(`{"orgId":"acme","contentGrants":["high"]}`, "content.read")
	tok := ps[0].token(id, secret, "content.read")
	bound := pgsession.MeterIdleInTransaction + pgsession.MeterLockTimeout + 2*time.Second

	// Load on the peer to be stopped, so that it is often inside a
	// meter transaction.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	readLoops(&wg, stop, 16, ps[0].OriginURL+"/v1/tiers", tok, nil)
	defer func() { close(stop); ps[0].cmd.Process.Signal(syscall.SIGCONT); wg.Wait() }()
	time.Sleep(300 * time.Millisecond)

	caught := false
	for try := 0; try < 50 && !caught; try++ {
		ps[0].cmd.Process.Signal(syscall.SIGSTOP)
		time.Sleep(20 * time.Millisecond)
		var n int
		// A session of the stopped peer, inside a transaction that has
		// written meter counters (and so holds their row locks).
		err := db.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity a
			JOIN pg_locks l ON l.pid = a.pid JOIN pg_class c ON c.oid = l.relation
			WHERE a.application_name = $1 AND a.state = 'idle in transaction'
			AND c.relname = 'meter_counters' AND l.mode = 'RowExclusiveLock'`, ps[0].name).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if caught = n > 0; !caught {
			ps[0].cmd.Process.Signal(syscall.SIGCONT)
			time.Sleep(30 * time.Millisecond)
		}
	}
	if !caught {
		t.Fatal("never caught the peer inside a transaction in 50 tries")
	}
	start := time.Now()
	code, ecode, err := call(ps[1].OriginURL, "/v1/tiers", tok)
	took := time.Since(start)
	t.Logf("the other origin answered %d in %v while its peer was stopped (bound %v)", code, took.Round(time.Millisecond), bound)
	if err != nil || code != 200 {
		t.Errorf("the other origin answered %d %s %v while its peer was stopped", code, ecode, err)
	}
	if took > bound {
		t.Errorf("the other origin took %v, more than the stated bound %v", took, bound)
	}
	// Resumed, the stopped origin recovers: it serves again.
	ps[0].cmd.Process.Signal(syscall.SIGCONT)
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, _, err := call(ps[0].OriginURL, "/v1/tiers", tok)
		if err == nil && code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resumed origin still answers %d %v", code, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// readLoops starts n clients that GET url with tok until stop is closed,
// each telling each (when set) how long a request took and whether it was
// answered 200.
func readLoops(wg *sync.WaitGroup, stop <-chan struct{}, n int, url, tok string, each func(took time.Duration, ok bool)) {
	client := &http.Client{Timeout: 30 * time.Second}
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				began := time.Now()
				req, _ := http.NewRequest("GET", url, nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := client.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if each != nil {
					each(time.Since(began), err == nil && resp.StatusCode == http.StatusOK)
				}
			}
		}()
	}
}
