package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// limits are the bounds of the sync's exchanges with servers: how long it
// waits for one, and how much it reads. A zero field is its default
// (defaultLimits); the flags of lectern sync set them.
type limits struct {
	Connect time.Duration // a TCP connection, and its TLS handshake
	Header  time.Duration // from a request written to its answer's header
	Idle    time.Duration // the longest wait for the next bytes of an answer's body
	// MaxDownload is the most bytes of one download: a zip export (which
	// declares no size but its Content-Length) or a media asset (which
	// also may not pass the bytes its media-manifest.json declares).
	MaxDownload int64

	// tls is the TLS configuration of the connections (tests: their
	// servers' certificates); nil: the system's roots.
	tls *tls.Config
}

// defaultLimits are the bounds when no flag sets them: a server that stops
// answering fails a sync in seconds, not minutes.
var defaultLimits = limits{Connect: 10 * time.Second, Header: 30 * time.Second, Idle: 30 * time.Second, MaxDownload: 2 << 30}

// maxJSON is the most bytes of a JSON answer of the API (licence status,
// subject page, export, mint): the largest real one is a few hundred KiB.
const maxJSON = 16 << 20

// orDefault is l with each zero field set to its default.
func (l limits) orDefault() limits {
	d := defaultLimits
	if l.Connect > 0 {
		d.Connect = l.Connect
	}
	if l.Header > 0 {
		d.Header = l.Header
	}
	if l.Idle > 0 {
		d.Idle = l.Idle
	}
	if l.MaxDownload > 0 {
		d.MaxDownload = l.MaxDownload
	}
	d.tls = l.tls
	return d
}

// transport is the connections of one client, their timeouts set.
func (l limits) transport() *http.Transport {
	d := &net.Dialer{Timeout: l.Connect, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		TLSClientConfig:       l.tls,
		TLSHandshakeTimeout:   l.Connect,
		ResponseHeaderTimeout: l.Header,
		ExpectContinueTimeout: time.Second,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
	}
}

// origin is the scheme, host and port of u: where a credential may go.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(net.JoinHostPort(u.Hostname(), port))
}

// originOf is the origin of the URL raw; "" when it does not parse.
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	return origin(u)
}

// loopback reports whether u's host is a loopback one, where plain http is
// allowed (tests replace it to see a loopback server as a remote one).
var loopback = func(u *url.URL) bool {
	h := u.Hostname()
	ip := net.ParseIP(h)
	return strings.EqualFold(h, "localhost") || ip != nil && ip.IsLoopback()
}

// secure refuses a URL the sync may not send a request to: anything but
// https, or http to a loopback host. Plain http elsewhere would show the
// token, the secret or a signed link to the network.
func secure(u *url.URL) error {
	if u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", redactURL(u))
	}
	if u.Scheme == "https" || u.Scheme == "http" && loopback(u) {
		return nil
	}
	return fmt.Errorf("refusing %s: this client speaks https only (plain http only to a loopback host)", redactURL(u))
}

// redactURL is u without its query (a signed link's signature), for
// messages.
func redactURL(u *url.URL) string {
	c := *u
	c.RawQuery, c.Fragment, c.User = "", "", nil
	return c.String()
}

// redirects is a client's redirect policy: at most 10, each to a secure
// URL (secure), and, when only is not "", to that origin only: the
// clients that carry a credential never follow a redirect off the origin
// it belongs to.
func redirects(only string) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("refusing an 11th redirect")
		}
		if err := secure(req.URL); err != nil {
			return fmt.Errorf("a redirect to %s: %w", redactURL(req.URL), err)
		}
		if only != "" && origin(req.URL) != only {
			return fmt.Errorf("refusing a redirect to %s: this client's credentials go to %s only", redactURL(req.URL), only)
		}
		return nil
	}
}

// guard is the round tripper under every client of the sync. It refuses a
// request to an insecure URL (secure) and a credential (an Authorization
// header) to any origin but creds; it bounds each answer's body to max
// bytes (0: none) and each wait for its next bytes to idle.
type guard struct {
	base  http.RoundTripper
	creds []string // the origins an Authorization header may go to
	max   int64
	// bound names max in messages: "the bound of a JSON answer".
	bound string
	idle  time.Duration
	// connect and header name the timeouts in messages.
	connect, header time.Duration
}

// errIdle ends a body that sent nothing for the idle timeout.
var errIdle = errors.New("idle")

func (g *guard) RoundTrip(req *http.Request) (*http.Response, error) {
	fail := func(err error) (*http.Response, error) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	if err := secure(req.URL); err != nil {
		return fail(err)
	}
	if req.Header.Get("Authorization") != "" {
		o, allowed := origin(req.URL), false
		for _, c := range g.creds {
			allowed = allowed || c == o
		}
		if !allowed {
			return fail(fmt.Errorf("refusing to send credentials to %s: they go to %s only", o, strings.Join(g.creds, " and ")))
		}
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	resp, err := g.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel(nil)
		if req.Context().Err() == nil {
			err = g.explain(err)
		}
		return nil, err
	}
	if g.max > 0 && resp.ContentLength > g.max {
		resp.Body.Close()
		cancel(nil)
		return nil, fmt.Errorf("the answer declares %d bytes, over %s, %s", resp.ContentLength, g.bound, sizeOf(g.max))
	}
	b := &body{rc: resp.Body, ctx: ctx, cancel: cancel, max: g.max, idle: g.idle,
		what: req.Method + " " + redactURL(req.URL), bound: g.bound}
	b.timer = time.AfterFunc(time.Hour, func() { cancel(errIdle) })
	b.timer.Stop()
	resp.Body = b
	return resp, nil
}

