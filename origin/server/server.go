// Package server is the origin's public API: the request pipeline of
// docs/edge.md (The request pipeline) in its fixed order — route (404/405), authenticate (401),
// scope (403), syntactic validation (400), organisation gate (403) — and
// then the route's own handler. Every response carries X-Request-Id, and
// every error is the spec's error body.
package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lectern-api/lectern/internal/telemetry"
	"github.com/lectern-api/lectern/origin/auth"
	"github.com/lectern-api/lectern/origin/billing"
	"github.com/lectern-api/lectern/origin/bundles"
	"github.com/lectern-api/lectern/origin/lease"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/progress"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/front"
	wire "github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/shared/link"
	"github.com/lectern-api/lectern/shared/param"
	"github.com/lectern-api/lectern/shared/reqid"
	"github.com/lectern-api/lectern/shared/route"
	"github.com/lectern-api/lectern/shared/token"
)

// Config wires a Server.
type Config struct {
	Store   store.Store
	Auth    *auth.Authenticator
	Content func() *Content // the corpus being served; reloads swap it
	Now     func() time.Time
	Logger  *slog.Logger
	// Resource is the API's resource identifier (RFC 9728 §2), and
	// AuthorizationServers the issuers whose tokens it accepts; both are
	// published at /.well-known/oauth-protected-resource.
	Resource             string
	AuthorizationServers []string
	// ResourceMetadataURL is the absolute URL of that document, named in
	// every 401 challenge.
	ResourceMetadataURL string
	LicenseURL          string // the licence terms, in GET /v1/license
	// Meters holds the organisations' meters.
	Meters meter.Store
	// TagKey keys the forensic tag of the licence envelope.
	TagKey []byte
	// CursorKey seals pagination cursors.
	CursorKey []byte
	// ChangesKey seals the change feed's since tokens; ChangesAccepted
	// opens those sealed under the secret accepted beside the
	// deployment's (nil: none).
	ChangesKey, ChangesAccepted []byte
	// CursorAccepted opens the cursors sealed under the secret accepted
	// beside the deployment's while it is rotated
	// (LECTERN_SECRET_ACCEPT); nil: none. Nothing is sealed with it.
	CursorAccepted []byte
	// EdgeKeys check the edge's signatures (edgesig.KeysOf the secret).
	EdgeKeys edgesig.Keys
	// EdgeAccepted check them too: those of the accepted secret
	// (edgesig.Receiver.Accepted). Zero: none.
	EdgeAccepted edgesig.Keys
	// OriginHosts are the names (host[:port]) the edges reach this origin
	// by (LECTERN_ORIGIN_HOSTS): a call signed for another is refused, so
	// one captured on its way to a peer origin cannot be replayed here.
	// Empty: a call's own Host field is taken as this origin's.
	OriginHosts []string
	// EdgeAcceptV2 takes forwards and gate calls signed by the previous
	// release's rule, v2, which leaves If-None-Match and the other
	// answer-changing fields unsigned (edgesig.Receiver.AcceptV2): only
	// during a rolling upgrade (LECTERN_EDGE_ACCEPT_V2). False: refused.
	EdgeAcceptV2 bool
	// Started is when this origin's process started: a signature made
	// before it may have been accepted by its last run, and is refused
	// (edgesig.Seen.Begin). Zero: when New runs.
	Started time.Time
	// URLKeys check the signed download links under link.Prefix
	// (files.go); the zero Keys refuses every link.
	URLKeys link.Keys
	// CanaryKey keys the export bundles' canaries (the secret's
	// subkey.Canary).
	CanaryKey []byte
	// InlineCeiling is the largest inline export body, in bytes; 0 is
	// DefaultInlineCeiling (exports.go).
	InlineCeiling int64
	// Bundles keeps the export bundles built (exports.go); nil: a store
	// in a new temporary directory, for tests.
	Bundles *bundles.Store
	// DownloadsPerOrg bounds the downloads of one organisation served at
	// once (downloads.go); 0 is DefaultDownloadsPerOrg.
	DownloadsPerOrg int
	// DownloadRate bounds how many downloads of one organisation start a
	// second (downloads.go); 0 is DefaultDownloadRate.
	DownloadRate float64
	// Progress keeps the learners' progress records (progress.go).
	Progress progress.Store
	// Leases grants the edge's leases and takes them back (lease.go;
	// docs/edge.md, Leases). Nil: the lease and usage endpoints are not
	// served (404), and the edge gates every 304.
	Leases *lease.Manager
}

