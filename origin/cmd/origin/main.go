// Command origin runs Lectern's origin stack in the foreground: the public
// API (direct mode), the dev identity provider and the admin API, on the
// addresses of the README's settings; either of the last two may
// be off. `make run` starts it. Several origins share one PostgreSQL
// database, LECTERN_SECRET and LECTERN_ISSUER (config.check).
//
// The command parses its settings (config.go) and runs the origin that
// origin/wiring assembles from them.
package main

import (
	"context"
	"io"
	"time"

	"github.com/lectern-api/lectern/internal/cmdline"
	"github.com/lectern-api/lectern/internal/telemetry"
	"github.com/lectern-api/lectern/origin/wiring"
)

func main() { cmdline.Main("origin", run) }

// run starts the stack and serves until ctx is done.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, err := parseCommandLine(args, getenv, stdout)
	if err != nil {
		return err
	}
	st, err := start(ctx, cfg, stdout)
	if err != nil {
		return err
	}
	<-ctx.Done()
	return st.Close()
}

// start opens the origin of cfg, serving in the background, and prints
// its addresses (and make run's walk-through) on stdout, where it also
// logs. Addresses may be ":0"-style; the bound ones are in the returned
// origin.
func start(ctx context.Context, cfg config, stdout io.Writer) (*wiring.Origin, error) {
	// Before anything: a call the edge signed while this process loaded
	// (and queued while it did not listen yet) is no replay of the last
	// run's.
	began := time.Now()
	log, err := telemetry.NewLogger(stdout, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	o, err := wiring.Open(ctx, wiring.Options{
		OriginAddr: listenAddr(cfg.OriginAddr), IdPAddr: listenAddr(cfg.IdPAddr), AdminAddr: listenAddr(cfg.AdminAddr),
		AdminToken: cfg.AdminToken, DB: cfg.DB, Corpus: cfg.Corpus, CorpusSync: cfg.CorpusSync, TestClock: cfg.TestClock,
		Secret: cfg.Secret, SecretAccepted: cfg.SecretAccept, URLKeys: cfg.urlKeys, PublicURL: cfg.PublicURL, LicenseURL: cfg.LicenseURL,
		Issuer: cfg.Issuer, JWKSURL: cfg.JWKSURL, Audience: cfg.Audience,
		Leases:      wiring.LeaseSettings{Off: !cfg.Leases, TTL: cfg.leaseTTL, Retention: cfg.leaseRetention, Edges: cfg.edgeURLs},
		OriginHosts: cfg.originHosts, EdgeAcceptV2: cfg.EdgeAcceptV2, BcryptSecrets: cfg.bcryptSecrets,
		BundleDir: cfg.BundleDir, BundleMax: cfg.bundleMax, BundleReserve: cfg.bundleReserve,
		BundleOrgShare: cfg.bundleOrgShare, BundleBuildsPerHour: cfg.bundleBuildsPerHour, Limits: cfg.Limits,
		MemoryLimit: cfg.autoMemLimit, Log: log, Stdout: stdout, Started: began,
		Webhooks: wiring.WebhookSettings{AllowPrivate: cfg.WebhookAllowPrivate},
	})
	if err != nil {
		return nil, err
	}
	if err := o.Announce(ctx, stdout, cfg.Demo); err != nil {
		o.Close()
		return nil, err
	}
	return o, nil
}

// listenAddr is a listener's address setting as wiring.Options takes it:
// "" (no listener) for off, and an empty setting (-idp-addr=), which
// net.Listen reads as every address and any port, spelt ":0".
func listenAddr(addr string) string {
	switch addr {
	case off:
		return ""
	case "":
		return ":0"
	}
	return addr
}
