// Package wazero serves HTTP through the edge module (docs/edge.md) under
// wazero, the Go host beside worker/cloudflare's JS one: it compiles the
// module once, keeps a small pool of configured instances, and for each
// request drives the module's start/resume loop, performing the
// subrequests it asks for (JWKS, the origin's gate, forwards) and writing
// its final answer. The local edge (worker/cmd/edge), wasmtest and tools/bench
// all run this host, so the module under test is served exactly as
// `make run` serves it.
//
// Each instance is single-threaded: calls into it are serialised, but a
// request releases its instance while a subrequest is in flight, so one
// instance serves interleaved requests (its state is kept per handle) and
// a pool of N serves N calls in parallel. A request stays on the instance
// it started on; the JWKS, verified-token and per-organisation ETag caches
// are per instance, so requests bearing one token go to one instance.
//
// With several origins (Config.Origins), subrequests to the origin go to
// each in turn and fail over where that cannot apply a request twice
// (origins.go).
//
// With leases (Config.Leases) the host performs the module's background
// lease and usage calls, logs each leased 304 before answering it and
// reports the last run's log at start (usage.go), flushes the module's
// usage every second and at Close, and serves the origin's revoke push
// (leases.go).
//
// The files, by job: host.go serves requests through the pool;
// instance.go is one instance and its parked requests; subrequest.go
// performs what the module asks for (the stall timer, failover);
// origins.go and probe.go keep the origins (round robin, backoff,
// liveness); codec.go and guest.go are the ABI's messages; observe.go
// tells a Config.Observer what the host does (the edge's metrics).
package wazero

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/shared/param"
	"github.com/lectern-api/lectern/shared/reqid"
)

