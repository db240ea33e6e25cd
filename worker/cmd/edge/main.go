// Command edge is the edge on a host of its own (beside the Cloudflare
// worker, worker/cloudflare): it serves the edge module
// (build/worker.wasm, docs/edge.md) under wazero on LECTERN_EDGE_ADDR,
// in front of the origin at LECTERN_ORIGIN_URL, or of the origins it lists,
// comma-separated (docs/edge.md, "Several origins"). `make run` starts it
// beside the origin stack; docs/operations.md runs it in production.
//
//	go run ./worker/cmd/edge [-wasm build/worker.wasm] [-addr 127.0.0.1:8787] ...
//
// Settings are environment variables mirrored by flags (-h lists them).
// Token verification and the secret mean what they mean to the origin
// (origin/cmd/origin/config.go); both tiers of one deployment need the
// same LECTERN_SECRET, or, when it is unset, the same var/secret, which
// the origin creates on its first start.
//
// With leases on (LECTERN_EDGE_LEASES, on by default; docs/edge.md,
// "Leases") the edge answers revalidations within leases the origin grants
// it, logs each such 304 to its usage log (LECTERN_EDGE_USAGE_LOG) before
// answering it, reports the log of its last run to the origin at start,
// and takes the origin's revoke pushes at /internal/revoke on its own
// listener, the URL it sends the origin with every lease request.
//
// With LECTERN_TEST_CLOCK=1 the edge follows the origin's test clock: it
// reads GET /admin/v1/clock (LECTERN_ADMIN_ADDR, LECTERN_ADMIN_TOKEN)
// before every message it gives the module, so tokens expire at the edge
// when they expire at the origin.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lectern-api/lectern/internal/cmdline"
	"github.com/lectern-api/lectern/internal/httpsrv"
	"github.com/lectern-api/lectern/internal/telemetry"
	"github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/shared/link"
	"github.com/lectern-api/lectern/worker/wazero"
)

func main() { cmdline.Main("edge", run) }

// config is the edge's settings (README, Environment).
type config struct {
	Addr      string   // LECTERN_EDGE_ADDR
	Origins   []string // LECTERN_ORIGIN_URL, a comma-separated list: default http://<LECTERN_ORIGIN_ADDR>
	IdPAddr   string   // LECTERN_IDP_ADDR: only for the issuer's default (one dev origin), as at the origin
	Issuer    string   // LECTERN_ISSUER: default http://<IdPAddr>
	JWKSURL   string   // LECTERN_JWKS_URL: default <issuer>/.well-known/jwks.json (every origin's provider serves it)
	Audience  string   // LECTERN_AUDIENCE
	Secret    string   // LECTERN_SECRET: default the contents of var/secret
	URLKeys   string   // LECTERN_URL_KEYS: the origin's; default one key derived from the secret
	PublicURL string   // LECTERN_PUBLIC_URL: default http://<Addr>; names the resource metadata in challenges
	Wasm      string   // -wasm: the module
	Instances int      // LECTERN_EDGE_INSTANCES: module instances serving in parallel
	Leases    bool     // LECTERN_EDGE_LEASES: on (default) or off
	UsageLog  string   // LECTERN_EDGE_USAGE_LOG: default var/edge-usage-<port>.log
	RevokeURL string   // LECTERN_EDGE_REVOKE_URL: default http://<the listen address>/internal/revoke
	// MetricsAddr is LECTERN_EDGE_METRICS_ADDR: where GET /metrics is
	// served behind the admin token (metrics.go), or "off" (the default).
	MetricsAddr string
	// SecretAccept is LECTERN_SECRET_ACCEPT, the origins': the secret
	// accepted beside Secret while it is rotated.
	SecretAccept string
	// SignV2 is LECTERN_EDGE_SIGN_V2=1: sign by the previous release's
	// rule while its origins still serve (docs/upgrading.md).
	SignV2 bool

	TestClock  bool   // LECTERN_TEST_CLOCK=1
	LogFormat  string // LECTERN_LOG_FORMAT: json or text
	LogLevel   string // LECTERN_LOG_LEVEL: debug, info, warn or error
	AdminAddr  string // LECTERN_ADMIN_ADDR, for the test clock
	AdminToken string // LECTERN_ADMIN_TOKEN, for the test clock and the metrics (default: var/admin-token's)

	// Not from the environment (zero: the defaults; tests set short
	// ones). Limits are the listener's, as at the origin (httpsrv.Default);
	// ForwardTimeout, OriginBackoff and DialTimeout are wazero.Config's.
	Limits         httpsrv.Limits
	ForwardTimeout time.Duration
	OriginBackoff  time.Duration
	DialTimeout    time.Duration
}

