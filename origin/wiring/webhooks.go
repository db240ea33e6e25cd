package wiring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/lectern-api/lectern/origin/changes"
	"github.com/lectern-api/lectern/origin/corpus/follow"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/webhook"
	"github.com/lectern-api/lectern/shared/subkey"
)

// WebhookSettings are the origin's webhook settings (origin/webhook).
type WebhookSettings struct {
	// AllowPrivate lets endpoints be http and on private, loopback or
	// link-local addresses (LECTERN_WEBHOOK_ALLOW_PRIVATE=1, which make
	// run sets): development only.
	AllowPrivate bool
}

// Webhooks is the outbox of d on the store s (which must keep one:
// pgstore and sqlitestore do), its secrets sealed under the deployment's
// webhook key (shared/subkey.Webhooks; the accepted secret's opens them
// too while LECTERN_SECRET is rotated).
func (d Deployment) Webhooks(s any, set WebhookSettings, now func() time.Time, log *slog.Logger) (*webhook.Outbox, error) {
	ws, ok := s.(webhook.Store)
	if !ok {
		return nil, fmt.Errorf("wiring: the store %T keeps no webhook outbox", s)
	}
	return webhook.New(webhook.Config{Store: ws, Key: subkey.Derive(d.Secret, subkey.Webhooks),
		Accepted: d.accepted(subkey.Webhooks), Now: now, Log: log, AllowPrivate: set.AllowPrivate}), nil
}

// openWebhooks makes the origin's outbox, registers its metrics and
// starts its delivery loop (stopped by Close, before the store closes).
func (o *Origin) openWebhooks(d Deployment, set WebhookSettings) error {
	w, err := d.Webhooks(o.store, set, o.clock.Now, o.log)
	if err != nil {
		return err
	}
	if set.AllowPrivate {
		o.log.Warn("webhook: " + AllowPrivateSetting + "=1: endpoints may be http and on private, loopback and link-local addresses; development only")
	}
	w.Register(o.metrics.Registry())
	o.webhooks = w
	if o.corpus != nil {
		o.corpus.OnChange(o.contentChanged)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); resealWebhooks(ctx, w, o.log); w.Run(ctx) }()
	o.stopWebhooks = func() { cancel(); <-done }
	return nil
}

// resealWebhooks seals again under LECTERN_SECRET every endpoint secret
// only LECTERN_SECRET_ACCEPT opens (webhook.Outbox.Reseal), before the
// origin's first delivery, so that the accepted secret can be dropped
// (docs/operations.md, "Rotating keys"), and warns of each endpoint whose
// secret opens under neither. A warning, not a refusal to start: such an
// endpoint's deliveries fail (and are retried for 24 h) until it is
// rotated, but the API and every other endpoint are unaffected, and a
// refusal would take the deployment down at the rotation's last step
// for one organisation's endpoint.
func resealWebhooks(ctx context.Context, w *webhook.Outbox, log *slog.Logger) {
	r, err := w.Reseal(ctx)
	if r.Sealed > 0 {
		log.Info("webhook: endpoint secrets sealed again under LECTERN_SECRET", "secrets", r.Sealed)
	}
	for _, e := range r.Unopened {
		log.Warn("webhook: an endpoint's secret opens under neither LECTERN_SECRET nor LECTERN_SECRET_ACCEPT: "+
			"its deliveries fail until it is rotated (adminctl webhook rotate ORG ID)", "org", e.Org, "endpoint", e.ID)
	}
	if err != nil && ctx.Err() == nil {
		log.Warn("webhook: seal endpoint secrets again under LECTERN_SECRET (deliveries still do it, endpoint by endpoint)", "err", err)
	}
}

// AllowPrivateSetting is the development setting of WebhookSettings.AllowPrivate.
const AllowPrivateSetting = "LECTERN_WEBHOOK_ALLOW_PRIVATE"

// Webhooks is the origin's outbox: the one Emit of its events' sources.
func (o *Origin) Webhooks() *webhook.Outbox { return o.webhooks }

// The meters' events: what Meters.Apply learns of an organisation from
// an op's result, sent as webhooks. The enumeration alarm trips in the
// op that reads past 40% of the granted lessons (meter.Result.Tripped:
// once a day, in the meter's transaction, so on one origin):
// org.suspended with reason enumeration_alarm. A monthly meter with a
// limit whose count, after an op of a step on it (passed or refused),
// is at 80% or 100% of the limit: quota.threshold, 80% before 100% when
// one op crosses both, emitted under a key naming the org, meter, month,
// limit and level (EmitOnce), so that every origin seeing it sends it
// once between them; the origin remembers the keys it emitted, so the
// write is made once per origin and key. Calls billed by the edge's
// lease reports are seen at the organisation's next op the origin
// bills, whose count holds them (docs/decisions/webhooks.md, "Where
// events come from").

// thresholds are quota.threshold's levels, in percent.
var thresholds = []int64{80, 100}

// MeterEvents emits the events of meter ops (Meters.Events).
type MeterEvents struct {
	out  *webhook.Outbox
	log  *slog.Logger
	mu   sync.Mutex
	sent map[string]bool // EmitOnce keys emitted by this origin (bounded: sentMax)
}

