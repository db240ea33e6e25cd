package server

import (
	"context"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
)

// OrgExtras are the members the admin API adds to an organisation
// (DESIGN.md: GET /admin/v1/orgs/{orgId}): its meters in the current month
// and hour, and today's enumeration count against its granted lessons.
func (s *Server) OrgExtras(ctx context.Context, o *store.Org) (map[string]any, error) {
	now := s.cfg.Now()
	c := s.cfg.Content().Corpus
	u, read, err := s.cfg.Meters.Usage(ctx, meter.Key(o), now, c.ContentVersion)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"meters": map[string]any{
			"month": map[string]int64{
				"calls": u.Get(meter.MonthCalls), "downloads": u.Get(meter.MonthDownloads),
				"exports": u.Get(meter.MonthExports), "testprepitems": u.Get(meter.MonthTestprepItems),
			},
			"hour": map[string]int64{
				"calls": u.Get(meter.HourCalls), "lessonreads": u.Get(meter.HourLessonReads), "mints": u.Get(meter.HourMints),
			},
		},
		"enumeration": map[string]any{
			"day":            now.UTC().Format(time.DateOnly),
			"lessonsRead":    read,
			"grantedLessons": GrantedLessons(c, o.Grants),
		},
	}, nil
}

// GrantedLessons counts the lessons of c that grants cover: the
// denominator of the enumeration alarm.
func GrantedLessons(c *corpus.Corpus, grants []string) int {
	n := 0
	for _, t := range c.Tiers {
		for _, sub := range t.Subjects {
			if licence.Entitled(grants, sub.Tier, sub.Slug) == nil {
				n += len(sub.Lessons)
			}
		}
	}
	return n
}
