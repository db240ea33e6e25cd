package lease

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/lectern-api/lectern/internal/httpsig"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/shared/edgesig"
	wire "github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/shared/reqid"
)

// Revoke takes back org's leases (an organisation's meter.Key) after a
// change to it committed: it bumps org's epoch, so that no lease granted
// on what was read before the change can commit, pushes a revoke to
// every open lease's edge host that takes one and applies the usage it
// answers as final, and waits for the others (no push possible, or the
// push failed) to expire on the origin's clock, at most TTL + 1 s of real
// time. When it returns, no lease of org answers a 304 any more: the
// caller may acknowledge the change (spec: a licence change applies to
// the next call).
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
	open, err := m.cfg.Store.OpenLeases(ctx, org, m.cfg.Now())
	if err != nil {
		return fmt.Errorf("lease: list the open leases of %q: %w", org, err)
	}
	left, err := m.takeBack(ctx, open, false)
	if err != nil {
		return err
	}
	var until time.Time
	for _, l := range left {
		if l.Expires.After(until) {
			until = l.Expires
		}
	}
	// Expires is at most the grant's time plus the TTL (Validity), so
	// the bound only cuts a wait short when the clock moved backward.
	expiry := until.After(m.cfg.Now()) // some lease no push reached is still valid
	m.wait(ctx, until, m.cfg.TTL+time.Second-time.Since(start))
	if m.cfg.OnRevoke != nil {
		m.cfg.OnRevoke(time.Since(start), expiry)
	}
	return ctx.Err()
}

// Recall takes back org's leases because a call was refused only for
// their reservations (meter.Result.Reserved): a push to each that takes
// one, without keeping it, and its usage applied as final; those that
// take none are waited for until their reservation ends (Settle, on the
// origin's clock), at most TTL + SettleGrace + 1 s; one whose push
// failed is not (it reserves until its host reports it). The caller
// then applies its op once more. Concurrent recalls of one organisation
// share one round.
// Failures are logged: the op is applied again whatever came of it.
func (m *Manager) Recall(ctx context.Context, org string) {
	m.recalls.do(ctx, org, func() {
		start := time.Now()
		open, err := m.cfg.Store.OpenLeases(ctx, org, m.cfg.Now())
		if err != nil {
			m.cfg.Logger.Warn("lease: recall: list the open leases", "org", org, "err", err)
			return
		}
		left, err := m.takeBack(ctx, open, false)
		if err != nil {
			m.cfg.Logger.Warn("lease: recall: apply the reports", "org", org, "err", err)
		}
		var until time.Time
		for _, l := range left {
			// A lease whose push failed, or whose revoke URL is no
			// longer a listed edge host's, keeps its reservation until
			// its host reports it (settle): waiting would not free it.
			if l.RevokeURL == "" && l.Settle.After(until) {
				until = l.Settle
			}
		}
		m.wait(ctx, until, m.cfg.TTL+SettleGrace+time.Second-time.Since(start))
	})
}

// Settle collects the usage the edges hold of org's leases, where their
// host takes a push, and applies it, so that the meters read next are
// exact: a push with keep (the edge goes on using the lease) to each
// open lease with a revoke URL, all within within (0: SettleTimeout). A
// push that fails or does not answer in time is skipped (the reading then
// lags by what that edge holds unreported, at most lease.ReportEvery uses
// per lease or lease.ReportInterval). Failures are logged.
func (m *Manager) Settle(ctx context.Context, org string, within time.Duration) {
	if within <= 0 {
		within = SettleTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	open, err := m.cfg.Store.OpenLeases(ctx, org, m.cfg.Now())
	if err != nil {
		m.cfg.Logger.Warn("lease: settle: list the open leases", "org", org, "err", err)
		return
	}
	if _, err := m.takeBack(ctx, open, true); err != nil {
		m.cfg.Logger.Warn("lease: settle: apply the reports", "org", org, "err", err)
	}
}

// takeBack pushes a revoke (keep: a settle) for leases to their edge
// hosts, concurrently, at most wire.MaxReports leases a push, and
// applies what they answer. A lease a host answered no report for is not
// held there: it is closed at what was reported before. It returns the
// leases no push reached: those without a revoke URL, those whose revoke
// URL the edge hosts listed now do not allow (stored under another
// LECTERN_EDGE_URLS, before a restart: never called, edges.go), and those
// whose push failed. An error is the store's.
func (m *Manager) takeBack(ctx context.Context, leases []meter.Lease, keep bool) ([]meter.Lease, error) {
	var left []meter.Lease
	batches := map[string][][]meter.Lease{}
	var unlisted map[string]int // revoke URL: leases not pushed to
	for _, l := range leases {
		if l.RevokeURL == "" {
			left = append(left, l)
			continue
		}
		if !m.AllowsRevokeURL(l.RevokeURL) {
			if unlisted == nil {
				unlisted = map[string]int{}
			}
			unlisted[l.RevokeURL]++
			left = append(left, l)
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
	type answer struct {
		batch   []meter.Lease
		reports []meter.Report
		err     error
	}
	answers := make(chan answer)
	n := 0
	for url, bs := range batches {
		for _, b := range bs {
			n++
			go func() {
				rs, err := m.push(ctx, url, b, keep)
				answers <- answer{b, rs, err}
			}()
		}
	}
	var reports []meter.Report
	for range n {
		a := <-answers
		if a.err != nil {
			m.cfg.Logger.Warn("lease: a revoke push failed", "url", a.batch[0].RevokeURL, "leases", len(a.batch), "keep", keep, "err", a.err)
			left = append(left, a.batch...)
			continue
		}
		reports = append(reports, a.reports...)
	}
	if len(reports) > 0 {
		if err := m.cfg.Store.ReportLeases(context.WithoutCancel(ctx), m.cfg.Now(), reports); err != nil {
			return left, fmt.Errorf("lease: apply the reports of a revoke: %w", err)
		}
	}
	return left, nil
}

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
	httpsig.Sign(m.cfg.EdgeKeys, edgesig.Revoke, req, body, m.cfg.Now())
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
		return nil, fmt.Errorf("the edge host answered %d", res.StatusCode)
	}
	got, err := wire.ParseReports(answer)
	if err != nil {
		return nil, fmt.Errorf("the edge host's answer: %w", err)
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

// wait waits until the origin's clock reaches t, at most bound of real
// time, or until ctx is done.
func (m *Manager) wait(ctx context.Context, t time.Time, bound time.Duration) {
	deadline := time.Now().Add(bound)
	for {
		d := min(t.Sub(m.cfg.Now()), time.Until(deadline))
		if d <= 0 {
			return
		}
		timer := time.NewTimer(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
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
