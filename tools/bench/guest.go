package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/lectern-api/lectern/shared/scope"
	host "github.com/lectern-api/lectern/worker/wazero"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// build is one build of the edge module.
type build struct {
	name string // "TinyGo" or "standard Go"
	wasm []byte
}

// buildModules builds the edge module with standard Go and, when it is
// installed, with TinyGo, with the Makefile's flags. note says why TinyGo
// was skipped.
func buildModules(ctx context.Context, root, dir string) (builds []build, note string, err error) {
	std := filepath.Join(dir, "worker-go.wasm")
	if err := runCmd(ctx, root, host.GoEnv, "go", host.GoBuild(std, "./worker/wasm")...); err != nil {
		return nil, "", err
	}
	tg := host.TinyGo()
	if tg == "" {
		note = "tinygo: not found, skipped"
	} else {
		out := filepath.Join(dir, "worker-tinygo.wasm")
		if err := runCmd(ctx, root, nil, tg, host.TinyGoBuild(out, "./worker/wasm")...); err != nil {
			return nil, "", err
		}
		b, err := os.ReadFile(out)
		if err != nil {
			return nil, "", err
		}
		builds = append(builds, build{"TinyGo", b}) // the deployed build first
	}
	b, err := os.ReadFile(std)
	if err != nil {
		return nil, "", err
	}
	return append(builds, build{"standard Go", b}), note, nil
}

func runCmd(ctx context.Context, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// runtimeFor compiles b in a new wazero runtime with WASI, as
// wasmtest/host does; it returns the compile time too.
func runtimeFor(ctx context.Context, b build) (wazero.Runtime, wazero.CompiledModule, time.Duration, error) {
	rt := wazero.NewRuntime(ctx)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, nil, 0, err
	}
	t0 := time.Now()
	compiled, err := rt.CompileModule(ctx, b.wasm)
	if err != nil {
		rt.Close(ctx)
		return nil, nil, 0, fmt.Errorf("compile %s module: %w", b.name, err)
	}
	return rt, compiled, time.Since(t0), nil
}

// guest is one instance of the edge module driven directly through its
// ABI (docs/edge.md), so that the time spent inside module calls can be
// told apart from the host's work (JSON on the host side, subrequests).
type guest struct {
	mod                             api.Module
	alloc, configure, start, resume api.Function
	stack                           []uint64
}

// instantiate makes a guest with the module configuration the wazero host
// uses (real wall clock, crypto random source) and returns how long the
// instantiation took (including the reactor's _initialize).
func instantiate(ctx context.Context, rt wazero.Runtime, compiled wazero.CompiledModule) (*guest, time.Duration, error) {
	mc := wazero.NewModuleConfig().WithName("").WithStartFunctions("_initialize").
		WithSysWalltime().WithSysNanotime().WithRandSource(rand.Reader)
	t0 := time.Now()
	mod, err := rt.InstantiateModule(ctx, compiled, mc)
	took := time.Since(t0)
	if err != nil {
		return nil, 0, fmt.Errorf("instantiate: %w", err)
	}
	g := &guest{mod: mod, stack: make([]uint64, 2),
		alloc: mod.ExportedFunction("alloc"), configure: mod.ExportedFunction("configure"),
		start: mod.ExportedFunction("start"), resume: mod.ExportedFunction("resume")}
	if g.alloc == nil || g.configure == nil || g.start == nil || g.resume == nil {
		mod.Close(ctx)
		return nil, 0, errors.New("module lacks an export of docs/edge.md")
	}
	return g, took, nil
}

// cost is the time a request spent inside the module: the CPU time of the
// calling thread (threadCPU; zero where the clock is missing) and the
// wall-clock time, which also counts any time the thread was not running.
type cost struct{ cpu, wall time.Duration }

func (c cost) plus(d cost) cost { return cost{c.cpu + d.cpu, c.wall + d.wall} }

