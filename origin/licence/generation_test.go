package licence

import (
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/token"
)

// TestIssued: which tokens were issued for the organisation of their id
// as it is now (issue #13: a re-created id is a new organisation).
func TestIssued(t *testing.T) {
	created := time.Date(2026, 11, 22, 12, 0, 0, 500_000_000, time.UTC) // half past a second
	o := &store.Org{ID: "acme", Generation: "gen-2", CreatedAt: created}
	legacy := &store.Org{ID: "acme", CreatedAt: created} // created before generations
	iat := func(d time.Duration) token.Claims {
		return token.Claims{Org: "acme", IssuedAt: created.Add(d).Truncate(time.Second)}
	}
	withGen := func(c token.Claims, gen string) token.Claims { c.OrgGen = gen; return c }
	tests := []struct {
		name   string
		org    *store.Org
		claims token.Claims
		client *store.Client
		want   bool
	}{
		{"org_gen of this org", o, withGen(iat(-time.Hour), "gen-2"), nil, true},
		{"org_gen of the deleted org", o, withGen(iat(time.Hour), "gen-1"), nil, false},
		{"org_gen on an org without one", legacy, withGen(iat(time.Hour), "gen-1"), nil, false},
		{"client of this org", o, token.Claims{ClientID: "c"}, &store.Client{OrgGeneration: "gen-2"}, true},
		{"client of the deleted org, read before it went", o, token.Claims{ClientID: "c"}, &store.Client{OrgGeneration: "gen-1"}, false},
		{"client of this org, token naming another generation", o, withGen(token.Claims{ClientID: "c"}, "gen-1"), &store.Client{OrgGeneration: "gen-2"}, false},
		{"client of an org without generation", legacy, token.Claims{ClientID: "c"}, &store.Client{}, true},
		// Tokens without org_gen (another OAuth server's): iat decides, in
		// whole seconds.
		{"iat a minute after creation", o, iat(time.Minute), nil, true},
		{"iat in the second of creation", o, iat(0), nil, true},
		{"iat the second before creation", o, iat(-time.Second), nil, false},
		{"iat a day before creation", o, iat(-24 * time.Hour), nil, false},
		{"no iat", o, token.Claims{Org: "acme"}, nil, false},
		{"legacy org, dev token with an empty org_gen", legacy, iat(time.Minute), nil, true},
		{"legacy org, token from before it", legacy, iat(-time.Minute), nil, false},
	}
	for _, tt := range tests {
		if got := Issued(tt.org, tt.claims, tt.client); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}