// NewMeterEvents emits the meters' events to out, logging on log what
// could not be queued.
func NewMeterEvents(out *webhook.Outbox, log *slog.Logger) *MeterEvents {
	return &MeterEvents{out: out, log: log, sent: map[string]bool{}}
}

// sentMax bounds the keys remembered; past it they are forgotten (a key
// emitted again is a no-op in the store).
const sentMax = 100_000

// applied is told of every op the meters applied.
func (m *MeterEvents) applied(ctx context.Context, op meter.Op, res meter.Result) {
	if res.Suspended || res.Duplicate {
		return
	}
	org, _, _ := strings.Cut(op.Org, "/")
	ctx = context.WithoutCancel(ctx)
	if res.Tripped && op.Read != nil {
		day := op.Now.UTC().Format(time.DateOnly)
		if _, err := m.out.EmitOnce(ctx, "alarm/"+op.Org+"/"+day, org, webhook.OrgSuspended, webhook.Suspension{
			OrgID: org, Reason: webhook.ReasonAlarm, At: op.Now.UTC().Format(time.RFC3339), Day: day,
			LessonsRead: res.LessonsRead, GrantedLessons: op.Read.Granted}); err != nil {
			m.log.Error("webhook: org.suspended not queued", "org", org, "err", err)
		}
	}
	for _, st := range op.Stages {
		for _, s := range st {
			if s.Meter.Hourly() || s.Limit == nil || *s.Limit <= 0 || s.Refund {
				continue
			}
			// The count itself decides, not a refusal: a step refused
			// because it asks for more than is left (a mint of 900
			// with 500 left) leaves the meter where it was. An op
			// that crosses both levels sends 80% first.
			used := res.After.Get(s.Meter)
			for _, level := range thresholds {
				if used*100 >= level**s.Limit {
					m.threshold(ctx, op, org, s.Meter, level, used, *s.Limit)
				}
			}
		}
	}
}

func (m *MeterEvents) threshold(ctx context.Context, op meter.Op, org string, mt meter.Meter, level, used, limit int64) {
	month := op.Now.UTC().Format("2006-01")
	key := fmt.Sprintf("quota/%s/%s/%s/%d/%d", op.Org, mt, month, limit, level)
	m.mu.Lock()
	if m.sent[key] {
		m.mu.Unlock()
		return
	}
	if len(m.sent) >= sentMax {
		clear(m.sent)
	}
	m.sent[key] = true
	m.mu.Unlock()
	if _, err := m.out.EmitOnce(ctx, key, org, webhook.QuotaThreshold, webhook.Threshold{
		OrgID: org, Meter: mt.String(), Percent: int(level), Used: used, Limit: limit, Month: month,
		ResetsAt: meter.NextMonth(op.Now).Format(time.RFC3339)}); err != nil {
		m.mu.Lock()
		delete(m.sent, key) // tried again by the next op
		m.mu.Unlock()
		m.log.Error("webhook: quota.threshold not queued", "org", org, "meter", mt.String(), "err", err)
	}
}

// contentChanged sends content.changed to every organisation whose
// granted subjects differ between the two versions of ch
// (origin/changes.Diff, with its grants as they are now), with each
// subject's lessons added, changed and removed: follow.Corpus.OnChange's
// function. Every origin may tell a change (a change is told until one
// marks it announced), so each event is keyed by the change
// (webhook.Outbox.EmitOnce): an organisation is sent one per change. An
// organisation that has no endpoint for it costs one read. An error
// leaves the change to be told again.
func (o *Origin) contentChanged(ctx context.Context, ch follow.Change) error {
	ids, err := o.store.OrgIDs(ctx)
	if err != nil {
		return fmt.Errorf("content.changed: list the organisations: %w", err)
	}
	to := ch.To
	var errs []error
	for _, id := range ids {
		org, err := o.store.GetOrg(ctx, id)
		if err != nil {
			continue // deleted since the list
		}
		subjects, lessons := changes.Diff(ch.FromParts, to.Parts, org.Grants, org.Grants)
		if len(subjects) == 0 {
			continue
		}
		data := webhook.ContentChange{OrgID: id, FromVersion: ch.From, ToVersion: to.ContentVersion}
		at := map[string]int{}
		for _, s := range subjects {
			at[s.Subject] = len(data.Subjects)
			data.Subjects = append(data.Subjects, webhook.SubjectChange{Subject: s.Subject, Change: string(s.Change)})
		}
		for _, l := range lessons {
			sc := &data.Subjects[at[l.Subject]]
			switch l.Change {
			case changes.Added:
				sc.LessonsAdded++
			case changes.Changed:
				sc.LessonsChanged++
			case changes.Removed:
				sc.LessonsRemoved++
			}
		}
		if _, err := o.webhooks.EmitOnce(ctx, "content.changed/"+ch.Key, id, webhook.ContentChanged, data); err != nil {
			errs = append(errs, fmt.Errorf("content.changed to %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}
