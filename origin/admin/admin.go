// Package admin is the operator's admin API (docs/operations.md, "The admin API"),
// served on its own listener (LECTERN_ADMIN_ADDR, loopback by default):
// organisations and their plans, OAuth clients, the export ledger, leak
// forensics, webhook endpoints and their delivery logs, corpus reload,
// health, the Prometheus metrics (GET /metrics),
// its OpenAPI description (GET /admin/v1/openapi.json, openapi.json) and,
// with LECTERN_TEST_CLOCK=1 only, the test clock.
//
// Every call needs "Authorization: Bearer <LECTERN_ADMIN_TOKEN>"; the token
// is checked before routing, so nothing about the admin surface (not even
// whether the test clock is on) is visible without it. Every response
// carries an X-Request-Id, and every error is the API's error body
// (spec: Errors) with requestId equal to that header.
//
// Handlers return error and one adapter writes it: an *apierr.Error is sent
// as is; anything else is 500 INTERNAL, its cause logged with the request
// id and never sent.
package admin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/lectern-api/lectern/origin/clock"
	"github.com/lectern-api/lectern/origin/internal/jsonbody"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/webhook"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/reqid"
)

// Config is what the admin API needs from the origin. Store is required;
// the function members are the origin's, passed in so that this package
// stays decoupled from the identity provider and the corpus.
type Config struct {
	// Token is LECTERN_ADMIN_TOKEN. It is compared in constant time with
	// the Bearer token of every call and never logged. An empty Token
	// rejects every call.
	Token string
	Store store.Store
	// Clock is the origin's clock (nil: the wall clock).
	Clock *clock.Clock
	// TestClock (LECTERN_TEST_CLOCK=1) serves /admin/v1/clock; without it
	// that path is 404 NOT_FOUND exactly like an unknown one.
	TestClock bool
	// CreateClient creates an OAuth client of orgID with scope suffixes
	// and returns its id and its only plaintext copy of the secret. It may
	// return an error wrapping store.ErrNotFound for an unknown org.
	// Nil: the clients route is not served (404).
	CreateClient func(ctx context.Context, orgID string, scopes, grantTypes, redirectURIs []string) (clientID, secret string, err error)
	// Reload loads the corpus in dir and swaps it in, returning the new
	// content version. An *apierr.Error is answered as is; every other
	// error is a load failure and answers 400 naming dir with the error's
	// text (the loader names file and field).
	// Nil: the reload route is not served (404).
	Reload func(ctx context.Context, dir string) (contentVersion string, err error)
	// Ready reports whether the origin is ready (nil: always ready).
	Ready func() bool
	// Orgs, when set, is what the origin holds about an organisation
	// beside its stored record: its meters and its enumeration alarm.
	// Nil: orgs are answered as stored.
	Orgs Orgs
	// Meters holds the export ledger GET /admin/v1/orgs/{orgId}/ledger
	// lists (meter.Store.Ledger, under the org's meter.Key). Nil: the
	// ledger route is not served (404).
	Meters meter.Store
	// Forensics, with Meters, serves POST /admin/v1/forensics (nil: 404).
	Forensics *Forensics
	// Logger receives the access log and the causes of 500s (nil: none).
	Logger *slog.Logger
	// Metrics, when set, is served at GET /metrics (Prometheus), behind
	// the admin token like every call: a scraper is given it as its
	// bearer token (docs/operations.md, Metrics).
	Metrics http.Handler
	// Leases takes back the edge's leases after a change that must apply
	// on the next call (nil: there are none to take back).
	Leases Leases
	// Webhooks serves the organisations' webhook endpoints and delivery
	// logs (webhooks.go), and is told of licence changes and suspensions
	// (nil: the routes are not served, 404).
	Webhooks *webhook.Outbox
}

// Leases are the edge's leases on organisations (origin/lease.Manager;
// docs/edge.md, Leases). A change an edge could contradict from a lease
// (an organisation patched, reinstated or deleted, the test clock moved)
// is committed first, then its leases are revoked, and only then is it
// acknowledged, so that the next call after the answer sees it through
// every edge.
type Leases interface {
	// Revoke returns once the leases of org (an organisation's
	// meter.Key) are revoked or expired.
	Revoke(ctx context.Context, org string) error
	// RevokeAll is Revoke of every organisation.
	RevokeAll(ctx context.Context) error
}

// Orgs is the origin's side of an organisation (server.Server provides
// it), passed in so that this package stays decoupled from the meters and
// the corpus.
type Orgs interface {
	// OrgExtras returns, for the organisation just read, its effective
	// status (its stored one, or "suspended" while the enumeration alarm
	// is in force) and the members GET org adds (meters, enumeration), so
	// that the answer is of one organisation even when its id is deleted
	// and created again meanwhile. The members may not collide with the
	// org's own.
	OrgExtras(ctx context.Context, o *store.Org) (status string, members map[string]any, err error)
	// Reinstate lifts the enumeration alarm of o. PATCH calls it before it
	// stores status "active" (the operator's reinstatement).
	Reinstate(ctx context.Context, o *store.Org) error
}