// Config is what a Host needs besides the module.
type Config struct {
	// The configuration message of docs/edge.md.
	Origin           string // origin base URL, e.g. http://127.0.0.1:8080 (with Origins: empty, or the first of them)
	JWKSURL          string
	Issuer           string
	Audience         string
	Secret           string // LECTERN_SECRET, shared with the origin
	ResourceMetadata string // URL named in 401 challenges
	URLKeys          string // LECTERN_URL_KEYS, as the origin's; empty: the key derived from Secret
	// SecretAccept is LECTERN_SECRET_ACCEPT, as the origins': the secret
	// accepted beside Secret while it is rotated. The origins' revoke
	// pushes signed with it are taken, and links of its derived key
	// verify; the host and the module sign with Secret only.
	SecretAccept string
	// SignV2 signs every call to the origins, the module's and the
	// host's own, by the previous release's rule (edgesig v2), which its
	// origins read: for an edge upgraded before them (LECTERN_EDGE_SIGN_V2,
	// docs/upgrading.md). Off: the v3 rule.
	SignV2 bool

	// Origins, when there are several, are the origins' base URLs
	// (docs/edge.md, "Several origins"): the module is configured with the
	// first, and the host sends each subrequest under it to one of them,
	// round robin, trying another on a connection failure where that is
	// safe. Default: Origin alone.
	Origins []string
	// OriginBackoff is how long an origin that gave an attempt no
	// connection is tried only after the others (default
	// DefaultOriginBackoff).
	OriginBackoff time.Duration
	// ProbeEvery is how often each origin's liveness is probed when there
	// are several (probe.go; 0: DefaultProbeEvery; negative: never).
	ProbeEvery time.Duration
	// DialTimeout bounds each connection attempt of the default Client
	// (default: net/http's 30 s with one origin, DefaultOriginDialTimeout
	// with several, so that an origin that drops packets, rather than
	// refusing, costs that much before the next is tried).
	DialTimeout time.Duration

	// Leases turns the module's leases on (docs/edge.md, "Leases"): it
	// then answers revalidations within a lease from the origin, and the
	// host keeps UsageLog, performs the module's background subrequests,
	// reports usage every lease.ReportInterval (the module is configured
	// to report by that interval only, "reportEvery": 0: the log holds
	// what is unreported) and serves the revoke endpoint (POST
	// lease.RevokePath).
	Leases bool
	// Revoke is the URL at which the origin reaches this host's revoke
	// endpoint, http://<its listen address>/internal/revoke, sent in every
	// lease request; "" when the origin cannot push (it then waits for a
	// lease to expire).
	Revoke string
	// UsageLog is the path of the usage log, required with Leases: one
	// per host process, never shared (usage.go).
	UsageLog string

	// Instances is the pool size (default 1).
	Instances int
	// Now is the clock given to the guest in every message's "now"
	// (default time.Now). The test clock of the local stack goes here.
	Now func() time.Time
	// Client performs subrequests (default: no redirects, no transparent
	// decompression: the origin's bytes pass through as they are).
	Client *http.Client
	// SubrequestTimeout bounds JWKS and gate calls, whole (default 10 s).
	SubrequestTimeout time.Duration
	// ForwardTimeout bounds how long a forward may wait on an origin that
	// makes no progress (default 30 s): for the answer's head once the
	// client's body has been passed on, and for each read of the answer's
	// body. A forward that times out before its head is a failed
	// subrequest, which the guest answers with 500 INTERNAL; one whose
	// body stalls is cut off. Time spent waiting on the client (its body,
	// its reading of the answer) does not count: the server's limits
	// bound that.
	ForwardTimeout time.Duration
	// Stderr receives the guest's stdout and stderr (default discarded).
	Stderr io.Writer
	// ThreadCPU, when set, reads the calling thread's CPU clock; the Host
	// then counts the CPU time of its module calls in Stats (tools/bench
	// sets it; each call counted costs two clock reads).
	ThreadCPU func() time.Duration
	// ThreadCPUEvery, when above 1, makes the count a sample: each
	// instance reads the clock around one call in ThreadCPUEvery and
	// counts that call ThreadCPUEvery times, so that the reads (system
	// calls on Linux) weigh less on the load being measured. Take it odd:
	// a request's calls come in start–resume pairs, and an even period
	// could count only starts.
	ThreadCPUEvery int
	Logger         *slog.Logger
	// Observer, when set, is told what the host does, for metrics
	// (observe.go).
	Observer Observer
}

// Host serves HTTP through a pool of module instances.
type Host struct {
	mod     *Module
	cfg     Config
	origins *origins
	next    atomic.Uint64
	stats   struct {
		requests, forwards, subrequests, parks, failures, refreshes, failovers, backgrounds, revokes atomic.Int64
		moduleCPU                                                                                    atomic.Int64 // ns
	}

	observer Observer     // Config.Observer, or one that does nothing
	busy     atomic.Int64 // instances inside a module call (Pool)

	keys   edgesig.Keys     // sign the host's own calls (usage replay)
	revoke edgesig.Receiver // checks the origin's revoke pushes
	usage  *usageLog        // with Config.Leases
	// replaying holds the earlier runs' usage while its replay is on its
	// way (each lease's highest count; nil once answered): a revoke push
	// naming one of those leases is answered with it (serveRevoke), so
	// the origin never closes it below what was served.
	replaying map[string]int64
	// dirty says a lease may have usage to report: the flush ticker then
	// asks the instances (leases.go).
	dirty    atomic.Bool
	tickStop chan struct{}
	tickDone chan struct{}

	// Background work: JWKS refreshes (docs/edge.md, "refresh"), the
	// module's background subrequests, the usage log's replay. Its
	// context is cancelled by Close, which then waits for it.
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bgMu     sync.Mutex // guards bgClosed, and bg.Add against Close's Wait
	bgClosed bool
	bg       sync.WaitGroup

	mu   sync.Mutex // guards pool (an instance is replaced after a trap)
	pool []*instance
}

