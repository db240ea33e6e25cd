package wiring

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/lectern-api/lectern/internal/httpsrv"
	"github.com/lectern-api/lectern/internal/telemetry"
	"github.com/lectern-api/lectern/origin/admin"
	"github.com/lectern-api/lectern/origin/bundles"
	"github.com/lectern-api/lectern/origin/clock"
	"github.com/lectern-api/lectern/origin/corpus/follow"
	"github.com/lectern-api/lectern/origin/idp"
	"github.com/lectern-api/lectern/origin/internal/pgmig"
	"github.com/lectern-api/lectern/origin/internal/private"
	"github.com/lectern-api/lectern/origin/lease"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/server"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/webhook"
	"github.com/lectern-api/lectern/shared/link"
)

// Options are what an Origin is opened with: origin/cmd/origin's settings
// (README, Environment), typed. The zero value of a field is the default
// the field says.
type Options struct {
	// The listeners' addresses (":0"-style allowed). OriginAddr, the
	// public API's, is required; IdPAddr and AdminAddr "" are off: no
	// identity provider, no admin API on this origin.
	OriginAddr, IdPAddr, AdminAddr string
	// AdminToken is the admin API's bearer token; "": the one kept in
	// var/admin-token (private.AdminToken), when the admin API is on.
	AdminToken string
	DB         string // a SQLite path or a postgres:// URL
	// Corpus is the configured corpus directory (follow.Config.Dir):
	// generated when missing.
	Corpus string
	// CorpusSync is how often the deployment's corpus record is read
	// (follow.Config.Every); zero: follow.SyncEvery.
	CorpusSync time.Duration
	TestClock  bool // the admin API's test clock; never in production
	// Secret is the deployment secret (LECTERN_SECRET); "": var/secret,
	// SQLite only (private.Secret).
	Secret string
	// SecretAccepted is the secret accepted beside Secret while it is
	// rotated (LECTERN_SECRET_ACCEPT, Deployment.Accepted); "": none.
	SecretAccepted string
	URLKeys        link.Keys // the download links' keys; zero: derived from Secret
	// PublicURL is the API's base URL; "": the bound OriginURL.
	PublicURL  string
	LicenseURL string
	// Issuer is the tokens' iss; "": the bound IdPURL. JWKSURL, when set,
	// is another OAuth2 server's keys; "": the dev provider's, read from
	// the database.
	Issuer, JWKSURL, Audience string
	// Leases are the lease settings; Open counts revocations in the
	// metrics (OnRevoke is its own).
	Leases LeaseSettings
	// OriginHosts are the names the edges reach this origin by
	// (Deployment.OriginHosts).
	OriginHosts []string
	// BcryptSecrets keeps client secrets in bcrypt, the one form the
	// previous release checks (Deployment.BcryptSecrets).
	BcryptSecrets bool
	// EdgeAcceptV2 takes the previous release's edge signatures
	// (Deployment.EdgeAcceptV2).
	EdgeAcceptV2 bool
	BundleDir    string // where the export bundles are kept; "": BundleDirOf the public listener
	BundleMax    int64  // the most bytes of bundles kept; zero: bundles.DefaultMaxBytes
	// BundleReserve is the bytes kept free on the bundles' volume; zero:
	// bundles.DefaultReserve's, negative: none.
	BundleReserve int64
	// BundleOrgShare is the percent of BundleMax one organisation's
	// bundles may hold; zero: bundles.DefaultOrgShare. BundleBuildsPerHour
	// bounds the bundles built for one organisation a UTC hour; zero:
	// bundles.DefaultBuildsPerHour, negative: no bound.
	BundleOrgShare      int
	BundleBuildsPerHour int
	// Limits bound what a client may take of each listener; zero fields
	// are httpsrv.Default's.
	Limits httpsrv.Limits
	// Webhooks are the webhook settings (webhooks.go).
	Webhooks WebhookSettings
	// MemoryLimit: the origin sets the Go runtime's memory limit itself
	// (memory.go), as it does when GOMEMLIMIT is unset.
	MemoryLimit bool
	// Log is the origin's event log, and its access log unless AccessLog
	// is set; nil: nothing is logged.
	Log *slog.Logger
	// AccessLog, when set, writes the public API's access log lines
	// instead of Log (tools/bench: formatted as shipped, written nowhere).
	AccessLog *slog.Logger
	// Stdout is told of a corpus being generated; nil: nothing.
	Stdout io.Writer
	// Started is when the origin's process started (server.Config.Started);
	// zero: when Open began.
	Started time.Time
}

