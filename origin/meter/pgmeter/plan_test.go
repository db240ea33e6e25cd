package pgmeter_test

import (
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/pgschema"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/pgmeter"
)

// The committer's connection plans its statements once (writerConfig),
// unless the DSN says otherwise; the other connections keep the server's
// setting.
func TestWriterPlanCacheMode(t *testing.T) {
	base := pgschema.ForTest(t, what)
	for _, tc := range []struct {
		dsn, writer, pool string // pool "": the server's own, not the writer's
	}{
		{base, "force_generic_plan", ""},
		{pgschema.WithParam(base, "plan_cache_mode", "force_custom_plan"), "force_custom_plan", "force_custom_plan"},
	} {
		s, err := pgmeter.New(t.Context(), tc.dsn, pgmeter.Options{})
		if err != nil {
			t.Fatal(err)
		}
		op := meter.Op{Org: "acme", Now: time.Now(), Stages: []meter.Stage{{{Meter: meter.MonthCalls, N: 1}}}}
		if _, err := s.Apply(t.Context(), op); err != nil { // answered: the committer is done with its connection
			t.Fatal(err)
		}
		w, err := s.WriterSetting(t.Context(), "plan_cache_mode")
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.Setting(t.Context(), "plan_cache_mode")
		if err != nil {
			t.Fatal(err)
		}
		if w != tc.writer || (tc.pool != "" && p != tc.pool) || (tc.pool == "" && p == w) {
			t.Errorf("plan_cache_mode: committer %s, others %s; want %s, %s", w, p, tc.writer, tc.pool)
		}
		s.Close()
	}
}