// explain names the timeout a transport error is, if one.
func (g *guard) explain(err error) error {
	var op *net.OpError
	var te interface{ Timeout() bool }
	switch {
	case errors.As(err, &op) && op.Op == "dial" && op.Timeout(), strings.Contains(err.Error(), "TLS handshake timeout"):
		return fmt.Errorf("%w (no connection within -connect-timeout %v)", err, g.connect)
	case errors.As(err, &te) && te.Timeout():
		return fmt.Errorf("%w (no answer within -header-timeout %v)", err, g.header)
	}
	return err
}

// body is an answer's body under a guard: it ends with an error past max
// bytes, or when a read waits idle without a byte.
type body struct {
	rc          io.ReadCloser
	ctx         context.Context
	cancel      context.CancelCauseFunc
	timer       *time.Timer
	idle        time.Duration
	max, n      int64
	what, bound string
}

func (b *body) Read(p []byte) (int, error) {
	if b.max > 0 && b.n > b.max {
		return 0, b.over()
	}
	if b.max > 0 && int64(len(p)) > b.max-b.n+1 {
		p = p[:b.max-b.n+1]
	}
	if b.idle > 0 {
		b.timer.Reset(b.idle)
	}
	n, err := b.rc.Read(p)
	b.timer.Stop()
	b.n += int64(n)
	if b.max > 0 && b.n > b.max {
		return n - int(b.n-b.max), b.over()
	}
	if err != nil && err != io.EOF && errors.Is(context.Cause(b.ctx), errIdle) {
		err = fmt.Errorf("%s: no byte of the answer for %v (-idle-timeout)", b.what, b.idle)
	}
	return n, err
}

func (b *body) over() error {
	return fmt.Errorf("%s: the answer is over %s, %s", b.what, b.bound, sizeOf(b.max))
}

func (b *body) Close() error {
	b.timer.Stop()
	err := b.rc.Close()
	b.cancel(nil)
	return err
}

// sizeOf writes n bytes for a person: "16 MiB", "2 GiB", "1500 bytes".
func sizeOf(n int64) string {
	for _, u := range []struct {
		name  string
		shift uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// byteSize is a flag of a number of bytes: 2147483648, 2GiB, 512MiB, 64KiB
// (K, M, G and T are the same binary units).
type byteSize int64

func (b *byteSize) String() string { return sizeOf(int64(*b)) }

func (b *byteSize) Set(s string) error {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if i < 0 {
		i = len(s)
	}
	num, unit := s[:i], strings.ToUpper(strings.TrimSpace(s[i:]))
	shift, ok := map[string]uint{"": 0, "B": 0, "BYTES": 0, "K": 10, "KIB": 10, "M": 20, "MIB": 20, "G": 30, "GIB": 30, "T": 40, "TIB": 40}[unit]
	n, err := strconv.ParseInt(num, 10, 64)
	if !ok || err != nil || n <= 0 || n > (1<<62)>>shift {
		return fmt.Errorf("%q is not a size in bytes (e.g. 2GiB, 512MiB)", s)
	}
	*b = byteSize(n << shift)
	return nil
}

// limitFlags defines the flags of a sync's bounds on fs: the limits, and
// the whole run's -timeout.
func limitFlags(fs *flag.FlagSet) (*limits, *time.Duration) {
	l, timeout := defaultLimits, time.Hour
	fs.DurationVar(&timeout, "timeout", timeout, "the longest the whole sync may run, then it fails (exit 1) holding what it verified; a next run goes on (0: no limit)")
	fs.DurationVar(&l.Connect, "connect-timeout", l.Connect, "the longest wait for a connection and its TLS handshake")
	fs.DurationVar(&l.Header, "header-timeout", l.Header, "the longest wait for an answer's header once a request is sent")
	fs.DurationVar(&l.Idle, "idle-timeout", l.Idle, "the longest wait for the next bytes of an answer's body")
	fs.Var((*byteSize)(&l.MaxDownload), "max-download", "the most `bytes` of one download, e.g. 512MiB (a download also stops at its Content-Length, a media asset at the size media-manifest.json lists; a JSON answer at "+sizeOf(maxJSON)+")")
	return &l, &timeout
}

// syncWithin is syncDir ended after timeout (0: never): its error then
// says so.
func syncWithin(ctx context.Context, timeout time.Duration, cfg clientConfig, o syncOptions) (summary, error) {
	parent := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	sum, err := syncDir(ctx, cfg, o)
	if err != nil && timeout > 0 && ctx.Err() == context.DeadlineExceeded && parent.Err() == nil {
		err = fmt.Errorf("the -timeout of %v is reached: %w", timeout, err)
		if sum.Error != "" {
			sum.Error = err.Error()
		}
	}
	return sum, err
}
