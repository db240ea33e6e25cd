package server

import (
	"context"
	"net/http"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
)

// StatusSuspended is the plan status the enumeration alarm sets.
const StatusSuspended = "suspended"

// billLessonRead bills a lesson, transcript, quiz or media-list read of l,
// or of a lesson that does not exist when l is nil (a 404 on a licensed
// lesson id bills a call and a lesson read too), and runs the enumeration
// alarm (spec: States and transitions): the read that takes the
// organisation's distinct lessons read today past 40% of its granted
// lessons suspends it. That read is still served; the next content call
// answers ORG_SUSPENDED.
func (s *Server) billLessonRead(r *http.Request, req *request, l *corpus.Lesson) (meter.Bill, error) {
	var read *meter.Read
	if l != nil {
		read = &meter.Read{Ordinal: l.Ordinal, Version: req.corpus.ContentVersion}
	}
	bill, err := s.biller.LessonRead(r.Context(), req.org, req.now, read)
	if err != nil || bill.Err != nil || !bill.FirstRead {
		return bill, err
	}
	granted := GrantedLessons(req.corpus.Corpus, req.org.Grants)
	if meter.Alarm(bill.LessonsRead, granted) && !meter.Alarm(bill.LessonsRead-1, granted) {
		if err := s.suspend(r.Context(), req, bill.LessonsRead, granted); err != nil {
			return bill, err
		}
	}
	return bill, nil
}

// suspend sets the organisation's status to suspended, durably, before the
// read that crossed the threshold is answered.
func (s *Server) suspend(ctx context.Context, req *request, read, granted int) error {
	_, err := s.cfg.Store.UpdateOrg(ctx, req.org.ID, func(o *store.Org) error {
		// Not an organisation created again under this id since the
		// request read it: the reads counted were the old one's.
		if o.Status == licence.StatusActive && o.Generation == req.org.Generation {
			o.Status = StatusSuspended
			o.UpdatedAt = req.now
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.cfg.Logger.Warn("enumeration alarm: organisation suspended", "org", req.org.ID,
		"lessonsRead", read, "grantedLessons", granted, "requestId", req.id)
	return nil
}
