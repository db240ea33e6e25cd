//go:build !wasip1

package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/lectern-api/lectern/shared/token/tokentest"
	"github.com/lectern-api/lectern/worker/wasmbuild"
)

// These tests build the reactor and drive its ABI (docs/edge.md) under
// wazero: the standard Go build always, the TinyGo build when TinyGo is
// found (worker/wasmbuild.TinyGo: $TINYGO, PATH, or where tools/tinygo
// installs it). The full HTTP scenarios against a real origin are
// wasmtest's.

type build struct {
	name   string
	tinygo func() string // the compiler; "" for standard Go
}

var builds = []build{
	{"go", func() string { return "" }},
	{"tinygo", wasmbuild.TinyGo},
}

var (
	compiledMu sync.Mutex
	compiled   = map[string][]byte{}
)

// module builds b once per test binary and returns its bytes.
func module(t testing.TB, b build) []byte {
	t.Helper()
	compiledMu.Lock()
	defer compiledMu.Unlock()
	if m, ok := compiled[b.name]; ok {
		return m
	}
	out := filepath.Join(t.TempDir(), b.name+".wasm")
	tinygo := b.tinygo()
	if b.name == "tinygo" && tinygo == "" {
		t.Skipf("%s build: TinyGo not found (set TINYGO, or run tools/tinygo/build.sh)", b.name)
	}
	if err := wasmbuild.BuildModule(".", tinygo, out, "."); err != nil {
		t.Fatalf("%s build: %v", b.name, err)
	}
	m, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s build: %d bytes", b.name, len(m))
	compiled[b.name] = m
	return m
}

// guest is one instance of the reactor.
type guest struct {
	t   testing.TB
	ctx context.Context
	mod api.Module
}

func instantiate(t testing.TB, wasm []byte) *guest {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	t.Cleanup(func() { r.Close(ctx) })
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	c, err := r.CompileModule(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := r.InstantiateModule(ctx, c, wazero.NewModuleConfig().WithName("").
		WithStartFunctions("_initialize").WithSysWalltime().WithSysNanotime().WithRandSource(rand.Reader))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"alloc", "configure", "start", "resume", "control"} {
		if mod.ExportedFunction(name) == nil {
			t.Fatalf("export %s missing", name)
		}
	}
	return &guest{t, ctx, mod}
}

// call writes msg into a buffer from alloc and calls fn with it.
func (g *guest) call(fn string, msg []byte) []byte {
	g.t.Helper()
	res, err := g.mod.ExportedFunction("alloc").Call(g.ctx, uint64(len(msg)))
	if err != nil || res[0] == 0 {
		g.t.Fatalf("alloc(%d): %v %v", len(msg), res, err)
	}
	ptr := uint32(res[0])
	if !g.mod.Memory().Write(ptr, msg) {
		g.t.Fatal("write out of range")
	}
	res, err = g.mod.ExportedFunction(fn).Call(g.ctx, uint64(ptr), uint64(len(msg)))
	if err != nil {
		g.t.Fatalf("%s: %v", fn, err)
	}
	out, ok := g.mod.Memory().Read(uint32(res[0]>>32), uint32(res[0]))
	if !ok {
		g.t.Fatalf("%s: output out of range", fn)
	}
	return append([]byte(nil), out...)
}

type msgOut struct {
	Kind       string     `json:"kind"`
	Handle     int64      `json:"handle"`
	Status     int        `json:"status"`
	Headers    [][]string `json:"headers"`
	Body       string     `json:"body"`
	URL        string     `json:"url"`
	Forward    bool       `json:"forward"`
	Wake       []int64    `json:"wake"`
	Error      string     `json:"error"`
	Background *struct {
		Handle int64  `json:"handle"`
		URL    string `json:"url"`
		Body   string `json:"body"`
	} `json:"background"`
	Lease *struct {
		ID   string `json:"id"`
		Used int64  `json:"used"`
	} `json:"lease"`
}

func (g *guest) do(fn string, msg any) msgOut {
	g.t.Helper()
	b, ok := msg.([]byte)
	if !ok {
		b, _ = json.Marshal(msg)
	}
	raw := g.call(fn, b)
	var o msgOut
	if err := json.Unmarshal(raw, &o); err != nil {
		g.t.Fatalf("%s output %q: %v", fn, raw, err)
	}
	return o
}

func testToken(now time.Time, jti string) string {
	return tokentest.Mint("k1", tokentest.Claims{"iss": "http://idp.test", "aud": "lectern-api", "sub": "c1", "client_id": "c1", "org": "acme",
		"scope": "service-api/content.read", "iat": now.Unix(), "exp": now.Unix() + 900, "jti": jti})
}