// revoke takes back the leases of o after a change to it committed.
func (a *api) revoke(ctx context.Context, o *store.Org) error {
	if a.cfg.Leases == nil {
		return nil
	}
	if err := a.cfg.Leases.Revoke(ctx, meter.Key(o)); err != nil {
		return fmt.Errorf("revoke the leases of org %s: %w", o.ID, err)
	}
	return nil
}

// maxBody bounds every request body but a forensics leak (MaxLeak).
const maxBody = 1 << 20

// realm is the Bearer challenge's realm (RFC 6750 §3).
const realm = `Bearer realm="lectern-admin"`

// Handler returns the admin API.
func Handler(cfg Config) http.Handler {
	a := &api{cfg: cfg, log: cfg.Logger, clk: cfg.Clock, mux: http.NewServeMux()}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.clk == nil {
		a.clk = clock.New(nil)
	}
	sum := sha256.Sum256([]byte(cfg.Token))
	a.tokenSum = sum[:]

	a.handle("GET /admin/v1/health", a.health)
	a.handle("GET /admin/v1/openapi.json", a.openapi)
	a.handle("POST /admin/v1/orgs", a.createOrg)
	a.handle("GET /admin/v1/orgs/{orgId}", a.getOrg)
	a.handle("PATCH /admin/v1/orgs/{orgId}", a.patchOrg)
	a.handle("DELETE /admin/v1/orgs/{orgId}", a.deleteOrg)
	if cfg.CreateClient != nil {
		a.handle("POST /admin/v1/orgs/{orgId}/clients", a.createClient)
	}
	if cfg.Webhooks != nil {
		a.handleWebhooks()
	}
	if cfg.Meters != nil {
		a.handle("GET /admin/v1/orgs/{orgId}/ledger", a.ledger)
		a.handle("GET /admin/v1/ledger/archive", a.archive)
		a.handle("POST /admin/v1/ledger/trim", a.trim)
	}
	if cfg.Meters != nil && cfg.Forensics != nil {
		a.handleBody("POST /admin/v1/forensics", MaxLeak, a.forensics)
	}
	if cfg.Reload != nil {
		a.handle("POST /admin/v1/corpus/reload", a.reload)
	}
	if cfg.Metrics != nil {
		a.mux.Handle("GET /metrics", cfg.Metrics)
		a.patterns = append(a.patterns, "GET /metrics")
	}
	if cfg.TestClock {
		a.handle("GET /admin/v1/clock", a.getClock)
		a.handle("POST /admin/v1/clock", a.setClock)
	}
	return a
}

type api struct {
	cfg      Config
	log      *slog.Logger
	clk      *clock.Clock
	mux      *http.ServeMux
	tokenSum []byte   // SHA-256 of cfg.Token
	patterns []string // the routes served, as registered (openapi.json describes them)
}

// handlerFunc is an admin handler: it writes a success response itself
// and returns any error for the adapter to write.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle serves pattern with h, its body at most maxBody bytes.
func (a *api) handle(pattern string, h handlerFunc) { a.handleBody(pattern, maxBody, h) }

// handleBody serves pattern with h, its body at most limit bytes: a
// longer declared Content-Length is 413 before h, unread; h's read of a
// longer chunked body fails with an *http.MaxBytesError (tooLarge). The
// token was checked before (ServeHTTP): the listener leaves bodies to
// this (origin/wiring.Servers.ServeAdmin), so a caller without it is
// answered 401 and nothing of its body is read.
func (a *api) handleBody(pattern string, limit int64, h handlerFunc) {
	a.patterns = append(a.patterns, pattern)
	a.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			w.Header().Set("Connection", "close") // the body is not read
			a.writeError(w, r, tooLarge(limit))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		if err := h(w, r); err != nil {
			a.writeError(w, r, err)
		}
	})
}

// tooLarge is the 413 of a body over limit bytes (a whole number of MiB).
func tooLarge(limit int64) *apierr.Error {
	return apierr.New(apierr.PayloadTooLarge, "The request body exceeds "+strconv.FormatInt(limit>>20, 10)+" MiB.")
}

type ctxKey struct{}

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

// ServeHTTP runs the admin pipeline: request id → authenticate (401) →
// route (404, 405) → handler.
func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := reqid.NewOf("", 8) // 16 lowercase hex digits; an incoming id is never kept
	w.Header().Set("X-Request-Id", id)
	// Responses may hold client secrets and are never worth caching.
	w.Header().Set("Cache-Control", "no-store")
	r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, id))
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			a.log.Error("admin handler panicked", "requestId", id, "panic", p)
			if sw.status == 0 {
				a.writeError(sw, r, fmt.Errorf("panic: %v", p))
			}
		}
		// Never the Authorization header or a body: they hold secrets.
		a.log.Info("admin request", "requestId", id, "method", r.Method, "path", r.URL.Path,
			"status", sw.status, "duration", time.Since(start))
	}()
	a.serve(sw, r)
}

