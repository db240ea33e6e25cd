package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lectern-api/lectern/origin/admin"
	"github.com/lectern-api/lectern/origin/auth"
	"github.com/lectern-api/lectern/origin/clock"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/httpsrv"
	"github.com/lectern-api/lectern/origin/idp"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/pgmeter"
	"github.com/lectern-api/lectern/origin/meter/sqlitemeter"
	"github.com/lectern-api/lectern/origin/server"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/store/pgstore"
	"github.com/lectern-api/lectern/origin/store/sqlitestore"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/id"
	"github.com/lectern-api/lectern/shared/scope"
)

// stack is the running origin: its listeners and what they serve.
type stack struct {
	OriginURL, IdPURL, AdminURL string
	AdminToken                  string

	content atomic.Pointer[server.Content]
	// reloading is held by the corpus reload in progress: reloads run
	// one at a time (issue #13: four at once took the origin from 0.8 to
	// 2.8 GB, each holding a whole corpus and its indexes).
	reloading sync.Mutex
	clock     *clock.Clock
	store     store.Store
	meters    meter.Store
	servers   []*http.Server
	limits    httpsrv.Limits // of every listener (config.Limits)
	log       *slog.Logger

	stopWatch func() // stops the test clock's Watch and waits for it
}

// start opens everything and serves in the background. Addresses may be
// ":0"-style; the bound ones are in the returned stack.
func start(ctx context.Context, cfg config, stdout io.Writer) (_ *stack, err error) {
	st := &stack{log: slog.New(slog.NewTextHandler(stdout, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	defer func() {
		if err != nil {
			st.Close()
		}
	}()
	originLn, err := net.Listen("tcp", cfg.OriginAddr)
	if err != nil {
		return nil, fmt.Errorf("listen origin: %w", err)
	}
	idpLn, err := net.Listen("tcp", cfg.IdPAddr)
	if err != nil {
		originLn.Close()
		return nil, fmt.Errorf("listen identity provider: %w", err)
	}
	adminLn, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		originLn.Close()
		idpLn.Close()
		return nil, fmt.Errorf("listen admin: %w", err)
	}
	st.OriginURL = "http://" + originLn.Addr().String()
	st.IdPURL = "http://" + idpLn.Addr().String()
	st.AdminURL = "http://" + adminLn.Addr().String()
	st.AdminToken = cfg.AdminToken
	st.limits = cfg.Limits
	if cfg.Issuer == "http://"+cfg.IdPAddr {
		cfg.Issuer = st.IdPURL
		cfg.JWKSURL = st.IdPURL + "/.well-known/jwks.json"
	}
	if cfg.PublicURL == "" {
		cfg.PublicURL = st.OriginURL
	}

	secret, err := loadSecret(cfg.Secret, st.log)
	if err != nil {
		return nil, err
	}
	if !isPostgres(cfg.DB) {
		// Before the corpus, which may be generated into var/ too.
		if err := secureDB(st.log, cfg.DB); err != nil {
			return nil, err
		}
	}
	c, err := loadCorpus(cfg.Corpus, stdout)
	if err != nil {
		return nil, err
	}
	ct, err := server.Build(c)
	if err != nil {
		return nil, err
	}
	st.content.Store(ct)

	if st.store, st.meters, err = openStores(ctx, cfg.DB); err != nil {
		return nil, err
	}
	if err := st.openClock(ctx, cfg.TestClock); err != nil {
		return nil, err
	}
	provider, err := idp.New(ctx, idp.Config{Issuer: cfg.Issuer, Audience: cfg.Audience, Store: st.store, Now: st.clock.Now, Logger: st.log,
		SealKey: subkey(secret, "idp-keys")})
	if err != nil {
		return nil, err
	}
	api := server.New(server.Config{
		Store:                st.store,
		Auth:                 auth.New(auth.Config{Issuer: cfg.Issuer, Audience: cfg.Audience, JWKSURL: cfg.JWKSURL, Now: st.clock.Now}),
		Content:              st.content.Load,
		Now:                  st.clock.Now,
		Logger:               st.log,
		Resource:             cfg.PublicURL,
		AuthorizationServers: []string{cfg.Issuer},
		ResourceMetadataURL:  cfg.PublicURL + "/.well-known/oauth-protected-resource",
		LicenseURL:           cfg.LicenseURL,
		Meters:               st.meters,
		TagKey:               subkey(secret, "tag"),
		CursorKey:            subkey(secret, "cursor"),
		EdgeKey:              edgesig.Key(secret),
	})
	adm := admin.Handler(admin.Config{
		Token:     cfg.AdminToken,
		Store:     st.store,
		Clock:     st.clock,
		TestClock: cfg.TestClock,
		CreateClient: func(ctx context.Context, orgID string, scopes, grantTypes, redirectURIs []string) (string, string, error) {
			return idp.CreateClient(ctx, st.store, st.clock.Now(), orgID, scopes, grantTypes, redirectURIs)
		},
		Reload:    st.reload,
		OrgExtras: api.OrgExtras,
		Logger:    st.log,
	})
	st.serve(originLn, api)
	st.serve(idpLn, provider.Handler())
	st.serve(adminLn, adm)

	if err := st.demo(ctx, cfg, stdout); err != nil {
		return nil, err
	}
	return st, nil
}

// serve serves h on ln under the limits every listener has (package
// httpsrv: how long and how much a client may send, and net/http's own
// refusals in the API's error body).
func (st *stack) serve(ln net.Listener, h http.Handler) {
	cfg := httpsrv.Config{Limits: st.limits, Logger: st.log}
	srv := httpsrv.New(h, cfg)
	st.servers = append(st.servers, srv)
	go srv.Serve(httpsrv.Listener(ln, cfg))
}

// clockSync is how often a test clock adopts the moves other origins on
// its database made (docs/decisions.md, Hardening: the test clock).
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
	var errs []error
	for _, srv := range st.servers {
		errs = append(errs, srv.Shutdown(ctx))
	}
	if st.stopWatch != nil {
		st.stopWatch()
	}
	if st.meters != nil {
		errs = append(errs, st.meters.Close())
	}
	if st.store != nil {
		errs = append(errs, st.store.Close())
	}
	return errors.Join(errs...)
}

// openStores opens the store and the meters on one database: PostgreSQL
// for a postgres:// URL, SQLite otherwise.
func openStores(ctx context.Context, dsn string) (store.Store, meter.Store, error) {
	if isPostgres(dsn) {
		s, err := pgstore.New(ctx, dsn)
		if err != nil {
			return nil, nil, err
		}
		m, err := pgmeter.New(ctx, dsn, pgmeter.Options{})
		if err != nil {
			s.Close()
			return nil, nil, err
		}
		return s, m, nil
	}
	s, err := sqlitestore.New(ctx, dsn)
	if err != nil {
		return nil, nil, err
	}
	m, err := sqlitemeter.New(ctx, dsn, sqlitemeter.Options{})
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return s, m, nil
}

// isPostgres reports whether the LECTERN_DB setting names PostgreSQL.
func isPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// loadCorpus loads the corpus in dir, generating the deterministic one
// first when dir does not exist (make run on a fresh machine).
func loadCorpus(dir string, stdout io.Writer) (*corpus.Corpus, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stdout, "generating the corpus into %s ...\n", dir)
		sum, err := gen.Write(dir, gen.Options{Seed: 1})
		if err != nil {
			return nil, fmt.Errorf("generate corpus: %w", err)
		}
		fmt.Fprintf(stdout, "corpus %s: %d subjects, %d classes, %d media\n", sum.ContentVersion, sum.Subjects, sum.Classes, sum.Media)
	}
	c, err := corpus.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load corpus: %w", err)
	}
	return c, nil
}

