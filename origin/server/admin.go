package server

import (
	"context"
	"time"

	"github.com/lectern-api/lectern/origin/billing"
	"github.com/lectern-api/lectern/origin/lease"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
)

// OrgExtras is what the admin API adds to an organisation (docs/operations.md:
// GET /admin/v1/orgs/{orgId}): its effective status (licence.Status), and as
// members its meters in the current month and hour and today's
// enumeration count against its granted lessons, with the alarm in force
// if there is one. The meters are settled first, within
// lease.SettleTimeout as GET /v1/license's are: meters.settled says
// whether every edge holding a lease answered, and meters.unreported is
// the most calls the edges that did not may still report (billed then,
// reserved until then).
func (s *Server) OrgExtras(ctx context.Context, o *store.Org) (string, map[string]any, error) {
	now := s.cfg.Now()
	c := s.cfg.Content().Corpus
	unsettled := s.settle(ctx, o, lease.SettleTimeout)
	u, err := s.cfg.Meters.Usage(ctx, meter.Key(o), now)
	if err != nil {
		return "", nil, err
	}
	enumeration := map[string]any{
		"day":            now.UTC().Format(time.DateOnly),
		"lessonsRead":    u.LessonsRead,
		"grantedLessons": billing.GrantedLessons(c, o.Grants),
	}
	if a := u.Alarm; a != nil {
		enumeration["alarm"] = map[string]any{
			"trippedAt": licence.Timestamp(a.TrippedAt), "day": a.Day,
			"lessonsRead": a.LessonsRead, "grantedLessons": a.Granted,
		}
	}
	return licence.Status(o, u), map[string]any{
		"meters": map[string]any{
			"month": map[string]int64{
				"calls": u.Get(meter.MonthCalls), "downloads": u.Get(meter.MonthDownloads),
				"exports": u.Get(meter.MonthExports), "testprepitems": u.Get(meter.MonthTestprepItems),
			},
			"hour": map[string]int64{
				"calls": u.Get(meter.HourCalls), "lessonreads": u.Get(meter.HourLessonReads), "mints": u.Get(meter.HourMints),
			},
			"settled":    unsettled.Settled(),
			"unreported": unsettled.Calls,
		},
		"enumeration": enumeration,
	}, nil
}

// TranscriptLesson names the lesson of a transcript's markdown in the
// corpus being served (forensic.Detector's, for the admin API's
// forensics), by the bundle builder that writes transcripts.
func (s *Server) TranscriptLesson(md []byte) (string, bool) {
	return s.exporter(s.cfg.Content()).TranscriptLesson(md)
}
