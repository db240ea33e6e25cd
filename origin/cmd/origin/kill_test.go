package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2/clientcredentials"

	"github.com/lectern-api/lectern/internal/proctest"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/wiring"
)

// When LECTERN_KILL_CHILD is set the test binary is the origin: the
// parent test below runs it as a child process and kills it.
func TestMain(m *testing.M) {
	if os.Getenv("LECTERN_KILL_CHILD") == "1" {
		ctx := context.Background()
		cfg, err := parseConfig(nil, os.Getenv)
		if err != nil {
			fmt.Println("config:", err)
			os.Exit(2)
		}
		st, err := start(ctx, cfg, os.Stderr)
		if err != nil {
			fmt.Println("start:", err)
			os.Exit(2)
		}
		fmt.Printf("READY %s %s %s\n", st.OriginURL, st.IdPURL, st.AdminURL)
		select {}
	}
	code := m.Run()
	if fullDir != "" {
		os.RemoveAll(fullDir)
	}
	os.Exit(code)
}

// startChild starts the test binary as an origin (TestMain's child mode)
// named name on env, its standard error to stderr (kept by the Proc when
// nil), and returns it with its origin, identity provider and admin URLs
// once it is ready. It is killed when the test ends.
func startChild(t *testing.T, name string, env []string, stderr io.Writer) (*proctest.Proc, []string, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env, cmd.Stderr = env, stderr
	return proctest.Start(t, name, cmd, func(line string) ([]string, bool) {
		f := strings.Fields(line)
		return f[min(1, len(f)):], len(f) == 4 && f[0] == "READY"
	})
}

// killEnv is the environment of a child origin (TestMain's child mode)
// on free loopback ports, its corpus in dir/corpus and its database db;
// over adds variables (NAME=value), or replaces them.
func killEnv(dir, db string, over ...string) []string {
	return append(append(os.Environ(), "LECTERN_KILL_CHILD=1",
		"LECTERN_ORIGIN_ADDR=127.0.0.1:0", "LECTERN_IDP_ADDR=127.0.0.1:0", "LECTERN_ADMIN_ADDR=127.0.0.1:0",
		"LECTERN_ADMIN_TOKEN=admin-token-for-tests", "LECTERN_DB="+db,
		"LECTERN_CORPUS="+filepath.Join(dir, "corpus"), "LECTERN_SECRET=a-test-secret-of-at-least-32-characters",
		"LECTERN_BUNDLE_DIR="+filepath.Join(dir, "bundles")), over...)
}

// killChild returns a function that starts a child origin on env (each
// call a new process on the same database) and returns it with its URLs;
// a child still running when the test ends is killed then.
func killChild(t *testing.T, env []string) func() (*proctest.Proc, []string) {
	return func() (*proctest.Proc, []string) {
		t.Helper()
		p, urls, err := startChild(t, "origin", env, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		return p, urls
	}
}

// childStack is a testStack that talks to the child origin at urls.
func childStack(t *testing.T, urls []string) *testStack {
	return &testStack{t: t, stack: &stack{OriginURL: urls[0], IdPURL: urls[1], AdminURL: urls[2], AdminToken: "admin-token-for-tests"}}
}

// spec/issue: an increment is durable before its response is sent. The
// origin is killed with SIGKILL under load; after a restart on the same
// database its call meter equals the 200s the clients received, plus at
// most the requests in flight when it died.
func TestSIGKILLKeepsAcknowledgedCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: runs the origin as a child process")
	}
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"))
	child := killChild(t, killEnv(dir, filepath.Join(dir, "lectern.db")))
	p, urls := child()
	s := childStack(t, urls)
	id, secret := s.org(`{"orgId":"acme","contentGrants":["high"]}`, "content.read")
	cc := clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: s.IdPURL + "/oauth2/token", Scopes: []string{"service-api/content.read"}}
	tok, err := cc.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	var acked, sent atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	client := &http.Client{Timeout: 5 * time.Second}
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("GET", s.OriginURL+"/v1/tiers", nil)
				req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
				sent.Add(1)
				resp, err := client.Do(req)
				if err != nil {
					return // the origin died
				}
				resp.Body.Close()
				if resp.StatusCode == 200 {
					acked.Add(1)
				}
			}
		}()
	}
	time.Sleep(700 * time.Millisecond)
	p.Kill()
	close(stop)
	wg.Wait()
	if acked.Load() == 0 {
		t.Fatal("no request was acknowledged before the kill")
	}

	_, urls = child()
	s.AdminURL = urls[2]
	calls := int64(s.calls("acme"))
	t.Logf("acknowledged %d, sent %d, counted after restart %d", acked.Load(), sent.Load(), calls)
	if calls < acked.Load() {
		t.Errorf("lost acknowledged calls: counted %d, acknowledged %d", calls, acked.Load())
	}
	if calls > sent.Load() {
		t.Errorf("counted %d calls, more than the %d sent", calls, sent.Load())
	}
}

