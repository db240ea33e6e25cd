package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/lectern-api/lectern/internal/version"
	"github.com/lectern-api/lectern/shared/token"
)

// The health endpoints' paths. Neither is under /v1, so neither collides
// with a route of the API (shared/route) or with what the edge module
// serves: Health answers them before the handler it wraps.
const (
	HealthPath = "/healthz"
	ReadyPath  = "/readyz"
)

// Check is one condition of readiness: Func returns nil when it holds.
type Check struct {
	Name string
	Func func(ctx context.Context) error
}

// Health answers GET (and HEAD) /healthz and /readyz without a token:
// /healthz is 200 while the process serves, with the release and commit
// it runs ({"status":"ok","version":"0.5.0","commit":"1a2b3c4d5e6f"}:
// internal/version; no commit when the build recorded none), so a
// fleet's versions can be read; /readyz runs the Checks and
// is 200 when all hold, else 503 with {"status":"not ready","notReady":
// [names]}. The failing checks' errors go to the log, not to the caller.
//
// An unauthenticated caller costs little: the checks' verdict is kept for
// TTL, and callers meeting a run in progress wait for it rather than
// start another, so however many probe, the checks run at most once a
// TTL, each bounded by Timeout.
type Health struct {
	Checks  []Check
	Log     *slog.Logger
	TTL     time.Duration // DefaultTTL when zero
	Timeout time.Duration // DefaultTimeout when zero

	mu      sync.Mutex // held while the checks run
	checked time.Time
	failing []string
}

// The defaults of Health's TTL and Timeout.
const (
	DefaultTTL     = time.Second
	DefaultTimeout = 2 * time.Second
)

// Wrap returns h behind the health endpoints.
func (hl *Health) Wrap(h http.Handler) http.Handler {
	alive := map[string]any{"status": "ok", "version": version.Release}
	if c := version.Read().Commit; c != "" {
		alive["commit"] = c
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.URL.Path != HealthPath && r.URL.Path != ReadyPath) ||
			(r.Method != http.MethodGet && r.Method != http.MethodHead) {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		if r.URL.Path == HealthPath {
			writeStatus(w, http.StatusOK, alive)
			return
		}
		if failing := hl.Ready(r.Context()); len(failing) > 0 {
			w.Header().Set("Retry-After", "1")
			writeStatus(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "notReady": failing})
			return
		}
		writeStatus(w, http.StatusOK, map[string]any{"status": "ready"})
	})
}

// Ready returns the names of the checks that do not hold (none: ready),
// as of at most TTL ago.
func (hl *Health) Ready(ctx context.Context) []string {
	hl.mu.Lock()
	defer hl.mu.Unlock()
	ttl := hl.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if !hl.checked.IsZero() && time.Since(hl.checked) < ttl {
		return hl.failing
	}
	timeout := hl.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	// The verdict is every caller's: no one caller's leaving cuts it short.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	var failing []string
	for _, c := range hl.Checks {
		if err := c.Func(cctx); err != nil {
			failing = append(failing, c.Name)
			if hl.Log != nil {
				hl.Log.Warn("not ready", "check", c.Name, "err", err)
			}
		}
	}
	hl.checked, hl.failing = time.Now(), failing
	return failing
}

func writeStatus(w http.ResponseWriter, status int, v map[string]any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// maxJWKS bounds the JWKS document JWKSCheck reads (origin/auth reads as
// much).
const maxJWKS = 64 << 10

// JWKSCheck is the readiness check of a JWKS URL: it answers 200 with a
// key set holding at least one key.
func JWKSCheck(client *http.Client, url string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("JWKS %s: %s", url, resp.Status)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKS+1))
		if err != nil {
			return err
		}
		if len(b) > maxJWKS {
			return fmt.Errorf("JWKS %s: document over %d bytes", url, maxJWKS)
		}
		return HasKeys(token.ParseJWKS(b))
	}
}

// HasKeys is nil when set, read without error, holds a key.
func HasKeys(set *token.KeySet, err error) error {
	if err == nil && set.Len() == 0 {
		err = errors.New("the key set is empty")
	}
	return err
}

// HealthCheck is the readiness check of a peer that serves /healthz (an
// edge's origin): base+HealthPath answers 200.
func HealthCheck(client *http.Client, base string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(base, "/")+HealthPath, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s%s: %s", base, HealthPath, resp.Status)
		}
		return nil
	}
}

// AnyOf holds when one of checks does (an edge needs one origin up).
func AnyOf(checks ...func(ctx context.Context) error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var errs []error
		for _, c := range checks {
			err := c(ctx)
			if err == nil {
				return nil
			}
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
}
