package pgmeter_test

import (
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/pgschema"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/pgmeter"
)

// BenchmarkApply is tools/meterbench's group commit at 64 clients: one
// call (month and hour under caps) of one org a op.
func BenchmarkApply(b *testing.B) {
	s, err := pgmeter.New(b.Context(), pgschema.ForTest(b, what), pgmeter.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	quota, perHour := int64(1<<40), int64(1<<40)
	op := meter.Op{Org: "acme", Now: time.Now(), Stages: []meter.Stage{
		{{Meter: meter.MonthCalls, N: 1, Limit: &quota}},
		{{Meter: meter.HourCalls, N: 1, Limit: &perHour, Force: true}},
	}}
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Apply(b.Context(), op); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
