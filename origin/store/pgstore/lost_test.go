package pgstore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/pgschema"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/store/pgstore"
)

// TestReadsSurviveKilledBackends (issue #33, point 5): the backends of
// every pooled connection are killed (pg_terminate_backend, as a server
// restart or an operator does); the next reads, as many at once as the
// pool held connections, each answer, not one error per dead connection.
func TestReadsSurviveKilledBackends(t *testing.T) {
	const what = "the PostgreSQL store's lost-connection test"
	dsn := pgschema.ForTest(t, what)
	name := fmt.Sprintf("lectern-lost-%d", time.Now().UnixNano())
	s, err := pgstore.New(t.Context(), pgschema.WithParam(dsn, "application_name", name))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateOrg(t.Context(), &store.Org{ID: "acme", Name: "Acme", Tier: "high", Status: "active", Grants: []string{"high"},
		EclaVersion: 1, RequiredEclaVersion: 1, RenewsAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	read := func() []error {
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = s.GetOrg(t.Context(), "acme")
			}()
		}
		wg.Wait()
		return errs
	}
	read() // the pool holds several connections now
	killed := pgschema.Terminate(t, dsn, name)
	if killed < 2 {
		t.Fatalf("killed %d backends, want the pool's several", killed)
	}
	for i, err := range read() {
		if err != nil {
			t.Errorf("read %d after %d backends were killed: %v", i, killed, err)
		}
	}
}

// A read of what is not there is an answer, not a lost connection: the
// pool keeps its connections (the readiness probe reads a missing
// organisation every few seconds).
func TestNotFoundKeepsThePool(t *testing.T) {
	s, err := pgstore.New(t.Context(), pgschema.ForTest(t, "the PostgreSQL store's lost-connection test"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	for range 4 { // a few connections open
		wg.Add(1)
		go func() { defer wg.Done(); s.GetOrg(t.Context(), "nobody") }()
	}
	wg.Wait()
	before := s.PoolStat().TotalConns()
	for range 10 {
		if _, err := s.GetOrg(t.Context(), "nobody"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("GetOrg of no organisation: %v", err)
		}
	}
	if after := s.PoolStat().TotalConns(); after < before || before == 0 {
		t.Errorf("the pool held %d connections, then %d after reads of a missing organisation: reset", before, after)
	}
}
