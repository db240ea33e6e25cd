package wasmtest

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2/clientcredentials"

	"github.com/lectern-api/lectern/internal/proctest"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/shared/logbuftest"
	"github.com/lectern-api/lectern/worker/wasmbuild"
	"github.com/lectern-api/lectern/worker/wazero"
)

// The suite's fixed settings; every origin it starts shares them.
const (
	adminToken = "admin-token-for-wasmtest"
	secret     = "a-wasmtest-secret-of-at-least-32-characters"
	audience   = "lectern-api"
)

// build is one build of the module; every test runs against each.
type build struct {
	name string // "go" or "tinygo"
	path string
	mod  *wazero.Module
	err  error
}

var (
	root     string   // the repository
	tinygo   string   // the TinyGo binary, "" when none is installed
	tmp      string   // the suite's scratch directory
	builds   []*build // standard Go always, TinyGo when installed
	setupErr error    // nothing can run (no module, or the origin does not build): every test fails
	notes    []string // said once, by TestBuilds

	originBin string
	corpusDir string
	content   *corpus.Corpus // the corpus every origin serves

	sharedOnce   sync.Once
	sharedOrigin *origin
	sharedErr    error
)

func TestMain(m *testing.M) {
	code := func() int {
		var err error
		if tmp, err = os.MkdirTemp("", "wasmtest-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(tmp)
		flag.Parse() // testing.Short, before m.Run
		setupErr = setup()
		code := m.Run()
		if sharedOrigin != nil {
			sharedOrigin.stop()
		}
		for _, b := range builds {
			if b.mod != nil {
				b.mod.Close(context.Background())
			}
		}
		return code
	}()
	os.Exit(code)
}

// setup builds the module (standard Go, and TinyGo when present) and the
// origin command, and writes the small corpus.
func setup() error {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	root = filepath.Dir(strings.TrimSpace(string(out)))
	if ms, _ := filepath.Glob(filepath.Join(root, "worker/wasm/*.go")); len(ms) == 0 {
		return errors.New("worker/wasm has no Go files: there is no edge module to test")
	}

	std := &build{name: "go", path: filepath.Join(tmp, "worker-go.wasm")}
	std.err = wasmbuild.BuildModule(root, "", std.path, "./worker/wasm")
	builds = append(builds, std)
	if testing.Short() {
		notes = append(notes, "-short: the standard Go build only, its representative tests; make test runs the rest and the TinyGo build")
	} else if tinygo = wasmbuild.TinyGo(); tinygo != "" {
		b := &build{name: "tinygo", path: filepath.Join(tmp, "worker-tinygo.wasm")}
		b.err = wasmbuild.BuildModule(root, tinygo, b.path, "./worker/wasm")
		builds = append(builds, b)
	} else {
		notes = append(notes, noTinyGo+": the TinyGo build is not tested; tools/tinygo/build.sh installs it")
	}
	for _, b := range builds {
		if b.err != nil {
			continue
		}
		wasm, err := os.ReadFile(b.path)
		if err != nil {
			b.err = err
			continue
		}
		b.mod, b.err = wazero.Compile(context.Background(), wasm)
	}

	originBin = filepath.Join(tmp, "origin")
	if err := run(root, nil, "go", "build", "-o", originBin, "./origin/cmd/origin"); err != nil {
		return err
	}
	corpusDir = filepath.Join(tmp, "corpus")
	if _, err := gen.Write(corpusDir, gen.Options{Seed: 1, Small: true}); err != nil {
		return err
	}
	content, err = corpus.Load(corpusDir)
	return err
}

// noTinyGo says where wasmbuild.TinyGo looked.
const noTinyGo = "TinyGo not found ($TINYGO, PATH, ~/.cache/lectern/tinygo-" + wasmbuild.TinyGoVersion + ")"

func run(dir string, env []string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// TestBuilds reports what the suite runs against: it fails when a build
// of the module fails.
func TestBuilds(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	for _, n := range notes {
		t.Log(n)
	}
	for _, b := range builds {
		if b.err != nil {
			t.Errorf("build %s: %v", b.name, b.err)
			continue
		}
		t.Logf("build %s: %s, %d bytes, %s", b.name, filepath.Base(b.path), b.mod.Size, b.mod.Toolchain)
		want := "standard Go"
		if b.name == "tinygo" {
			want = "TinyGo"
		}
		if !strings.HasPrefix(b.mod.Toolchain, want) {
			t.Errorf("build %s: Toolchain says %q", b.name, b.mod.Toolchain)
		}
	}
}

// forEachBuild runs f as a subtest per build of the module: the
// representative tests, whose outcome the compiler could change (parsing,
// encoding, allocation, the reactor's calls), run on both.
func forEachBuild(t *testing.T, f func(t *testing.T, b *build)) {
	t.Helper()
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	for _, b := range builds {
		runOn(t, b, f)
	}
}

// forDeployedBuild runs f as a subtest on the deployed build of the
// module: TinyGo's when it is installed (docs/edge.md), standard Go's
// otherwise. The scenarios (leases, kills, the soak) run there only: they
// exercise the origin and the host around the module, the same code for
// either build.
func forDeployedBuild(t *testing.T, f func(t *testing.T, b *build)) {
	t.Helper()
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	if testing.Short() {
		t.Skip("-short: a scenario of the deployed build (make test runs it)")
	}
	runOn(t, builds[len(builds)-1], f) // TinyGo's is appended after standard Go's
}

func runOn(t *testing.T, b *build, f func(t *testing.T, b *build)) {
	t.Helper()
	t.Run(b.name, func(t *testing.T) {
		if b.err != nil {
			t.Skipf("build %s failed (see TestBuilds)", b.name)
		}
		f(t, b)
	})
}

// origin is an origin stack running as a child process (the origin
// command, built once), like `make run` runs it.
type origin struct {
	api, idp, admin string // base URLs; the API's without /v1
	offset          atomic.Int64
	proc            *proctest.Origin
	// edgeURLs is the origin's LECTERN_EDGE_URLS, the edge hosts it
	// pushes revokes to: the listeners of edges, reserved before it
	// starts, that the suite's edges take (edgeListener). Nil edges: the
	// test set LECTERN_EDGE_URLS itself.
	edgeURLs string
	edges    chan net.Listener
}

// edgePool is how many edge listeners an origin of the suite reserves
// and lists in LECTERN_EDGE_URLS: more than the edges with a revoke URL
// that any one origin serves (the shared origin's, across the builds).
const edgePool = 32

// reserveEdges opens o's edge listeners and sets o.edgeURLs.
func (o *origin) reserveEdges() error {
	o.edges = make(chan net.Listener, edgePool)
	urls := make([]string, 0, edgePool)
	for range edgePool {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			o.closeEdges()
			return err
		}
		o.edges <- ln
		urls = append(urls, "http://"+ln.Addr().String())
	}
	o.edgeURLs = strings.Join(urls, ",")
	return nil
}

// edgeListener is a listener for an edge in front of o whose revoke URL
// o accepts and pushes to: one of those o lists, or, where the test set
// LECTERN_EDGE_URLS itself, any loopback port.
func (o *origin) edgeListener(t testing.TB) net.Listener {
	t.Helper()
	if o.edges == nil {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	select {
	case ln := <-o.edges:
		return ln
	default:
		t.Fatalf("the origin's %d edge listeners (LECTERN_EDGE_URLS) are all taken: raise edgePool", edgePool)
		return nil
	}
}

// closeEdges closes the edge listeners no edge took.
func (o *origin) closeEdges() {
	for {
		select {
		case ln := <-o.edges:
			ln.Close()
		default:
			return
		}
	}
}

// shared returns the origin most tests share. Tests that move its clock
// start their own.
func shared(t *testing.T) *origin {
	t.Helper()
	sharedOnce.Do(func() { sharedOrigin, sharedErr = launch(filepath.Join(tmp, "shared"), nil) })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return sharedOrigin
}

// startOrigin starts an origin of the test's own, stopped at cleanup.
func startOrigin(t *testing.T) *origin {
	t.Helper()
	o, err := launch(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.stop)
	return o
}

// startOriginLog is startOrigin keeping the origin's log, its access
// lines included, in the returned buffer.
func startOriginLog(t *testing.T) (*origin, *logbuftest.Buffer) {
	t.Helper()
	log := new(logbuftest.Buffer)
	o, err := launch(t.TempDir(), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.stop)
	return o, log
}

// launch starts an origin on dir. Its log (stdout) goes to log at level
// info; with a nil log it is discarded, at level warn, so that the
// suite's many requests do not each write an access line.
// env holds more settings (NAME=value), after the suite's own.
func launch(dir string, log io.Writer, env ...string) (*origin, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cmd := exec.Command(originBin)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LECTERN_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "LECTERN_ORIGIN_ADDR=127.0.0.1:0", "LECTERN_IDP_ADDR=127.0.0.1:0",
		"LECTERN_ADMIN_ADDR=127.0.0.1:0", "LECTERN_ADMIN_TOKEN="+adminToken, "LECTERN_DB="+filepath.Join(dir, "lectern.db"),
		"LECTERN_CORPUS="+corpusDir, "LECTERN_SECRET="+secret, "LECTERN_TEST_CLOCK=1")
	o := new(origin)
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "LECTERN_EDGE_URLS=") }) {
		if err := o.reserveEdges(); err != nil {
			return nil, err
		}
		cmd.Env = append(cmd.Env, "LECTERN_EDGE_URLS="+o.edgeURLs)
	}
	cmd.Env = append(cmd.Env, env...)
	if log == nil {
		cmd.Env = append(cmd.Env, "LECTERN_LOG_LEVEL=warn")
	}
	// Not a test's child: the shared origin outlives the test that
	// starts it, and each test's own stops it at cleanup.
	p, err := proctest.LaunchOrigin(context.Background(), cmd, log)
	if err != nil {
		o.closeEdges()
		return nil, err
	}
	o.proc, o.api, o.idp, o.admin = p, p.API, p.IdP, p.Admin
	return o, nil
}

