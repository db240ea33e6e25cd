package lease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/lectern-api/lectern/internal/httpsig"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/shared/edgesig"
	wire "github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/shared/reqid"
)

// A lease is over at the end of its validity (meter.Lease.Expires: its
// grant's time plus at most the TTL, Validity), whether or not its edge
// host reported its final usage: the edge counts the validity from
// before it asked, so it answers no 304 from the lease after that, and
// nothing waits for the lease past it (Revoke; Settle past SettleGrace,
// the time a running host takes to report it). What the
// lease reserves is another matter: its block stays reserved until its
// final report (settle), so the uses a host reports late, after a
// freeze, are billed exactly and still within the quota.
func over(l meter.Lease, now time.Time) bool { return l.Closed || !now.Before(l.Expires) }

// recent reports whether l may hold usage its host reports at once when
// asked: it serves, or it ended less than SettleGrace ago. Settle pushes
// to those only; an older one's host has not reported it in time (frozen,
// dead, cut off), and its usage is billed when it does. Recall pushes to
// older ones too (see there).
func recent(l meter.Lease, now time.Time) bool {
	return !l.Closed && now.Before(l.Expires.Add(SettleGrace))
}

// How a revocation ended: the label OnRevoke is told, that of
// lectern_lease_revoke_duration_seconds{waited} (docs/operations.md).
const (
	// WaitedPush: every lease that still served was taken back by a push
	// its edge host answered (or there was none).
	WaitedPush = "push"
	// WaitedExpiry: it waited for a lease no push could take back to
	// expire: one without a revoke URL (Cloudflare), one whose URL is no
	// listed edge host's, or one whose host refused the push or could not
	// be sent it (down).
	WaitedExpiry = "expiry"
	// WaitedPushTimeout: it waited for a lease whose host did not answer
	// (a frozen edge) to expire: its push was still unanswered when the
	// lease ended, or none was sent because the host is silent.
	WaitedPushTimeout = "push_timeout"
)

