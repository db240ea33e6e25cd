package webhook

import (
	"context"
	"errors"
	"time"
)

// Store keeps the endpoints and the outbox (pgstore and sqlitestore
// implement it, in their webhooks.go; this package's tests run each
// against both). Secrets are stored as given: sealed by the Outbox, opaque here.
// A missing organisation, endpoint or delivery is store.ErrNotFound.
type Store interface {
	// CreateEndpoint stores e, a new endpoint of e.OrgID: store.ErrNotFound
	// when there is no such organisation, ErrTooMany when it has max
	// endpoints already. The count and the insert hold the organisation's
	// row, so concurrent creations cannot pass max.
	CreateEndpoint(ctx context.Context, e Endpoint, max int) error
	// Endpoints lists the endpoints of org in creation order.
	Endpoints(ctx context.Context, org string) ([]Endpoint, error)
	// DeleteEndpoint deletes endpoint id of org, and its deliveries.
	DeleteEndpoint(ctx context.Context, org, id string) error
	// RotateSecret makes secret endpoint id's secret and its current one
	// the previous, which still signs until until, and returns the
	// endpoint as stored.
	RotateSecret(ctx context.Context, org, id string, secret []byte, until time.Time) (Endpoint, error)
	// AllEndpoints lists every organisation's endpoints by id, those
	// with an id above after, at most limit (the pass that seals secrets
	// again after a rotation of the deployment secret).
	AllEndpoints(ctx context.Context, after string, limit int) ([]Endpoint, error)
	// Reseal replaces sealed secret old of endpoint id, its current or
	// its previous one, with sealed (the same secret sealed under
	// another key), and reports whether it did: false when the endpoint
	// holds old no more (it was rotated, sealed again by another origin,
	// or deleted). A compare-and-swap: a rotation is never undone.
	Reseal(ctx context.Context, id string, old, sealed []byte) (bool, error)

	// Enqueue writes ev and one pending delivery, due at ev.Created, per
	// endpoint of ev.Org that is enabled and subscribed to ev.Type, in
	// one transaction, and returns how many it queued. It writes nothing
	// and returns 0 when no endpoint is subscribed, or when an event of
	// ev.ID is stored already (EmitOnce's key).
	Enqueue(ctx context.Context, ev Event) (int, error)
	// Claim takes at most limit pending deliveries due at now (next
	// attempt at or before now), oldest first, for the claim token: each
	// counts an attempt and is not due again before until, the claim's
	// lease, unless Complete records its outcome first. Rows another
	// transaction is claiming are skipped, not waited for. Of one
	// endpoint it takes at most perEndpoint less busy[endpoint id] (the
	// attempts the caller has in flight to it), so that the rows of an
	// endpoint that is slow to answer do not take every worker while
	// other endpoints' rows wait.
	Claim(ctx context.Context, now, until time.Time, claim string, limit, perEndpoint int, busy map[string]int) ([]Delivery, error)
	// Complete records the outcome of an attempt of a claimed delivery
	// and reports whether it was still claimed by o.Claim (a claim whose
	// lease ended may have been taken again: its failure then changes
	// nothing, while a success is recorded whoever holds the row).
	Complete(ctx context.Context, o Outcome) (bool, error)
	// Deliveries lists the deliveries of endpoint id of org, newest first,
	// with an ID below before (0: from the newest), at most limit.
	Deliveries(ctx context.Context, org, id string, before int64, limit int) ([]Delivery, error)
	// Queue reports the pending deliveries and the creation time of the
	// oldest (zero when none).
	Queue(ctx context.Context) (pending int64, oldest time.Time, err error)
	// Prune deletes the events whose deliveries are all finished, the
	// last of them before before (an event left with no delivery, its
	// endpoints deleted: created before before), with their deliveries,
	// and returns how many events it deleted.
	Prune(ctx context.Context, before time.Time) (int64, error)
}

// ErrTooMany is CreateEndpoint's refusal of an organisation's endpoint
// over the cap.
var ErrTooMany = errors.New("too many webhook endpoints")

// Endpoint is an organisation's webhook endpoint as stored.
type Endpoint struct {
	ID, Org string
	URL     string
	Events  []string // the event types it takes
	// Secret is the current signing secret, sealed; Previous, sealed or
	// nil, is the one it replaced, which signs too until PreviousUntil.
	Secret, Previous []byte
	PreviousUntil    time.Time
	// Disabled is when it was disabled (zero: enabled), DisabledReason
	// why (an answer 410 Gone).
	Disabled       time.Time
	DisabledReason string
	Created        time.Time
}

// Event is an event in the outbox: its id (webhook-id), type, the body
// posted (the JSON envelope), and when it was emitted.
type Event struct {
	ID, Org, Type string
	Payload       []byte
	Created       time.Time
}

// Delivery states.
const (
	Pending   = "pending"   // to be tried (again)
	Delivered = "delivered" // answered 2xx
	Failed    = "failed"    // given up: RetryFor passed, or the endpoint answered 410
	Cancelled = "cancelled" // its endpoint was disabled before it was delivered
)

// Delivery is one event's delivery to one endpoint: claimed, with what
// Run needs to send it, or listed in the delivery log.
type Delivery struct {
	ID       int64
	Claim    string // the claim token it was claimed under
	Event    Event
	Endpoint Endpoint // as claimed: URL and secrets; in the log, ID only
	State    string
	Attempts int // attempts begun, the claimed one included
	// Status is the last attempt's HTTP status (0: none, or no answer),
	// Error what went wrong with it ("" when it was delivered).
	Status   int
	Error    string
	LastTry  time.Time // zero: never tried
	Next     time.Time // the next attempt, when pending
	Finished time.Time // when it was delivered or given up
	Created  time.Time
}

// Outcome is the result of one attempt of a claimed delivery.
type Outcome struct {
	ID    int64
	Claim string
	At    time.Time
	// State is Delivered, Pending (tried again at Next) or Failed.
	State  string
	Next   time.Time
	Status int
	Error  string
	// Disable disables the endpoint (it answered 410 Gone): its other
	// pending deliveries are cancelled.
	Disable  bool
	Endpoint string
}
