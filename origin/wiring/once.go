package wiring

import (
	"context"
	"log/slog"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// pruneOnceEvery is how often an origin forgets the keys of requests
// billed once (meter.Op.Once) that are older than meter.OnceWindow;
// several origins on one database each do, deleting the same rows.
const pruneOnceEvery = 10 * time.Minute

// startPruningOnce prunes s's keys now and every pruneOnceEvery until
// stop is called (stop waits for a prune in progress); nil when s keeps
// none. A failure is logged and tried again at the next turn.
func startPruningOnce(s meter.Store, now func() time.Time, log *slog.Logger) (stop func()) {
	p, ok := s.(meter.OnceStore)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(pruneOnceEvery)
		defer t.Stop()
		for {
			switch n, err := p.PruneOnce(ctx, now().Add(-meter.OnceWindow)); {
			case err != nil && ctx.Err() == nil:
				log.Warn("meter: prune the keys of requests billed once", "err", err)
			case n > 0:
				log.Debug("meter: pruned the keys of requests billed once", "keys", n)
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