// worse is the label of a revocation that waited for both a and b:
// push < expiry < push_timeout.
func worse(a, b string) string {
	rank := map[string]int{WaitedPush: 0, WaitedExpiry: 1, WaitedPushTimeout: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// Revoke takes back org's leases (an organisation's meter.Key) after a
// change to it committed: it bumps org's epoch, so that no lease granted
// on what was read before the change can commit, pushes a revoke to the
// edge host of every lease that still serves (one that is over serves no
// more) and applies the usage it answers as final, and waits for each
// such lease until its push is answered or it expires on the origin's
// clock: at most TTL + 1 s of real time in all, however long an edge host
// stays frozen and however many changes are made meanwhile. When it
// returns, no lease of org answers a 304 any more: the caller may
// acknowledge the change (spec: a licence change applies to the next
// call).
func (m *Manager) Revoke(ctx context.Context, org string) error {
	if err := m.cfg.Store.BumpEpoch(ctx, org); err != nil {
		return fmt.Errorf("lease: bump the epoch of %s: %w", org, err)
	}
	return m.revoke(ctx, org)
}

// RevokeAll is Revoke of every organisation: a corpus reload (every
// lease names the content version it was granted under).
func (m *Manager) RevokeAll(ctx context.Context) error {
	if err := m.cfg.Store.BumpEpoch(ctx, ""); err != nil {
		return fmt.Errorf("lease: bump every epoch: %w", err)
	}
	return m.revoke(ctx, "")
}

func (m *Manager) revoke(ctx context.Context, org string) error {
	start := time.Now()
	// Expires is at most the grant's time plus the TTL (Validity), so the
	// deadline only cuts a wait short when the origin's clock moved
	// backward.
	deadline := start.Add(m.cfg.TTL + time.Second)
	now := m.cfg.Now()
	open, err := m.cfg.Store.OpenLeases(ctx, org, now)
	if err != nil {
		return fmt.Errorf("lease: list the open leases of %q: %w", org, err)
	}
	var serving []meter.Lease
	for _, l := range open {
		if !over(l, now) {
			serving = append(serving, l)
		}
	}
	r := m.takeBack(ctx, serving, false)
	waited := WaitedPush
	for _, l := range r.unpushed {
		m.waitUntil(ctx, nil, l.Expires, deadline)
		waited = worse(waited, WaitedExpiry)
	}
	for _, l := range r.silent {
		m.waitUntil(ctx, nil, l.Expires, deadline)
		waited = worse(waited, WaitedPushTimeout)
	}
	for _, p := range r.pushes {
		// A push still unanswered when its leases end holds up nothing
		// more: it goes on to its own end (PushTimeout), its answer is
		// applied then, or its host is marked silent.
		end := latest(p.batch)
		if m.waitUntil(ctx, p.done, end, deadline) && p.outcome == pushAnswered {
			continue
		}
		m.waitUntil(ctx, nil, end, deadline)
		waited = worse(waited, p.waited())
	}
	if m.cfg.OnRevoke != nil {
		m.cfg.OnRevoke(time.Since(start), waited)
	}
	return ctx.Err()
}

// latest is the latest expiry of leases.
func latest(leases []meter.Lease) time.Time {
	var t time.Time
	for _, l := range leases {
		if l.Expires.After(t) {
			t = l.Expires
		}
	}
	return t
}

// Recall takes back org's leases because a call was refused only for
// their reservations (meter.Result.Reserved): a push to the host of each
// open one that takes one, without keeping it, and its usage applied as
// final; those that take none are waited for until their reservation
// ends (Settle, on the origin's clock), at most TTL + SettleGrace + 1 s.
// One whose push fails or whose host is silent is not (it reserves until
// its host reports it: waiting would not free it). The caller then
// applies its op once more. Concurrent recalls of one organisation share
// one round.
//
// Unlike Settle, Recall pushes to leases that ended longer than
// SettleGrace ago too: such a lease reserves until its host reports it
// (settle), and a host's usage log reports only the leases it answered
// a 304 from. A lease whose grant the host took, or never received,
// before it was killed, with no use logged, is reported by no replay:
// only the answer of the host running again (it does not hold the
// lease: closed at what was recorded, answered) ends its reservation,
// which would otherwise refuse calls until the month ends. A dead host
// refuses the push at once, and a frozen one costs one PushTimeout, then
// is silent.
// Failures are logged: the op is applied again whatever came of it.
func (m *Manager) Recall(ctx context.Context, org string) {
	m.recalls.do(ctx, org, func() {
		start := time.Now()
		deadline := start.Add(m.cfg.TTL + SettleGrace + time.Second)
		now := m.cfg.Now()
		open, err := m.cfg.Store.OpenLeases(ctx, org, now)
		if err != nil {
			m.cfg.Logger.Warn("lease: recall: list the open leases", "org", org, "err", err)
			return
		}
		r := m.takeBack(ctx, open, false)
		for _, p := range r.pushes {
			m.waitUntil(ctx, p.done, time.Time{}, deadline)
		}
		for _, l := range r.unpushed {
			// A lease whose revoke URL is no longer a listed edge host's
			// keeps its reservation until its host reports it.
			if l.RevokeURL == "" {
				m.waitUntil(ctx, nil, l.Settle, deadline)
			}
		}
	})
}

// Unsettled is what a Settle could not collect: the leases that may hold
// usage not in the meters (their host did not answer in time, is silent,
// takes no push, or has not reported a lease that ended), and Calls, the
// most that usage can be (their blocks less what was reported). It is
// billed when the hosts report it, and reserved until then.
type Unsettled struct {
	Leases int
	Calls  int64
	// Unknown: the open leases could not be read (the error is logged).
	Unknown bool
}

// Settled reports whether the reading is exact: nothing is unsettled.
func (u Unsettled) Settled() bool { return !u.Unknown && u.Leases == 0 }

// Settle collects the usage the edges hold of org's leases, where their
// host takes a push, and applies it, so that the meters read next are
// exact: a push with keep (the edge goes on using the lease) to the host
// of each recent open lease with a revoke URL, waiting for them at most
// within (0: SettleTimeout) of real time. It returns what it could not
// collect: a push that fails or does not answer in time is skipped (it
// goes on, and its answer is applied when it comes), and the reading
// then lags by at most Unsettled.Calls. Failures are logged.
func (m *Manager) Settle(ctx context.Context, org string, within time.Duration) Unsettled {
	if within <= 0 {
		within = SettleTimeout
	}
	deadline := time.Now().Add(within)
	lctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	now := m.cfg.Now()
	open, err := m.cfg.Store.OpenLeases(lctx, org, now)
	if err != nil {
		m.cfg.Logger.Warn("lease: settle: list the open leases", "org", org, "err", err)
		return Unsettled{Unknown: true}
	}
	var pending []meter.Lease
	var u Unsettled
	for _, l := range open {
		if recent(l, now) {
			pending = append(pending, l)
		} else {
			u.add(l)
		}
	}
	r := m.takeBack(ctx, pending, true)
	for _, l := range append(r.unpushed, r.silent...) {
		u.add(l)
	}
	for _, p := range r.pushes {
		if !m.waitUntil(ctx, p.done, time.Time{}, deadline) || p.outcome != pushAnswered {
			for _, l := range p.batch {
				u.add(l)
			}
		}
	}
	return u
}

func (u *Unsettled) add(l meter.Lease) {
	u.Leases++
	u.Calls += max(0, l.Calls-l.Used)
}

// round is what takeBack started: a push per batch of leases, running,
// and the leases it could not push: unpushed (no revoke URL, or one the
// edge hosts listed now do not allow: stored under another
// LECTERN_EDGE_URLS, before a restart, never called, edges.go) and
// silent (their host did not answer its last push: silence).
type round struct {
	pushes           []*push
	unpushed, silent []meter.Lease
}

// takeBack starts a revoke push (keep: a settle) for leases to their
// edge hosts, concurrently, at most wire.MaxReports leases a push, and
// returns at once. Each push runs to its own end, PushTimeout at most,
// whatever becomes of ctx: it applies what its host answers, and marks
// a host that did not answer silent.
func (m *Manager) takeBack(ctx context.Context, leases []meter.Lease, keep bool) round {
	var r round
	batches := map[string][][]meter.Lease{}
	var unlisted map[string]int // revoke URL: leases not pushed to
	for _, l := range leases {
		switch {
		case l.RevokeURL == "":
			r.unpushed = append(r.unpushed, l)
			continue
		case !m.AllowsRevokeURL(l.RevokeURL):
			if unlisted == nil {
				unlisted = map[string]int{}
			}
			unlisted[l.RevokeURL]++
			r.unpushed = append(r.unpushed, l)
			continue
		case m.silence.silent(l.RevokeURL, time.Now()):
			r.silent = append(r.silent, l)
			continue
		}
		bs := batches[l.RevokeURL]
		if n := len(bs); n == 0 || len(bs[n-1]) == wire.MaxReports {
			bs = append(bs, nil)
		}
		bs[len(bs)-1] = append(bs[len(bs)-1], l)
		batches[l.RevokeURL] = bs
	}
	for u, n := range unlisted {
		m.cfg.Logger.Warn("lease: a revoke URL that is no listed edge host's ("+EdgesSetting+") is not pushed to; its leases are waited for until they expire",
			"url", u, "leases", n, "keep", keep)
	}
	if len(r.silent) > 0 {
		m.cfg.Logger.Info("lease: not pushed to edge hosts that did not answer their last push; their leases are waited for until they expire",
			"leases", len(r.silent), "keep", keep)
	}
	for url, bs := range batches {
		for _, b := range bs {
			r.pushes = append(r.pushes, m.start(ctx, url, b, keep))
		}
	}
	return r
}

// A push's outcome.
type outcome int

const (
	pushAnswered outcome = iota + 1 // 200 and reports: applied
	pushRefused                     // the host answered something else
	pushFailed                      // not sent, or the connection failed: the host is down
	pushTimedOut                    // no answer within PushTimeout: the host is frozen
)

// push is one revoke push, running. outcome is set before done is closed.
type push struct {
	batch   []meter.Lease
	done    chan struct{}
	outcome outcome
}

// waited is the revocation's label when it waited for p's leases to
// expire: p was refused or failed (expiry), or timed out or is still
// unanswered (push_timeout).
func (p *push) waited() string {
	select {
	case <-p.done:
		if p.outcome == pushRefused || p.outcome == pushFailed {
			return WaitedExpiry
		}
	default:
	}
	return WaitedPushTimeout
}

// start sends a revoke of batch to the host at url in a goroutine of its
// own, bounded by PushTimeout and not by ctx (a caller that stops waiting
// leaves it to end), and applies the reports it answers.
func (m *Manager) start(ctx context.Context, url string, batch []meter.Lease, keep bool) *push {
	p := &push{batch: batch, done: make(chan struct{})}
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer close(p.done)
		sent := time.Now()
		pctx, cancel := context.WithTimeout(ctx, PushTimeout)
		rs, err := m.push(pctx, url, batch, keep)
		cancel()
		var refused *refusal
		switch {
		case err == nil:
			p.outcome = pushAnswered
		case errors.As(err, &refused):
			p.outcome = pushRefused
		case timedOut(err):
			p.outcome = pushTimedOut
		default:
			p.outcome = pushFailed
		}
		if err != nil {
			m.cfg.Logger.Warn("lease: a revoke push failed", "url", url, "leases", len(batch), "keep", keep, "err", err)
		}
		switch p.outcome {
		case pushTimedOut:
			m.silence.mark(url, sent, time.Now())
		case pushAnswered, pushRefused:
			m.silence.heard(url, sent)
		}
		if len(rs) > 0 {
			if err := m.cfg.Store.ReportLeases(ctx, m.cfg.Now(), rs); err != nil {
				// The host dropped the leases (unless keep) and keeps their
				// final reports until the origin acknowledges them: they
				// come again.
				m.cfg.Logger.Warn("lease: apply the reports of a revoke push", "url", url, "leases", len(batch), "keep", keep, "err", err)
			}
		}
	}()
	return p
}

// timedOut reports whether err is a push that got no answer in time.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// refusal is a host's answer that is not the reports of a revoke.
type refusal struct{ reason string }

func (r *refusal) Error() string { return r.reason }

// push sends one revoke to an edge host and returns the reports to apply:
// the host's, for the leases of batch only, final unless keep, and a
// final one at the recorded usage for each lease of batch it did not
// report (it does not hold it).
func (m *Manager) push(ctx context.Context, url string, batch []meter.Lease, keep bool) ([]meter.Report, error) {
	rv := wire.Revoke{Keep: keep}
	for _, l := range batch {
		rv.Leases = append(rv.Leases, l.ID)
	}
	body := wire.AppendRevoke(nil, &rv)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", reqid.New()) // in the shape the edge's own have
	if m.cfg.SignV2 {
		if err := httpsig.SignV2(m.cfg.EdgeKeys, edgesig.Revoke, req, body, m.cfg.Now()); err != nil {
			return nil, err
		}
	} else {
		httpsig.Sign(m.cfg.EdgeKeys, edgesig.Revoke, req, body, m.cfg.Now())
	}
	res, err := m.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(res.Body, wire.MaxBody+1))
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, &refusal{fmt.Sprintf("the edge host answered %d", res.StatusCode)}
	}
	got, err := wire.ParseReports(answer)
	if err != nil {
		return nil, &refusal{fmt.Sprintf("the edge host's answer: %v", err)}
	}
	return answered(batch, got, keep), nil
}

