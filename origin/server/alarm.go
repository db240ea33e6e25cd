package server

import (
	"context"
	"net/http"
	"time"

	"github.com/lectern-api/lectern/origin/billing"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/lease"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
)

// The enumeration alarm (spec: States and transitions) lives in the
// meter: the read that takes an organisation's distinct lessons read in a
// UTC day past 40% of its granted lessons records the alarm in its own
// transaction and is served; from then on the meter refuses every billed
// request of the organisation, which answers 403 ORG_SUSPENDED and bills
// nothing, until an operator reinstates it. The stored status is not
// written: the organisation's effective status is suspended while the
// alarm is in force (licence.Status).

// billLessonRead bills a lesson, transcript, quiz or media-list read of l,
// or of a lesson that does not exist when l is nil (a 404 on a licensed
// lesson id bills a call and a lesson read too), and feeds the
// enumeration alarm with l's id and the organisation's granted lessons
// under the corpus served. The read that trips the alarm is served, and
// logged: it is an operator event.
func (s *Server) billLessonRead(r *http.Request, req *request, l *corpus.Lesson) (billing.Bill, error) {
	var read *meter.Read
	if l != nil {
		read = &meter.Read{Lesson: l.ID, Granted: billing.GrantedLessons(req.corpus.Corpus, req.org.Grants)}
	}
	bill, err := s.biller.LessonRead(r.Context(), req.org, req.now, read)
	if err == nil && bill.Tripped {
		s.cfg.Logger.Warn("enumeration alarm: organisation suspended", "org", req.org.ID,
			"lessonsRead", bill.LessonsRead, "grantedLessons", read.Granted, "requestId", req.id)
		s.revokeTripped(r.Context(), req)
	}
	return bill, err
}

// revokeTripped takes back the leases of the organisation whose alarm the
// request tripped, before the read is answered: the alarm suspends the
// organisation from its next call, which no edge may then answer from a
// lease (docs/edge.md, Leases). The read itself is served whatever came
// of it: it passed and is billed.
func (s *Server) revokeTripped(ctx context.Context, req *request) {
	if s.cfg.Leases == nil {
		return
	}
	if err := s.cfg.Leases.Revoke(context.WithoutCancel(ctx), meter.Key(req.org)); err != nil {
		s.cfg.Logger.Error("enumeration alarm: the organisation's leases were not revoked", "org", req.org.ID,
			"requestId", req.id, "err", err)
	}
}

// settle collects the usage of o's leases the edges hold unreported,
// before its meters are read, waiting at most within for the edges
// (lease.Manager.Settle), and returns what it could not collect.
func (s *Server) settle(ctx context.Context, o *store.Org, within time.Duration) lease.Unsettled {
	if s.cfg.Leases == nil {
		return lease.Unsettled{}
	}
	return s.cfg.Leases.Settle(ctx, meter.Key(o), within)
}

// Reinstate lifts the enumeration alarm of o (the admin API calls it
// before it stores status active).
func (s *Server) Reinstate(ctx context.Context, o *store.Org) error {
	lifted, err := s.cfg.Meters.Reinstate(ctx, meter.Key(o))
	if err != nil {
		return err
	}
	if lifted {
		s.cfg.Logger.Info("enumeration alarm: organisation reinstated", "org", o.ID)
	}
	return nil
}