// New instantiates and configures cfg.Instances instances of m.
func New(ctx context.Context, m *Module, cfg Config) (*Host, error) {
	h, err := newHost(cfg)
	if err != nil {
		return nil, err
	}
	h.mod = m
	if h.cfg.Leases {
		if _, ok := m.compiled.ExportedFunctions()["control"]; !ok {
			h.Close(ctx)
			return nil, errors.New("edge host: leases need a module that exports control (docs/edge.md: Module ABI)")
		}
		if err := h.startLeases(); err != nil {
			h.Close(ctx)
			return nil, err
		}
	}
	h.startProbes()
	for range h.cfg.Instances {
		in, err := h.instantiate(ctx)
		if err != nil {
			h.Close(ctx)
			return nil, err
		}
		h.pool = append(h.pool, in)
	}
	return h, nil
}

// newHost is a Host of cfg, its defaults set, without instances.
func newHost(cfg Config) (*Host, error) {
	if cfg.Instances <= 0 {
		cfg.Instances = 1
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DisableCompression = true
		t.MaxIdleConnsPerHost = 64
		if cfg.DialTimeout <= 0 && len(cfg.Origins) > 1 {
			cfg.DialTimeout = DefaultOriginDialTimeout
		}
		if cfg.DialTimeout > 0 {
			t.DialContext = (&net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}).DialContext
		}
		cfg.Client = &http.Client{Transport: t,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if cfg.SubrequestTimeout <= 0 {
		cfg.SubrequestTimeout = 10 * time.Second
	}
	if cfg.ForwardTimeout <= 0 {
		cfg.ForwardTimeout = 30 * time.Second
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Origin == "" && len(cfg.Origins) > 0 {
		cfg.Origin = cfg.Origins[0]
	}
	if cfg.OriginBackoff <= 0 {
		cfg.OriginBackoff = DefaultOriginBackoff
	}
	origins, err := newOrigins(cfg.Origin, cfg.Origins, cfg.OriginBackoff)
	if err != nil {
		return nil, err
	}
	keys := edgesig.KeysOf([]byte(cfg.Secret))
	h := &Host{cfg: cfg, origins: origins, keys: keys, observer: cfg.Observer,
		revoke: edgesig.Receiver{Keys: keys, Accepted: edgesig.KeysOf([]byte(cfg.SecretAccept))}}
	if h.observer == nil {
		h.observer = noObserver{}
	}
	origins.observer = h.observer
	h.revoke.Seen.Begin(cfg.Now().UnixMilli()) // a push to the last run is not taken again
	if u, err := url.Parse(cfg.Revoke); err == nil && u.Host != "" {
		// A push signed for another edge host is refused here.
		h.revoke.Hosts = []string{u.Host}
	}
	h.bgCtx, h.bgCancel = context.WithCancel(context.Background())
	return h, nil
}

// Close closes the Host's instances (the Module stays compiled).
func (h *Host) Close(ctx context.Context) error {
	// The leases' usage is reported first, while the origin may still
	// take it; then background work ends (its fetches cancelled), while
	// its instance can still take the resume.
	h.stopLeases()
	h.bgMu.Lock()
	h.bgClosed = true
	h.bgMu.Unlock()
	h.bgCancel()
	h.bg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for _, in := range h.pool {
		in.mu.Lock()
		in.kill(errors.New("host closed"))
		errs = append(errs, in.g.Close(ctx))
		in.mu.Unlock()
	}
	h.pool = nil
	if h.usage != nil {
		errs = append(errs, h.usage.close())
	}
	return errors.Join(errs...)
}

// Memory returns the linear memory size, in bytes, of each instance.
func (h *Host) Memory() []uint64 {
	h.mu.Lock()
	pool := append([]*instance(nil), h.pool...)
	h.mu.Unlock()
	out := make([]uint64, len(pool))
	for i, in := range pool {
		in.mu.Lock()
		out[i] = uint64(in.g.mod.Memory().Size())
		in.mu.Unlock()
	}
	return out
}

// Stats counts what a Host has done since New.
type Stats struct {
	Requests    int64 // client requests started
	Forwards    int64 // client requests sent on to the origin
	Subrequests int64 // other subrequests: JWKS fetches, gate calls
	Parks       int64 // requests parked behind another's JWKS fetch
	Failures    int64 // requests answered 500 by the host itself
	Refreshes   int64 // background JWKS refreshes answered to the guest
	Failovers   int64 // subrequests sent on to another origin after a failed attempt
	Backgrounds int64 // background subrequests (lease requests, usage reports) answered to the guest; not in Subrequests
	Revokes     int64 // the origin's revoke pushes answered 200
	// ModuleCPU is the CPU time spent in module calls (configure, and for
	// each message alloc, the copy in and start or resume), counted only
	// when Config.ThreadCPU is set: an estimate from a sample of the calls
	// when Config.ThreadCPUEvery is.
	ModuleCPU time.Duration
}

// Stats returns the counters.
func (h *Host) Stats() Stats {
	return Stats{Requests: h.stats.requests.Load(), Forwards: h.stats.forwards.Load(),
		Subrequests: h.stats.subrequests.Load(), Parks: h.stats.parks.Load(), Failures: h.stats.failures.Load(),
		Refreshes: h.stats.refreshes.Load(), Failovers: h.stats.failovers.Load(), Backgrounds: h.stats.backgrounds.Load(),
		Revokes:   h.stats.revokes.Load(),
		ModuleCPU: time.Duration(h.stats.moduleCPU.Load())}
}

func (h *Host) instantiate(ctx context.Context) (*instance, error) {
	g, err := h.mod.Instantiate(ctx, h.cfg.Stderr)
	if err != nil {
		return nil, err
	}
	in := &instance{g: g, parked: map[int64]chan struct{}{}, woken: map[int64]bool{},
		clock: h.cfg.ThreadCPU, every: max(h.cfg.ThreadCPUEvery, 1), cpu: &h.stats.moduleCPU, busy: &h.busy}
	in.mu.Lock()
	err = configure(in.call, h.configMessage())
	in.mu.Unlock()
	if err != nil {
		g.Close(ctx)
		return nil, err
	}
	return in, nil
}

// configMessage is every instance's configuration. With leases the module
// reports usage by lease.ReportInterval only ("reportEvery": 0): the
// usage log holds what is unreported, so a report every ReportEvery uses
// would buy nothing and cost the origin a call (the host's flush reports
// every ReportInterval).
func (h *Host) configMessage() ConfigMessage {
	c := ConfigMessage{Origin: h.cfg.Origin, JWKSURL: h.cfg.JWKSURL, Issuer: h.cfg.Issuer,
		Audience: h.cfg.Audience, Secret: h.cfg.Secret, ResourceMetadata: h.cfg.ResourceMetadata, URLKeys: h.cfg.URLKeys,
		SecretAccept: h.cfg.SecretAccept, Leases: h.cfg.Leases, Revoke: h.cfg.Revoke, SignV2: h.cfg.SignV2}
	if h.origins != nil && len(h.origins.list) > 1 {
		bases := make([]string, len(h.origins.list))
		for i, o := range h.origins.list {
			bases[i] = o.base
		}
		c.Origins = strings.Join(bases, ",")
	}
	if h.cfg.Leases {
		c.ReportEvery = new(int64)
	}
	return c
}

// pick chooses the instance for a new request. Requests with the same
// Authorization go to the same instance, where that token is already
// verified and its organisation's ETag inputs are cached (both caches are
// per instance); the others go round robin.
func (h *Host) pick(authorization string) *instance {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.pool) == 0 {
		return nil
	}
	if authorization == "" {
		return h.pool[h.next.Add(1)%uint64(len(h.pool))]
	}
	f := fnv.New32a()
	io.WriteString(f, authorization)
	return h.pool[f.Sum32()%uint32(len(h.pool))]
}

// replace swaps a trapped instance for a fresh one; requests still bound
// to the old one fail.
func (h *Host) replace(old *instance) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, in := range h.pool {
		if in != old {
			continue
		}
		fresh, err := h.instantiate(context.Background())
		if err != nil {
			h.cfg.Logger.Error("edge: replace instance", "err", err)
			return
		}
		h.pool[i] = fresh
		old.g.Close(context.Background())
	}
}