// Server serves /v1, the protected-resource metadata and the signed
// download links.
type Server struct {
	cfg       Config
	edge      edgesig.Receiver // the edge's signatures, each accepted once
	biller    billing.Biller
	endpoints map[route.ID]endpoint
	exports   exporters   // the bundle builder of the corpus served (exports.go)
	downloads downloads   // the downloads in progress per organisation (downloads.go)
	counters  counters    // the last meter counts seen per organisation (exports.go)
	parts     partsCache  // earlier versions' parts, for the change feed (changes.go)
	record    recordCache // the deployment's corpus version, for the change feed (changes.go)
	// tmpBundles is the bundle store, Config.Bundles or one made on first
	// use (exports.go, bundleStore).
	tmpBundles struct {
		once sync.Once
		st   *bundles.Store
		err  error
	}
}

// request is what the pipeline knows about a request by the time it
// reaches a route's handler.
type request struct {
	id     string
	now    time.Time
	route  *route.Route
	vars   route.Vars
	params param.Values
	claims token.Claims
	org    *store.Org // nil only on routes that skip the gate
	corpus *Content

	edge bool // signed by the edge: answers carry X-Lectern-Org and -Grants
}

// handler serves one route after the pipeline has passed it. It returns
// an *apierr.Error to answer with that error; any other error is a 500.
type handler func(w http.ResponseWriter, r *http.Request, req *request) error

// endpoint is how the server answers one route.
type endpoint struct {
	serve handler
	// validate is set on the routes with a derived validator
	// (route.Derived, and route.Inline for format=inline): the route's step up to its 304 decision, which
	// resolves the target, checks the entitlement and derives the ETag,
	// and stops there. serve runs the same step and goes on (derived); the
	// edge's gate call runs only this (edge.go). A refusal on the way is
	// its error, billed as the route bills it.
	validate func(r *http.Request, req *request) (tag string, err error)
	// body is set on the routes that take a request body: it reads and
	// checks the body before the organisation gate (the pipeline: syntactic
	// validation, a free 400) and returns the handler that serves with
	// it, in place of serve (mint.go, withBody). req holds the front's
	// results (the token's claims), not yet the organisation.
	body func(r *http.Request, req *request) (handler, error)
}

