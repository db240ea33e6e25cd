package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/pgmeter"
	"github.com/lectern-api/lectern/origin/meter/sqlitemeter"
)

// Section meters: (p) durable meter increments per second on the pass's
// backend, as tools/meterbench measures them (one op: the month and hour
// call meters of one org, under caps), group commit against one
// transaction per op, with 1 and meterClients clients, interleaved in
// -runs rounds of min(-time, 2 s), each run on a new database. Goal:
// group commit at least 10× one transaction per op at meterClients
// clients.

// meterClients is (p)'s concurrent clients.
const meterClients = 64

// meterRows measures (p) on b.
func meterRows(ctx context.Context, o options, b backend, dir string, progress func(string, ...any)) ([]row, error) {
	type mode struct {
		name    string
		group   bool
		clients int
	}
	modes := []mode{{"group commit", true, 1}, {"group commit", true, meterClients},
		{"one transaction per op", false, 1}, {"one transaction per op", false, meterClients}}
	dur := min(o.time, 2*time.Second)
	rates := make([][]float64, len(modes))
	var n int
	for i := range o.runs {
		for j, m := range modes {
			progress("round %d/%d: (p) meters, %s, %d clients", i+1, o.runs, m.name, m.clients)
			n++
			r, err := meterRun(ctx, b, filepath.Join(dir, fmt.Sprintf("meters-%d", n)), m.group, m.clients, dur)
			if err != nil {
				return nil, fmt.Errorf("(p) %s, %d clients: %w", m.name, m.clients, err)
			}
			rates[j] = append(rates[j], r)
		}
	}
	med := make([]float64, len(modes))
	var rows []row
	for j, m := range modes {
		var all []string
		for _, r := range rates[j] {
			all = append(all, fmt.Sprintf("%.0f", r))
		}
		sorted := slices.Sorted(slices.Values(rates[j]))
		med[j] = sorted[len(sorted)/2]
		rows = append(rows, row{id: "p", what: fmt.Sprintf("  meter ops, %s, %d client(s)", m.name, m.clients),
			result: fmt.Sprintf("%.0f ops/s", med[j]), detail: "runs " + strings.Join(all, " ")})
	}
	ratio := med[1] / med[3]
	head := row{id: "p", what: fmt.Sprintf("meters: group commit ÷ one transaction per op, %d clients", meterClients),
		result: fmt.Sprintf("%.1f×", ratio), goal: "≥ 10×", verdict: verdict(ratio >= 10),
		detail: fmt.Sprintf("durable increments (month + hour calls, capped), median of %d interleaved runs of %v, each on a new database; 1 client: %.1f×",
			o.runs, dur, med[0]/med[2])}
	return append([]row{head}, rows...), nil
}

// meterRun opens a new meter store on b (group commit or one transaction
// per op), applies ops from clients clients for dur, and returns ops/s.
func meterRun(ctx context.Context, b backend, dir string, group bool, clients int, dur time.Duration) (float64, error) {
	var (
		s    meter.Store
		drop func()
		err  error
	)
	if b.url == "" {
		s, err = sqlitemeter.New(ctx, dir+".db", sqlitemeter.Options{NoGroupCommit: !group})
	} else {
		var dsn string
		if dsn, drop, err = b.database(ctx, dir, "lectern_bench_meters_"); err != nil {
			return 0, err
		}
		s, err = pgmeter.New(ctx, dsn, pgmeter.Options{NoGroupCommit: !group, MaxConns: clients})
	}
	if drop != nil {
		defer drop()
	}
	if err != nil {
		return 0, err
	}
	defer s.Close()
	limit := int64(1) << 62
	op := meter.Op{Org: "bench", Now: time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC), Stages: []meter.Stage{{
		{Meter: meter.MonthCalls, N: 1, Limit: &limit},
		{Meter: meter.HourCalls, N: 1, Limit: &limit},
	}}}
	for range 10 { // connections, statement caches, the first rows
		if _, err := s.Apply(ctx, op); err != nil {
			return 0, err
		}
	}
	var (
		done     atomic.Int64
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(dur)
	for range clients {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				res, err := s.Apply(ctx, op)
				if err == nil && res.Refused != nil {
					err = errors.New("op refused")
				}
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(done.Load()) / time.Since(start).Seconds(), ctx.Err()
}
