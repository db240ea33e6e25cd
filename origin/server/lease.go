package server

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/lectern-api/lectern/internal/telemetry"
	"github.com/lectern-api/lectern/origin/billing"
	"github.com/lectern-api/lectern/origin/lease"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/etag"
	wire "github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/shared/token"
)

// The origin's side of the edge's leases (docs/edge.md, Leases): the
// lease endpoint grants an edge instance a lease on an organisation's
// licence state with a block of reserved calls, the usage endpoint and
// the X-Lectern-Usage field of forwards and gate calls take the edge's
// cumulative usage reports. The grants, revocations and reports are
// origin/lease's; this file is their wire.

// signedInternal reads the body of r, the edge's gate, lease or usage
// call, and returns it when r is a POST signed for purpose over it (ok),
// with the key its bills are applied under. A body over wire.MaxBody is
// not read whole, so it is refused as unsigned: the edge never sends one.
func (s *Server) signedInternal(r *http.Request, id, purpose string) (body []byte, once billing.Once, ok bool) {
	if r.Method != http.MethodPost || r.Header.Get(edgesig.Header) == "" {
		return nil, once, false
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, wire.MaxBody+1))
	if err != nil || len(b) > wire.MaxBody {
		return nil, once, false
	}
	once, ok = s.acceptEdge(r, purpose, edgesig.BodyHash(b), id)
	return b, once, ok
}

// noRoute is the answer to an internal call without a valid signature:
// the answer to an unknown path, as the gate's.
func noRoute() *apierr.Error {
	return apierr.New(apierr.NotFound, "No route matches this path. Every route begins with /v1; see /v1/openapi.json.")
}

// badMessage is the 400 of a malformed message.
func badMessage(err error) *apierr.Error {
	return &apierr.Error{Code: apierr.BadRequest, Parameter: "body", Message: "The message is malformed: " + err.Error() + "."}
}

// serveUsage answers POST /internal/usage: the edge's reports, applied
// and committed before the 204 (the edge then counts them as
// acknowledged); 400 on a malformed body, 404 without a valid signature.
func (s *Server) serveUsage(w http.ResponseWriter, r *http.Request, id string) {
	b, _, ok := s.signedInternal(r, id, edgesig.Usage)
	if !ok {
		s.writeError(w, r, id, noRoute())
		return
	}
	telemetry.FromContext(r.Context()).SetEdge("usage")
	if err := s.usage(r.Context(), b); err != nil {
		s.writeError(w, r, id, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) usage(ctx context.Context, b []byte) error {
	rs, err := wire.ParseReports(b)
	if err != nil {
		return badMessage(err)
	}
	return s.cfg.Leases.Report(ctx, rs)
}

// serveLease answers POST /internal/lease: the reports the request
// carries are applied first, whatever else happens; then the bearer
// token is verified (401) and the organisation gate runs (its refusal is
// the answer), and the answer is 200 with a lease or with none (calls 0
// and when to ask again).
func (s *Server) serveLease(w http.ResponseWriter, r *http.Request, id string) {
	b, _, ok := s.signedInternal(r, id, edgesig.Lease)
	if !ok {
		s.writeError(w, r, id, noRoute())
		return
	}
	telemetry.FromContext(r.Context()).SetEdge("lease")
	a, err := s.lease(r, b)
	if err != nil {
		s.writeError(w, r, id, err)
		return
	}
	body := wire.AppendAnswer(nil, &a)
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// lease reads the lease request b and answers it as the lease manager
// decides (lease.Manager.Lease: its reports applied, the token verified,
// the gate run, a lease granted or none).
func (s *Server) lease(r *http.Request, b []byte) (wire.Answer, error) {
	ask, err := wire.ParseRequest(b)
	if err != nil {
		return wire.Answer{}, badMessage(err)
	}
	l, err := s.cfg.Leases.Lease(r.Context(), ask, &leaseAsker{s: s, r: r})
	if err != nil {
		return wire.Answer{}, err
	}
	if l.Grant.Calls == 0 {
		return wire.Answer{RetryMs: l.Grant.Retry.Milliseconds()}, nil
	}
	return leaseAnswer(l), nil
}

// leaseAsker is a lease request's lease.Asker: its Authorization field,
// verified as on the API's routes, and the organisation and corpus the
// server serves.
type leaseAsker struct {
	s      *Server
	r      *http.Request
	claims token.Claims // once authenticated
}

func (a *leaseAsker) Authenticate(ctx context.Context) error {
	if n := len(a.r.Header.Values("Authorization")); n > 1 {
		return apierr.New(apierr.BadRequest, "Send one Authorization field.")
	}
	claims, aerr := a.s.cfg.Auth.Authenticate(ctx, a.r.Header.Get("Authorization"))
	if aerr != nil {
		return aerr
	}
	a.claims = claims
	return nil
}

func (a *leaseAsker) Org(ctx context.Context) (*store.Org, error) { return a.s.org(ctx, a.claims) }

func (a *leaseAsker) ContentVersion() string { return a.s.cfg.Content().ContentVersion }

// leaseAnswer is the answer of a lease l: what the edge's 304s under it
// carry, as the gated 304 carries it (docs/edge.md, Leases).
func leaseAnswer(l lease.Leased) wire.Answer {
	o, g := l.Org, l.Grant
	bill := billing.CallBill(o, l.At, g.After)
	a := wire.Answer{Lease: g.ID, Org: o.ID, Epoch: l.Epoch, ContentVersion: l.ContentVersion,
		Grants: etag.GrantsDigest(o.Grants), Calls: g.Calls, ValidMs: g.Valid.Milliseconds(),
		Headers: leaseHeaders(l.ContentVersion, bill)}
	for _, rl := range bill.Limits() {
		a.RateLimits = append(a.RateLimits, wire.RateLimit{Name: rl.Name, Remaining: rl.Left, Reset: rl.Reset.Unix()})
	}
	return a
}

// leaseHeaders are the fixed fields of the organisation's 304s under a
// lease: those a gated 304 carries (the same functions set them), but
// ETag, RateLimit and X-Request-Id, which the edge sets per request, and
// the edge's own X-Lectern-* fields; in canonical form, sorted by name.
func leaseHeaders(version string, bill billing.Bill) [][2]string {
	h := http.Header{}
	commonHeaders(h)
	notModifiedHeaders(h, version, "", bill)
	out := make([][2]string, 0, len(h))
	for name, vs := range h {
		switch {
		case name == "Etag", name == "Ratelimit", name == "X-Request-Id",
			strings.HasPrefix(name, http.CanonicalHeaderKey(edgesig.HeaderPrefix)):
			continue
		}
		out = append(out, [2]string{name, strings.Join(vs, ", ")})
	}
	slices.SortFunc(out, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	return out
}

// applyUsage applies the reports of r's X-Lectern-Usage, an edge-signed
// forward or gate call, before the request is served. Best effort, as
// the edge counts it: a malformed field or a failure is logged and the
// request served.
func (s *Server) applyUsage(r *http.Request, id string) {
	vs := r.Header.Values(wire.UsageHeader)
	if len(vs) == 0 || s.cfg.Leases == nil {
		return
	}
	rs, err := wire.ParseHeader(strings.Join(vs, ", "))
	if err == nil {
		err = s.cfg.Leases.Report(context.WithoutCancel(r.Context()), rs)
	}
	if err != nil {
		s.cfg.Logger.Warn("lease: the usage field of an edge request was not applied", "requestId", id, "err", err)
	}
}
