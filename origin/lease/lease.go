// Package lease is the origin's side of the edge's leases (docs/edge.md,
// "Leases"; the wire is shared/lease): the Manager grants an edge
// instance, per organisation, a short lease with a block of calls
// reserved against the organisation's calls quota and callsPerHour cap,
// applies the edge's cumulative usage reports, and takes leases back
// when they must end before their time:
//
//   - Revoke and RevokeAll: a change that must apply on the next call (a
//     plan patched, an organisation deleted, the enumeration alarm
//     tripping, a corpus reload) is acknowledged only once the leases that
//     could contradict it are revoked (pushed to the edge host, which
//     answers their usage) or have expired (Gray and Cheriton's leases:
//     a write waits for the holders or for expiry).
//   - Recall: a call refused only because of leases' reservations
//     (meter.Result.Reserved) takes them back, so that a lease never
//     causes a false 429.
//   - Settle: the licence status and the admin API's reading of an
//     organisation first collect the usage the edges hold unreported, so
//     that their meters are exact where the host takes a push.
//
// The meters keep the leases in their own transactions
// (meter.LeaseStore); this package holds no lease state of its own.
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/edgesig"
	wire "github.com/lectern-api/lectern/shared/lease"
)

// Share is the part of what is left under a limit one lease may reserve:
// a quarter, so that leases shrink as the quota nears its end and several
// edges still get some.
const Share = 4

// MinValid is the shortest lease worth granting: below it the edge would
// spend it before the answer arrived.
const MinValid = 100 * time.Millisecond

// MinTTL and MaxTTL bound LECTERN_LEASE_TTL: under 100 ms no lease is
// granted at all (MinValid), and past a minute a revocation with no push
// (Cloudflare) would hold an admin change for longer than an operator
// waits.
const (
	MinTTL = MinValid
	MaxTTL = time.Minute
)

// Retry is how long an edge refused a lease waits before it asks again;
// RetryOff is the wait when leases are off, which only a restart changes.
const (
	Retry    = time.Second
	RetryOff = time.Minute
)

// settle is when a lease's reservation ends without a final report. An
// edge host that takes pushes (a revoke URL: the wazero host) logs every
// use before answering it and reports the log after a crash or a freeze,
// when it runs again: its lease reserves until that final report, at
// most until the month ends, so the uses it reports late are billed
// exactly and within the quota (a dead edge's block stays reserved
// meanwhile: docs/edge.md). The lease itself is over at its expiry
// (over, revoke.go): no change, reading or recall waits for it past
// that. One that cannot (Cloudflare) loses what it did not report with
// its isolate: its reservation ends SettleGrace after the lease.
func settle(now, expires time.Time, revokeURL string) time.Time {
	if revokeURL != "" {
		return meter.NextMonth(now)
	}
	return expires.Add(SettleGrace)
}

// SettleGrace is how long after its expiry a lease still reserves its
// calls without a final report where its host keeps no log: time for the
// edge's last report to arrive (lease.ReportInterval, and a round trip).
// Settle pushes to a lease until SettleGrace after its expiry (Recall
// until its reservation ends).
const SettleGrace = 2 * time.Second

// PushTimeout bounds one revoke push, connection and answer included: a
// host that does not answer within it is silent (SilentFor). No caller
// waits for a push past the end of its leases (Revoke) or its own bound
// (Settle).
const PushTimeout = 2 * time.Second

// SettleTimeout bounds the settle of a reading, GET /v1/license and the
// admin API's GET of an organisation, which must answer at once whatever
// an edge does: the usage of an edge that does not answer within it
// (frozen, far) is not in the reading (Unsettled), and is billed when it
// reports it (docs/edge.md, Taking leases back).
const SettleTimeout = 250 * time.Millisecond

// Config is what a Manager needs.
type Config struct {
	Store meter.LeaseStore
	// EdgeKeys sign the revoke pushes (edgesig.KeysOf the secret, the
	// keys the edge's own signatures are checked with).
	EdgeKeys edgesig.Keys
	// SignV2 signs the revoke pushes by the previous release's rule
	// (edgesig v2), the only one its edge hosts read, instead of v3: set
	// while this origin takes that release's edges' calls
	// (LECTERN_EDGE_ACCEPT_V2=1, the upgrade's window:
	// docs/upgrading.md). The v2 rule signed every field a revoke's list
	// holds (edgesig.V2Covers), so a v2 push is bound as a v3 one is;
	// this release's edge hosts take either.
	SignV2 bool
	// Off is LECTERN_LEASES=off: no lease is granted, and the edge gates
	// every 304 as without leases. Reports are still applied and leases
	// granted before still revoked.
	Off bool
	// TTL is a lease's longest validity (LECTERN_LEASE_TTL; zero:
	// wire.DefaultTTL).
	TTL time.Duration
	// Retention is how long a lease is kept once it ended
	// (LECTERN_LEASE_RETENTION; zero: DefaultRetention; prune.go).
	Retention time.Duration
	// OnRevoke, when set, is told of each revocation (an admin change, a
	// reload, the alarm): how long it took, and how it ended: WaitedPush,
	// WaitedExpiry or WaitedPushTimeout (the origin's metrics).
	OnRevoke func(took time.Duration, waited string)
	// Now is the origin's clock (the admin test clock when set).
	Now    func() time.Time
	Logger *slog.Logger
	// Client makes the pushes (nil: NewClient()).
	Client *http.Client
	// Edges are the base URLs of the edge hosts that take revoke pushes
	// (LECTERN_EDGE_URLS, ParseEdges; edges.go): a lease's revoke URL
	// must be the revoke endpoint of one of them (AllowsRevokeURL), when
	// the lease is asked for and again when a push is made. None: no
	// push is made, and a lease request naming a revoke URL is refused.
	Edges []string
}

