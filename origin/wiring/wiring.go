// Package wiring assembles an origin from its parts, the one way every
// origin is put together: the store and the meters on one database, the
// corpus followed (origin/corpus/follow), the public API behind its
// access log, metrics and health, the identity provider and the admin API
// keyed from the deployment secret, the edge's leases, and listeners
// served under the limits of internal/httpsrv. Open makes the whole
// origin from Options (origin.go); origin/cmd/origin opens it on its
// configured addresses, and tools/bench opens the same in process, so the
// bench measures the origin that ships.
package wiring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/lectern-api/lectern/internal/httpsrv"
	"github.com/lectern-api/lectern/origin/admin"
	"github.com/lectern-api/lectern/origin/auth"
	"github.com/lectern-api/lectern/origin/bundles"
	"github.com/lectern-api/lectern/origin/forensic"
	"github.com/lectern-api/lectern/origin/idp"
	"github.com/lectern-api/lectern/origin/lease"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/pgmeter"
	"github.com/lectern-api/lectern/origin/meter/sqlitemeter"
	"github.com/lectern-api/lectern/origin/progress"
	"github.com/lectern-api/lectern/origin/server"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/store/pgstore"
	"github.com/lectern-api/lectern/origin/store/sqlitestore"
	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/link"
	"github.com/lectern-api/lectern/shared/subkey"
)