// New returns a Server.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{cfg: cfg, biller: billing.Biller{Store: cfg.Meters},
		edge: edgesig.Receiver{Keys: cfg.EdgeKeys, Accepted: cfg.EdgeAccepted, Hosts: cfg.OriginHosts, AcceptV2: cfg.EdgeAcceptV2}}
	switch {
	case !cfg.Started.IsZero():
		s.edge.Seen.Begin(cfg.Started.UnixMilli())
	case cfg.Now != nil:
		s.edge.Seen.Begin(cfg.Now().UnixMilli())
	}
	if cfg.Leases != nil {
		s.biller.Leases = cfg.Leases
	}
	s.endpoints = map[route.ID]endpoint{
		route.Tiers:         derived(s, requestTag, s.tiers),
		route.Subjects:      derived(s, s.subjectsStep, s.subjects),
		route.Subject:       derived(s, s.subjectStep, s.subject),
		route.Classes:       derived(s, s.classesStep, s.classes),
		route.Search:        derived(s, s.searchStep, s.search),
		route.License:       {serve: s.license},
		route.OpenAPI:       {serve: s.openAPI},
		route.Testprep:      derived(s, requestTag, s.testprep),
		route.TestprepItems: derived(s, s.testprepItemsStep, s.testprepItems),
		route.Lesson:        derived(s, s.lessonStep, s.lesson),
		route.Transcript:    derived(s, s.lessonStep, s.lessonTranscript),
		route.Quiz:          derived(s, s.lessonStep, s.lessonQuiz),
		route.Media:         derived(s, s.mediaStep, s.lessonMedia),
		route.ExportSubject: derived(s, s.exportSubjectStep, s.export), // route.Inline: a tag for format=inline only
		route.ExportClass:   derived(s, s.exportClassStep, s.export),
		route.MediaURLs:     withBody(param.ParseMint, s.mint),
		route.Progress:      {serve: s.getProgress}, // route.Record: the 304 is decided after the record is read
		route.PutProgress:   s.progressBody(),
		route.Changes:       {serve: s.changes}, // an extension; unmetered
	}
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A well-formed incoming id is kept (the edge forwards its own, so
	// that both tiers log one id); otherwise one is made.
	id := reqid.Keep(r.Header.Get("X-Request-Id"))
	h := w.Header()
	h.Set("X-Request-Id", id)
	commonHeaders(h)
	if r.URL.Path == "/.well-known/oauth-protected-resource" {
		s.protectedResource(w, r, id)
		return
	}
	if r.URL.Path == edgesig.GatePath { // answers nothing without a valid edge signature
		s.serveGate(w, r, id)
		return
	}
	if s.cfg.Leases != nil {
		switch r.URL.Path {
		case wire.Path: // answers nothing without a valid edge signature
			s.serveLease(w, r, id)
			return
		case wire.UsagePath:
			s.serveUsage(w, r, id)
			return
		}
	}
	if strings.HasPrefix(r.URL.Path, link.Prefix) { // signed links: no token, nothing metered
		s.serveFile(w, r, id)
		return
	}
	once, edge := s.fromEdge(r, id)
	req := &request{id: id, now: s.cfg.Now(), edge: edge}
	if req.edge {
		// Billed once whatever origin serves it (billing.Once).
		r = r.WithContext(billing.WithOnce(r.Context(), once))
		telemetry.FromContext(r.Context()).SetEdge("forward")
		s.applyUsage(r, id)
	}
	if err := s.serve(w, r, req); err != nil {
		s.writeError(w, r, id, err)
	}
}

// commonHeaders sets the fields every answer of the API carries but its
// request id: answers are per client (the token), and vary with the
// token and the encoding.
func commonHeaders(h http.Header) {
	h.Set("Cache-Control", "private")
	h.Set("Vary", "Authorization, Accept-Encoding")
}

// serve runs the request pipeline in its order (docs/edge.md).
func (s *Server) serve(w http.ResponseWriter, r *http.Request, req *request) error {
	e, err := s.runFront(r, req)
	if err != nil {
		return err
	}
	serve := e.serve
	if e.body != nil {
		if serve, err = e.body(r, req); err != nil {
			return err
		}
	}
	if err := s.admit(r, req); err != nil {
		return err
	}
	return serve(w, r, req)
}

// runFront runs the front of the pipeline (shared/front): route (404/405),
// authenticate (401), scope (403), syntactic validation (400); then it
// returns the route's endpoint, or 404 for a route this build does not
// serve.
func (s *Server) runFront(r *http.Request, req *request) (endpoint, error) {
	passed, ferr := front.Run(front.Request{Method: r.Method, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery,
		Authorization: r.Header.Get("Authorization"), Authorizations: len(r.Header.Values("Authorization"))},
		front.AuthFunc(func(authorization string) (token.Claims, *apierr.Error) {
			return s.cfg.Auth.Authenticate(r.Context(), authorization)
		}))
	if ferr != nil {
		return endpoint{}, ferr
	}
	rt := passed.Route
	req.route, req.vars, req.params, req.claims = rt, passed.Vars, passed.Params, passed.Claims
	e, ok := s.endpoints[rt.ID]
	if !ok {
		// Routes of later issues: not served by this build, and free.
		return e, apierr.New(apierr.NotFound, "This server does not serve "+rt.OperationID+" yet.")
	}
	return e, nil
}