// parseConfig reads the settings from args and getenv.
func parseConfig(args []string, getenv func(string) string) (config, error) {
	return parseCommandLine(args, getenv, io.Discard)
}

// parseCommandLine is parseConfig answering -h and -version on stdout,
// with cmdline.ErrDone.
func parseCommandLine(args []string, getenv func(string) string, stdout io.Writer) (config, error) {
	var c config
	var originAddr, originURL, instances, leases string
	fs := cmdline.New("edge", getenv)
	fs.Env(&c.Addr, "LECTERN_EDGE_ADDR", "addr", "127.0.0.1:8787", "edge address")
	fs.Env(&originAddr, "LECTERN_ORIGIN_ADDR", "origin-addr", "127.0.0.1:8080", "origin address (the default of -origin-url)")
	fs.Env(&originURL, "LECTERN_ORIGIN_URL", "origin-url", "", "origin base URL, or several, comma-separated (default: http://<origin-addr>, i.e. http://127.0.0.1:8080)")
	fs.Env(&c.IdPAddr, "LECTERN_IDP_ADDR", "idp-addr", "127.0.0.1:9090",
		"identity provider of a single dev origin: only the default issuer, http://<idp-addr> (unused once the issuer is set)")
	fs.Env(&c.Issuer, "LECTERN_ISSUER", "issuer", "",
		"token issuer: the origins' LECTERN_ISSUER, the URL in front of their identity providers (default: http://<idp-addr>)")
	fs.Env(&c.JWKSURL, "LECTERN_JWKS_URL", "jwks-url", "",
		"JWKS URL (default: <issuer>/.well-known/jwks.json, which every origin's identity provider serves; set it only for another OAuth2 server)")
	fs.Env(&c.Audience, "LECTERN_AUDIENCE", "audience", "lectern-api", "token audience")
	fs.Env(&c.Secret, "LECTERN_SECRET", "secret", "", "deployment secret shared with the origin (default: the contents of "+secretFile+")")
	fs.Env(&c.SecretAccept, "LECTERN_SECRET_ACCEPT", "secret-accept", "", "during a rotation of LECTERN_SECRET, the other secret, the origins': still accepted, never signed with (default: none)")
	fs.Env(&c.URLKeys, "LECTERN_URL_KEYS", "url-keys", "", "kid=secret,… keys of the signed download links, or derived for the one derived from the secret, the origin's (default: derived)")
	fs.Env(&c.PublicURL, "LECTERN_PUBLIC_URL", "public-url", "", "the API's public base URL (default: http://<addr>)")
	fs.Env(&c.Wasm, "LECTERN_EDGE_WASM", "wasm", "build/worker.wasm", "the edge module (make worker builds it)")
	fs.Env(&instances, "LECTERN_EDGE_INSTANCES", "instances", "", "module instances serving in parallel (default: GOMAXPROCS, at most 4)")
	fs.Env(&leases, "LECTERN_EDGE_LEASES", "leases", "on", "answer revalidations within leases from the origin: on or off (docs/edge.md, Leases)")
	fs.Env(&c.UsageLog, "LECTERN_EDGE_USAGE_LOG", "usage-log", "", "the leases' usage log, one per edge (default: var/edge-usage-<port>.log)")
	fs.Env(&c.RevokeURL, "LECTERN_EDGE_REVOKE_URL", "revoke-url", "", "where the origin reaches this edge's revoke endpoint (default: http://<addr>"+lease.RevokePath+")")
	fs.Env(&c.MetricsAddr, "LECTERN_EDGE_METRICS_ADDR", "metrics-addr", "off",
		"address of the Prometheus metrics (GET /metrics, behind the admin token), or off")
	fs.Switch(&c.SignV2, "LECTERN_EDGE_SIGN_V2", "sign-v2",
		"sign the calls to the origins by the previous release's rule (v2), for origins of that release: only during a rolling upgrade (docs/upgrading.md)")
	fs.Switch(&c.TestClock, "LECTERN_TEST_CLOCK", "test-clock", "follow the origin's admin test clock; never in production")
	fs.Env(&c.LogFormat, "LECTERN_LOG_FORMAT", "log-format", telemetry.DefaultFormat, "access and event log format: json or text")
	fs.Env(&c.LogLevel, "LECTERN_LOG_LEVEL", "log-level", telemetry.DefaultLevel, "least level logged: debug, info, warn or error")
	fs.Env(&c.AdminAddr, "LECTERN_ADMIN_ADDR", "admin-addr", "127.0.0.1:8081", "admin API address (for the test clock)")
	fs.Env(&c.AdminToken, "LECTERN_ADMIN_TOKEN", "admin-token", "",
		"admin API bearer token: the test clock's, and the metrics' (default for the metrics: the contents of "+adminTokenFile+")")
	if err := fs.Parse(args, stdout); err != nil {
		return c, err
	}
	if originURL == "" {
		originURL = "http://" + originAddr
	}
	if _, err := telemetry.NewLogger(io.Discard, c.LogFormat, c.LogLevel); err != nil {
		return c, err
	}
	var err error
	if c.Origins, err = wazero.ParseOrigins(originURL); err != nil {
		return c, fmt.Errorf("LECTERN_ORIGIN_URL: %w", err)
	}
	// The keys are found from the issuer alone: LECTERN_IDP_ADDR only
	// names the issuer of make run's one origin. Without LECTERN_JWKS_URL
	// the issuer is the origins' dev provider, whose tokens name it
	// without a trailing slash (the origin trims it the same way), and
	// which serves its JWKS under it on every origin.
	if c.Issuer == "" {
		c.Issuer = "http://" + c.IdPAddr
	}
	if c.JWKSURL == "" {
		c.Issuer = strings.TrimSuffix(c.Issuer, "/")
		c.JWKSURL = c.Issuer + "/.well-known/jwks.json"
	}
	c.Instances = min(runtime.GOMAXPROCS(0), 4)
	if instances != "" {
		n, err := strconv.Atoi(instances)
		if err != nil || n < 1 || n > 256 {
			return c, fmt.Errorf("instances %q: want an integer from 1 to 256", instances)
		}
		c.Instances = n
	}
	switch leases {
	case "on":
		c.Leases = true
	case "off":
	default:
		return c, fmt.Errorf("LECTERN_EDGE_LEASES %q: want on or off", leases)
	}
	if c.RevokeURL != "" {
		if u, err := url.Parse(c.RevokeURL); err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return c, fmt.Errorf("LECTERN_EDGE_REVOKE_URL %q: want an http or https URL", c.RevokeURL)
		}
	}
	if c.URLKeys != "" {
		if _, err := link.ParseKeys(c.URLKeys); err != nil {
			return c, err
		}
	}
	if c.SecretAccept != "" && len(c.SecretAccept) < 32 {
		return c, errors.New("LECTERN_SECRET_ACCEPT must be at least 32 characters, as LECTERN_SECRET")
	}
	if c.TestClock && c.AdminToken == "" {
		return c, errors.New("LECTERN_TEST_CLOCK=1 needs LECTERN_ADMIN_TOKEN to read the origin's clock")
	}
	return c, nil
}

