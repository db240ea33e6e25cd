package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lectern-api/lectern/internal/cmdline"
	"github.com/lectern-api/lectern/internal/httpsrv"
	"github.com/lectern-api/lectern/internal/telemetry"
	"github.com/lectern-api/lectern/origin/bundles"
	"github.com/lectern-api/lectern/origin/internal/private"
	"github.com/lectern-api/lectern/origin/lease"
	"github.com/lectern-api/lectern/origin/wiring"
	wire "github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/shared/link"
)

// config is the origin's settings (README, Environment): environment
// variables, mirrored by flags.
type config struct {
	OriginAddr string // LECTERN_ORIGIN_ADDR
	IdPAddr    string // LECTERN_IDP_ADDR; "off": no identity provider on this origin
	AdminAddr  string // LECTERN_ADMIN_ADDR; "off": no admin API on this origin
	AdminToken string // LECTERN_ADMIN_TOKEN; unset: kept in var/admin-token (private.AdminToken), printed with Demo
	DB         string // LECTERN_DB: a SQLite path or a postgres:// URL
	Corpus     string // LECTERN_CORPUS: generated when missing
	TestClock  bool   // LECTERN_TEST_CLOCK=1
	// Demo is make run's walk-through (LECTERN_DEMO=1): on a new
	// database the demo organisation, granted every tier, and a client
	// with every scope are created and their secret printed, with the
	// admin token. Without it an origin creates nothing and prints no
	// secret.
	Demo      bool
	LogFormat string // LECTERN_LOG_FORMAT: json or text
	LogLevel  string // LECTERN_LOG_LEVEL: debug, info, warn or error

	// Token verification. By default the dev identity provider's: its
	// tokens carry Issuer and its keys are read from the database, which
	// every origin on it shares (whichever origin's provider signed).
	// With JWKSURL the keys are fetched from there instead: any OAuth2
	// server with a JWKS endpoint replaces the dev provider.
	Issuer   string // LECTERN_ISSUER: default http://<bound IdPAddr> (SQLite only)
	JWKSURL  string // LECTERN_JWKS_URL: default none, the dev provider's keys from the database
	Audience string // LECTERN_AUDIENCE: default lectern-api

	// Secret keys the forensic tags, cursors, the edge's gate calls and
	// the sealed signing keys; every origin (and edge) of one deployment
	// needs the same. When unset it is kept in var/secret, created on
	// first start: SQLite only (dev), a PostgreSQL deployment must set it.
	Secret string // LECTERN_SECRET
	// SecretAccept is a second secret accepted beside Secret while it is
	// rotated: what it keyed, signed or sealed still verifies and opens,
	// and nothing is made with it (docs/operations.md, Rotating keys).
	SecretAccept string // LECTERN_SECRET_ACCEPT
	// URLKeys sign and check the download links: LECTERN_URL_KEYS,
	// "kid=secret,…" (the first signs, all verify; shared/link), parsed by
	// check into urlKeys. Unset: one key derived from the secret.
	URLKeys string // LECTERN_URL_KEYS
	urlKeys link.Keys

	PublicURL  string // LECTERN_PUBLIC_URL: the API's base URL; default http://<OriginAddr>
	LicenseURL string // LECTERN_LICENSE_URL

	// The edge's leases (docs/edge.md, Leases): granted unless off, each
	// valid at most LeaseTTL (a Go duration, lease.MinTTL to
	// lease.MaxTTL), parsed by check into leaseTTL.
	Leases   bool   // LECTERN_LEASES: on (default) or off
	LeaseTTL string // LECTERN_LEASE_TTL: default 5s
	leaseTTL time.Duration
	// LeaseRetention is how long an ended lease is kept before it is
	// pruned (a Go duration, lease.MinRetention to lease.MaxRetention),
	// parsed by check into leaseRetention.
	LeaseRetention string // LECTERN_LEASE_RETENTION: default 24h
	leaseRetention time.Duration
	// EdgeURLs lists the edge hosts the origin pushes revokes to
	// (lease.ParseEdges: comma-separated base URLs), parsed by check into
	// edgeURLs. Unset: none, so no push is made and a lease request
	// naming a revoke URL is refused (400).
	EdgeURLs string // LECTERN_EDGE_URLS
	edgeURLs []string
	// OriginHosts are the names (host[:port]) the edges reach this
	// origin by, comma-separated, parsed by check into originHosts: a
	// call signed for another host is refused, so one captured on its
	// way to a peer origin cannot be replayed here. Unset: a call's own
	// Host is taken as this origin's.
	OriginHosts string // LECTERN_ORIGIN_HOSTS
	originHosts []string
	// EdgeAcceptV2 (LECTERN_EDGE_ACCEPT_V2=1) takes forwards and gate
	// calls signed by the previous release's edges (the v2 rule, which
	// leaves If-None-Match and Range unsigned), and signs the origin's
	// lease revoke pushes by the v2 rule they read: only while a rolling
	// upgrade mixes releases (docs/upgrading.md). Default: refused, v3.
	EdgeAcceptV2 bool
	// ClientSecretHash is the form new client secrets are stored in
	// (LECTERN_CLIENT_SECRET_HASH): keyed (the default, a keyed SHA-256
	// checked in microseconds) or bcrypt, the one form 0.4.0 checks,
	// which also leaves stored bcrypt hashes unreplaced: only while a
	// rolling upgrade mixes releases on one database (docs/upgrading.md).
	// Either form is checked either way. Parsed by check into
	// bcryptSecrets.
	ClientSecretHash string
	bcryptSecrets    bool

	// The export bundles built (origin/bundles): kept in BundleDir, at
	// most BundleMaxMB mebibytes (parsed by check into bundleMax), never
	// below BundleReserveMB free on its volume (bundleReserve: 0 for the
	// store's default, negative for none, as wiring.Options takes it).
	BundleDir       string // LECTERN_BUNDLE_DIR: default bundles beside the SQLite database, else var/bundles-<port> (wiring.BundleDirOf)
	BundleMaxMB     string // LECTERN_BUNDLE_MAX_MB: default 2048
	BundleReserveMB string // LECTERN_BUNDLE_RESERVE_MB: default a tenth of the volume, at most 512
	bundleMax       int64
	bundleReserve   int64
	// No organisation holds more than BundleOrgShare percent of the
	// bundles' bound, nor has more than BundleBuildsPerHour built an hour
	// on this origin (issue #36; parsed by check into bundleOrgShare and
	// bundleBuildsPerHour).
	BundleOrgShare      string // LECTERN_BUNDLE_ORG_SHARE: default 25
	BundleBuildsPerHour string // LECTERN_BUNDLE_BUILDS_PER_HOUR: default 1000, 0 for no bound
	bundleOrgShare      int
	bundleBuildsPerHour int

	// WebhookAllowPrivate (LECTERN_WEBHOOK_ALLOW_PRIVATE=1) lets webhook
	// endpoints be http and on private, loopback and link-local
	// addresses: development only (make run sets it).
	WebhookAllowPrivate bool

	// Limits bound what a client may take of each listener; not from the
	// environment: zero fields are httpsrv.Default's, tests set short ones.
	Limits httpsrv.Limits
	// CorpusSync is how often the origin reads the deployment's corpus
	// record (origin/corpus/follow); not from the environment: zero is
	// follow.SyncEvery, tests set a long one to hold an origin on its
	// version.
	CorpusSync time.Duration

	// autoMemLimit: GOMEMLIMIT is unset, so the origin sets the memory
	// limit itself (wiring.Options.MemoryLimit).
	autoMemLimit bool
}