func (h *Host) now() int64 { return h.cfg.Now().UnixMilli() }

// ServeHTTP answers r through the module.
func (h *Host) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Leases && r.URL.Path == lease.RevokePath && h.serveRevoke(w, r) {
		return
	}
	h.stats.requests.Add(1)
	in := h.pick(r.Header.Get("Authorization"))
	if in == nil {
		h.fail(w, errors.New("host closed"))
		return
	}
	// The body is read before the module sees the request: the signature
	// of its forward covers the body's hash. At most param.MaxBody+1
	// bytes are read and forwarded: no route takes more, and the origin
	// answers that many as too large, as it would the whole.
	var body []byte
	var bodyHash string
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		b, err := io.ReadAll(io.LimitReader(r.Body, param.MaxBody+1))
		if err != nil {
			h.cfg.Logger.Info("edge: the client's body could not be read", "err", err)
			w.Header().Set("Connection", "close")
			writeErrorStatus(w, http.StatusRequestTimeout, hostRequestID(), &apierr.Error{Code: apierr.BadRequest, Parameter: "body",
				Message: "The request body did not arrive in time (the server's read limit); nothing was done. Send the request again, its body at once."})
			return
		}
		if len(b) > 0 {
			body, bodyHash = b, edgesig.BodyHash(b)
		}
	}
	out, err := h.do(in, Start, StartMessage{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
		Headers: requestHeaders(r), Now: h.now(), BodySHA256: bodyHash})
	var fwd *http.Response // the origin's answer to the last forward, body unread
	defer func() {
		if fwd != nil {
			fwd.Body.Close()
		}
	}()
	for {
		if err != nil {
			if in.isDead() {
				h.replace(in)
			}
			h.fail(w, err)
			return
		}
		switch out.Kind {
		case "response":
			h.respond(w, out, fwd)
			return
		case "subrequest":
			if fwd != nil {
				fwd.Body.Close()
				fwd = nil
			}
			if out.Forward {
				h.stats.forwards.Add(1)
			} else {
				h.stats.subrequests.Add(1)
			}
			var msg ResumeMessage
			if out.Forward {
				out.body = body
			}
			msg, fwd = h.subrequest(r.Context(), r, out)
			msg.Handle, msg.Now = out.Handle, h.now()
			out, err = h.do(in, Resume, msg)
		case "park":
			h.stats.parks.Add(1)
			select {
			case <-out.parked:
			case <-time.After(parkTimeout):
				in.unpark(out.Handle)
			}
			out, err = h.do(in, Resume, wakeMessage{Handle: out.Handle, Wake: true, Now: h.now()})
		default:
			err = fmt.Errorf("edge module output of kind %q", out.Kind)
		}
	}
}

