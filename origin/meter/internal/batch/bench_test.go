package batch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/internal/batch"
)

// BenchmarkCommit is the CPU a batch costs apart from its database: 16
// calls (month and hour under caps) of 4 orgs with no lease, committed to
// the database in memory.
func BenchmarkCommit(b *testing.B) {
	db := newMem()
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	quota, perHour := int64(1<<40), int64(1<<40)
	jobs := make([]batch.Job, 16)
	for i := range jobs {
		jobs[i] = batch.Job{Op: meter.Op{Org: fmt.Sprintf("org-%d", i%4), Now: now, Stages: []meter.Stage{
			{{Meter: meter.MonthCalls, N: 1, Limit: &quota}},
			{{Meter: meter.HourCalls, N: 1, Limit: &perHour, Force: true}},
		}}}
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := batch.Commit(ctx, db, jobs); err != nil {
			b.Fatal(err)
		}
	}
}