func (o *origin) stop() {
	o.proc.Kill()
	o.closeEdges()
}

// now is the origin's test clock as the edge sees it: the test moves both.
func (o *origin) now() time.Time { return time.Now().Add(time.Duration(o.offset.Load())) }

// advance moves the origin's test clock, and so the edge's, forward.
func (o *origin) advance(t *testing.T, seconds int) {
	t.Helper()
	if code, m := o.adminCall(t, "POST", "/admin/v1/clock", fmt.Sprintf(`{"advanceSeconds":%d}`, seconds)); code != 200 {
		t.Fatalf("advance the clock: %d %v", code, m)
	}
	o.offset.Add(int64(seconds) * int64(time.Second))
}

// adminCall calls the admin API and decodes its JSON answer.
func (o *origin) adminCall(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, o.admin+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// org creates an organisation (body is the admin API's JSON) and a client
// with scopes (suffixes), and returns the client's credentials.
func (o *origin) org(t *testing.T, body string, scopes ...string) (clientID, clientSecret string) {
	t.Helper()
	if code, m := o.adminCall(t, "POST", "/admin/v1/orgs", body); code != 201 {
		t.Fatalf("create org %s: %d %v", body, code, m)
	}
	var org struct{ OrgID string }
	json.Unmarshal([]byte(body), &org)
	b, _ := json.Marshal(map[string]any{"scopes": scopes})
	code, m := o.adminCall(t, "POST", "/admin/v1/orgs/"+org.OrgID+"/clients", string(b))
	if code != 201 {
		t.Fatalf("create client: %d %v", code, m)
	}
	return m["clientId"].(string), m["clientSecret"].(string)
}

// token gets a client_credentials token with an unmodified OAuth2 client.
func (o *origin) token(t *testing.T, clientID, clientSecret string, scopes ...string) string {
	t.Helper()
	full := make([]string, len(scopes))
	for i, s := range scopes {
		full[i] = "service-api/" + s
	}
	cc := clientcredentials.Config{ClientID: clientID, ClientSecret: clientSecret, TokenURL: o.idp + "/oauth2/token", Scopes: full}
	tok, err := cc.Token(context.Background())
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	return tok.AccessToken
}

// calls is the organisation's monthly call meter.
func (o *origin) calls(t *testing.T, org string) int {
	t.Helper()
	code, m := o.adminCall(t, "GET", "/admin/v1/orgs/"+org, "")
	if code != 200 {
		t.Fatalf("get org %s: %d %v", org, code, m)
	}
	meters, _ := m["meters"].(map[string]any)
	month, _ := meters["month"].(map[string]any)
	n, ok := month["calls"].(float64)
	if !ok {
		t.Fatalf("org %s has no meters.month.calls: %v", org, m)
	}
	return int(n)
}

// edge is the module served by the wazero host in front of an origin.
type edge struct {
	url    string
	host   *wazero.Host
	stderr *logbuftest.Buffer
}

// edgeConfig is the host configuration for o; tests adjust it.
func edgeConfig(o *origin) wazero.Config {
	return wazero.Config{
		Origin: o.api, JWKSURL: o.idp + "/.well-known/jwks.json", Issuer: o.idp, Audience: audience, Secret: secret,
		// The origin names its own resource metadata in challenges
		// (LECTERN_PUBLIC_URL unset); the edge is configured alike, so
		// both tiers' 401s are byte-identical.
		ResourceMetadata: o.api + "/.well-known/oauth-protected-resource",
		Instances:        2,
		Now:              o.now,
	}
}

// newEdge serves b in front of o with cfg (edgeConfig(o) when nil).
func newEdge(t *testing.T, b *build, o *origin, adjust func(*wazero.Config)) *edge {
	t.Helper()
	cfg := edgeConfig(o)
	if adjust != nil {
		adjust(&cfg)
	}
	e := &edge{stderr: new(logbuftest.Buffer)}
	cfg.Stderr = e.stderr
	h, err := wazero.New(context.Background(), b.mod, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	e.url, e.host = srv.URL, h
	t.Cleanup(func() {
		srv.Close()
		h.Close(context.Background())
		if t.Failed() && e.stderr.Len() > 0 {
			t.Logf("guest output:\n%s", e.stderr)
		}
	})
	return e
}

// answer is a response read in full, its body as sent (not decompressed).
type answer struct {
	status int
	header http.Header
	body   []byte
}

var rawClient = &http.Client{
	Transport:     &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 32},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       30 * time.Second,
}

// do sends method target (path and query) to base with headers given as
// name, value pairs.
func do(t testing.TB, base, method, target, body string, hdr ...string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+target, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := rawClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, base+target, err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	if a.body, err = io.ReadAll(resp.Body); err != nil {
		t.Fatalf("%s %s: read body: %v", method, base+target, err)
	}
	return a
}

// code is the error code of an error body, or "".
func (a answer) code() string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	json.Unmarshal(a.body, &e)
	return e.Error.Code
}