// requestHeaders are r's headers as the start message carries them, Host
// first.
func requestHeaders(r *http.Request) [][2]string {
	hdrs := make([][2]string, 0, len(r.Header)+1)
	if r.Host != "" {
		hdrs = append(hdrs, [2]string{"Host", r.Host})
	}
	for name, vs := range r.Header {
		for _, v := range vs {
			hdrs = append(hdrs, [2]string{name, v})
		}
	}
	return hdrs
}

// respond writes the module's response output: its status, headers and
// body, or with Passthrough the body of fwd, the origin's answer to the
// last forward.
func (h *Host) respond(w http.ResponseWriter, out *Output, fwd *http.Response) {
	if out.Passthrough && fwd == nil {
		h.fail(w, errors.New("passthrough without a forward"))
		return
	}
	if out.Lease != nil {
		// Logged before it is answered: a 304 the client saw is
		// billed even if this process is killed now. A use that
		// cannot be logged is not answered.
		if err := h.logUse(out.Lease); err != nil {
			h.fail(w, err)
			return
		}
	}
	wh := w.Header()
	for _, kv := range out.Headers {
		wh.Add(kv[0], kv[1])
	}
	w.WriteHeader(out.Status)
	if out.Status == http.StatusNotModified {
		h.observer.NotModified(notModifiedBy(out))
	}
	if out.Passthrough {
		if _, err := io.Copy(w, fwd.Body); err != nil {
			h.cfg.Logger.Warn("edge: passthrough body", "err", err)
		}
	} else if out.Body != "" {
		io.WriteString(w, out.Body)
	}
}