// secretFile is where the origin keeps the secret of a dev stack when
// LECTERN_SECRET is unset (origin/internal/private/kept.go). The edge only
// reads it: the origin creates it.
const secretFile = "var/secret"

func loadSecret(configured string) (string, error) {
	if configured == "" {
		b, err := os.ReadFile(secretFile)
		if err != nil {
			return "", fmt.Errorf("LECTERN_SECRET is unset and %s is unreadable (start the origin first: it creates it): %w", secretFile, err)
		}
		configured = strings.TrimSpace(string(b))
	}
	if len(configured) < 32 {
		return "", errors.New("LECTERN_SECRET must be at least 32 characters")
	}
	return configured, nil
}

// run serves until ctx is done.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, err := parseCommandLine(args, getenv, stdout)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, stdout)
}

// serve serves the edge configured by cfg until ctx is done.
func serve(ctx context.Context, cfg config, stdout io.Writer) error {
	secret, err := loadSecret(cfg.Secret)
	if err != nil {
		return err
	}
	wasm, err := os.ReadFile(cfg.Wasm)
	if err != nil {
		return fmt.Errorf("read the edge module (make worker builds it): %w", err)
	}
	log, err := telemetry.NewLogger(stdout, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return err
	}
	began := time.Now()
	mod, err := wazero.Compile(ctx, wasm)
	if err != nil {
		return err
	}
	defer mod.Close(context.Background())
	compiled := time.Since(began)

	metricsLn, metricsToken, err := listenMetrics(cfg)
	if err != nil {
		return err
	}
	if metricsLn != nil {
		defer metricsLn.Close()
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen edge: %w", err)
	}
	met := newMetrics(cfg.Origins)
	hcfg := hostConfig(cfg, ln.Addr(), secret, log)
	hcfg.Observer = met
	h, err := wazero.New(ctx, mod, hcfg)
	if err != nil {
		ln.Close()
		return err
	}
	defer h.Close(context.Background())
	met.instances(h.Pool)

	announce(stdout, cfg, ln.Addr(), mod, compiled, hcfg, metricsLn)
	return serveHTTP(ctx, cfg, log, h, met, ln, metricsLn, metricsToken)
}

