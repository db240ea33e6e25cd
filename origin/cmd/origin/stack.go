package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lectern-api/lectern/internal/telemetry"
	"github.com/lectern-api/lectern/origin/admin"
	"github.com/lectern-api/lectern/origin/bundles"
	"github.com/lectern-api/lectern/origin/clock"
	"github.com/lectern-api/lectern/origin/idp"
	"github.com/lectern-api/lectern/origin/internal/pgmig"
	"github.com/lectern-api/lectern/origin/lease"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/server"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/wiring"
	"github.com/lectern-api/lectern/shared/id"
	"github.com/lectern-api/lectern/shared/scope"
)

// stack is the running origin: its listeners and what they serve.
type stack struct {
	OriginURL, IdPURL, AdminURL string // IdPURL and AdminURL are "" when off
	AdminToken                  string
	adminTokenFile              string // where AdminToken is kept; "" when configured

	content atomic.Pointer[server.Content]
	// reloading is held by the corpus reload in progress: reloads run
	// one at a time (issue #13: four at once took the origin from 0.8 to
	// 2.8 GB, each holding a whole corpus and its indexes).
	reloading sync.Mutex
	clock     *clock.Clock
	store     store.Store
	meters    meter.Store
	bundles   *bundles.Store // the export bundles built (LECTERN_BUNDLE_DIR)
	leases    *lease.Manager // nil when the meters keep no leases
	servers   wiring.Servers // every listener, under config.Limits
	log       *slog.Logger
	metrics   *telemetry.Metrics // served at the admin API's GET /metrics
	health    *telemetry.Health  // /healthz and /readyz on the public API
	// jwksReady is the readiness check of the token-verification keys
	// (identity.go).
	jwksReady func(ctx context.Context) error

	stopWatch func() // stops the test clock's Watch and waits for it

	// Following the deployment's corpus (corpus.go): the record this
	// origin last failed to load, and when (held under reloading), and
	// the stop of the loop that reads the record.
	failed     corpusFailure
	stopFollow func()
	stopPrune  func() // stops the pruning of ended leases

	autoMemLimit bool        // config.autoMemLimit (memory.go)
	resettle     *time.Timer // the settleMemory after a swap (held under reloading)
}

