package progresstest

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/progress"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/id"
)

// Bench runs the store's benchmarks on s, an empty database: Read1 and
// Read100 read a record of 1 and of 100 classes, Save100 saves one (a read, an Apply and
// a save, as a PUT does), each learner its own; SaveOneLearner has every
// goroutine save the same learner's record and reports the share of
// saves refused with ErrConflict.
func Bench(b *testing.B, s Store) {
	ctx := b.Context()
	o := &store.Org{ID: "bench", Name: "bench", Tier: "standard", Status: "active",
		EclaVersion: 1, RequiredEclaVersion: 1, RenewsAt: t0, CreatedAt: t0, UpdatedAt: t0}
	if err := s.CreateOrg(ctx, o); err != nil {
		b.Fatalf("CreateOrg: %v", err)
	}
	seedN := func(learner string, n int) progress.Record {
		r := progress.Record{OrgID: "bench", Learner: learner}
		for i := range n {
			r.Apply(id.Lesson{Tier: id.Tiers[i%len(id.Tiers)], Slug: fmt.Sprintf("subject-%02d", i%9), Class: 1 + i/9},
				score(float64(i%101)), t0.Add(time.Duration(i)*time.Minute))
		}
		v, err := s.SaveProgress(ctx, r)
		if err != nil {
			b.Fatalf("SaveProgress: %v", err)
		}
		r.Version = v
		return r
	}
	seed := func(learner string) progress.Record { return seedN(learner, 100) }
	for _, n := range []int{1, 100} {
		learner := fmt.Sprintf("reader-%d", n)
		seedN(learner, n)
		b.Run(fmt.Sprintf("Read%d", n), func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r, err := s.Progress(ctx, "bench", learner)
					if err != nil || len(r.Classes) != n {
						b.Fatalf("Progress: %d classes, %v", len(r.Classes), err)
					}
				}
			})
		})
	}
	var learners atomic.Int64
	b.Run("Save100", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			learner := fmt.Sprintf("writer-%d", learners.Add(1))
			seed(learner)
			for n := 0; pb.Next(); n++ {
				r, err := s.Progress(ctx, "bench", learner)
				if err != nil {
					b.Fatalf("Progress: %v", err)
				}
				r.Apply(id.Lesson{Tier: "high", Slug: "subject-00", Class: 1}, score(float64(n%101)), t0.Add(time.Duration(n)*time.Second))
				if _, err := s.SaveProgress(ctx, r); err != nil {
					b.Fatalf("SaveProgress: %v", err)
				}
			}
		})
	})
	seed("shared")
	b.Run("SaveOneLearner", func(b *testing.B) {
		var saved, refused atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for n := 0; pb.Next(); n++ {
				r, err := s.Progress(ctx, "bench", "shared")
				if err != nil {
					b.Fatalf("Progress: %v", err)
				}
				r.Apply(id.Lesson{Tier: "high", Slug: "subject-00", Class: 1}, score(float64(n%101)), t0.Add(time.Duration(n)*time.Second))
				switch _, err := s.SaveProgress(ctx, r); {
				case err == nil:
					saved.Add(1)
				case errors.Is(err, progress.ErrConflict):
					refused.Add(1)
				default:
					b.Fatalf("SaveProgress: %v", err)
				}
			}
		})
		if total := saved.Load() + refused.Load(); total > 0 {
			b.ReportMetric(float64(refused.Load())/float64(total), "conflict-share")
		}
	})
}
