// Command meterbench measures durable meter increments per second (one
// call: the month and hour call meters of one org, under caps) on SQLite
// and on PostgreSQL: group commit with 1 and with 64 concurrent clients,
// against the same store committing one transaction per increment
// (NoGroupCommit) with 1 and 64 clients. It prints the median of a few
// runs and the ratio of group commit to one transaction per increment at
// 64 clients (issue goal: at least 10×).
//
// SQLite runs in a temporary file. PostgreSQL runs when LECTERN_TEST_PG
// names a database, in a temporary schema that it drops afterwards.
//
//	go run ./tools/meterbench [-clients 64] [-runs 3] [-time 2s]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lectern-api/lectern/internal/pgschema"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/pgmeter"
	"github.com/lectern-api/lectern/origin/meter/sqlitemeter"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "meterbench:", err)
		os.Exit(1)
	}
}

// mode is one configuration measured.
type mode struct {
	name    string
	group   bool
	clients int
}

// opener opens a fresh store for one run of a mode and returns a cleanup
// that closes it and removes its data.
type opener func(ctx context.Context, group bool, clients int) (meter.Store, func(), error)

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("meterbench", flag.ContinueOnError)
	clients := fs.Int("clients", 64, "concurrent clients of the concurrent runs")
	runs := fs.Int("runs", 3, "runs per measurement; the median is reported")
	dur := fs.Duration("time", 2*time.Second, "length of one run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	modes := []mode{
		{"group commit", true, 1},
		{"group commit", true, *clients},
		{"one txn per increment", false, 1},
		{"one txn per increment", false, *clients},
	}
	fmt.Fprintf(stdout, "meterbench: durable meter increments per second (one call = month + hour calls of one org, capped), median of %d runs of %v\n\n", *runs, *dur)

	dir, err := os.MkdirTemp("", "meterbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var n atomic.Int64
	sqlite := func(ctx context.Context, group bool, clients int) (meter.Store, func(), error) {
		path := filepath.Join(dir, fmt.Sprintf("meter-%d.db", n.Add(1)))
		s, err := sqlitemeter.New(ctx, path, sqlitemeter.Options{NoGroupCommit: !group})
		if err != nil {
			return nil, nil, err
		}
		return s, func() {
			s.Close()
			for _, suffix := range []string{"", "-wal", "-shm"} {
				os.Remove(path + suffix)
			}
		}, nil
	}
	if err := bench(ctx, stdout, "sqlite", sqlite, modes, *runs, *dur); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}

	base := getenv("LECTERN_TEST_PG")
	if base == "" {
		fmt.Fprintln(stdout, "postgres: skipped (LECTERN_TEST_PG not set)")
		return nil
	}
	postgres := func(ctx context.Context, group bool, clients int) (meter.Store, func(), error) {
		dsn, drop, err := pgschema.New(ctx, base, "meterbench_")
		if err != nil {
			return nil, nil, err
		}
		s, err := pgmeter.New(ctx, dsn, pgmeter.Options{NoGroupCommit: !group, MaxConns: clients})
		if err != nil {
			drop()
			return nil, nil, err
		}
		return s, func() { s.Close(); drop() }, nil
	}
	if err := bench(ctx, stdout, "postgres", postgres, modes, *runs, *dur); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}

// bench measures every mode on one store and prints its table.
func bench(ctx context.Context, stdout io.Writer, store string, open opener, modes []mode, runs int, dur time.Duration) error {
	rates := make([][]float64, len(modes))
	for range runs { // interleaved, so drift hits every mode alike
		for i, m := range modes {
			r, err := measure(ctx, open, m, dur)
			if err != nil {
				return fmt.Errorf("%s, %d clients: %w", m.name, m.clients, err)
			}
			rates[i] = append(rates[i], r)
		}
	}
	med := make([]float64, len(modes))
	fmt.Fprintf(stdout, "%-9s %-22s %7s %14s   %s\n", "store", "mode", "clients", "ops/s (median)", "runs")
	for i, m := range modes {
		slices.Sort(rates[i])
		med[i] = rates[i][len(rates[i])/2]
		var all []string
		for _, r := range rates[i] {
			all = append(all, fmt.Sprintf("%.0f", r))
		}
		fmt.Fprintf(stdout, "%-9s %-22s %7d %14.0f   %s\n", store, m.name, m.clients, med[i], strings.Join(all, " "))
	}
	// modes: 0 group/1, 1 group/N, 2 plain/1, 3 plain/N.
	ratio := med[1] / med[3]
	verdict := "meets"
	if ratio < 10 {
		verdict = "MISSES"
	}
	fmt.Fprintf(stdout, "%s: group commit %d clients / one txn per increment %d clients = %.1f× (%s the 10× goal); vs 1 client one txn per increment: %.1f×\n\n",
		store, modes[1].clients, modes[3].clients, ratio, verdict, med[1]/med[2])
	return nil
}

// measure runs m once for dur on a fresh store and returns ops/s.
func measure(ctx context.Context, open opener, m mode, dur time.Duration) (float64, error) {
	s, cleanup, err := open(ctx, m.group, m.clients)
	if err != nil {
		return 0, err
	}
	defer cleanup()
	limit := int64(1) << 62
	op := meter.Op{Org: "bench", Now: time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC), Stages: []meter.Stage{{
		{Meter: meter.MonthCalls, N: 1, Limit: &limit},
		{Meter: meter.HourCalls, N: 1, Limit: &limit},
	}}}
	// Warm up: connections, statement caches, the first rows.
	for range 10 {
		if _, err := s.Apply(ctx, op); err != nil {
			return 0, err
		}
	}
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(dur)
	for range m.clients {
		wg.Go(func() {
			for time.Now().Before(deadline) {
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
	elapsed := time.Since(start)
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(done.Load()) / elapsed.Seconds(), nil
}