// listenMetrics opens the metrics listener and reads the token that
// guards it, unless cfg turns the metrics off (nil, "").
func listenMetrics(cfg config) (net.Listener, string, error) {
	if cfg.MetricsAddr == "off" {
		return nil, "", nil
	}
	token, err := loadMetricsToken(cfg.AdminToken)
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil {
		return nil, "", fmt.Errorf("listen metrics: %w", err)
	}
	return ln, token, nil
}

// hostConfig is the host's configuration for an edge listening on addr:
// cfg's settings with their defaults filled in from that address (the
// public URL, the revoke endpoint and the usage log), and its clock.
func hostConfig(cfg config, addr net.Addr, secret string, log *slog.Logger) wazero.Config {
	edgeURL := "http://" + addr.String()
	public := cfg.PublicURL
	if public == "" {
		public = edgeURL
	}
	now := time.Now
	if cfg.TestClock {
		now = (&adminClock{url: "http://" + cfg.AdminAddr + "/admin/v1/clock", token: cfg.AdminToken, log: log}).Now
	}
	revoke, usageLog := cfg.RevokeURL, cfg.UsageLog
	if revoke == "" {
		revoke = edgeURL + lease.RevokePath
	}
	if usageLog == "" {
		_, port, _ := net.SplitHostPort(addr.String())
		usageLog = filepath.Join("var", "edge-usage-"+port+".log")
	}
	if !cfg.Leases {
		revoke, usageLog = "", ""
	}
	return wazero.Config{
		Leases: cfg.Leases, Revoke: revoke, UsageLog: usageLog,
		Origins: cfg.Origins, JWKSURL: cfg.JWKSURL, Issuer: cfg.Issuer, Audience: cfg.Audience,
		Secret: secret, SecretAccept: cfg.SecretAccept, SignV2: cfg.SignV2, URLKeys: cfg.URLKeys, ResourceMetadata: strings.TrimSuffix(public, "/") + "/.well-known/oauth-protected-resource",
		Instances: cfg.Instances, Now: now, Stderr: os.Stderr, Logger: log, ForwardTimeout: cfg.ForwardTimeout,
		OriginBackoff: cfg.OriginBackoff, DialTimeout: cfg.DialTimeout,
	}
}

// announce prints what the edge serves, at addr, and with what: its
// "API (edge)" line is the ready line its callers wait for
// (internal/proctest).
func announce(stdout io.Writer, cfg config, addr net.Addr, mod *wazero.Module, compiled time.Duration, hcfg wazero.Config, metricsLn net.Listener) {
	edgeURL := "http://" + addr.String()
	fmt.Fprintf(stdout, "\nLectern edge\n  API (edge)         %s/v1\n  module             %s: %s, %d KB, compiled in %s, %d instance(s)\n",
		edgeURL, cfg.Wasm, mod.Toolchain, (mod.Size+1023)/1024, compiled.Round(time.Millisecond), cfg.Instances)
	if len(cfg.Origins) == 1 {
		fmt.Fprintf(stdout, "  origin             %s\n", cfg.Origins[0])
	} else {
		fmt.Fprintf(stdout, "  origins            %s (round robin; failover on connection failures)\n", strings.Join(cfg.Origins, ", "))
	}
	if cfg.Leases {
		fmt.Fprintf(stdout, "  leases             on: usage log %s, revoke endpoint %s\n", hcfg.UsageLog, hcfg.Revoke)
	} else {
		fmt.Fprintf(stdout, "  leases             off: every revalidation is gated at the origin\n")
	}
	if metricsLn != nil {
		fmt.Fprintf(stdout, "  metrics            http://%s/metrics (Authorization: Bearer <the admin token>)\n", metricsLn.Addr())
	}
	if cfg.TestClock {
		fmt.Fprintf(stdout, "  clock              the origin's test clock (http://%s/admin/v1/clock)\n", cfg.AdminAddr)
	}
	fmt.Fprintf(stdout, "\nThrough the edge, with a token from the identity provider:\n  curl -s -H \"Authorization: Bearer $TOKEN\" %s/v1/tiers\n", edgeURL)
}

