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
