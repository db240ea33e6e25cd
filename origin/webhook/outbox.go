package webhook

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"
)

// The event types (docs/integrating.md, "Webhooks", shows each body).
const (
	// ContentChanged: the corpus moved and some of the organisation's
	// granted subjects changed (ContentChange).
	ContentChanged = "content.changed"
	// LicenseChanged: the organisation's status, grants, expiry or
	// agreement versions changed (LicenseChange).
	LicenseChanged = "license.changed"
	// OrgSuspended: the organisation was suspended, by the enumeration
	// alarm or an operator (Suspension).
	OrgSuspended = "org.suspended"
	// QuotaThreshold: a monthly meter reached 80% or 100% of its limit
	// (Threshold).
	QuotaThreshold = "quota.threshold"
)

// Types are the event types an endpoint may take, in documentation order.
var Types = []string{ContentChanged, LicenseChanged, OrgSuspended, QuotaThreshold}

// ContentChange is content.changed's data: the versions, and the
// organisation's granted subjects that changed between them.
type ContentChange struct {
	OrgID       string          `json:"orgId"`
	FromVersion string          `json:"fromVersion"`
	ToVersion   string          `json:"toVersion"`
	Subjects    []SubjectChange `json:"subjects"`
}

// SubjectChange is one changed subject: its id ("<tier>/<subjectSlug>",
// a grant's form), whether it was added, changed or removed, and how
// many of its lessons were.
type SubjectChange struct {
	Subject        string `json:"subject"`
	Change         string `json:"change"` // "added", "changed" or "removed"
	LessonsAdded   int    `json:"lessonsAdded"`
	LessonsChanged int    `json:"lessonsChanged"`
	LessonsRemoved int    `json:"lessonsRemoved"`
}

// LicenseChange is license.changed's data: the licence as it is now
// (GET /v1/license's members of the same names), and which of them
// changed.
type LicenseChange struct {
	OrgID               string   `json:"orgId"`
	Status              string   `json:"status"`
	Tier                string   `json:"tier"`
	ContentGrants       []string `json:"contentGrants"`
	RenewsAt            string   `json:"renewsAt"`
	EclaVersion         int      `json:"eclaVersion"`
	RequiredEclaVersion int      `json:"requiredEclaVersion"`
	Changed             []string `json:"changed"`
}

// Suspension reasons.
const (
	ReasonAlarm    = "enumeration_alarm" // more than 40% of the granted lessons read in a UTC day
	ReasonOperator = "operator"
)

// Suspension is org.suspended's data.
type Suspension struct {
	OrgID  string `json:"orgId"`
	Reason string `json:"reason"` // ReasonAlarm or ReasonOperator
	At     string `json:"at"`
	// The alarm's numbers: distinct lessons read on the UTC day Day, of
	// GrantedLessons (absent for an operator's suspension).
	Day            string `json:"day,omitempty"`
	LessonsRead    int    `json:"lessonsRead,omitempty"`
	GrantedLessons int    `json:"grantedLessons,omitempty"`
}

// Threshold is quota.threshold's data: a monthly meter (GET /v1/license's
// quota key) reached Percent (80 or 100) of its limit in Month (UTC,
// "2006-01").
type Threshold struct {
	OrgID    string `json:"orgId"`
	Meter    string `json:"meter"`
	Percent  int    `json:"percent"`
	Used     int64  `json:"used"`
	Limit    int64  `json:"limit"`
	Month    string `json:"month"`
	ResetsAt string `json:"resetsAt"`
}

// Defaults of Config.
const (
	DefaultMaxEndpoints = 10
	DefaultClaimFor     = time.Minute
	DefaultRetryFor     = 24 * time.Hour
	DefaultRetention    = 35 * 24 * time.Hour
	DefaultPoll         = time.Second
	DefaultWorkers      = 8
	DefaultPerEndpoint  = 2
	// Overlap is how long a rotated secret still signs.
	Overlap = 24 * time.Hour
	// MaxPayload bounds an event's body: a larger one is refused by Emit.
	MaxPayload = 64 << 10
)