// admit runs the organisation gate (403) on a route that has a scope,
// and takes the Content the request is served from.
func (s *Server) admit(r *http.Request, req *request) error {
	rt := req.route
	if rt.Scope != "" {
		org, err := s.org(r.Context(), req.claims)
		if err != nil {
			return err
		}
		req.org = org
		if org == nil {
			return licence.Check(nil, req.now)
		}
		telemetry.FromContext(r.Context()).SetOrg(org.ID)
		// spec: Route rules §8: the licence status answers even when the
		// organisation is suspended, expired or pre-agreement.
		if rt.ID != route.License {
			if gerr := licence.Check(org, req.now); gerr != nil {
				return gerr
			}
		}
	}
	req.corpus = s.cfg.Content()
	return nil
}

// org reads the token's organisation afresh (entitlements are re-read on
// every request): the org claim when the token has one, else the org of
// its client. A nil org means none exists, or the one of that id now is
// not the one the token was issued for (licence.Issued: it was deleted and
// created again).
func (s *Server) org(ctx context.Context, c token.Claims) (*store.Org, error) {
	orgID := c.Org
	var client *store.Client
	if orgID == "" && c.ClientID != "" {
		cl, err := s.cfg.Store.GetClient(ctx, c.ClientID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		orgID, client = cl.OrgID, cl
	}
	if orgID == "" {
		return nil, nil
	}
	o, err := s.cfg.Store.GetOrg(ctx, orgID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !licence.Issued(o, c, client) {
		return nil, nil
	}
	return o, nil
}

// statusError is an API error answered with another status than its
// code's (apierr.Status): bodyTimeout's 408 and bundleFailed's 503,
// whose conditions the spec's codes do not name.
type statusError struct {
	e      *apierr.Error
	status int
}

func (s *statusError) Error() string { return s.e.Error() }
func (s *statusError) Unwrap() error { return s.e }

// writeError answers with err in the spec's error body. Anything that is
// not an *apierr.Error is a 500 INTERNAL whose cause goes to the log, never
// to the client, unless the client has gone (clientGone).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, id string, err error) {
	var e *apierr.Error
	var se *statusError
	status := 0
	if errors.As(err, &se) {
		e, status = se.e, se.status
	} else if !errors.As(err, &e) {
		if clientGone(r) {
			s.cfg.Logger.Info("request cancelled by the client", "requestId", id, "method", r.Method, "path", r.URL.Path, "err", err)
			return
		}
		// Logged once, here, with what an operator needs to find it: the
		// request, its organisation and the route it was serving.
		op := r.URL.Path
		if rt, _, _ := route.Match(r.Method, r.URL.EscapedPath()); rt != nil {
			op = rt.OperationID
		}
		s.cfg.Logger.Error("internal error", "requestId", id, "method", r.Method, "path", r.URL.Path, "operation", op,
			"org", telemetry.FromContext(r.Context()).Org(), "err", err)
		e = apierr.New(apierr.Internal, "Internal error; it is safe to retry once. Quote the requestId if it persists.")
	}
	telemetry.FromContext(r.Context()).SetCode(string(e.Code))
	h := w.Header()
	for _, kv := range e.Headers() {
		h.Set(kv.Name, kv.Value)
	}
	if c := token.ChallengeFor(e, token.Realm, s.cfg.ResourceMetadataURL); c != "" {
		h.Set("WWW-Authenticate", c)
	}
	// Error bodies are never compressed: they are small (spec: Transport
	// names them among the bodies under 384 bytes), and the edge, which
	// writes the same errors, then needs no compressor.
	body := e.AppendJSON(nil, id)
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if status == 0 {
		status = e.Status()
	}
	if status == http.StatusRequestTimeout {
		h.Set("Connection", "close") // RFC 9110 §15.5.9; the rest of the body is not read
	}
	w.WriteHeader(status)
	w.Write(body)
}

// clientGone reports whether the request's client has gone: net/http
// cancels the request's context when its connection closes (or its
// HTTP/2 stream is reset), and nothing else cancels it while the handler
// runs. A handler failing then is not a server fault, since the failure
// is the cancellation reaching the store or the meters, and there is
// nobody to answer: it is logged at Info, not as an internal error, and
// no 500 is written.
func clientGone(r *http.Request) bool { return r.Context().Err() != nil }