// start opens everything and serves in the background. Addresses may be
// ":0"-style; the bound ones are in the returned stack.
func start(ctx context.Context, cfg config, stdout io.Writer) (_ *stack, err error) {
	// Before anything: a call the edge signed while this process loaded
	// (and queued while it did not listen yet) is no replay of the last
	// run's.
	began := time.Now()
	log, err := telemetry.NewLogger(stdout, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	st := &stack{log: log, metrics: telemetry.NewMetrics()}
	// A peer's migration or key rotation in progress is waited for, and
	// the wait logged here (pgmig.Retry).
	ctx = pgmig.WithLogger(ctx, log)
	defer func() {
		if err != nil {
			st.Close()
		}
	}()
	st.autoMemLimit = cfg.autoMemLimit
	if cfg.AdminAddr != off {
		if st.AdminToken, st.adminTokenFile, err = loadAdminToken(cfg.AdminToken, st.log); err != nil {
			return nil, err
		}
	}
	st.servers = wiring.Servers{Limits: cfg.Limits, Logger: st.log}

	// The slow part of a start (the corpus: seconds on a large one) comes
	// before the listeners are opened, so that no connection waits in
	// the kernel's queue for an origin that cannot answer yet: until it
	// listens, a client (an edge) is refused at once and tries another.
	secret, err := loadSecret(cfg.Secret, !wiring.IsPostgres(cfg.DB), st.log)
	if err != nil {
		return nil, err
	}
	if !wiring.IsPostgres(cfg.DB) {
		// Before the corpus, which may be generated into var/ too.
		if err := secureDB(st.log, cfg.DB); err != nil {
			return nil, err
		}
	}
	if st.store, st.meters, err = wiring.OpenStores(ctx, cfg.DB, st.metrics.MeterCommit); err != nil {
		return nil, err
	}
	if err := st.openCorpus(ctx, cfg.Corpus, stdout); err != nil {
		return nil, err
	}
	st.settleMemory()
	if err := st.openClock(ctx, cfg.TestClock); err != nil {
		return nil, err
	}

	originLn, idpLn, adminLn, err := listenAll(cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil { // those not served yet; Close shut down the others
			closeAll(originLn, idpLn, adminLn)
		}
	}()
	st.OriginURL, st.IdPURL, st.AdminURL = baseURL(originLn), baseURL(idpLn), baseURL(adminLn)
	if cfg.Issuer == "" {
		// SQLite and a provider of its own (parseConfig): tokens name
		// the address it listens on.
		cfg.Issuer = st.IdPURL
	}
	if cfg.PublicURL == "" {
		cfg.PublicURL = st.OriginURL
	}
	d := deployment(cfg, secret)
	provider, verifier, err := st.identity(ctx, d, cfg)
	if err != nil {
		return nil, err
	}
	progress, err := wiring.ProgressOf(st.store)
	if err != nil {
		return nil, err
	}
	st.metrics.CorpusVersion(func() string { return st.content.Load().ContentVersion })
	st.leases = d.Leases(st.meters, wiring.LeaseSettings{Off: !cfg.Leases, TTL: cfg.leaseTTL,
		Retention: cfg.leaseRetention, OnRevoke: st.metrics.LeaseRevoke, Edges: cfg.edgeURLs}, st.clock.Now, st.log)
	if st.leases != nil {
		st.stopPrune = st.leases.StartPruning()
	}
	kept, err := bundles.Open(cfg.BundleDir, cfg.bundleMax)
	if err != nil {
		return nil, err
	}
	st.bundles = kept
	api := d.API(wiring.Parts{Started: began, Store: st.store, Meters: &wiring.Meters{Store: st.meters, Metrics: st.metrics}, Progress: progress,
		Auth: verifier, Content: st.content.Load, Now: st.clock.Now, Logger: st.log, Leases: st.leases, Bundles: kept})
	st.health = &telemetry.Health{Log: st.log, Checks: st.readiness()}
	var leases admin.Leases
	if st.leases != nil {
		leases = st.leases
	}
	adm := admin.Handler(admin.Config{
		Leases:    leases,
		Token:     st.AdminToken,
		Store:     st.store,
		Clock:     st.clock,
		TestClock: cfg.TestClock,
		CreateClient: func(ctx context.Context, orgID string, scopes, grantTypes, redirectURIs []string) (string, string, error) {
			return idp.CreateClient(ctx, st.store, st.clock.Now(), orgID, scopes, grantTypes, redirectURIs)
		},
		Reload: st.reload,
		Orgs:   api,
		Meters: st.meters,
		Forensics: &admin.Forensics{Keys: d.Forensic(), Links: d.Links(),
			TranscriptLesson: api.TranscriptLesson},
		Logger:  st.log,
		Ready:   func() bool { return len(st.health.Ready(ctx)) == 0 },
		Metrics: st.metrics.Handler(),
	})
	access := &telemetry.Access{Log: st.log, Metrics: st.metrics}
	st.servers.Serve(originLn, st.health.Wrap(access.Wrap(api)))
	if idpLn != nil {
		st.servers.Serve(idpLn, provider.Handler())
	}
	if adminLn != nil {
		st.servers.ServeAdmin(adminLn, adm)
	}
	st.followCorpus(cfg.CorpusSync)

	if err := st.demo(ctx, cfg, stdout); err != nil {
		return nil, err
	}
	return st, nil
}

// readiness is what GET /readyz (and the admin API's health) checks: the
// database answers, a corpus is loaded, and the token-verification keys
// are there (identity.go). Each is one small read.
func (st *stack) readiness() []telemetry.Check {
	return []telemetry.Check{
		{Name: "database", Func: func(ctx context.Context) error {
			// One indexed read; an organisation of that id need not exist.
			_, err := st.store.GetOrg(ctx, "readyz-probe")
			if errors.Is(err, store.ErrNotFound) {
				err = nil
			}
			return err
		}},
		{Name: "corpus", Func: func(context.Context) error {
			if st.content.Load() == nil {
				return errors.New("no corpus loaded")
			}
			return nil
		}},
		{Name: "jwks", Func: st.jwksReady},
	}
}

// deployment is what cfg and the secret make of the origins' common
// settings.
func deployment(cfg config, secret []byte) wiring.Deployment {
	return wiring.Deployment{Secret: secret, URLKeys: cfg.urlKeys, PublicURL: cfg.PublicURL, Issuer: cfg.Issuer, Audience: cfg.Audience,
		LicenseURL: cfg.LicenseURL, OriginHosts: cfg.originHosts}
}

// clockSync is how often a test clock adopts the moves other origins on
// its database made (docs/decisions/admin-api-and-the-licence-envelope.md, the test clock).
const clockSync = time.Second

// openClock makes the stack's clock. A test clock's offset is kept in the
// store, so a restart keeps it, and synced every clockSync from it, so the
// origins sharing a PostgreSQL database agree. Without the test clock the
// clock is the wall clock, whatever offset a test run left in the
// database.
func (st *stack) openClock(ctx context.Context, testClock bool) error {
	if !testClock {
		st.clock = clock.New(nil)
		return nil
	}
	c, err := clock.Stored(ctx, nil, st.store)
	if err != nil {
		return err
	}
	st.clock = c
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Watch(wctx, clockSync, func(err error) { st.log.Warn("origin: sync the test clock", "err", err) })
	}()
	st.stopWatch = func() { cancel(); <-done }
	return nil
}

// Close stops serving, letting requests in flight finish, then closes
// the stores. The public API drains first, while the identity provider
// (its JWKS) and the admin API (the edge's test clock) still answer; only
// once every server has drained are the meters closed: their Close
// commits what is queued, and no handler is left to queue more.
func (st *stack) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := []error{st.servers.Shutdown(ctx)}
	if st.stopWatch != nil {
		st.stopWatch()
	}
	if st.stopFollow != nil {
		st.stopFollow()
	}
	if st.stopPrune != nil {
		st.stopPrune()
	}
	st.reloading.Lock()
	if st.resettle != nil {
		st.resettle.Stop()
	}
	st.reloading.Unlock()
	if st.meters != nil {
		errs = append(errs, st.meters.Close())
	}
	if st.store != nil {
		errs = append(errs, st.store.Close())
	}
	if st.bundles != nil {
		errs = append(errs, st.bundles.Close())
	}
	return errors.Join(errs...)
}