// Config configures an Outbox.
type Config struct {
	Store Store
	// Key seals the endpoints' secrets (shared/subkey.Webhooks of the
	// deployment secret); Accepted, when set, opens them too (the
	// accepted secret's, while LECTERN_SECRET is rotated).
	Key, Accepted []byte
	Now           func() time.Time // nil: time.Now
	Log           *slog.Logger     // nil: none
	// AllowPrivate lifts the https-only rule and the refusal of private
	// addresses (LECTERN_WEBHOOK_ALLOW_PRIVATE=1): development only.
	AllowPrivate bool
	// TLS is the client's TLS configuration (nil: the system's roots);
	// tests trust their receivers' certificates with it.
	TLS *tls.Config
	// MaxEndpoints caps an organisation's endpoints (0: DefaultMaxEndpoints).
	MaxEndpoints int
	// ClaimFor is a claim's lease: a claimed delivery whose outcome is
	// not recorded within it (its origin died) is claimed again
	// (0: DefaultClaimFor). It must exceed AttemptTimeout.
	ClaimFor time.Duration
	// RetryFor is how long a delivery is tried before it is given up
	// (0: DefaultRetryFor).
	RetryFor time.Duration
	// Retention is how long an event is kept once its deliveries are
	// finished: the delivery log's depth (0: DefaultRetention).
	Retention time.Duration
	// Poll is how often Run looks for due deliveries when nothing woke it
	// (0: DefaultPoll); Workers how many attempts it makes at once
	// (0: DefaultWorkers).
	Poll    time.Duration
	Workers int
	// PerEndpoint caps the attempts in flight to one endpoint here
	// (0: DefaultPerEndpoint), so that a receiver that does not answer
	// holds at most that many of the Workers while the others send to
	// other endpoints.
	PerEndpoint int
	// Backoff is the wait before the attempt after attempt n (nil:
	// Backoff, the package function).
	Backoff func(n int) time.Duration
}

// Outbox is the origin's webhooks: the endpoints, Emit, and the delivery
// loop (Run).
type Outbox struct {
	cfg    Config
	keys   [][]byte
	client *http.Client
	wake   chan struct{}
	m      *metrics
}

// New returns the Outbox of cfg.
func New(cfg Config) *Outbox {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.MaxEndpoints = or(cfg.MaxEndpoints, DefaultMaxEndpoints)
	cfg.ClaimFor = or(cfg.ClaimFor, DefaultClaimFor)
	cfg.RetryFor = or(cfg.RetryFor, DefaultRetryFor)
	cfg.Retention = or(cfg.Retention, DefaultRetention)
	cfg.Poll = or(cfg.Poll, DefaultPoll)
	cfg.Workers = or(cfg.Workers, DefaultWorkers)
	cfg.PerEndpoint = or(cfg.PerEndpoint, DefaultPerEndpoint)
	if cfg.Backoff == nil {
		cfg.Backoff = Backoff
	}
	keys := [][]byte{cfg.Key}
	if len(cfg.Accepted) > 0 {
		keys = append(keys, cfg.Accepted)
	}
	return &Outbox{cfg: cfg, keys: keys, client: newClient(cfg.AllowPrivate, cfg.TLS),
		wake: make(chan struct{}, 1), m: newMetrics()}
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// AllowPrivate reports whether private addresses and http are allowed.
func (o *Outbox) AllowPrivate() bool { return o.cfg.AllowPrivate }

// Emit writes an event of eventType about organisation orgID, data its
// "data" member (one of this package's event data types), to the outbox
// of every endpoint of orgID that takes eventType, and returns its id ("" when
// no endpoint takes it). It is durable when Emit returns: the delivery
// loop of whichever origin claims it first sends it. Each call is a new
// event; when several origins may report the same change, use EmitOnce.
func (o *Outbox) Emit(ctx context.Context, orgID, eventType string, data any) (string, error) {
	var b [16]byte
	rand.Read(b[:])
	return o.emit(ctx, "msg_"+hex.EncodeToString(b[:]), orgID, eventType, data)
}

// EmitOnce is Emit of an event whose id is derived from key (and orgID
// and eventType): the first call with a key writes it, and later calls
// with the same key, from any origin, write nothing (while the event is
// kept: Retention). Sources that several origins see (a corpus reload
// every origin follows, a meter crossing a threshold) name the change in
// key, e.g. "<fromVersion>..<toVersion>".
func (o *Outbox) EmitOnce(ctx context.Context, key, orgID, eventType string, data any) (string, error) {
	h := sha256.Sum256([]byte(orgID + "\x00" + eventType + "\x00" + key))
	return o.emit(ctx, "msg_"+hex.EncodeToString(h[:16]), orgID, eventType, data)
}

// envelope is the body posted: the Standard Webhooks payload shape.
type envelope struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      any    `json:"data"`
}