// reloadRetryAfter is the Retry-After of a reload refused because another
// runs: a full corpus loads and builds in seconds.
const reloadRetryAfter = 5

// reload swaps in the corpus of dir; requests in flight finish on the one
// they began with. While one reload runs, another is refused with 409
// WRITE_CONFLICT and Retry-After (docs/decisions.md, Hardening): it is
// not queued, so a client that gives up leaves nothing waiting.
func (st *stack) reload(ctx context.Context, dir string) (string, error) {
	if !st.reloading.TryLock() {
		return "", &apierr.Error{Code: apierr.WriteConflict, RetryAfter: apierr.Int(reloadRetryAfter),
			Message: "A corpus reload is already running; nothing was changed. Retry once it has ended."}
	}
	defer st.reloading.Unlock()
	c, err := corpus.Load(dir)
	if err != nil {
		return "", err
	}
	ct, err := server.Build(c)
	if err != nil {
		return "", err
	}
	st.content.Store(ct)
	return c.ContentVersion, nil
}

// demoOrg is the organisation make run creates on a new database.
const demoOrg = "demo"

// demo creates the demo organisation and its client on a new database and
// prints the credentials and a curl walk-through.
func (st *stack) demo(ctx context.Context, cfg config, stdout io.Writer) error {
	fmt.Fprintf(stdout, "\nLectern origin stack\n  API (direct)       %s/v1\n  identity provider  %s\n  admin API          %s\n",
		st.OriginURL, st.IdPURL, st.AdminURL)
	if cfg.generatedToken {
		fmt.Fprintf(stdout, "  admin token        %s   (set LECTERN_ADMIN_TOKEN to choose one)\n", cfg.AdminToken)
	}
	_, err := st.store.GetOrg(ctx, demoOrg)
	if err == nil {
		fmt.Fprintf(stdout, "\nThe demo organisation %q exists; its client secret was shown when it was created.\n", demoOrg)
		return nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	o := licence.NewOrg(st.clock.Now())
	o.ID, o.Name, o.Grants = demoOrg, "Demo Organisation", append([]string(nil), id.Tiers...)
	if err := st.store.CreateOrg(ctx, o); err != nil {
		return err
	}
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
  TOKEN=$(curl -s -u '%s:%s' \
    -d grant_type=client_credentials -d 'scope=service-api/content.read' \
    %s/oauth2/token | sed 's/.*"access_token":"\([^"]*\)".*/\1/')
  curl -s -H "Authorization: Bearer $TOKEN" %s/v1/license
  curl -s -H "Authorization: Bearer $TOKEN" %s/v1/tiers
`, demoOrg, clientID, clientSecret, clientID, clientSecret, st.IdPURL, st.OriginURL, st.OriginURL)
	return nil
}
