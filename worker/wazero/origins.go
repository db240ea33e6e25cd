package wazero

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Several origins (docs/edge.md, "Several origins"). The module knows one
// origin base, the first of the list, and builds every forward and gate
// URL on it; the host sends each subrequest under that base to one of the
// origins, round robin, and tries the next one when an attempt got no
// answer and the module's mark allows it (Output.Retry): any such attempt
// ("any"), or one that cannot have reached the origin ("unsent"). An
// origin that gave an attempt no connection is tried after the others for
// OriginBackoff.

// The module's marks of what may be sent to the next origin (docs/edge.md,
// "Several origins"; the rule is the module's, worker/pipeline.Retry).
const (
	retryAny    = "any"    // any attempt that got no answer
	retryUnsent = "unsent" // only an attempt that got no connection
)

// ParseOrigins reads a comma-separated list of origin base URLs
// (LECTERN_ORIGIN_URL, ORIGIN_URL of the Cloudflare worker): each an
// absolute http or https URL without query or fragment, a trailing slash
// dropped, none twice.
func ParseOrigins(list string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimRight(strings.TrimSpace(s), "/")
		u, err := url.Parse(s)
		switch {
		case s == "":
			return nil, fmt.Errorf("origin list %q has an empty entry", list)
		case err != nil:
			return nil, fmt.Errorf("origin %q: %w", s, err)
		case u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
			return nil, fmt.Errorf("origin %q: want an http or https base URL, e.g. http://127.0.0.1:8080", s)
		case seen[s]:
			return nil, fmt.Errorf("origin %q is listed twice", s)
		}
		seen[s] = true
		out = append(out, s)
	}
	return out, nil
}

// DefaultOriginBackoff is how long an origin that gave an attempt no
// connection is tried only after the others: long enough that a down origin costs one failed
// dial per few seconds, not one per request; short enough that a
// restarted one is back in the rotation at once.
const DefaultOriginBackoff = 5 * time.Second

// DefaultOriginDialTimeout bounds a connection attempt when there are
// several origins: an origin on the same network accepts in milliseconds,
// and one that drops packets then costs this, not the forward timeout,
// before the request goes to the next.
const DefaultOriginDialTimeout = 3 * time.Second

// origins is the host's view of the configured origins.
type origins struct {
	base    string // the module's origin base: URLs under it are the origins'
	list    []*origin
	next    atomic.Uint64
	backoff time.Duration
	now     func() time.Time // the real clock, never the test clock
	// observer is told of ejections (probe.go); newHost sets the Host's.
	observer Observer
}

type origin struct {
	base  string
	index int    // in the list: the module's signatures are in its order
	host  string // the base's host[:port]: what the host's own signatures name
	mu    sync.Mutex
	down  time.Time // tried after the others until then
	// probed is what the liveness probes found (probe.go).
	probed ejection
}

// newOrigins: base is the module's origin base, list the origins (nil:
// base alone). With one origin every URL is sent as the module wrote it.
func newOrigins(base string, list []string, backoff time.Duration) (*origins, error) {
	base = strings.TrimRight(base, "/")
	o := &origins{base: base, backoff: backoff, now: time.Now, observer: noObserver{}}
	if len(list) == 0 {
		list = []string{base}
	}
	if len(list) > 1 {
		parsed, err := ParseOrigins(strings.Join(list, ","))
		if err != nil {
			return nil, err
		}
		if base != parsed[0] {
			return nil, fmt.Errorf("the module's origin %q is not the first of the origins %q", base, list)
		}
		list = parsed
	}
	for i, b := range list {
		b = strings.TrimRight(b, "/")
		u, err := url.Parse(b)
		if err != nil {
			return nil, fmt.Errorf("origin %q: %w", b, err)
		}
		or := &origin{base: b, index: i, host: u.Host}
		or.probed.gone = make(chan struct{})
		o.list = append(o.list, or)
	}
	return o, nil
}

// target is one URL to try for a subrequest, and the origin it goes to
// (nil for a URL that is no origin's, e.g. an identity provider's JWKS).
type target struct {
	url    string
	origin *origin
}

// route lists the URLs to try for u, in order. A URL under the origin
// base, with several origins, gets one per origin: the next in round
// robin first, those in backoff last. Any other URL is tried as it is,
// once.
func (o *origins) route(u string) []target {
	rest, under := strings.CutPrefix(u, o.base)
	if !under || rest != "" && rest[0] != '/' && rest[0] != '?' {
		return []target{{url: u}}
	}
	if len(o.list) < 2 {
		return []target{{url: u, origin: o.list[0]}}
	}
	n := uint64(len(o.list))
	first := (o.next.Add(1) - 1) % n
	now := o.now()
	out := make([]target, 0, n)
	var later []target
	for i := range n {
		or := o.list[(first+i)%n]
		t := target{url: or.base + rest, origin: or}
		if or.isDown(now) || or.isEjected() {
			later = append(later, t)
		} else {
			out = append(out, t)
		}
	}
	return append(out, later...)
}

func (or *origin) isDown(now time.Time) bool {
	or.mu.Lock()
	defer or.mu.Unlock()
	return now.Before(or.down)
}

// failed records that or gave an attempt no connection: it goes to the
// back of the order for the backoff.
func (o *origins) failed(or *origin) {
	if or == nil {
		return
	}
	or.mu.Lock()
	or.down = o.now().Add(o.backoff)
	or.mu.Unlock()
}

// traceConnection returns ctx with a trace that records whether the
// request sent within it got a connection. One that got none was never
// sent, whatever its method: its dial was refused, found no route or was
// cut. (The error alone does not say: a dial cut by the request's context
// is reported as the context's error.)
func traceConnection(ctx context.Context) (context.Context, *atomic.Bool) {
	got := new(atomic.Bool)
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { got.Store(true) }}), got
}

// errHandedOn is what a failed attempt reads from a client body that has
// since been handed to the next origin.
var errHandedOn = errors.New("the client's body was handed to another origin")