// Origin is a running origin: its listeners and what they serve (the
// public API behind its access log, metrics and health, the identity
// provider, the admin API), its stores, corpus and clock. Open makes one;
// Close stops it.
type Origin struct {
	OriginURL, IdPURL, AdminURL string // IdPURL and AdminURL are "" when off
	AdminToken                  string
	AdminTokenFile              string // where AdminToken is kept; "" when configured

	issuer    string // the tokens' iss, resolved
	publicURL string // the API's base URL, resolved: LECTERN_URL of make run's lectern sync
	corpus    *follow.Corpus
	clock     *clock.Clock
	store     store.Store
	meters    meter.Store
	bundles   *bundles.Store // the export bundles built (LECTERN_BUNDLE_DIR)
	leases    *lease.Manager // nil when the meters keep no leases
	api       *server.Server
	handler   http.Handler // the public API as served: health, access log, api
	servers   Servers      // every listener, under Options.Limits
	log       *slog.Logger
	metrics   *telemetry.Metrics // served at the admin API's GET /metrics
	health    *telemetry.Health  // /healthz and /readyz on the public API
	// jwksReady is the readiness check of the token-verification keys
	// (identity.go).
	jwksReady func(ctx context.Context) error
	// clients registers the clients of the admin API and make run's
	// demo, their secrets hashed as the deployment's identity provider
	// stores them (idp.Config.CreateClient).
	clients idp.Config

	stopWatch func() // stops the test clock's Watch and waits for it
	stopPrune func() // stops the pruning of ended leases
	stopOnce  func() // stops the pruning of the keys of requests billed once

	webhooks     *webhook.Outbox // the events' outbox (webhooks.go)
	stopWebhooks func()          // stops its delivery loop and waits for it
}