// Manager grants, revokes, recalls and settles leases. It is safe for
// concurrent use.
type Manager struct {
	cfg     Config
	client  *http.Client
	edges   map[string]bool // the canonical base URLs of cfg.Edges
	recalls flights         // one recall of an organisation at a time
	silence silence         // edge hosts that did not answer a push
}

// New returns a Manager.
func New(cfg Config) *Manager {
	if cfg.TTL == 0 {
		cfg.TTL = wire.DefaultTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{cfg: cfg, client: cfg.Client}
	m.edges = m.edgeSet(cfg.Edges)
	if m.client == nil {
		m.client = NewClient()
	}
	return m
}

// NewClient is the pushes' HTTP client: each push is bounded by
// PushTimeout, and a redirect is never followed (its answer is a failed
// push): the revoke URL is the edge host's own, and a push carries a
// signature that must not be sent anywhere else.
func NewClient() *http.Client {
	return &http.Client{
		Timeout:       PushTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// TTL is the longest validity of a lease.
func (m *Manager) TTL() time.Duration { return m.cfg.TTL }

// Epoch is org's lease epoch (an organisation's meter.Key), read from the
// store: Lease reads it before it reads the organisation it grants on.
func (m *Manager) Epoch(ctx context.Context, org string) (int64, error) {
	return m.cfg.Store.Epoch(ctx, org)
}

// Report applies an edge's cumulative usage reports (idempotent: see
// meter.LeaseStore.ReportLeases).
func (m *Manager) Report(ctx context.Context, rs []wire.Report) error {
	if len(rs) == 0 {
		return nil
	}
	return m.cfg.Store.ReportLeases(ctx, m.cfg.Now(), meterReports(rs, false))
}

func meterReports(rs []wire.Report, final bool) []meter.Report {
	out := make([]meter.Report, len(rs))
	for i, r := range rs {
		out[i] = meter.Report{Lease: r.Lease, Used: r.Used, Final: r.Final || final}
	}
	return out
}

// Ask is a lease request that passed the organisation gate.
type Ask struct {
	// Org is the organisation as read after Epoch.
	Org *store.Org
	// Epoch is its epoch as read before Org.
	Epoch int64
	Want  int64
	// RevokeURL is where the edge host takes pushes; "" when it cannot.
	RevokeURL string
	Now       time.Time
}

// Grant is what Manager.Grant decided. Calls 0 is no lease: the edge
// asks again after Retry.
type Grant struct {
	ID    string
	Calls int64
	Valid time.Duration
	Retry time.Duration
	// After holds the organisation's billed counts at the grant (the
	// rateLimits of the answer are counted from them).
	After meter.Counters
}

// Grant grants a lease, or none (Calls 0) when leases are off, the
// enumeration alarm is in force, the epoch moved since Ask.Epoch, the
// validity would be under MinValid, or fewer than wire.MinCalls calls
// could be reserved (near the quota every 304 is then gated, exact).
func (m *Manager) Grant(ctx context.Context, a Ask) (Grant, error) {
	if a.RevokeURL != "" && m.AllowsRevokeURL(a.RevokeURL) {
		m.silence.heard(a.RevokeURL, time.Now()) // its host runs: push to it again
	}
	if m.cfg.Off {
		return Grant{Retry: RetryOff}, nil
	}
	valid := Validity(a.Org, a.Now, m.cfg.TTL)
	if valid < MinValid {
		return Grant{Retry: Retry}, nil
	}
	id := NewID()
	expires := a.Now.Add(valid)
	g, err := m.cfg.Store.GrantLease(ctx, meter.LeaseGrant{
		Org: meter.Key(a.Org), Now: a.Now, ID: id, Epoch: a.Epoch,
		Want: min(a.Want, wire.MaxCalls), Floor: wire.MinCalls, Share: Share,
		MonthLimit: a.Org.Quota.Calls, HourLimit: a.Org.RateLimits.CallsPerHour,
		Expires: expires, Settle: settle(a.Now, expires, a.RevokeURL), RevokeURL: a.RevokeURL,
	})
	if err != nil {
		return Grant{}, err
	}
	if g.Calls == 0 || g.Suspended || g.Stale {
		return Grant{Retry: Retry, After: g.After}, nil
	}
	return Grant{ID: id, Calls: g.Calls, Valid: valid, After: g.After}, nil
}

// Validity is how long a lease of o granted at now may last: at most ttl,
// and never past the next UTC hour (its calls are reserved against the
// hour's cap), the next UTC month (the quota's) or the licence's expiry
// (the gate's), so that no lease spans a change the gate would see.
func Validity(o *store.Org, now time.Time, ttl time.Duration) time.Duration {
	return min(ttl, meter.NextHour(now).Sub(now), meter.NextMonth(now).Sub(now), o.RenewsAt.Sub(now))
}

// NewID is a lease id: 128 random bits in hex.
func NewID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b[:])
}