func (a *api) serve(w http.ResponseWriter, r *http.Request) {
	if err := a.authenticate(w, r); err != nil {
		if r.ContentLength != 0 {
			// Nothing of the body is read without the token, nor
			// waited for: net/http would read up to 256 KiB of it
			// before answering on a connection it keeps.
			w.Header().Set("Connection", "close")
		}
		a.writeError(w, r, err)
		return
	}
	// An unclean path (//, /./, /../, a trailing slash) names no route:
	// answer 404 rather than the mux's redirect.
	if p := r.URL.EscapedPath(); path.Clean(p) != p {
		a.writeError(w, r, notFoundRoute(r))
		return
	}
	if _, pattern := a.mux.Handler(r); pattern == "" {
		// No route for method and path: ask the mux which it is, 404 or
		// 405, by running its own reply on a writer that only records.
		var rec headerRecorder
		h, _ := a.mux.Handler(r)
		h.ServeHTTP(&rec, r)
		if rec.status == http.StatusMethodNotAllowed {
			allow := strings.Split(rec.header.Get("Allow"), ", ")
			a.writeError(w, r, &apierr.Error{Code: apierr.MethodNotAllowed, Allow: allow,
				Message: r.Method + " is not served on " + r.URL.Path + "; allowed: " + strings.Join(allow, ", ") + "."})
			return
		}
		a.writeError(w, r, notFoundRoute(r))
		return
	}
	a.mux.ServeHTTP(w, r)
}

func notFoundRoute(r *http.Request) *apierr.Error {
	return apierr.New(apierr.NotFound, "No admin route matches "+r.Method+" "+r.URL.Path+".")
}

// authenticate checks the Bearer token. Both sides are hashed before the
// constant-time compare, so neither the token nor its length leaks
// through timing. RFC 6750 §3.1: a request without credentials gets a
// challenge without an error code.
func (a *api) authenticate(w http.ResponseWriter, r *http.Request) error {
	h := r.Header.Get("Authorization")
	if h == "" {
		w.Header().Set("WWW-Authenticate", realm)
		return apierr.New(apierr.InvalidToken, "The admin API needs Authorization: Bearer <LECTERN_ADMIN_TOKEN>.")
	}
	scheme, tok, _ := strings.Cut(h, " ")
	tok = strings.TrimSpace(tok)
	sum := sha256.Sum256([]byte(tok))
	ok := strings.EqualFold(scheme, "Bearer") && tok != "" && a.cfg.Token != "" &&
		subtle.ConstantTimeCompare(sum[:], a.tokenSum) == 1
	if !ok {
		w.Header().Set("WWW-Authenticate", realm+`, error="invalid_token"`)
		return apierr.New(apierr.InvalidToken, "The admin token is missing, malformed or wrong.")
	}
	return nil
}

// writeError writes err as the API's error body. Anything but an
// *apierr.Error is a server fault: logged with the request id, answered
// 500 INTERNAL without its text.
func (a *api) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apierr.Error
	if !errors.As(err, &ae) {
		a.log.Error("admin request failed", "requestId", requestID(r.Context()),
			"method", r.Method, "path", r.URL.Path, "err", err)
		ae = apierr.New(apierr.Internal, "The admin API failed; the cause is in the origin's log under this request id.")
	}
	a.writeErrorStatus(w, r, ae, ae.Status())
}

func (a *api) writeErrorStatus(w http.ResponseWriter, r *http.Request, ae *apierr.Error, status int) {
	for _, h := range ae.Headers() {
		w.Header().Set(h.Name, h.Value)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(ae.AppendJSON(nil, requestID(r.Context())))
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	return writeRaw(w, status, b)
}

func writeRaw(w http.ResponseWriter, status int, b []byte) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
	return nil
}

func badRequest(param, msg string) *apierr.Error {
	return &apierr.Error{Code: apierr.BadRequest, Parameter: param, Message: msg}
}

// readBody reads a body, bounded by handle; an empty body means {}.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, tooLarge(tooBig.Limit)
	case err != nil:
		return nil, badRequest("body", "The request body could not be read.")
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return []byte("{}"), nil
	}
	return b, nil
}

// decodeObject decodes body, one JSON object, into fields (jsonbody.Object).
// It is as strict as the public API: names match exactly, and a repeated
// or unknown member, a wrong type or trailing data is 400 naming the
// member or body, in words that name the JSON type, never Go's. It
// returns the members present.
func decodeObject(body []byte, fields map[string]jsonbody.Field) (map[string]bool, error) {
	present, err := jsonbody.Object(body, "", fields)
	if err != nil {
		return nil, err
	}
	return present, nil
}

// statusWriter records the status for the access log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// headerRecorder is a ResponseWriter that keeps the header and status and
// drops the body.
type headerRecorder struct {
	header http.Header
	status int
}

func (r *headerRecorder) Header() http.Header {
	if r.header == nil {
		r.header = http.Header{}
	}
	return r.header
}

func (r *headerRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *headerRecorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return len(b), nil
}