func (o *Outbox) emit(ctx context.Context, id, orgID, eventType string, data any) (string, error) {
	if !slices.Contains(Types, eventType) {
		return "", fmt.Errorf("webhook: unknown event type %q", eventType)
	}
	now := o.cfg.Now().UTC()
	body, err := json.Marshal(envelope{Type: eventType, Timestamp: now.Format(time.RFC3339Nano), Data: data})
	if err != nil {
		return "", fmt.Errorf("webhook: encode %s: %w", eventType, err)
	}
	if len(body) > MaxPayload {
		return "", fmt.Errorf("webhook: %s event of %d bytes, over %d", eventType, len(body), MaxPayload)
	}
	n, err := o.cfg.Store.Enqueue(ctx, Event{ID: id, Org: orgID, Type: eventType, Payload: body, Created: now})
	if err != nil {
		return "", fmt.Errorf("webhook: queue %s for org %s: %w", eventType, orgID, err)
	}
	if n == 0 {
		return "", nil
	}
	o.Wake()
	return id, nil
}

// Wake makes Run look for due deliveries now.
func (o *Outbox) Wake() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// NewEndpoint is what AddEndpoint made: the endpoint, and its secret's
// text, shown this once.
type NewEndpoint struct {
	Endpoint
	SecretText string
}

// BadEndpoint is AddEndpoint's refusal of a URL or an event list.
type BadEndpoint struct {
	Member string // "url" or "events"
	Reason string
}

func (e *BadEndpoint) Error() string { return e.Member + ": " + e.Reason }

// AddEndpoint registers url for events of orgID: a *BadEndpoint for a
// URL CheckURL refuses or an event list empty, repeated or naming no
// type of Types; store.ErrNotFound for no such organisation; ErrTooMany
// past the cap.
func (o *Outbox) AddEndpoint(ctx context.Context, orgID, url string, events []string) (NewEndpoint, error) {
	if err := CheckURL(url, o.cfg.AllowPrivate); err != nil {
		return NewEndpoint{}, &BadEndpoint{Member: "url", Reason: err.Error()}
	}
	if len(events) == 0 {
		return NewEndpoint{}, &BadEndpoint{Member: "events", Reason: "name at least one event type"}
	}
	for i, e := range events {
		if !slices.Contains(Types, e) {
			return NewEndpoint{}, &BadEndpoint{Member: "events", Reason: "unknown event type " + e}
		}
		if slices.Contains(events[:i], e) {
			return NewEndpoint{}, &BadEndpoint{Member: "events", Reason: "event type " + e + " is named twice"}
		}
	}
	var b [8]byte
	rand.Read(b[:])
	e := Endpoint{ID: "wh_" + hex.EncodeToString(b[:]), Org: orgID, URL: url, Events: slices.Clone(events),
		Created: o.cfg.Now().UTC()}
	key, text := newSecret()
	sealed, err := seal(o.cfg.Key, e.ID, key)
	if err != nil {
		return NewEndpoint{}, err
	}
	e.Secret = sealed
	if err := o.cfg.Store.CreateEndpoint(ctx, e, o.cfg.MaxEndpoints); err != nil {
		return NewEndpoint{}, err
	}
	return NewEndpoint{Endpoint: e, SecretText: text}, nil
}

// MaxEndpoints is the cap on an organisation's endpoints.
func (o *Outbox) MaxEndpoints() int { return o.cfg.MaxEndpoints }

// Endpoints lists orgID's endpoints.
func (o *Outbox) Endpoints(ctx context.Context, orgID string) ([]Endpoint, error) {
	return o.cfg.Store.Endpoints(ctx, orgID)
}

// DeleteEndpoint deletes endpoint id of orgID and its deliveries.
func (o *Outbox) DeleteEndpoint(ctx context.Context, orgID, id string) error {
	return o.cfg.Store.DeleteEndpoint(ctx, orgID, id)
}

// Rotate gives endpoint id of orgID a new secret, returned as text this
// once; the one it replaces still signs for Overlap (deliveries carry
// both signatures meanwhile).
func (o *Outbox) Rotate(ctx context.Context, orgID, id string) (NewEndpoint, error) {
	key, text := newSecret()
	sealed, err := seal(o.cfg.Key, id, key)
	if err != nil {
		return NewEndpoint{}, err
	}
	e, err := o.cfg.Store.RotateSecret(ctx, orgID, id, sealed, o.cfg.Now().Add(Overlap))
	if err != nil {
		return NewEndpoint{}, err
	}
	return NewEndpoint{Endpoint: e, SecretText: text}, nil
}