// Open opens everything and serves in the background. The bound
// addresses are in the returned Origin. On an error nothing is left open
// or served.
func Open(ctx context.Context, opts Options) (_ *Origin, err error) {
	// Before anything: a call the edge signed while this process loaded
	// (and queued while it did not listen yet) is no replay of the last
	// run's.
	began := opts.Started
	if began.IsZero() {
		began = time.Now()
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	o := &Origin{log: log, metrics: telemetry.NewMetrics()}
	// A peer's migration or key rotation in progress is waited for, and
	// the wait logged here (pgmig.Retry).
	ctx = pgmig.WithLogger(ctx, log)
	defer func() {
		if err != nil {
			o.Close()
		}
	}()
	if opts.AdminAddr != "" {
		if o.AdminToken, o.AdminTokenFile, err = private.AdminToken(opts.AdminToken, o.log); err != nil {
			return nil, err
		}
	}
	o.servers = Servers{Limits: opts.Limits, Logger: o.log}

	// The slow part of a start (the corpus: seconds on a large one) comes
	// before the listeners are opened, so that no connection waits in
	// the kernel's queue for an origin that cannot answer yet: until it
	// listens, a client (an edge) is refused at once and tries another.
	secret, err := o.openData(ctx, opts)
	if err != nil {
		return nil, err
	}

	originLn, idpLn, adminLn, err := listenAll(opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil { // those not served yet; Close shut down the others
			closeAll(originLn, idpLn, adminLn)
		}
	}()
	o.OriginURL, o.IdPURL, o.AdminURL = baseURL(originLn), baseURL(idpLn), baseURL(adminLn)
	if opts.Issuer == "" {
		// SQLite and a provider of its own (origin/cmd/origin's
		// config): tokens name the address it listens on.
		opts.Issuer = o.IdPURL
	}
	o.issuer = opts.Issuer
	if opts.PublicURL == "" {
		opts.PublicURL = o.OriginURL
	}
	o.publicURL = opts.PublicURL
	d := Deployment{Secret: secret, Accepted: []byte(opts.SecretAccepted), URLKeys: opts.URLKeys, PublicURL: opts.PublicURL, Issuer: opts.Issuer,
		Audience: opts.Audience, LicenseURL: opts.LicenseURL, OriginHosts: opts.OriginHosts,
		EdgeAcceptV2: opts.EdgeAcceptV2, BcryptSecrets: opts.BcryptSecrets}
	// Keyed under the deployment secret, whether or not this origin runs
	// the provider: any origin's provider checks it without bcrypt.
	o.clients = d.IdP(o.store, o.clock.Now, o.log)
	provider, verifier, err := o.identity(ctx, d, opts)
	if err != nil {
		return nil, err
	}
	progress, err := ProgressOf(o.store)
	if err != nil {
		return nil, err
	}
	o.metrics.CorpusVersion(func() string { return o.corpus.Content().ContentVersion })
	set := opts.Leases
	set.OnRevoke = o.metrics.LeaseRevoke
	o.leases = d.Leases(o.meters, set, o.clock.Now, o.log)
	if o.leases != nil {
		o.stopPrune = o.leases.StartPruning()
	}
	o.stopOnce = startPruningOnce(o.meters, o.clock.Now, o.log)
	if o.bundles, err = o.openBundles(opts, originLn); err != nil {
		return nil, err
	}
	if err := o.openWebhooks(d, opts.Webhooks); err != nil {
		return nil, err
	}
	o.api = d.API(Parts{Started: began, Store: o.store, Meters: &Meters{Store: o.meters, Metrics: o.metrics,
		Events: NewMeterEvents(o.webhooks, o.log)}, Progress: progress,
		Auth: verifier, Content: o.corpus.Content, Now: o.clock.Now, Logger: o.log, Leases: o.leases, Bundles: o.bundles})
	o.health = &telemetry.Health{Log: o.log, Checks: o.readiness()}
	adm := o.adminHandler(ctx, d, opts.TestClock)
	accessLog := opts.AccessLog
	if accessLog == nil {
		accessLog = o.log
	}
	access := &telemetry.Access{Log: accessLog, Metrics: o.metrics}
	o.handler = o.health.Wrap(access.Wrap(o.api))
	// Following the record from now: every swap takes back the edge's
	// leases, a reload through the admin API as well.
	o.corpus.Start(o.leases)
	o.servers.Serve(originLn, o.handler)
	if idpLn != nil {
		o.servers.Serve(idpLn, provider.Handler())
	}
	if adminLn != nil {
		o.servers.ServeAdmin(adminLn, adm)
	}
	return o, nil
}

// openData opens what the origin serves from, in Open's order: the
// deployment secret (returned), the database's files made private, the
// stores and meters, the corpus, and the clock.
func (o *Origin) openData(ctx context.Context, opts Options) (secret []byte, err error) {
	if secret, err = private.Secret(opts.Secret, !IsPostgres(opts.DB), o.log); err != nil {
		return nil, err
	}
	if !IsPostgres(opts.DB) {
		// Before the corpus, which may be generated into var/ too.
		if err := private.SecureDB(o.log, opts.DB); err != nil {
			return nil, err
		}
	}
	if o.store, o.meters, err = OpenStores(ctx, opts.DB, o.metrics.MeterCommit); err != nil {
		return nil, err
	}
	registerStoreMetrics(o.metrics.Registry(), o.store) // dbmetrics.go
	settle := func() { SettleMemory(opts.MemoryLimit) }
	if o.corpus, err = follow.Open(ctx, follow.Config{Store: o.store, Dir: opts.Corpus, Every: opts.CorpusSync,
		Log: o.log, Stdout: opts.Stdout, Settle: settle, Lift: func() { ReloadMemoryLimit(opts.MemoryLimit) }}); err != nil {
		return nil, err
	}
	settle()
	if err := o.openClock(ctx, opts.TestClock); err != nil {
		return nil, err
	}
	return secret, nil
}

// adminHandler is the admin API over what Open has opened; ctx bounds its
// readiness checks.
func (o *Origin) adminHandler(ctx context.Context, d Deployment, testClock bool) http.Handler {
	var leases admin.Leases
	if o.leases != nil {
		leases = o.leases
	}
	return admin.Handler(admin.Config{
		Leases:       leases,
		Token:        o.AdminToken,
		Store:        o.store,
		Clock:        o.clock,
		TestClock:    testClock,
		Webhooks:     o.webhooks,
		CreateClient: o.clients.CreateClient,
		Reload:       o.corpus.Reload,
		Orgs:         o.api,
		Meters:       o.meters,
		Forensics: &admin.Forensics{Keys: d.Forensic(), Accepted: d.ForensicAccepted(), Links: d.Links(),
			TranscriptLesson: o.api.TranscriptLesson},
		Logger:  o.log,
		Ready:   func() bool { return len(o.health.Ready(ctx)) == 0 },
		Metrics: o.metrics.Handler(),
	})
}

// readiness is what GET /readyz (and the admin API's health) checks: the
// database answers, a corpus is loaded, and the token-verification keys
// are there (identity.go). Each is one small read.
func (o *Origin) readiness() []telemetry.Check {
	return []telemetry.Check{
		{Name: "database", Func: func(ctx context.Context) error {
			// One indexed read; an organisation of that id need not exist.
			_, err := o.store.GetOrg(ctx, "readyz-probe")
			if errors.Is(err, store.ErrNotFound) {
				err = nil
			}
			return err
		}},
		{Name: "corpus", Func: func(context.Context) error {
			if o.corpus.Content() == nil {
				return errors.New("no corpus loaded")
			}
			return nil
		}},
		{Name: "jwks", Func: o.jwksReady},
	}
}

// clockSync is how often a test clock adopts the moves other origins on
// its database made (docs/decisions/admin-api-and-the-licence-envelope.md, the test clock).
const clockSync = time.Second

// openClock makes the origin's clock. A test clock's offset is kept in the
// store, so a restart keeps it, and synced every clockSync from it, so the
// origins sharing a PostgreSQL database agree. Without the test clock the
// clock is the wall clock, whatever offset a test run left in the
// database.
func (o *Origin) openClock(ctx context.Context, testClock bool) error {
	if !testClock {
		o.clock = clock.New(nil)
		return nil
	}
	c, err := clock.Stored(ctx, nil, o.store)
	if err != nil {
		return err
	}
	o.clock = c
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Watch(wctx, clockSync, func(err error) { o.log.Warn("origin: sync the test clock", "err", err) })
	}()
	o.stopWatch = func() { cancel(); <-done }
	return nil
}