// parseConfig reads the settings from args and getenv.
func parseConfig(args []string, getenv func(string) string) (config, error) {
	return parseCommandLine(args, getenv, io.Discard)
}

// parseCommandLine is parseConfig answering -h and -version on stdout,
// with cmdline.ErrDone.
func parseCommandLine(args []string, getenv func(string) string, stdout io.Writer) (config, error) {
	var c config
	fs := cmdline.New("origin", getenv)
	fs.Env(&c.OriginAddr, "LECTERN_ORIGIN_ADDR", "origin-addr", "127.0.0.1:8080", "origin address (public API, direct mode)")
	fs.Env(&c.IdPAddr, "LECTERN_IDP_ADDR", "idp-addr", "127.0.0.1:9090", "identity provider address, or off")
	fs.Env(&c.AdminAddr, "LECTERN_ADMIN_ADDR", "admin-addr", "127.0.0.1:8081", "admin API address, or off")
	fs.Env(&c.AdminToken, "LECTERN_ADMIN_TOKEN", "admin-token", "", "admin API bearer token (default: the one in "+private.AdminTokenFile+", created on first start)")
	fs.Env(&c.DB, "LECTERN_DB", "db", "var/lectern.db", "SQLite path or postgres:// URL")
	fs.Env(&c.Corpus, "LECTERN_CORPUS", "corpus", "var/corpus", "corpus directory (generated when missing)")
	fs.Env(&c.Issuer, "LECTERN_ISSUER", "issuer", "", "token issuer (default: http://<idp-addr>; required with PostgreSQL)")
	fs.Env(&c.JWKSURL, "LECTERN_JWKS_URL", "jwks-url", "", "JWKS URL of another issuer (default: the dev identity provider's keys, from the database)")
	fs.Env(&c.Audience, "LECTERN_AUDIENCE", "audience", "lectern-api", "token audience")
	fs.Env(&c.Secret, "LECTERN_SECRET", "secret", "", "deployment secret, at least 32 characters (default: var/secret, created; required with PostgreSQL)")
	fs.Env(&c.SecretAccept, "LECTERN_SECRET_ACCEPT", "secret-accept", "", "during a rotation of LECTERN_SECRET, the other secret: what it keyed, signed or sealed is still accepted, nothing new is made with it (default: none)")
	fs.Env(&c.URLKeys, "LECTERN_URL_KEYS", "url-keys", "", "kid=secret,… keys of the signed download links, or derived for the one derived from the secret: the first signs, all verify (default: derived)")
	fs.Env(&c.PublicURL, "LECTERN_PUBLIC_URL", "public-url", "", "the API's public base URL (default: http://<origin-addr>)")
	fs.Env(&c.LicenseURL, "LECTERN_LICENSE_URL", "license-url", "https://lectern.example/licence", "link to the licence terms")
	fs.OnOff(&c.Leases, "LECTERN_LEASES", "leases", true, "grant the edge leases of licence state and calls")
	fs.Env(&c.LeaseTTL, "LECTERN_LEASE_TTL", "lease-ttl", wire.DefaultTTL.String(), "a lease's longest validity, a Go duration from 100ms to 60s")
	fs.Env(&c.LeaseRetention, "LECTERN_LEASE_RETENTION", "lease-retention", "24h", "how long an ended lease is kept before it is pruned, a Go duration from 1h to 9600h")
	fs.Env(&c.EdgeURLs, lease.EdgesSetting, "edge-urls", "",
		"comma-separated base URLs (http[s]://host[:port]) of the edge hosts that take revoke pushes at <url>"+wire.RevokePath+" (default: none, no push)")
	fs.Env(&c.OriginHosts, "LECTERN_ORIGIN_HOSTS", "origin-hosts", "",
		"comma-separated host[:port] names the edges reach this origin by, as their LECTERN_ORIGIN_URL writes them; signed calls for another host are refused (default: any)")
	fs.Switch(&c.EdgeAcceptV2, "LECTERN_EDGE_ACCEPT_V2", "edge-accept-v2",
		"take forwards and gate calls signed by the previous release's edges (the v2 rule, If-None-Match unsigned), and sign lease revoke pushes v2 for them: only during a rolling upgrade (docs/upgrading.md)")
	fs.Env(&c.ClientSecretHash, "LECTERN_CLIENT_SECRET_HASH", "client-secret-hash", secretHashKeyed,
		"the form client secrets are stored in: keyed, or bcrypt (new ones in bcrypt, and bcrypt ones not replaced) only while origins of 0.4.0 share the database (docs/upgrading.md)")
	fs.Env(&c.BundleDir, "LECTERN_BUNDLE_DIR", "bundle-dir", "", "directory of the export bundles built, private to the origin (default: bundles beside the SQLite database, else var/bundles-<origin port>)")
	fs.Env(&c.BundleMaxMB, "LECTERN_BUNDLE_MAX_MB", "bundle-max-mb", strconv.Itoa(bundles.DefaultMaxBytes>>20),
		"most mebibytes of bundles kept; the least recently used go first")
	fs.Env(&c.BundleReserveMB, "LECTERN_BUNDLE_RESERVE_MB", "bundle-reserve-mb", "",
		"mebibytes kept free on the bundle directory's volume, below which no bundle is written; 0: none (default: a tenth of the volume, at most "+
			strconv.Itoa(bundles.DefaultReserveMax>>20)+")")
	fs.Env(&c.BundleOrgShare, "LECTERN_BUNDLE_ORG_SHARE", "bundle-org-share", strconv.Itoa(bundles.DefaultOrgShare),
		"most percent of LECTERN_BUNDLE_MAX_MB one organisation's bundles hold; past it its own least recently used go first; 100: no share")
	fs.Env(&c.BundleBuildsPerHour, "LECTERN_BUNDLE_BUILDS_PER_HOUR", "bundle-builds-per-hour", strconv.Itoa(bundles.DefaultBuildsPerHour),
		"most export bundles built for one organisation a UTC hour on this origin; one more is 429 RATE_LIMITED; 0: no bound")
	fs.Switch(&c.WebhookAllowPrivate, wiring.AllowPrivateSetting, "webhook-allow-private",
		"let webhook endpoints be http and on private, loopback and link-local addresses; development only (make run sets it)")
	fs.Switch(&c.TestClock, "LECTERN_TEST_CLOCK", "test-clock", "enable the admin test clock; never in production")
	fs.Switch(&c.Demo, "LECTERN_DEMO", "demo", "make run's walk-through: create the demo organisation and a client on a new database and print their secret and the admin token; never in production")
	fs.Env(&c.LogFormat, "LECTERN_LOG_FORMAT", "log-format", telemetry.DefaultFormat, "access and event log format: json or text")
	fs.Env(&c.LogLevel, "LECTERN_LOG_LEVEL", "log-level", telemetry.DefaultLevel, "least level logged: debug, info, warn or error")
	if err := fs.Parse(args, stdout); err != nil {
		return c, err
	}
	if err := c.check(); err != nil {
		return c, err
	}
	c.autoMemLimit = getenv("GOMEMLIMIT") == ""
	if c.JWKSURL == "" {
		// The dev provider's issuer, as it writes it in tokens.
		c.Issuer = strings.TrimSuffix(c.Issuer, "/")
	}
	return c, nil
}