// demoOrg is the organisation make run creates on a new database.
const demoOrg = "demo"

// demo prints the addresses served and, under make run (cfg.Demo),
// creates the demo organisation and its client on a new database and
// prints the credentials, the admin token and a curl walk-through; on a
// database that has it, the walk-through creates a client with adminctl
// first. Every shell variable the walk-through uses, it sets
// (TestWalkThrough). Without cfg.Demo nothing is created and no secret
// printed: a generated admin token is named by its file.
func (st *stack) demo(ctx context.Context, cfg config, stdout io.Writer) error {
	fmt.Fprintf(stdout, "\nLectern origin stack\n  API (direct)       %s/v1\n  identity provider  %s\n  admin API          %s\n",
		st.OriginURL, orOff(st.IdPURL), orOff(st.AdminURL))
	switch {
	case st.adminTokenFile != "" && cfg.Demo:
		fmt.Fprintf(stdout, "  admin token        %s   (kept in %s; set LECTERN_ADMIN_TOKEN to choose one)\n", st.AdminToken, st.adminTokenFile)
	case st.adminTokenFile != "":
		fmt.Fprintf(stdout, "  admin token        kept in %s (readable by this user only)\n", st.adminTokenFile)
	}
	if !cfg.Demo {
		return nil
	}
	_, err := st.store.GetOrg(ctx, demoOrg)
	if errors.Is(err, store.ErrNotFound) {
		o := licence.NewOrg(st.clock.Now())
		o.ID, o.Name, o.Grants = demoOrg, "Demo Organisation", append([]string(nil), id.Tiers...)
		// ErrConflict: another origin on the database, started at the
		// same time, created it first.
		err = st.store.CreateOrg(ctx, o)
		if err == nil {
			return st.demoClient(ctx, cfg, stdout)
		}
	}
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return err
	}
	fmt.Fprintf(stdout, "\nThe demo organisation %q exists: its first client's secret was shown once, when it was created.\n", demoOrg)
	if st.AdminURL == "" {
		fmt.Fprintf(stdout, "Create a client of it with `adminctl client create %s -scopes content.read` on an admin API of the deployment (this origin has none).\n", demoOrg)
		return nil
	}
	// adminctl prints the answer's JSON pretty-printed.
	token := ""
	if st.adminTokenFile != "" {
		token = "LECTERN_ADMIN_TOKEN=$(cat " + st.adminTokenFile + ") "
	} else {
		fmt.Fprintln(stdout, "(adminctl reads LECTERN_ADMIN_TOKEN: export the one this origin was started with.)")
	}
	fmt.Fprintf(stdout, `
Try it with a new client (adminctl client create; its secret is shown once):
  CLIENT=$(%sgo run ./tools/adminctl -addr %s client create %s -scopes content.read)
  CLIENT_ID=$(printf '%%s' "$CLIENT" | sed -n 's/.*"clientId": *"\([^"]*\)".*/\1/p')
  CLIENT_SECRET=$(printf '%%s' "$CLIENT" | sed -n 's/.*"clientSecret": *"\([^"]*\)".*/\1/p')
%s`, token, st.AdminURL, demoOrg, st.tryIt(cfg, `"$CLIENT_ID:$CLIENT_SECRET"`))
	return nil
}

// demoClient creates the new demo organisation's client and prints its
// credentials and the walk-through.
func (st *stack) demoClient(ctx context.Context, cfg config, stdout io.Writer) error {
	clientID, clientSecret, err := idp.CreateClient(ctx, st.store, st.clock.Now(), demoOrg, scope.All,
		[]string{"client_credentials"}, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, `
Created the demo organisation %q (every tier granted) and its client:
  client id      %s
  client secret  %s   (shown once)

Try it:
%s`, demoOrg, clientID, clientSecret, st.tryIt(cfg, "'"+clientID+":"+clientSecret+"'"))
	return nil
}

// tryIt is the walk-through's last lines: a token for the client whose
// credentials (user:password, quoted for the shell) are given, and two
// calls with it.
func (st *stack) tryIt(cfg config, credentials string) string {
	return fmt.Sprintf(`  TOKEN=$(curl -s -u %s \
    -d grant_type=client_credentials -d 'scope=service-api/content.read' \
    %s/oauth2/token | sed 's/.*"access_token":"\([^"]*\)".*/\1/')
  curl -s -H "Authorization: Bearer $TOKEN" %s/v1/license
  curl -s -H "Authorization: Bearer $TOKEN" %s/v1/tiers
`, credentials, tokenBase(st.IdPURL, cfg.Issuer), st.OriginURL, st.OriginURL)
}
