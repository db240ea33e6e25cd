package wiring

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/lectern-api/lectern/internal/telemetry"
	"github.com/lectern-api/lectern/origin/auth"
	"github.com/lectern-api/lectern/origin/idp"
	"github.com/lectern-api/lectern/shared/token"
)

// The refresh policy of the dev provider's keys read from the database
// (auth.Config): a read is one query of a table of a few rows, cheap next
// to the HTTP fetch token.Cache's defaults are made for. A key another
// origin created is seen within storeKeysMaxAge, and at once by a token
// naming it, with at most one read per storeKeysMinInterval however many
// tokens name kids the set lacks (made-up ones included); requests
// meeting a read in flight wait for it rather than start another.
const (
	storeKeysMaxAge      = time.Minute
	storeKeysMinInterval = time.Second
)

// identity returns the token verifier of the public API and, unless
// opts.IdPAddr is off, the dev identity provider. Without opts.JWKSURL the
// verifier reads the dev provider's keys from the database
// (idp.PublicKeys): every origin on it accepts the tokens of every
// origin's provider, whether or not that origin is up, and whether or not
// this one runs a provider. Keys that do not open with this deployment's
// secret stop the start either way.
func (o *Origin) identity(ctx context.Context, d Deployment, opts Options) (*idp.IdP, *auth.Authenticator, error) {
	icfg := d.IdP(o.store, o.clock.Now, o.log)
	var provider *idp.IdP
	if opts.IdPAddr != "" {
		icfg.OnToken = newTokenRequests(o.metrics.Registry()).observe // dbmetrics.go
		var err error
		if provider, err = idp.New(ctx, icfg); err != nil {
			return nil, nil, err
		}
	}
	acfg := auth.Config{Issuer: d.Issuer, Audience: d.Audience, JWKSURL: opts.JWKSURL, Now: o.clock.Now,
		Client: &http.Client{Timeout: 10 * time.Second, Transport: jwksCounter{http.DefaultTransport, o.metrics}}}
	if opts.JWKSURL == "" {
		keys, err := idp.NewPublicKeys(icfg)
		if err != nil {
			return nil, nil, err
		}
		if _, err := keys.KeySet(ctx); err != nil {
			return nil, nil, err
		}
		acfg.Keys = func(ctx context.Context) (*token.KeySet, error) {
			set, err := keys.KeySet(ctx)
			o.metrics.JWKSFetch("store", err)
			return set, err
		}
		acfg.MaxAge, acfg.MinInterval = storeKeysMaxAge, storeKeysMinInterval
		o.jwksReady = func(ctx context.Context) error { return telemetry.HasKeys(keys.KeySet(ctx)) }
	} else {
		o.jwksReady = telemetry.JWKSCheck(acfg.Client, opts.JWKSURL)
	}
	return provider, auth.New(acfg), nil
}

// jwksCounter counts the fetches of LECTERN_JWKS_URL: a fetch that got
// no answer, or one other than 200, failed.
type jwksCounter struct {
	next    http.RoundTripper
	metrics *telemetry.Metrics
}

func (c jwksCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err == nil && resp.StatusCode != http.StatusOK {
		c.metrics.JWKSFetch("url", fmt.Errorf("status %d", resp.StatusCode))
	} else {
		c.metrics.JWKSFetch("url", err)
	}
	return resp, err
}

// listenAll opens the origin's listeners: the public API's always, the
// identity provider's and the admin API's unless their address is ""
// (then nil). On an error none is left open.
func listenAll(opts Options) (origin, provider, admin net.Listener, err error) {
	if opts.OriginAddr == "" {
		return nil, nil, nil, errors.New("wiring: no address for the public API (Options.OriginAddr)")
	}
	var open []net.Listener
	listen := func(what, addr string) net.Listener {
		if err != nil || addr == "" {
			return nil
		}
		ln, lerr := net.Listen("tcp", addr)
		if lerr != nil {
			err = fmt.Errorf("listen %s: %w", what, lerr)
			closeAll(open...)
			return nil
		}
		open = append(open, ln)
		return ln
	}
	origin = listen("origin", opts.OriginAddr)
	provider = listen("identity provider", opts.IdPAddr)
	admin = listen("admin", opts.AdminAddr)
	if err != nil {
		return nil, nil, nil, err
	}
	return origin, provider, admin, nil
}

// closeAll closes the listeners that are not nil.
func closeAll(lns ...net.Listener) {
	for _, ln := range lns {
		if ln != nil {
			ln.Close()
		}
	}
}

// baseURL is http://<address of ln>, or "" for a listener that is off.
func baseURL(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return "http://" + ln.Addr().String()
}