// OpenStores opens the store and the meters on one database: PostgreSQL
// for a postgres:// URL, SQLite otherwise. onCommit (nil: none) is told of
// every meter transaction (the origin's metrics, telemetry.MeterCommit).
// On an error neither is left open.
func OpenStores(ctx context.Context, dsn string, onCommit func(ops int, took time.Duration, err error)) (store.Store, meter.Store, error) {
	if IsPostgres(dsn) {
		s, err := pgstore.New(ctx, dsn)
		if err != nil {
			return nil, nil, err
		}
		m, err := pgmeter.New(ctx, dsn, pgmeter.Options{OnCommit: onCommit})
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
	m, err := sqlitemeter.New(ctx, dsn, sqlitemeter.Options{OnCommit: onCommit})
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return s, m, nil
}

// ProgressOf is the progress store of s: the store itself, which keeps
// the learners' records in its database (sqlitestore and pgstore
// implement progress.Store). A store that does not is an error.
func ProgressOf(s store.Store) (progress.Store, error) {
	p, ok := s.(progress.Store)
	if !ok {
		return nil, fmt.Errorf("wiring: the store %T keeps no progress records", s)
	}
	return p, nil
}

// IsPostgres reports whether the LECTERN_DB setting names PostgreSQL.
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// Deployment is what is one for all the origins of a deployment: the
// secret every key derives from (shared/subkey), the public API's base
// URL, and the identity provider whose tokens it accepts.
type Deployment struct {
	Secret []byte // LECTERN_SECRET
	// Accepted is the secret accepted beside Secret while it is rotated
	// (LECTERN_SECRET_ACCEPT; nil: none): what it keyed, signed or
	// sealed still verifies and opens (cursors, the edge's signatures,
	// forensic tags and canaries, the signing seeds, the derived link
	// key), and nothing is made with it.
	Accepted []byte
	// URLKeys sign and check the download links (LECTERN_URL_KEYS); the
	// zero Keys stands for the one key derived from Secret (link.Derived).
	URLKeys    link.Keys
	PublicURL  string // the public API's base URL, also its resource identifier
	Issuer     string
	Audience   string
	LicenseURL string
	// OriginHosts are the names the edges reach this origin by
	// (LECTERN_ORIGIN_HOSTS): an edge's call signed for another host is
	// refused. None: a call's own Host is taken as this origin's.
	OriginHosts []string
	// EdgeAcceptV2 takes forwards and gate calls signed by the previous
	// release's edges, v2 (LECTERN_EDGE_ACCEPT_V2): a rolling upgrade's.
	// The origin then signs its revoke pushes v2 too, which those edges
	// read (lease.Config.SignV2).
	EdgeAcceptV2 bool
	// BcryptSecrets keeps client secrets in bcrypt, the one form the
	// previous release checks (LECTERN_CLIENT_SECRET_HASH=bcrypt;
	// idp.Config.BcryptSecrets): a rolling upgrade's, while its origins
	// share the database.
	BcryptSecrets bool
}

// Parts are what one origin's public API serves from.
type Parts struct {
	Store  store.Store
	Meters meter.Store
	// Progress keeps the learners' progress records (ProgressOf(Store)).
	Progress progress.Store
	Auth     *auth.Authenticator
	Content  func() *server.Content // the corpus being served; reloads swap it
	Now      func() time.Time
	Logger   *slog.Logger
	// Leases grants and takes back the edge's leases (d.Leases); nil:
	// none, the edge gates every 304.
	Leases *lease.Manager
	// Bundles keeps the export bundles built; nil: a store in a new
	// temporary directory.
	Bundles *bundles.Store
	// Started is when the origin's process started (server.Config.Started).
	Started time.Time
}

// LeaseSettings are the origin's lease settings.
type LeaseSettings struct {
	Off bool          // LECTERN_LEASES=off
	TTL time.Duration // LECTERN_LEASE_TTL (zero: shared/lease.DefaultTTL)
	// Retention is how long an ended lease is kept
	// (LECTERN_LEASE_RETENTION; zero: lease.DefaultRetention).
	Retention time.Duration
	// OnRevoke is told of each revocation (lease.Config.OnRevoke).
	OnRevoke func(took time.Duration, waited string)
	// Edges are the base URLs of the edge hosts that take revoke pushes
	// (LECTERN_EDGE_URLS, lease.ParseEdges); none: no push is made, and
	// a lease request naming a revoke URL is refused.
	Edges []string
}

// Leases is the lease manager of an origin whose meters are m: nil when
// m keeps no leases (meter.LeaseStore). Its revoke pushes are signed with
// the edge key, the one the edge's own signatures are checked with (by
// the previous release's rule, v2, while d.EdgeAcceptV2: that release's
// edge hosts read no other), and go only to the edge hosts of
// set.Edges. With leases on and no edge host listed, it logs once that
// revoke pushes are off.
func (d Deployment) Leases(m meter.Store, set LeaseSettings, now func() time.Time, log *slog.Logger) *lease.Manager {
	ls, ok := m.(meter.LeaseStore)
	if !ok {
		return nil
	}
	if log != nil && !set.Off && len(set.Edges) == 0 {
		log.Info("lease: revoke pushes are off until " + lease.EdgesSetting + " lists the edge hosts: " +
			"an edge naming a revoke URL is refused its leases (400) and serves without them; edges naming none (Cloudflare) are unaffected")
	}
	return lease.New(lease.Config{Store: ls, EdgeKeys: edgesig.KeysOf(d.Secret), SignV2: d.EdgeAcceptV2, Off: set.Off, TTL: set.TTL,
		Retention: set.Retention, OnRevoke: set.OnRevoke, Edges: set.Edges, Now: now, Logger: log})
}

// API is the public API of d served from p.
func (d Deployment) API(p Parts) *server.Server {
	return server.New(server.Config{
		Store:                p.Store,
		Auth:                 p.Auth,
		Content:              p.Content,
		Now:                  p.Now,
		Logger:               p.Logger,
		Resource:             d.PublicURL,
		AuthorizationServers: []string{d.Issuer},
		ResourceMetadataURL:  d.PublicURL + "/.well-known/oauth-protected-resource",
		LicenseURL:           d.LicenseURL,
		Meters:               p.Meters,
		TagKey:               d.Forensic().Tag,
		CursorKey:            subkey.Derive(d.Secret, subkey.Cursor),
		CursorAccepted:       d.accepted(subkey.Cursor),
		ChangesKey:           subkey.Derive(d.Secret, subkey.Changes),
		ChangesAccepted:      d.accepted(subkey.Changes),
		EdgeKeys:             edgesig.KeysOf(d.Secret),
		EdgeAccepted:         edgesig.KeysOf(d.Accepted),
		OriginHosts:          d.OriginHosts,
		EdgeAcceptV2:         d.EdgeAcceptV2,
		URLKeys:              d.Links(),
		CanaryKey:            d.Forensic().Canary,
		Progress:             p.Progress,
		Leases:               p.Leases,
		Bundles:              p.Bundles,
		Started:              p.Started,
	})
}

// accepted is the key for purpose derived from the accepted secret, nil
// when there is none.
func (d Deployment) accepted(purpose string) []byte {
	if len(d.Accepted) == 0 {
		return nil
	}
	return subkey.Derive(d.Accepted, purpose)
}

// Forensic are the keys of d's licence tags and canaries: the public
// API marks with them, the admin API's forensics reads with them.
func (d Deployment) Forensic() forensic.Keys {
	return forensic.Keys{Tag: subkey.Derive(d.Secret, subkey.Tag), Canary: subkey.Derive(d.Secret, subkey.Canary)}
}

// ForensicAccepted are the forensic keys of the accepted secret, which
// the admin API's forensics reads with too; zero when there is none.
func (d Deployment) ForensicAccepted() forensic.Keys {
	return forensic.Keys{Tag: d.accepted(subkey.Tag), Canary: d.accepted(subkey.Canary)}
}

// Links are the keys of d's download links: URLKeys, its entry
// link.DerivedEntry in place, or when it is zero the key derived from
// the secret; the accepted secret's derived key verifies too.
func (d Deployment) Links() link.Keys {
	if d.URLKeys.IsZero() {
		return link.Derived(d.Secret, d.Accepted)
	}
	return d.URLKeys.WithSecrets(d.Secret, d.Accepted)
}

// IdP is the configuration of d's identity provider on s, its signing
// seeds sealed under the secret: for idp.New, and for idp.NewPublicKeys
// where an origin reads the provider's keys from the database.
func (d Deployment) IdP(s store.Store, now func() time.Time, log *slog.Logger) idp.Config {
	return idp.Config{Issuer: d.Issuer, Audience: d.Audience, Store: s, Now: now, Logger: log,
		SealKey: subkey.Derive(d.Secret, subkey.IDPKeys), AcceptedSealKey: d.accepted(subkey.IDPKeys),
		BcryptSecrets: d.BcryptSecrets}
}

// Servers serves an origin's listeners, every one under the same limits
// (internal/httpsrv: how long and how much a client may send, and net/http's
// own refusals in the API's error body), and drains them together.
type Servers struct {
	Limits  httpsrv.Limits // zero: httpsrv.Default
	Logger  *slog.Logger
	servers []*http.Server
}

// Serve serves h on ln in the background until Shutdown.
func (s *Servers) Serve(ln net.Listener, h http.Handler) { s.serve(ln, h, s.Limits) }

// ServeAdmin serves the admin API h (admin.Handler) on ln as Serve does,
// but with bodies of up to admin.MaxLeak that h bounds itself, route by
// route, once the admin token is checked: refused before h, a forensics
// leak over 1 MiB was a 400 ahead of its token.
func (s *Servers) ServeAdmin(ln net.Listener, h http.Handler) {
	l := s.Limits
	l.MaxBodyBytes, l.HandlerBoundsBody = admin.MaxLeak, true
	s.serve(ln, h, l)
}

func (s *Servers) serve(ln net.Listener, h http.Handler, l httpsrv.Limits) {
	cfg := httpsrv.Config{Limits: l, Logger: s.Logger}
	srv := httpsrv.New(h, cfg)
	s.servers = append(s.servers, srv)
	go srv.Serve(httpsrv.Listener(ln, cfg))
}

// Len is how many listeners s serves.
func (s *Servers) Len() int { return len(s.servers) }

// Shutdown stops serving, letting the requests in flight finish within
// ctx, in the order the listeners were served.
func (s *Servers) Shutdown(ctx context.Context) error {
	var errs []error
	for _, srv := range s.servers {
		errs = append(errs, srv.Shutdown(ctx))
	}
	return errors.Join(errs...)
}
