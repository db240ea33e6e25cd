package lease

import (
	"context"
	"time"

	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
	wire "github.com/lectern-api/lectern/shared/lease"
)

// The lease request (docs/edge.md, "The lease request"): what the origin
// does with an edge's POST /internal/lease once its signature is checked
// and its body read, in order. The lease endpoint (origin/server) is its
// wire: it decodes the request, hands it to Manager.Lease with an Asker,
// and encodes the decision.

// Asker is the origin's side of one lease request beyond its body: who
// asks, as the request's bearer token says, and the corpus served. The
// lease endpoint implements it over the HTTP request.
type Asker interface {
	// Authenticate verifies the request's token; its error (401, or
	// 400 to a repeated Authorization field) is the answer.
	Authenticate(ctx context.Context) error
	// Org reads the verified token's organisation, afresh at every call:
	// nil and no error when there is none (NO_ORGANIZATION).
	Org(ctx context.Context) (*store.Org, error)
	// ContentVersion is the version of the corpus served.
	ContentVersion() string
}

// Leased is what Manager.Lease decided: a lease (Grant.Calls > 0) on Org,
// as read after Epoch, under the corpus of ContentVersion, granted at At
// on the origin's clock; or none (Grant.Calls 0: the edge asks again
// after Grant.Retry).
type Leased struct {
	Org            *store.Org
	Epoch          int64
	ContentVersion string
	At             time.Time
	Grant          Grant
}

// Lease decides the lease request ask, in this order: the reports it
// carries are applied first, whatever happens next; a revoke URL that is
// not an edge host's (AllowsRevokeURL) is 400; the token is verified
// (a.Authenticate); then the organisation gate runs, as on every route
// but /v1/license, and a lease is granted, or none.
//
// The organisation's epoch is read before the organisation the lease is
// granted on, so that a change committed after that read moves it and
// the grant is refused (meter.LeaseGrant.Epoch). The organisation is read
// once first only to learn its key (its generation); one deleted and
// created again between the reads is granted none. The content version is
// read after the gate, before the grant.
func (m *Manager) Lease(ctx context.Context, ask wire.Request, a Asker) (Leased, error) {
	if err := m.Report(ctx, ask.Reports); err != nil {
		return Leased{}, err
	}
	if !m.AllowsRevokeURL(ask.Revoke) {
		return Leased{}, &apierr.Error{Code: apierr.BadRequest, Parameter: "revoke",
			Message: "revoke must be empty or the revoke endpoint (<base URL>" + wire.RevokePath + ") of an edge host listed in the origin's " +
				EdgesSetting + "; this origin pushes revokes to no other address."}
	}
	if err := a.Authenticate(ctx); err != nil {
		return Leased{}, err
	}
	now := m.cfg.Now()
	o, err := a.Org(ctx)
	if err != nil || o == nil {
		return Leased{}, orgRefusal(err, now)
	}
	key := meter.Key(o)
	epoch, err := m.Epoch(ctx, key)
	if err != nil {
		return Leased{}, err
	}
	if o, err = a.Org(ctx); err != nil || o == nil {
		return Leased{}, orgRefusal(err, now)
	}
	if gerr := licence.Check(o, now); gerr != nil {
		return Leased{}, gerr
	}
	if meter.Key(o) != key { // deleted and created again between the reads
		return Leased{Grant: Grant{Retry: Retry}}, nil
	}
	version := a.ContentVersion()
	g, err := m.Grant(ctx, Ask{Org: o, Epoch: epoch, Want: ask.Want, RevokeURL: ask.Revoke, Now: now})
	if err != nil {
		return Leased{}, err
	}
	if g.Calls == 0 {
		return Leased{Grant: g}, nil
	}
	return Leased{Org: o, Epoch: epoch, ContentVersion: version, At: now, Grant: g}, nil
}

// orgRefusal is the gate's answer when the token's organisation could
// not be read (err) or does not exist (nil err).
func orgRefusal(err error, now time.Time) error {
	if err != nil {
		return err
	}
	return licence.Check(nil, now)
}