// do is in.do, then the background work the output asks for, if any.
func (h *Host) do(in *instance, fn Func, msg message) (*Output, error) {
	out, err := in.do(fn, msg)
	if err != nil {
		return out, err
	}
	if out.Refresh != nil {
		h.refresh(in, *out.Refresh)
	}
	if out.Background != nil {
		h.background(in, *out.Background)
	}
	if out.Lease != nil {
		h.dirty.Store(true)
	}
	return out, err
}

// refresh fetches the JWKS in a goroutine of its own, bounded by
// SubrequestTimeout and cancelled by Close, and resumes the background
// handle on in with the answer (status 0 on failure). No request waits
// for it; the guest's "done" may wake requests parked on it.
func (h *Host) refresh(in *instance, rf Refresh) {
	h.bgMu.Lock()
	defer h.bgMu.Unlock()
	if h.bgClosed {
		return // the guest presumes the fetch lost (token.DefaultInFlightTimeout)
	}
	h.stats.subrequests.Add(1)
	h.bg.Add(1)
	go func() {
		defer h.bg.Done()
		msg, _ := h.subrequest(h.bgCtx, nil, &Output{Method: "GET", URL: rf.URL, Retry: rf.Retry,
			Headers: [][2]string{{"Accept", "application/json"}}})
		msg.Handle, msg.Now = rf.Handle, h.now()
		out, err := h.do(in, Resume, msg)
		switch {
		case err != nil:
			h.cfg.Logger.Warn("edge: background JWKS refresh", "err", err)
		case out.Kind != "done":
			h.cfg.Logger.Warn("edge: background JWKS refresh answered", "kind", out.Kind, "status", out.Status, "body", out.Body)
		default:
			h.stats.refreshes.Add(1)
		}
	}()
}

// fail answers 500 INTERNAL in the API's error body when the host itself
// fails (a trapped instance, a malformed output): the cause goes to the
// log, never to the client.
func (h *Host) fail(w http.ResponseWriter, err error) {
	id := hostRequestID()
	h.stats.failures.Add(1)
	h.cfg.Logger.Error("edge host", "requestId", id, "err", err)
	body := apierr.New(apierr.Internal, "Internal error at the edge; it is safe to retry once. Quote the requestId if it persists.").AppendJSON(nil, id)
	wh := w.Header()
	wh.Set("Content-Type", "application/json")
	wh.Set("Content-Length", strconv.Itoa(len(body)))
	wh.Set("X-Request-Id", id)
	wh.Set("Cache-Control", "private")
	w.WriteHeader(http.StatusInternalServerError)
	w.Write(body)
}

// hostRequestID is the request id of an answer the host writes itself,
// with no module output behind it: "edge_" and 24 lowercase hex digits,
// the form both hosts give (hostErrorId in
// shared/testdata/edge-messages.txt), and the one worker/cmd/edge's
// listener gives net/http's own refusals (httpsrv's IDPrefix).
func hostRequestID() string { return reqid.NewOf("edge_", reqid.RandomBytes) }
