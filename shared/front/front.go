// Package front is the front of the request pipeline that both tiers run
// identically, in the request pipeline's order (docs/edge.md): route (404 NOT_FOUND, 405), then for
// routes with a scope authenticate (401 invalid_token), scope (403
// insufficient_scope) and the learner check (403 LEARNER_REQUIRED), then
// syntactic validation of the query (400). What follows (the organisation
// gate, entitlements, meters, content) is the origin's.
package front

import (
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/param"
	"github.com/lectern-api/lectern/shared/route"
	"github.com/lectern-api/lectern/shared/token"
)

// Request is what the front looks at.
type Request struct {
	Method        string
	Path          string // escaped path, without the query
	RawQuery      string
	Authorization string // the first Authorization field line
	// Authorizations is how many Authorization field lines the request
	// has (0 is read as 1 when Authorization is set): more than one is
	// refused at authentication (RepeatedAuthorization).
	Authorizations int
}

// Passed is a request that passed the front.
type Passed struct {
	Route  *route.Route
	Vars   route.Vars
	Params param.Values
	Claims token.Claims // zero on routes without a scope
}

// Authenticator verifies a bearer token taken from the Authorization
// header; each tier supplies its own (the origin fetches keys over HTTP,
// the edge through subrequests), both over shared/token. An interface
// rather than a func, so the edge can pass its request state without the
// closure TinyGo would allocate for every captured variable.
type Authenticator interface {
	Authenticate(authorization string) (token.Claims, *apierr.Error)
}

// AuthFunc is a func as an Authenticator.
type AuthFunc func(authorization string) (token.Claims, *apierr.Error)

// Authenticate calls f.
func (f AuthFunc) Authenticate(authorization string) (token.Claims, *apierr.Error) {
	return f(authorization)
}

// Run passes req through the front, or returns the error to answer with.
func Run(req Request, auth Authenticator) (Passed, *apierr.Error) {
	var p Passed
	rt, vars, err := route.Match(req.Method, req.Path)
	if err != nil {
		return p, err
	}
	p.Route, p.Vars = rt, vars
	if rt.Scope != "" {
		if req.Authorizations > 1 || token.Combined(req.Authorization) {
			return p, token.RepeatedAuthorization()
		}
		claims, err := auth.Authenticate(req.Authorization)
		if err != nil {
			return p, err
		}
		if !claims.Scope.Has(rt.Scope) {
			return p, token.InsufficientScope(rt.Scope)
		}
		if rt.Learner && claims.Learner == "" {
			return p, apierr.New(apierr.LearnerRequired, "This route needs an interactive learner token (authorization_code grant); a client_credentials token has no learner.")
		}
		p.Claims = claims
	}
	params, perr := param.Parse(rt, req.RawQuery)
	if perr != nil {
		return p, perr
	}
	p.Params = params
	return p, nil
}