// call writes msg into the guest, calls fn and decodes its output. spent
// is the time of alloc, the copy in and the call; copying and decoding
// the output are the host's work and are not counted (the copy allocates
// on the Go heap, where an assist to the host's collector could land).
// The caller keeps its goroutine on one thread (flow.run), so that the
// thread's CPU clock is the module's.
func (g *guest) call(fn api.Function, msg []byte) (out *output, spent cost, err error) {
	ctx := context.Background()
	t0, c0 := time.Now(), threadCPU()
	g.stack[0] = uint64(len(msg))
	if err := g.alloc.CallWithStack(ctx, g.stack); err != nil {
		return nil, cost{}, fmt.Errorf("alloc: %w", err)
	}
	ptr := uint32(g.stack[0])
	if ptr == 0 || !g.mod.Memory().Write(ptr, msg) {
		return nil, cost{}, fmt.Errorf("alloc: no room for %d bytes", len(msg))
	}
	g.stack[0], g.stack[1] = uint64(ptr), uint64(len(msg))
	if err := fn.CallWithStack(ctx, g.stack); err != nil {
		return nil, cost{}, err
	}
	spent = cost{threadCPU() - c0, time.Since(t0)}
	b, ok := g.mod.Memory().Read(uint32(g.stack[0]>>32), uint32(g.stack[0]))
	if !ok {
		return nil, cost{}, errors.New("output outside memory")
	}
	b = append([]byte(nil), b...)
	out = new(output)
	if err := json.Unmarshal(b, out); err != nil {
		return nil, cost{}, fmt.Errorf("output %.200q: %w", b, err)
	}
	return out, spent, nil
}

// output is any output message of docs/edge.md.
type output struct {
	Kind        string      `json:"kind"`
	Error       string      `json:"error"`
	Handle      int64       `json:"handle"`
	Status      int         `json:"status"`
	Headers     [][2]string `json:"headers"`
	Body        string      `json:"body"`
	Passthrough bool        `json:"passthrough"`
	Method      string      `json:"method"`
	URL         string      `json:"url"`
	Forward     bool        `json:"forward"`
}

// guestConfig is the configuration message of docs/edge.md.
type guestConfig struct {
	Origin           string `json:"origin"`
	JWKSURL          string `json:"jwksUrl"`
	Issuer           string `json:"issuer"`
	Audience         string `json:"audience"`
	Secret           string `json:"secret"`
	ResourceMetadata string `json:"resourceMetadata"`
}

func (g *guest) setup(cfg guestConfig) error {
	msg, _ := json.Marshal(cfg)
	out, _, err := g.call(g.configure, msg)
	if err != nil {
		return fmt.Errorf("configure: %w", err)
	}
	if out.Error != "" || out.Status >= 400 {
		return fmt.Errorf("configure: %s%s", out.Error, out.Body)
	}
	return nil
}

type startMessage struct {
	Method  string      `json:"method"`
	Path    string      `json:"path"`
	Query   string      `json:"query"`
	Headers [][2]string `json:"headers"`
	Now     int64       `json:"now"`
}

type resumeMessage struct {
	Handle  int64       `json:"handle"`
	Status  int         `json:"status"`
	Headers [][2]string `json:"headers,omitempty"`
	Body    *string     `json:"body,omitempty"`
	Error   string      `json:"error,omitempty"`
	Now     int64       `json:"now"`
}

// fetcher performs a subrequest the guest asked for and answers it.
type fetcher func(out *output) resumeMessage

// exchange drives one request through g to its final response, performing
// subrequests with fetch; it returns the response, the time spent inside
// the module and the number of module calls.
func (g *guest) exchange(req startMessage, fetch fetcher) (*output, cost, int, error) {
	msg, _ := json.Marshal(req)
	out, total, err := g.call(g.start, msg)
	calls := 1
	for err == nil && out.Kind == "subrequest" {
		rm := fetch(out)
		rm.Handle, rm.Now = out.Handle, time.Now().UnixMilli()
		msg, _ = json.Marshal(rm)
		var spent cost
		out, spent, err = g.call(g.resume, msg)
		total = total.plus(spent)
		calls++
	}
	if err != nil {
		return nil, cost{}, 0, err
	}
	if out.Kind != "response" {
		return nil, cost{}, 0, fmt.Errorf("%s %s: output of kind %q", req.Method, req.Path, out.Kind)
	}
	return out, total, calls, nil
}