// answered is what a host's answer to a revoke of batch means for the
// meters (push).
func answered(batch []meter.Lease, got []wire.Report, keep bool) []meter.Report {
	held := make(map[string]wire.Report, len(got))
	for _, r := range got {
		held[r.Lease] = r
	}
	out := make([]meter.Report, 0, len(batch))
	for _, l := range batch {
		r, ok := held[l.ID]
		switch {
		case !ok:
			out = append(out, meter.Report{Lease: l.ID, Used: l.Used, Final: true})
		case keep:
			out = append(out, meter.Report{Lease: l.ID, Used: r.Used, Final: r.Final})
		default:
			out = append(out, meter.Report{Lease: l.ID, Used: r.Used, Final: true})
		}
	}
	return out
}

// waitUntil waits until done is closed (nil: never), or the origin's
// clock reaches t (zero: never), or the real time reaches deadline, or ctx
// is done, whichever comes first. It reports whether done was closed.
func (m *Manager) waitUntil(ctx context.Context, done <-chan struct{}, t, deadline time.Time) bool {
	for {
		d := time.Until(deadline)
		if !t.IsZero() {
			d = min(d, t.Sub(m.cfg.Now()))
		}
		if d <= 0 {
			select {
			case <-done:
				return true
			default:
				return false
			}
		}
		timer := time.NewTimer(d)
		select {
		case <-done:
			timer.Stop()
			return true
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-timer.C:
		}
	}
}

