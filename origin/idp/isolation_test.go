package idp

import (
	"fmt"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/store"
)

// TestAttackerCannotLockOutAnotherOrganisation (issue #36, points 5 and
// 6): two organisations on one origin. The attacker, from its own
// address, floods wrong secrets for the victim's client id; the victim's
// token requests from its own address are unaffected, before it ever got
// a token on this origin (no per-process memory of its secret helps), on
// another origin on the same store, and after the attacker's flood. The
// attacker's address is blocked after MaxFailures, so the flood's cost
// stays bounded.
func TestAttackerCannotLockOutAnotherOrganisation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.Limits = Limits{MaxFailures: 10, FailureWindow: time.Minute} })
	now := e.clock.Now()
	if err := e.store.CreateOrg(t.Context(), &store.Org{ID: "org-attacker", Name: "Attacker", Tier: "standard",
		Status: "active", CreatedAt: now, UpdatedAt: now, RenewsAt: now.AddDate(1, 0, 0)}); err != nil {
		t.Fatal(err)
	}
	attackerID, attackerSecret := e.createClient(t, "org-attacker")
	victimID, victimSecret := e.createClient(t, testOrg)
	attacker, victim := from("127.0.0.2"), from("127.0.0.3")

	// The attacker's own client works from its address, as the victim's
	// from the victim's.
	e.token(attacker, attackerID, attackerSecret).want(t, "attacker's own client", 200, "")

	// The flood: far more wrong secrets than MaxFailures, for the victim's
	// id, from the attacker's address.
	blocked := 0
	for i := range 50 {
		a := e.token(attacker, victimID, fmt.Sprintf("guess-%d", i))
		switch {
		case a.status == 401 && a.code == "invalid_client":
		case a.status == 429 && a.code == "temporarily_unavailable":
			blocked++
		default:
			t.Fatalf("guess %d: got %d %q, want 401 invalid_client or 429", i, a.status, a.code)
		}
	}
	if blocked != 40 {
		t.Errorf("the flood: %d of 50 guesses refused 429 unchecked, want 40 (blocked after 10 failures)", blocked)
	}

	// The victim, from its own address, never verified on this origin
	// before: its right secret passes, at once and repeatedly.
	for i := range 3 {
		e.token(victim, victimID, victimSecret).want(t, fmt.Sprintf("victim's token %d after the flood", i+1), 200, "")
	}
	// Another origin on the same store (nothing remembered there) too.
	other := &env{t: t, clock: e.clock, store: e.store}
	other.serve(t, func(c *Config) { c.Limits = Limits{MaxFailures: 10, FailureWindow: time.Minute} })
	other.token(victim, victimID, victimSecret).want(t, "victim's token from another origin", 200, "")

	// A second flood while the victim works: still unaffected.
	for i := range 20 {
		e.token(attacker, victimID, fmt.Sprintf("again-%d", i))
		e.token(victim, victimID, victimSecret).want(t, fmt.Sprintf("victim during flood %d", i), 200, "")
	}
	// The attacker's address stays blocked for the window, whatever id.
	e.token(attacker, attackerID, attackerSecret).want(t, "attacker's address blocked", 429, "temporarily_unavailable")
	e.clock.Advance(61 * time.Second)
	e.token(attacker, attackerID, attackerSecret).want(t, "attacker after the window", 200, "")
}

// createClient registers a client_credentials client of org with the
// content.read scope, as the admin API does.
func (e *env) createClient(t *testing.T, org string) (id, secret string) {
	t.Helper()
	id, secret, err := e.cfg.CreateClient(t.Context(), org, []string{"content.read"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return id, secret
}