// Close stops serving, letting requests in flight finish, then closes
// the stores. The public API drains first, while the identity provider
// (its JWKS) and the admin API (the edge's test clock) still answer; only
// once every server has drained are the meters closed: their Close
// commits what is queued, and no handler is left to queue more.
func (o *Origin) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := []error{o.servers.Shutdown(ctx)}
	if o.stopWatch != nil {
		o.stopWatch()
	}
	if o.corpus != nil {
		o.corpus.Close()
	}
	if o.stopPrune != nil {
		o.stopPrune()
	}
	if o.stopOnce != nil {
		o.stopOnce()
	}
	if o.stopWebhooks != nil {
		o.stopWebhooks()
	}
	if o.meters != nil {
		errs = append(errs, o.meters.Close())
	}
	if o.store != nil {
		errs = append(errs, o.store.Close())
	}
	if o.bundles != nil {
		errs = append(errs, o.bundles.Close())
	}
	return errors.Join(errs...)
}

// Content is the corpus being served.
func (o *Origin) Content() *server.Content { return o.corpus.Content() }

// Corpus is the followed corpus: its reload (the admin API's) and its
// sync with the deployment's record.
func (o *Origin) Corpus() *follow.Corpus { return o.corpus }

// Clock is the origin's clock: the test clock under Options.TestClock.
func (o *Origin) Clock() *clock.Clock { return o.clock }

// Store is the origin's store.
func (o *Origin) Store() store.Store { return o.store }

// Meters are the origin's meters, as the admin API reads them.
func (o *Origin) Meters() meter.Store { return o.meters }

// Leases is the origin's lease manager; nil when its meters keep none.
func (o *Origin) Leases() *lease.Manager { return o.leases }

// Bundles is the store of the export bundles built.
func (o *Origin) Bundles() *bundles.Store { return o.bundles }

// API is the public API alone, without the access log, metrics and
// health of Handler.
func (o *Origin) API() *server.Server { return o.api }

// Handler is the public API as the origin serves it on OriginURL: health
// and readiness, the access log and metrics, the API.
func (o *Origin) Handler() http.Handler { return o.handler }

// Served is how many listeners the origin serves.
func (o *Origin) Served() int { return o.servers.Len() }