// SilentFor bounds how long an edge host that did not answer a push
// within PushTimeout (frozen) is silent: not pushed to again, its leases
// waited for until they expire as those of a host that takes no push.
// So a frozen host costs the first push's timeout, not one per change,
// reading or recall. A host that runs again asks for a lease before it
// serves from one, which ends its silence at once (Manager.Lease); the
// bound is for one that asks another origin of the deployment.
const SilentFor = 10 * time.Second

// silence is the edge hosts that are silent, by the canonical base of
// their revoke URL (only listed hosts are pushed to or lease, so it holds
// at most one entry per listed host).
type silence struct {
	mu sync.Mutex
	// marked: when the unanswered push that made a host silent was sent,
	// and when it timed out; ran: when the host last showed it runs (it
	// asked for a lease, or answered a push sent then).
	marked map[string][2]time.Time
	ran    map[string]time.Time
}

func silenceKey(url string) string {
	if base, ok := revokeBase(url); ok {
		return base
	}
	return url
}

// silent reports whether the host of url is silent at now (real time).
func (s *silence) silent(url string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := silenceKey(url)
	m, ok := s.marked[k]
	if !ok {
		return false
	}
	if m[0].Before(s.ran[k]) || now.Sub(m[1]) >= SilentFor {
		delete(s.marked, k)
		return false
	}
	return true
}

// mark makes the host of url silent from now: a push sent to it at sent
// got no answer in time.
func (s *silence) mark(url string, sent, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.marked == nil {
		s.marked = map[string][2]time.Time{}
	}
	s.marked[silenceKey(url)] = [2]time.Time{sent, now}
}

// heard records that the host of url ran at t: it asked for a lease, or
// answered a push sent at t. A push left unanswered makes it silent only
// if it was sent after.
func (s *silence) heard(url string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ran == nil {
		s.ran = map[string]time.Time{}
	}
	k := silenceKey(url)
	if t.After(s.ran[k]) {
		s.ran[k] = t
	}
}

// flights runs one call per key at a time: a caller that finds one
// running waits for it to end instead of starting its own.
type flights struct {
	mu      sync.Mutex
	running map[string]chan struct{}
}

func (f *flights) do(ctx context.Context, key string, fn func()) {
	f.mu.Lock()
	if ch, ok := f.running[key]; ok {
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		return
	}
	if f.running == nil {
		f.running = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	f.running[key] = ch
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.running, key)
		f.mu.Unlock()
		close(ch)
	}()
	fn()
}