// httpFetcher performs subrequests over HTTP as wasmtest/host does: a
// forward's body is read and dropped (it never enters the module), the
// JWKS and gate bodies are handed to the guest.
func httpFetcher(client *http.Client) fetcher {
	return func(out *output) resumeMessage {
		req, err := http.NewRequest(out.Method, out.URL, nil)
		if err != nil {
			return resumeMessage{Error: err.Error()}
		}
		for _, kv := range out.Headers {
			switch strings.ToLower(kv[0]) {
			case "host":
				req.Host = kv[1]
			case "content-length", "transfer-encoding", "connection":
			default:
				req.Header.Add(kv[0], kv[1])
			}
		}
		resp, err := client.Do(req)
		if err != nil {
			return resumeMessage{Error: err.Error()}
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return resumeMessage{Error: err.Error()}
		}
		rm := resumeMessage{Status: resp.StatusCode}
		for name, vs := range resp.Header {
			for _, v := range vs {
				rm.Headers = append(rm.Headers, [2]string{name, v})
			}
		}
		if !out.Forward {
			s := string(b)
			rm.Body = &s
		}
		return rm
	}
}

// flow is one kind of request whose module time is measured.
type flow struct {
	name   string
	want   int
	next   func(i int) startMessage // the i-th request
	guest  *guest
	fetch  fetcher
	cpu    []time.Duration // per request
	wall   []time.Duration
	calls  int // module calls per request (start + resumes)
	before func() error
}

// run measures f for about dur (at least 50 requests) and keeps every
// request's module time.
func (f *flow) run(dur time.Duration) error {
	if f.before != nil {
		if err := f.before(); err != nil {
			return err
		}
	}
	runtime.LockOSThread() // the thread's CPU clock is then this goroutine's
	defer runtime.UnlockOSThread()
	deadline := time.Now().Add(dur)
	for i := 0; i < 50 || time.Now().Before(deadline); i++ {
		out, spent, calls, err := f.guest.exchange(f.next(i), f.fetch)
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		if out.Status != f.want {
			return fmt.Errorf("%s: status %d, want %d: %.300s", f.name, out.Status, f.want, out.Body)
		}
		f.cpu, f.wall = append(f.cpu, spent.cpu), append(f.wall, spent.wall)
		f.calls = calls
	}
	return nil
}

// signer mints tokens of the identity provider's exact shape
// (origin/idp: EdDSA, kid, the same claims) with a key of its own, so
// that every request can bear a token the module has never verified.
type signer struct {
	key    ed25519.PrivateKey
	issuer string
	jwks   string
	n      int
}

func newSigner(issuer string) *signer {
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	jwks := fmt.Sprintf(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":%q,"kid":"bench","alg":"EdDSA","use":"sig"}]}`,
		base64.RawURLEncoding.EncodeToString(pub))
	return &signer{key: key, issuer: issuer, jwks: jwks}
}

func (s *signer) token() string {
	s.n++
	now := time.Now()
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{
		"iss": s.issuer, "aud": audience, "sub": "bench-client", "client_id": "bench-client",
		"scope": scope.Full(scope.ContentRead), "org": benchOrg,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(900 * time.Second).Unix(),
		"jti": fmt.Sprintf("bench-%d", s.n),
	})
	t.Header["kid"] = "bench"
	raw, err := t.SignedString(s.key)
	if err != nil {
		panic(err) // an ed25519 key always signs
	}
	return raw
}

// fetch answers the guest's JWKS fetch from memory; nothing else is
// expected of a guest configured with this signer.
func (s *signer) fetch(out *output) resumeMessage {
	if out.URL != s.issuer+"/.well-known/jwks.json" {
		return resumeMessage{Error: "unexpected subrequest " + out.URL}
	}
	return resumeMessage{Status: 200, Headers: [][2]string{{"Content-Type", "application/json"}}, Body: &s.jwks}
}

// medianDuration returns the median of d, sorting it.
func medianDuration(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2]
}
