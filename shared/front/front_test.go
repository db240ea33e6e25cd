package front

import (
	"testing"

	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/scope"
	"github.com/lectern-api/lectern/shared/token"
)

func TestRun(t *testing.T) {
	machine := token.Claims{Scope: scope.Of(scope.ContentRead, scope.ProgressRead)}
	learner := token.Claims{Scope: scope.Of(scope.ProgressRead), Learner: "ana"}
	auth := func(c token.Claims) AuthFunc {
		return func(h string) (token.Claims, *apierr.Error) {
			if h != "Bearer good" {
				return token.Claims{}, token.Unauthorized(token.ReasonMalformed)
			}
			return c, nil
		}
	}
	tests := []struct {
		name, method, path, query, authz string
		claims                           token.Claims
		code                             apierr.Code
	}{
		{"unknown route before auth", "GET", "/v1/nope", "", "", machine, apierr.NotFound},
		{"405 before auth", "DELETE", "/v1/tiers", "", "", machine, apierr.MethodNotAllowed},
		{"openapi needs no token", "GET", "/v1/openapi.json", "", "", machine, ""},
		{"401 before 400", "GET", "/v1/subjects", "limit=0", "", machine, apierr.InvalidToken},
		{"403 scope before 400", "GET", "/v1/testprep/act/items", "limit=0", "Bearer good", machine, apierr.InsufficientScope},
		{"learner required", "GET", "/v1/progress", "", "Bearer good", machine, apierr.LearnerRequired},
		{"learner passes", "GET", "/v1/progress", "", "Bearer good", learner, ""},
		{"400 last", "GET", "/v1/subjects", "limit=0", "Bearer good", machine, apierr.BadRequest},
		{"passes", "GET", "/v1/subjects", "limit=5", "Bearer good", machine, ""},
	}
	for _, tt := range tests {
		p, err := Run(Request{Method: tt.method, Path: tt.path, RawQuery: tt.query, Authorization: tt.authz}, auth(tt.claims))
		var got apierr.Code
		if err != nil {
			got = err.Code
		}
		if got != tt.code {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.code)
		}
		if err == nil && p.Route == nil {
			t.Errorf("%s: passed without a route", tt.name)
		}
	}
}

// Two Authorization field lines (or two combined into one by a Fetch API
// host) are 400 BAD_REQUEST at authentication: after routing, before the
// token is verified and before query validation.
func TestRepeatedAuthorization(t *testing.T) {
	called := false
	auth := AuthFunc(func(string) (token.Claims, *apierr.Error) {
		called = true
		return token.Claims{Scope: scope.Of(scope.ContentRead)}, nil
	})
	tests := []struct {
		name  string
		req   Request
		code  apierr.Code
		authd bool
	}{
		{"two lines", Request{Method: "GET", Path: "/v1/subjects", RawQuery: "limit=0", Authorization: "Bearer good", Authorizations: 2}, apierr.BadRequest, false},
		{"combined", Request{Method: "GET", Path: "/v1/tiers", Authorization: "Bearer good, Bearer good"}, apierr.BadRequest, false},
		{"combined, lower case", Request{Method: "GET", Path: "/v1/tiers", Authorization: " bearer a,b"}, apierr.BadRequest, false},
		{"one line", Request{Method: "GET", Path: "/v1/tiers", Authorization: "Bearer good", Authorizations: 1}, "", true},
		{"count unset", Request{Method: "GET", Path: "/v1/tiers", Authorization: "Bearer good"}, "", true},
		{"not Bearer, with a comma", Request{Method: "GET", Path: "/v1/tiers", Authorization: `Digest a="1", b="2"`}, "", true},
		{"route first", Request{Method: "GET", Path: "/v1/nope", Authorization: "Bearer a", Authorizations: 2}, apierr.NotFound, false},
		{"405 first", Request{Method: "CONNECT", Path: "/v1/tiers", Authorization: "Bearer a", Authorizations: 2}, apierr.MethodNotAllowed, false},
		{"no scope, no look", Request{Method: "GET", Path: "/v1/openapi.json", Authorization: "Bearer a", Authorizations: 2}, "", false},
	}
	for _, tt := range tests {
		called = false
		_, err := Run(tt.req, auth)
		var got apierr.Code
		if err != nil {
			got = err.Code
		}
		if got != tt.code || called != tt.authd {
			t.Errorf("%s: got %q (authenticated %v), want %q (%v)", tt.name, got, called, tt.code, tt.authd)
		}
		if got == apierr.BadRequest && (err.Parameter != "Authorization" || err.Status() != 400) {
			t.Errorf("%s: got %+v, want 400 naming Authorization", tt.name, err)
		}
	}
}

// An empty path (RFC 9110 §4.2.3: it is "/") is no route: 404 NOT_FOUND,
// whatever the method.
func TestEmptyPath(t *testing.T) {
	for _, m := range []string{"GET", "CONNECT", "OPTIONS"} {
		_, err := Run(Request{Method: m, Path: ""}, AuthFunc(func(string) (token.Claims, *apierr.Error) { return token.Claims{}, nil }))
		if err == nil || err.Code != apierr.NotFound {
			t.Errorf("%s with an empty path: got %v, want NOT_FOUND", m, err)
		}
	}
}
