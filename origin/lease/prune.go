package lease

import (
	"context"
	"time"
)

// Ended leases are pruned (issue #28): a lease row stays after it closes
// (its reports are billed in its own periods, and a report after its
// reservation ended is still billed, capped), but past Retention it
// serves nothing, so it is deleted; a report for it after that is
// ignored as for an unknown id.
const (
	// DefaultRetention is how long a lease is kept once it ended
	// (LECTERN_LEASE_RETENTION): a day covers an edge host restarted on
	// its usage log after a night's outage.
	DefaultRetention = 24 * time.Hour
	// MinRetention and MaxRetention bound the setting.
	MinRetention = time.Hour
	MaxRetention = 400 * 24 * time.Hour
	// PruneEvery is how often an origin prunes; several origins on one
	// database each do, deleting the same rows.
	PruneEvery = 10 * time.Minute
)

func (m *Manager) retention() time.Duration {
	if m.cfg.Retention > 0 {
		return m.cfg.Retention
	}
	return DefaultRetention
}

// Prune deletes the leases that ended more than the retention ago: closed
// ones past their validity, and any past its reservation (Settle).
func (m *Manager) Prune(ctx context.Context) (int64, error) {
	return m.cfg.Store.PruneLeases(ctx, m.cfg.Now().Add(-m.retention()))
}

// StartPruning prunes now and every PruneEvery until stop is called (stop
// waits for a prune in progress). A failure is logged and tried again at
// the next turn.
func (m *Manager) StartPruning() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(PruneEvery)
		defer t.Stop()
		for {
			switch n, err := m.Prune(ctx); {
			case err != nil && ctx.Err() == nil:
				m.cfg.Logger.Warn("lease: prune the ended leases", "err", err)
			case n > 0:
				m.cfg.Logger.Info("lease: pruned ended leases", "leases", n, "retention", m.retention().String())
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}
