package pgmeter_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/pgschema"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/pgmeter"
)

// TestUsageSurvivesKilledBackends (issue #33, point 5): the backends of
// the meters' read connections are killed; the next Usage reads, as many
// at once as there were connections, each answer.
func TestUsageSurvivesKilledBackends(t *testing.T) {
	dsn := pgschema.ForTest(t, what)
	name := fmt.Sprintf("lectern-meter-lost-%d", time.Now().UnixNano())
	s := openStore(t, pgschema.WithParam(dsn, "application_name", name), pgmeter.Options{})
	now := time.Now()
	read := func() []error {
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = s.Usage(t.Context(), "acme", now)
			}()
		}
		wg.Wait()
		return errs
	}
	if _, err := s.Apply(t.Context(), meter.Op{Org: "acme", Now: now, Stages: []meter.Stage{{{Meter: meter.MonthCalls, N: 1}}}}); err != nil {
		t.Fatal(err)
	}
	read()
	killed := pgschema.Terminate(t, dsn, name)
	if killed < 2 {
		t.Fatalf("killed %d backends, want several", killed)
	}
	for i, err := range read() {
		if err != nil {
			t.Errorf("usage read %d after %d backends were killed: %v", i, killed, err)
		}
	}
}