const config = `{"origin":"http://origin.test","jwksUrl":"http://idp.test/jwks","issuer":"http://idp.test","audience":"lectern-api","secret":"0123456789abcdef0123456789abcdef","resourceMetadata":"http://edge.test/.well-known/oauth-protected-resource"}`

func startMsg(path, authz string, now int64) map[string]any {
	h := [][]string{{"Accept-Encoding", "gzip"}}
	if authz != "" {
		h = append(h, []string{"Authorization", authz})
	}
	return map[string]any{"method": "GET", "path": path, "query": "", "headers": h, "now": now}
}

func TestReactor(t *testing.T) {
	for _, b := range builds {
		t.Run(b.name, func(t *testing.T) {
			g := instantiate(t, module(t, b))
			now := time.Now()
			ms := now.UnixMilli()
			if o := g.do("start", startMsg("/v1/tiers", "", ms)); o.Kind != "error" {
				t.Errorf("start before configure: got %+v, want an error", o)
			}
			if o := g.do("configure", []byte(config)); o.Kind != "configured" {
				t.Fatalf("configure: %+v", o)
			}
			o := g.do("start", startMsg("/v1/nope", "", ms))
			if o.Kind != "response" || o.Status != 404 || !strings.Contains(o.Body, `"NOT_FOUND"`) {
				t.Errorf("404: got %+v", o)
			}
			o = g.do("start", startMsg("/v1/tiers", "", ms))
			if o.Status != 401 || !strings.Contains(o.Body, "authorization header missing") {
				t.Errorf("401: got %+v", o)
			}
			tok := "Bearer " + testToken(now, "a")
			a := g.do("start", startMsg("/v1/tiers", tok, ms))
			p := g.do("start", startMsg("/v1/tiers", tok, ms))
			if a.Kind != "subrequest" || a.URL != "http://idp.test/jwks" || p.Kind != "park" {
				t.Fatalf("JWKS: got %+v and %+v", a, p)
			}
			o = g.do("resume", map[string]any{"handle": a.Handle, "status": 200, "body": string(tokentest.JWKS("k1")), "now": ms + 1})
			if o.Kind != "subrequest" || !o.Forward || o.URL != "http://origin.test/v1/tiers" || len(o.Wake) != 1 || o.Wake[0] != p.Handle {
				t.Fatalf("after the JWKS: got %+v", o)
			}
			o = g.do("resume", map[string]any{"handle": a.Handle, "status": 200, "now": ms + 2,
				"headers": [][]string{{"X-Lectern-Org", "acme"}, {"X-Lectern-Grants", "ff"}, {"Content-Type", "application/json"}}})
			if o.Kind != "response" || o.Status != 200 || len(o.Headers) != 1 {
				t.Errorf("passthrough: got %+v", o)
			}
			o = g.do("resume", map[string]any{"handle": p.Handle, "wake": true, "now": ms + 3})
			if o.Kind != "subrequest" || !o.Forward {
				t.Errorf("woken: got %+v", o)
			}
			o = g.do("resume", map[string]any{"handle": 999, "status": 200, "now": ms + 3})
			if o.Status != 500 {
				t.Errorf("unknown handle: got %+v", o)
			}
			// A request id made in the guest comes from WASI random_get.
			id := ""
			for _, h := range o.Headers {
				if h[0] == "X-Request-Id" {
					id = h[1]
				}
			}
			if len(id) != 28 || id == "req_000000000000000000000000" {
				t.Errorf("X-Request-Id %q", id)
			}
			if o := g.do("resume", []byte(`{"handle":`)); o.Status != 500 {
				t.Errorf("malformed resume: got %+v", o)
			}
		})
	}
}