// serveHTTP serves h on ln, and the metrics on metricsLn when not nil,
// until one of them fails or ctx is done; then it shuts them down,
// waiting up to 10 s for the requests in flight.
func serveHTTP(ctx context.Context, cfg config, log *slog.Logger, h *wazero.Host, met *metrics, ln, metricsLn net.Listener, metricsToken string) error {
	// The origin's listeners' limits (internal/httpsrv), and its answers to
	// what net/http refuses, with the host's request ids; in them the
	// health endpoints, then the access log, which also settles the
	// request's traceparent before the module copies it to the origin.
	scfg := httpsrv.Config{Limits: cfg.Limits, IDPrefix: "edge_", Logger: log}
	access := &telemetry.Access{Log: log, Edge: true}
	srv := httpsrv.New(readiness(cfg, log).Wrap(access.Wrap(met.wrap(h))), scfg)
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(httpsrv.Listener(ln, scfg)) }()
	// The metrics listener bounds its clients as the public one does.
	var msrv *http.Server
	if metricsLn != nil {
		mcfg := httpsrv.Config{Limits: cfg.Limits, IDPrefix: "edge_", Logger: log}
		msrv = httpsrv.New(met.handler(metricsToken), mcfg)
		go func() { errc <- msrv.Serve(httpsrv.Listener(metricsLn, mcfg)) }()
	}
	select {
	case err := <-errc:
		if msrv != nil {
			msrv.Close()
		}
		srv.Close()
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if msrv != nil {
		err = errors.Join(err, msrv.Shutdown(sctx))
	}
	return err
}

// healthClient makes the readiness checks' calls; each check is bounded
// by telemetry.Health's timeout too.
var healthClient = &http.Client{Timeout: telemetry.DefaultTimeout}

// readiness is the edge's /healthz and /readyz. It serves only once the
// module is compiled and its instances configured (serve), so what
// /readyz checks is what the module needs from elsewhere: the issuer's
// JWKS answers with a key, and an origin answers its /healthz (one is
// enough: the host fails over to it).
func readiness(cfg config, log *slog.Logger) *telemetry.Health {
	origins := make([]func(context.Context) error, len(cfg.Origins))
	for i, o := range cfg.Origins {
		origins[i] = telemetry.HealthCheck(healthClient, o)
	}
	return &telemetry.Health{Log: log, Checks: []telemetry.Check{
		{Name: "jwks", Func: telemetry.JWKSCheck(healthClient, cfg.JWKSURL)},
		{Name: "origin", Func: telemetry.AnyOf(origins...)},
	}}
}

// adminClock reads the origin's test clock. A failed read keeps the last
// offset it saw.
type adminClock struct {
	url, token string
	log        *slog.Logger
	offset     atomic.Int64 // seconds
}

var clockClient = &http.Client{Timeout: 2 * time.Second}

func (c *adminClock) Now() time.Time {
	req, _ := http.NewRequest("GET", c.url, nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := clockClient.Do(req)
	if err == nil {
		var st struct {
			OffsetSeconds *int64 `json:"offsetSeconds"`
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		switch {
		case err == nil && resp.StatusCode == 200 && st.OffsetSeconds != nil:
			c.offset.Store(*st.OffsetSeconds)
		case err == nil:
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
	}
	if err != nil {
		c.log.Warn("edge: read the test clock", "err", err)
	}
	return time.Now().Add(time.Duration(c.offset.Load()) * time.Second)
}