// The values of LECTERN_CLIENT_SECRET_HASH: the form an origin stores
// client secrets in (idp.Config.BcryptSecrets).
const (
	secretHashKeyed  = "keyed"
	secretHashBcrypt = "bcrypt"
)

// off is the address value that turns a listener off: an origin of a
// deployment may leave the identity provider and the admin API to others.
const off = "off"

// check refuses the settings an origin cannot run with. SQLite (make run)
// needs none: it is one origin, whose defaults are its own. Origins
// sharing PostgreSQL must share what each would otherwise invent: the
// secret (var/secret is per host) and the issuer (http://<identity
// provider address> is per origin, and each would refuse the others'
// tokens as "issuer mismatch"). The issuer is required too when this
// origin has no identity provider to default to.
func (c *config) check() error {
	var errs []error
	if c.OriginAddr == off {
		errs = append(errs, errors.New("LECTERN_ORIGIN_ADDR cannot be off: the public API is what an origin serves"))
	}
	if wiring.IsPostgres(c.DB) {
		if c.Secret == "" {
			errs = append(errs, errors.New("LECTERN_SECRET is required with a PostgreSQL LECTERN_DB: "+
				"every origin on the database must use the same one (cursors, tags, edge signatures, sealed signing keys), "+
				"so none is created in var/"))
		}
		if c.Issuer == "" {
			errs = append(errs, errors.New("LECTERN_ISSUER is required with a PostgreSQL LECTERN_DB: "+
				"every origin on the database issues and accepts tokens under it; "+
				"set it to the URL clients reach an identity provider at, e.g. https://auth.example.org"))
		}
	} else if c.IdPAddr == off && c.Issuer == "" {
		errs = append(errs, errors.New("LECTERN_ISSUER is required with LECTERN_IDP_ADDR=off: "+
			"it names the identity provider whose tokens this origin accepts"))
	}
	if _, err := telemetry.NewLogger(io.Discard, c.LogFormat, c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	ttl, err := time.ParseDuration(c.LeaseTTL)
	if err != nil || ttl < lease.MinTTL || ttl > lease.MaxTTL {
		errs = append(errs, fmt.Errorf("LECTERN_LEASE_TTL=%q: want a Go duration from %v to %v, such as 5s", c.LeaseTTL, lease.MinTTL, lease.MaxTTL))
	}
	c.leaseTTL = ttl
	keep, err := time.ParseDuration(c.LeaseRetention)
	if err != nil || keep < lease.MinRetention || keep > lease.MaxRetention {
		errs = append(errs, fmt.Errorf("LECTERN_LEASE_RETENTION=%q: want a Go duration from %v to %v, such as 24h", c.LeaseRetention, lease.MinRetention, lease.MaxRetention))
	}
	c.leaseRetention = keep
	edges, err := lease.ParseEdges(c.EdgeURLs)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s=%q: %w (want the base URLs of the edge hosts that take revoke pushes, comma-separated: http://10.0.0.5:8787,https://edge-2.internal)",
			lease.EdgesSetting, c.EdgeURLs, err))
	}
	c.edgeURLs = edges
	if c.originHosts, err = parseHosts(c.OriginHosts); err != nil {
		errs = append(errs, fmt.Errorf("LECTERN_ORIGIN_HOSTS=%q: %w (want the host[:port] names the edges reach this origin by, comma-separated: 10.0.0.5:8080,origin-1.internal:8080)",
			c.OriginHosts, err))
	}
	mb, err := strconv.ParseInt(c.BundleMaxMB, 10, 64)
	if err != nil || mb < 1 || mb > 1<<30 {
		errs = append(errs, fmt.Errorf("LECTERN_BUNDLE_MAX_MB=%q: want a whole number of mebibytes, at least 1", c.BundleMaxMB))
	}
	c.bundleMax = mb << 20
	if c.BundleReserveMB != "" {
		mb, err := strconv.ParseInt(c.BundleReserveMB, 10, 64)
		if err != nil || mb < 0 || mb > 1<<30 {
			errs = append(errs, fmt.Errorf("LECTERN_BUNDLE_RESERVE_MB=%q: want a whole number of mebibytes, 0 for none", c.BundleReserveMB))
		}
		if c.bundleReserve = mb << 20; mb == 0 {
			c.bundleReserve = -1
		}
	}
	if n, err := strconv.Atoi(c.BundleOrgShare); err != nil || n < 1 || n > 100 {
		errs = append(errs, fmt.Errorf("LECTERN_BUNDLE_ORG_SHARE=%q: want a whole percent from 1 to 100 (100: no share)", c.BundleOrgShare))
	} else {
		c.bundleOrgShare = n
	}
	if n, err := strconv.Atoi(c.BundleBuildsPerHour); err != nil || n < 0 {
		errs = append(errs, fmt.Errorf("LECTERN_BUNDLE_BUILDS_PER_HOUR=%q: want a whole number of builds, 0 for no bound", c.BundleBuildsPerHour))
	} else if c.bundleBuildsPerHour = n; n == 0 {
		c.bundleBuildsPerHour = -1 // wiring.Options: negative, no bound
	}
	if c.BundleDir == "" && !wiring.IsPostgres(c.DB) {
		// One origin a SQLite database: its bundles beside it. With
		// PostgreSQL, wiring names one directory an origin by its port.
		c.BundleDir = filepath.Join(filepath.Dir(c.DB), "bundles")
	}
	switch c.ClientSecretHash {
	case secretHashKeyed:
	case secretHashBcrypt:
		c.bcryptSecrets = true
	default:
		errs = append(errs, fmt.Errorf("LECTERN_CLIENT_SECRET_HASH=%q: want %s, or %s only while origins of 0.4.0 share the database",
			c.ClientSecretHash, secretHashKeyed, secretHashBcrypt))
	}
	if c.SecretAccept != "" && len(c.SecretAccept) < 32 {
		errs = append(errs, errors.New("LECTERN_SECRET_ACCEPT must be at least 32 characters, as LECTERN_SECRET"))
	}
	if c.SecretAccept != "" && c.SecretAccept == c.Secret {
		errs = append(errs, errors.New("LECTERN_SECRET_ACCEPT is LECTERN_SECRET: during a rotation it is the other secret (the new one, then the old one)"))
	}
	if c.URLKeys != "" {
		keys, err := link.ParseKeys(c.URLKeys)
		if err != nil {
			errs = append(errs, err)
		}
		c.urlKeys = keys
	}
	return errors.Join(errs...)
}

// parseHosts reads LECTERN_ORIGIN_HOSTS: "" (none), or comma-separated
// host[:port] names, each what a URL's authority holds, without
// userinfo.
func parseHosts(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var out []string
	for i, h := range strings.Split(list, ",") {
		h = strings.TrimSpace(h)
		u, err := url.Parse("http://" + h)
		if h == "" || err != nil || u.Host != h || u.User != nil || u.Hostname() == "" {
			return nil, fmt.Errorf("entry %d %q is not a host[:port]", i+1, h)
		}
		out = append(out, strings.ToLower(h))
	}
	return out, nil
}
