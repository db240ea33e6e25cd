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
// attacker's address is blocked after MaxFailures: its wrong secrets
// answer 429 and add nothing to the failure table, so the flood's cost
// stays bounded; its own right secret still passes (a block is no
// lockout; TestBalancerAddressCannotLockOutRightSecrets).
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
		t.Errorf("the flood: %d of 50 guesses refused 429, want 40 (blocked after 10 failures)", blocked)
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
	// The attacker's address stays blocked for the window, whatever id:
	// wrong secrets answer 429; a right one passes.
	a := e.token(attacker, attackerID, "wrong")
	a.want(t, "attacker's address blocked, wrong secret", 429, "temporarily_unavailable")
	a.wantRetryAfter(t, "attacker's address blocked", 1, 60)
	e.token(attacker, "lc_nobody", "wrong").want(t, "attacker's address blocked, unknown id", 429, "temporarily_unavailable")
	e.token(attacker, attackerID, attackerSecret).want(t, "attacker's own right secret", 200, "")
	e.clock.Advance(61 * time.Second)
	e.token(attacker, attackerID, "wrong").want(t, "attacker after the window, wrong secret", 401, "invalid_client")
}

// TestBalancerAddressCannotLockOutRightSecrets (issue #36 point 5, its
// review): behind an L7 balancer (docs/operations.md, LECTERN_ISSUER)
// every client connects from the balancer's address. A flood through it
// of wrong secrets for random client ids (no id known) and for the
// victim's id blocks that address, yet the victim's right secret, and
// every other organisation's, still gets a token through it: only wrong
// secrets are refused 429. The flood adds no key to the failure table
// once the address is blocked.
func TestBalancerAddressCannotLockOutRightSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.Limits = Limits{MaxFailures: 10, FailureWindow: time.Minute} })
	now := e.clock.Now()
	if err := e.store.CreateOrg(t.Context(), &store.Org{ID: "org-other", Name: "Other", Tier: "standard",
		Status: "active", CreatedAt: now, UpdatedAt: now, RenewsAt: now.AddDate(1, 0, 0)}); err != nil {
		t.Fatal(err)
	}
	victimID, victimSecret := e.createClient(t, testOrg)
	otherID, otherSecret := e.createClient(t, "org-other")
	balancer := from("127.0.0.9") // everyone's remote address

	refused := 0
	for i := range 200 {
		id := "lc_" + randomString(16) // random ids: no client id needed
		if i%2 == 1 {
			id = victimID
		}
		a := e.token(balancer, id, randomString(32))
		switch {
		case a.status == 401 && a.code == "invalid_client":
		case a.status == 429 && a.code == "temporarily_unavailable":
			refused++
		default:
			t.Fatalf("flood %d: got %d %q, want 401 invalid_client or 429", i, a.status, a.code)
		}
	}
	if refused != 190 {
		t.Errorf("the flood: %d of 200 refused 429, want 190 (the address blocked after 10 failures)", refused)
	}
	if n := e.idp.failures.len(); n > 1+10 {
		t.Errorf("failure table after the flood: %d keys, want at most 11 (the address and 10 pairs)", n)
	}

	// Through the same address: the right secrets pass, repeatedly.
	for i := range 3 {
		e.token(balancer, victimID, victimSecret).want(t, fmt.Sprintf("victim's right secret %d", i+1), 200, "")
		e.token(balancer, otherID, otherSecret).want(t, fmt.Sprintf("other organisation's right secret %d", i+1), 200, "")
	}
	// A wrong one is refused 429, with Retry-After, also for the victim's
	// id (a success cleared nothing).
	a := e.token(balancer, victimID, "wrong")
	a.want(t, "wrong secret through the blocked address", 429, "temporarily_unavailable")
	a.wantRetryAfter(t, "wrong secret through the blocked address", 1, 60)

	// Interleaved with a second flood: still served.
	for i := range 20 {
		e.token(balancer, "lc_"+randomString(16), "x").want(t, "second flood", 429, "temporarily_unavailable")
		e.token(balancer, victimID, victimSecret).want(t, fmt.Sprintf("victim during the second flood %d", i), 200, "")
	}
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