// Deliveries lists endpoint id's deliveries, newest first (Store.Deliveries);
// store.ErrNotFound when orgID has no endpoint id.
func (o *Outbox) Deliveries(ctx context.Context, orgID, id string, before int64, limit int) ([]Delivery, error) {
	return o.cfg.Store.Deliveries(ctx, orgID, id, before, limit)
}

// keysOf are the signing keys of a claimed endpoint at now: its secret,
// and its previous one while it still signs. A secret that only the
// accepted key opens is sealed again under the deployment's key on the
// way (reseal).
func (o *Outbox) keysOf(ctx context.Context, e Endpoint, now time.Time) ([][]byte, error) {
	k, err := o.openSecret(ctx, e.ID, e.Secret)
	if err != nil {
		return nil, err
	}
	keys := [][]byte{k}
	if e.Previous != nil && now.Before(e.PreviousUntil) {
		p, err := o.openSecret(ctx, e.ID, e.Previous)
		if err != nil {
			return nil, err
		}
		keys = append(keys, p)
	}
	return keys, nil
}

// openSecret opens endpoint id's sealed secret, and seals it again
// under the deployment's key when the accepted key opened it.
func (o *Outbox) openSecret(ctx context.Context, id string, sealed []byte) ([]byte, error) {
	k, by, err := open(o.keys, id, sealed)
	if err != nil || by == 0 {
		return k, err
	}
	if _, err := o.reseal(ctx, id, sealed, k); err != nil {
		// It signs all the same; the next delivery or start tries again.
		o.cfg.Log.Warn("webhook: seal a secret again under LECTERN_SECRET", "endpoint", id, "err", err)
	}
	return k, nil
}

// reseal stores key, endpoint id's secret sealed as old under the
// accepted key, sealed under the deployment's key, unless the endpoint
// changed since (Store.Reseal).
func (o *Outbox) reseal(ctx context.Context, id string, old, key []byte) (bool, error) {
	sealed, err := seal(o.cfg.Key, id, key)
	if err != nil {
		return false, err
	}
	ok, err := o.cfg.Store.Reseal(context.WithoutCancel(ctx), id, old, sealed)
	if err != nil {
		return false, fmt.Errorf("webhook: seal the secret of endpoint %s again: %w", id, err)
	}
	return ok, nil
}

// Resealed is what Reseal did.
type Resealed struct {
	// Sealed counts the secrets (current or previous) sealed again under
	// the deployment's key.
	Sealed int
	// Unopened are the endpoints whose secret, or previous secret while
	// it still signs, opens under neither key: their deliveries fail
	// until the endpoint is rotated (or the secret it was sealed under is
	// accepted again).
	Unopened []Endpoint
}

// resealPage is how many endpoints Reseal reads at a time.
const resealPage = 500

// Reseal goes over every endpoint and seals again under the deployment's
// key each secret that only the accepted key opens, so that once the
// accepted secret is dropped (docs/operations.md, "Rotating keys") every
// endpoint still signs. Each origin runs it when it starts; deliveries
// do the same for the endpoints they send to. An endpoint changed
// meanwhile (rotated, or sealed again by another origin) is left as it
// is.
func (o *Outbox) Reseal(ctx context.Context) (Resealed, error) {
	var r Resealed
	now := o.cfg.Now()
	after := ""
	for {
		es, err := o.cfg.Store.AllEndpoints(ctx, after, resealPage)
		if err != nil {
			return r, err
		}
		for _, e := range es {
			sealed := [][]byte{e.Secret}
			if e.Previous != nil && now.Before(e.PreviousUntil) {
				sealed = append(sealed, e.Previous)
			}
			for _, s := range sealed {
				k, by, err := open(o.keys, e.ID, s)
				if err != nil {
					r.Unopened = append(r.Unopened, e)
					break
				}
				if by == 0 {
					continue
				}
				ok, err := o.reseal(ctx, e.ID, s, k)
				if err != nil {
					return r, err
				}
				if ok {
					r.Sealed++
				}
			}
		}
		if len(es) < resealPage {
			return r, nil
		}
		after = es[len(es)-1].ID
	}
}