// spec/issue #17 §4: an acknowledged PUT is committed before it is
// answered, on both stores (PostgreSQL when LECTERN_TEST_PG is set).
// Several learners, each with several writers retrying on 409, write
// progress until the origin is killed with SIGKILL; after a restart on
// the same database every class a 200 acknowledged is in its learner's
// record with a bestScore at least the acknowledged score, and the
// record's version is at least the number of 200s (every write here
// changes the record, so each 200 is one saved write) and at most the
// PUTs sent.
func TestSIGKILLKeepsAcknowledgedProgress(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: runs the origin as a child process")
	}
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			dir := t.TempDir()
			writeCorpus(t, filepath.Join(dir, "corpus"))
			db, over := filepath.Join(dir, "lectern.db"), []string(nil)
			if store == "postgres" {
				db = pgDSN(t, "the SIGKILL test of progress writes on PostgreSQL")
				over = []string{"LECTERN_ISSUER=https://auth.lectern.test"} // required with PostgreSQL; never fetched
			}
			killProgress(t, dir, db, killEnv(dir, db, over...))
		})
	}
}

// killLearner is one learner's writes in killProgress.
type killLearner struct {
	name, tok string
	next      atomic.Int64 // the number of the next write
	sent      atomic.Int64 // PUTs sent, retries included

	mu     sync.Mutex
	acked  map[string]float64 // lesson id: the highest score a 200 acknowledged
	writes int64              // 200s
}

func killProgress(t *testing.T, dir, db string, env []string) {
	const (
		org      = "acme"
		learners = 6
		writers  = 3  // per learner: they race on its version
		classes  = 20 // write n goes to class n%classes with score n/classes
	)
	c, err := corpus.Load(filepath.Join(dir, "corpus"))
	if err != nil {
		t.Fatal(err)
	}
	lessons := c.Lessons[:classes]
	child := killChild(t, env)
	proc, urls := child()
	s := childStack(t, urls)
	s.org(`{"orgId":"`+org+`","contentGrants":`+allTiers+`}`, "content.read")
	ls := make([]*killLearner, learners)
	for i := range ls {
		ls[i] = &killLearner{name: fmt.Sprintf("learner-%d", i), acked: map[string]float64{}}
		ls[i].tok = s.learnerToken(org, ls[i].name, "progress.write")
	}

	var acked, conflicts atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	client := &http.Client{Timeout: 5 * time.Second}
	for _, l := range ls {
		for range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					n := l.next.Add(1) - 1
					if n >= classes*101 {
						return // every score written: the bound keeps each write a change
					}
					lesson, score := lessons[n%classes].ID, float64(n/classes)
					for { // the same write again after a 409, at once
						select {
						case <-stop:
							return
						default:
						}
						req, _ := http.NewRequest("PUT", s.OriginURL+"/v1/progress/"+lesson, strings.NewReader(fmt.Sprintf(`{"score":%v}`, score)))
						req.Header.Set("Authorization", "Bearer "+l.tok)
						l.sent.Add(1)
						resp, err := client.Do(req)
						if err != nil {
							return // the origin died
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode == http.StatusConflict {
							conflicts.Add(1)
							continue
						}
						if resp.StatusCode != 200 {
							t.Errorf("PUT %s for %s: %d", lesson, l.name, resp.StatusCode)
							return
						}
						l.mu.Lock()
						l.writes++
						l.acked[lesson] = max(l.acked[lesson], score)
						l.mu.Unlock()
						acked.Add(1)
						break
					}
				}
			}()
		}
	}
	// Kill mid-load: once a fair number of writes are acknowledged, with
	// every writer still running (none reaches its bound this soon).
	for deadline := time.Now().Add(30 * time.Second); acked.Load() < 200; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("only %d writes acknowledged before the kill", acked.Load())
		}
	}
	proc.Kill()
	close(stop)
	wg.Wait()
	t.Logf("acknowledged %d writes, %d answered 409", acked.Load(), conflicts.Load())

	proc, urls = child()
	s = childStack(t, urls)
	for _, l := range ls {
		tok := s.learnerToken(org, l.name, "progress.read")
		r := s.get("GET", "/v1/progress?limit=100", tok)
		var p struct {
			Items []struct {
				LessonID         string
				Score, BestScore *float64
			}
			Total int
		}
		if r.status != 200 || json.Unmarshal(r.body, &p) != nil {
			t.Fatalf("GET /v1/progress for %s after the restart: %d %s", l.name, r.status, r.body)
		}
		best := map[string]float64{}
		for _, it := range p.Items {
			if it.BestScore != nil {
				best[it.LessonID] = *it.BestScore
			}
		}
		for lesson, score := range l.acked {
			if b, ok := best[lesson]; !ok || b < score {
				t.Errorf("%s: %s acknowledged with score %v, after the restart bestScore %v (recorded: %t)", l.name, lesson, score, b, ok)
			}
		}
	}
	proc.Kill()

	// The versions, read from the database itself once the origin is gone.
	st, meters, err := wiring.OpenStores(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	defer meters.Close()
	ps, err := wiring.ProgressOf(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		rec, err := ps.Progress(context.Background(), org, l.name)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Version < l.writes || rec.Version > l.sent.Load() {
			t.Errorf("%s: version %d after the restart, %d writes acknowledged, %d PUTs sent", l.name, rec.Version, l.writes, l.sent.Load())
		}
	}
}
