package server

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lectern-api/lectern/internal/telemetry"
	"github.com/lectern-api/lectern/origin/billing"
	"github.com/lectern-api/lectern/origin/lease"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/meter"
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
// call, and returns it when r is a POST signed for purpose over it (ok).
// A body over wire.MaxBody is not read whole, so it is refused as
// unsigned: the edge never sends one.
func (s *Server) signedInternal(r *http.Request, id, purpose string) (body []byte, ok bool) {
	if r.Method != http.MethodPost || r.Header.Get(edgesig.Header) == "" {
		return nil, false
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, wire.MaxBody+1))
	if err != nil || len(b) > wire.MaxBody {
		return nil, false
	}
	return b, s.acceptEdge(r, purpose, edgesig.BodyHash(b), id)
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
	b, ok := s.signedInternal(r, id, edgesig.Usage)
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
	b, ok := s.signedInternal(r, id, edgesig.Lease)
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

// lease reads the lease request b, applies its reports, verifies r's
// token and grants.
func (s *Server) lease(r *http.Request, b []byte) (wire.Answer, error) {
	ctx := r.Context()
	ask, err := wire.ParseRequest(b)
	if err != nil {
		return wire.Answer{}, badMessage(err)
	}
	if err := s.cfg.Leases.Report(ctx, ask.Reports); err != nil {
		return wire.Answer{}, err
	}
	if !s.validRevokeURL(ask.Revoke) {
		return wire.Answer{}, &apierr.Error{Code: apierr.BadRequest, Parameter: "revoke",
			Message: "revoke must be empty or the revoke endpoint (<base URL>" + wire.RevokePath + ") of an edge host listed in the origin's " +
				lease.EdgesSetting + "; this origin pushes revokes to no other address."}
	}
	if n := len(r.Header.Values("Authorization")); n > 1 {
		return wire.Answer{}, apierr.New(apierr.BadRequest, "Send one Authorization field.")
	}
	claims, aerr := s.cfg.Auth.Authenticate(ctx, r.Header.Get("Authorization"))
	if aerr != nil {
		return wire.Answer{}, aerr
	}
	return s.grantLease(ctx, claims, ask)
}

// grantLease runs the organisation gate for the token's organisation
// and grants it a lease, or none.
func (s *Server) grantLease(ctx context.Context, claims token.Claims, ask wire.Request) (wire.Answer, error) {
	now := s.cfg.Now()
	// The epoch is read before the organisation the lease is granted on,
	// so that a change committed after that read moves it and the grant
	// is refused (meter.LeaseGrant.Epoch). The organisation is read once
	// first only to learn its key (its generation).
	o, err := s.org(ctx, claims)
	if err != nil || o == nil {
		return wire.Answer{}, orgRefusal(err, now)
	}
	key := meter.Key(o)
	epoch, err := s.cfg.Leases.Epoch(ctx, key)
	if err != nil {
		return wire.Answer{}, err
	}
	if o, err = s.org(ctx, claims); err != nil || o == nil {
		return wire.Answer{}, orgRefusal(err, now)
	}
	if gerr := licence.Check(o, now); gerr != nil {
		return wire.Answer{}, gerr
	}
	if meter.Key(o) != key { // deleted and created again between the reads
		return wire.Answer{RetryMs: lease.Retry.Milliseconds()}, nil
	}
	version := s.cfg.Content().ContentVersion
	g, err := s.cfg.Leases.Grant(ctx, lease.Ask{Org: o, Epoch: epoch, Want: ask.Want, RevokeURL: ask.Revoke, Now: now})
	if err != nil {
		return wire.Answer{}, err
	}
	if g.Calls == 0 {
		return wire.Answer{RetryMs: g.Retry.Milliseconds()}, nil
	}
	return leaseAnswer(o, epoch, version, g, now), nil
}

// leaseAnswer is the answer of a lease g granted to o at now, under the
// corpus of version: what the edge's 304s under it carry, as the gated
// 304 carries it (docs/edge.md, Leases).
func leaseAnswer(o *store.Org, epoch int64, version string, g lease.Grant, now time.Time) wire.Answer {
	bill := billing.CallBill(o, now, g.After)
	a := wire.Answer{Lease: g.ID, Org: o.ID, Epoch: epoch, ContentVersion: version,
		Grants: etag.GrantsDigest(o.Grants), Calls: g.Calls, ValidMs: g.Valid.Milliseconds(),
		Headers: leaseHeaders(version, bill)}
	for _, l := range bill.Limits() {
		a.RateLimits = append(a.RateLimits, wire.RateLimit{Name: l.Name, Remaining: l.Left, Reset: l.Reset.Unix()})
	}
	return a
}

// orgRefusal is the gate's answer when the token's organisation could
// not be read (err) or does not exist (nil err).
func orgRefusal(err error, now time.Time) error {
	if err != nil {
		return err
	}
	return licence.Check(nil, now)
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

// validRevokeURL reports whether u can be an edge host's revoke URL: ""
// (no push), or exactly the revoke endpoint of an edge host listed in
// LECTERN_EDGE_URLS (lease.Manager.AllowsRevokeURL). The origin posts
// signed pushes to it, so it must be an address the operator named, not
// one of the requester's choosing (the admin API, a private service).
func (s *Server) validRevokeURL(u string) bool {
	return s.cfg.Leases.AllowsRevokeURL(u)
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