// TestReactorLeases drives the lease ABI in the guest: configure with
// leases on, a revalidation gated that asks for a lease in the
// background, its grant, a 304 answered with the lease (and the lease
// named in the output), then the control export's flush and revoke.
func TestReactorLeases(t *testing.T) {
	for _, b := range builds {
		t.Run(b.name, func(t *testing.T) {
			g := instantiate(t, module(t, b))
			cfg := strings.TrimSuffix(config, "}") + `,"leases":true,"revoke":"http://edge.test/internal/revoke"}`
			if o := g.do("configure", []byte(cfg)); o.Kind != "configured" {
				t.Fatalf("configure: %+v", o)
			}
			now := time.Now()
			ms := now.UnixMilli()
			tok := "Bearer " + testToken(now, "lease")
			o := g.do("start", startMsg("/v1/tiers", tok, ms))
			o = g.do("resume", map[string]any{"handle": o.Handle, "status": 200, "body": string(tokentest.JWKS("k1")), "now": ms})
			const version = "2026-11-01+abcdef012345"
			g.do("resume", map[string]any{"handle": o.Handle, "status": 200, "now": ms,
				"headers": [][]string{{"X-Lectern-Org", "acme"}, {"X-Lectern-Grants", "00ff"}, {"X-Service-Content-Version", version}}})
			cond := startMsg("/v1/tiers", tok, ms)
			cond["headers"] = append(cond["headers"].([][]string), []string{"If-None-Match", "*"})
			o = g.do("start", cond)
			if o.Kind != "subrequest" || !strings.HasSuffix(o.URL, "/internal/gate") || o.Background == nil ||
				o.Background.URL != "http://origin.test/internal/lease" || !strings.Contains(o.Background.Body, `"want":8`) {
				t.Fatalf("first revalidation: got %+v, want the gate and a lease request", o)
			}
			answer := `{"lease":"L1","org":"acme","epoch":1,"contentVersion":"` + version + `","grants":"00ff","calls":8,"validMs":60000,"retryMs":0,` +
				`"headers":[["Cache-Control","private"],["Vary","Authorization, Accept-Encoding"],["X-Service-Content-Version","` + version + `"]],"rateLimits":[]}`
			if d := g.do("resume", map[string]any{"handle": o.Background.Handle, "status": 200, "body": answer, "now": ms}); d.Kind != "done" {
				t.Fatalf("lease answer: got %+v", d)
			}
			o = g.do("start", cond)
			if o.Kind != "response" || o.Status != 304 || o.Lease == nil || o.Lease.ID != "L1" || o.Lease.Used != 1 {
				t.Fatalf("leased revalidation: got %+v", o)
			}
			f := g.do("control", []byte(fmt.Sprintf(`{"op":"flush","now":%d}`, ms)))
			if f.Kind != "subrequest" || f.URL != "http://origin.test/internal/usage" || f.Body != `{"reports":[{"lease":"L1","used":1}]}` {
				t.Fatalf("flush: got %+v", f)
			}
			if d := g.do("resume", map[string]any{"handle": f.Handle, "status": 204, "now": ms}); d.Kind != "done" {
				t.Fatalf("flush answer: got %+v", d)
			}
			if f := g.do("control", []byte(fmt.Sprintf(`{"op":"flush","now":%d}`, ms))); f.Kind != "done" || f.Handle != 0 {
				t.Errorf("flush with nothing to report: got %+v", f)
			}
			r := g.do("control", []byte(fmt.Sprintf(`{"op":"revoke","now":%d,"body":"{\"leases\":[\"L1\"]}"}`, ms)))
			if r.Kind != "done" || r.Body != `{"reports":[{"lease":"L1","used":1,"final":true}]}` {
				t.Fatalf("revoke: got %+v", r)
			}
			if o := g.do("start", cond); o.Kind != "subrequest" || !strings.HasSuffix(o.URL, "/internal/gate") {
				t.Errorf("after the revoke: got %+v, want the gate", o)
			}
		})
	}
}

// The per-call cost in the guest: a cached token, a fresh token (one
// EdDSA verification), and a 404.
func BenchmarkReactor(b *testing.B) {
	for _, bl := range builds {
		b.Run(bl.name, func(b *testing.B) {
			g := instantiate(b, module(b, bl))
			g.do("configure", []byte(config))
			now := time.Now()
			ms := now.UnixMilli()
			tok := "Bearer " + testToken(now, "cached")
			o := g.do("start", startMsg("/v1/tiers", tok, ms))
			g.do("resume", map[string]any{"handle": o.Handle, "status": 200, "body": string(tokentest.JWKS("k1")), "now": ms})
			run := func(name string, msg func(i int) []byte) {
				b.Run(name, func(b *testing.B) {
					i := 0
					for b.Loop() {
						out := g.call("start", msg(i))
						i++
						var o msgOut
						json.Unmarshal(out, &o)
						if o.Kind == "subrequest" {
							g.call("resume", []byte(fmt.Sprintf(`{"handle":%d,"status":0,"now":%d}`, o.Handle, ms)))
						}
					}
				})
			}
			cached, _ := json.Marshal(startMsg("/v1/tiers", tok, ms))
			run("cached-token", func(int) []byte { return cached })
			fresh := make([][]byte, 0, 4096)
			run("fresh-token", func(i int) []byte {
				for len(fresh) <= i {
					m, _ := json.Marshal(startMsg("/v1/tiers", "Bearer "+testToken(now, fmt.Sprint("f", len(fresh))), ms))
					fresh = append(fresh, m)
				}
				return fresh[i]
			})
			nf, _ := json.Marshal(startMsg("/v1/nope", "", ms))
			run("404", func(int) []byte { return nf })
		})
	}
}
