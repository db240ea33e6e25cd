package main

import (
	"context"
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

	"github.com/lectern-api/lectern/shared/scope"
	"github.com/lectern-api/lectern/shared/token/tokentest"
	"github.com/lectern-api/lectern/worker/wasmbuild"
	"github.com/lectern-api/lectern/worker/wazero"
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
	if err := runCmd(ctx, root, wasmbuild.GoEnv, "go", wasmbuild.GoBuild(std, "./worker/wasm")...); err != nil {
		return nil, "", err
	}
	tg := wasmbuild.TinyGo()
	if tg == "" {
		note = "tinygo: not found, skipped"
	} else {
		out := filepath.Join(dir, "worker-tinygo.wasm")
		if err := runCmd(ctx, root, nil, tg, wasmbuild.TinyGoBuild(out, "./worker/wasm")...); err != nil {
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

// guest is one instance of the edge module driven directly through its
// ABI (wazero.Guest), so that the time spent inside module calls can be
// told apart from the host's work (JSON on the host side, subrequests).
type guest struct{ *wazero.Guest }

// cost is the time a request spent inside the module: the CPU time of the
// calling thread (threadCPU; zero where the clock is missing) and the
// wall-clock time, which also counts any time the thread was not running.
type cost struct{ cpu, wall time.Duration }

func (c cost) plus(d cost) cost { return cost{c.cpu + d.cpu, c.wall + d.wall} }

// call sends msg to fn and decodes its output. spent is the time of
// Guest.Call (alloc, the copy in and the call); writing msg and decoding
// the output are the host's work and are not counted (both allocate on
// the Go heap, where an assist to the host's collector could land). The
// caller keeps its goroutine on one thread (flow.run), so that the
// thread's CPU clock is the module's.
func (g guest) call(fn wazero.Func, msg []byte) (out *wazero.Output, spent cost, err error) {
	t0, c0 := time.Now(), threadCPU()
	raw, err := g.Call(fn, msg)
	if err != nil {
		return nil, cost{}, err
	}
	spent = cost{threadCPU() - c0, time.Since(t0)}
	if out, err = g.Output(raw); err != nil {
		return nil, cost{}, fmt.Errorf("output %.200q: %w", raw, err)
	}
	return out, spent, nil
}

// fetcher performs a subrequest the guest asked for and answers it.
type fetcher func(out *wazero.Output) wazero.ResumeMessage

// exchange drives one request through g to its final response, performing
// subrequests with fetch; it returns the response, the time spent inside
// the module and the number of module calls.
func (g guest) exchange(req wazero.StartMessage, fetch fetcher) (*wazero.Output, cost, int, error) {
	out, total, err := g.call(wazero.Start, req.AppendJSON(nil))
	calls := 1
	for err == nil && out.Kind == "subrequest" {
		rm := fetch(out)
		rm.Handle, rm.Now = out.Handle, time.Now().UnixMilli()
		var spent cost
		out, spent, err = g.call(wazero.Resume, rm.AppendJSON(nil))
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

// httpFetcher performs subrequests over HTTP as the wazero host does: a
// forward's body is read and dropped (it never enters the module), the
// JWKS and gate bodies are handed to the guest.
func httpFetcher(client *http.Client) fetcher {
	return func(out *wazero.Output) wazero.ResumeMessage {
		req, err := http.NewRequest(out.Method, out.URL, nil)
		if err != nil {
			return wazero.ResumeMessage{Error: err.Error()}
		}
		out.SetHeader(req)
		resp, err := client.Do(req)
		if err != nil {
			return wazero.ResumeMessage{Error: err.Error()}
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return wazero.ResumeMessage{Error: err.Error()}
		}
		rm := wazero.ResumeMessage{Status: resp.StatusCode}
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
	next   func(i int) wazero.StartMessage // the i-th request
	guest  guest
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
// (origin/idp: EdDSA, kid, the same claims) with a key of its own
// (tokentest's, kid "bench"), each with a jti of its own, so that every
// request can bear a token the module has never verified.
type signer struct {
	issuer string
	jwks   string
	n      int
}

func newSigner(issuer string) *signer {
	return &signer{issuer: issuer, jwks: string(tokentest.JWKS("bench"))}
}

func (s *signer) token() string {
	s.n++
	now := time.Now()
	return tokentest.Mint("bench", tokentest.Claims{
		"iss": s.issuer, "aud": audience, "sub": "bench-client", "client_id": "bench-client",
		"scope": scope.Full(scope.ContentRead), "org": benchOrg,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(900 * time.Second).Unix(),
		"jti": fmt.Sprintf("bench-%d", s.n),
	})
}

// fetch answers the guest's JWKS fetch from memory; nothing else is
// expected of a guest configured with this signer.
func (s *signer) fetch(out *wazero.Output) wazero.ResumeMessage {
	if out.URL != s.issuer+"/.well-known/jwks.json" {
		return wazero.ResumeMessage{Error: "unexpected subrequest " + out.URL}
	}
	return wazero.ResumeMessage{Status: 200, Headers: [][2]string{{"Content-Type", "application/json"}}, Body: &s.jwks}
}

// medianDuration returns the median of d, sorting it.
func medianDuration(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2]
}
