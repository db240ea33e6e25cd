package wiring

import (
	"database/sql"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lectern-api/lectern/origin/store"
)

// The store's connection pools and the identity provider's token
// requests, in the origin's metrics (docs/operations.md, Metrics), beside
// the series of internal/telemetry.

// dbCollector reads the store's pools at each scrape: pgxpool's Stat with
// PostgreSQL (pool "store"), database/sql's Stats of SQLite's write and
// read connections (pools "store-write" and "store-read").
type dbCollector struct {
	stats func() []poolStats

	conns, max, waits, waitTime, acquires, acquireTime *prometheus.Desc
}

// poolStats is one pool's state, in the terms both drivers give.
type poolStats struct {
	name                     string
	acquired, idle, building int64
	max                      int64
	waits                    int64   // acquires that found no idle connection and waited
	waitSeconds              float64 // their waits
	acquires                 int64   // -1: not counted (database/sql)
	acquireSeconds           float64
}

// registerStoreMetrics registers s's pool series on reg, when s has a
// pool to read (pgstore, sqlitestore).
func registerStoreMetrics(reg prometheus.Registerer, s store.Store) {
	var stats func() []poolStats
	switch s := s.(type) {
	case interface{ PoolStat() *pgxpool.Stat }:
		stats = func() []poolStats { return []poolStats{pgxStats("store", s.PoolStat())} }
	case interface {
		DBStats() (write, read sql.DBStats)
	}:
		stats = func() []poolStats {
			w, r := s.DBStats()
			return []poolStats{sqlStats("store-write", w), sqlStats("store-read", r)}
		}
	default:
		return
	}
	pool := []string{"pool"}
	reg.MustRegister(&dbCollector{stats: stats,
		conns: prometheus.NewDesc("lectern_db_connections",
			"The store's database connections now, by pool and state: acquired (in use), idle, or constructing (PostgreSQL only).",
			[]string{"pool", "state"}, nil),
		max: prometheus.NewDesc("lectern_db_connections_max",
			"The most connections the pool opens (0: no bound).", pool, nil),
		waits: prometheus.NewDesc("lectern_db_acquire_waits_total",
			"Acquires that found no idle connection and waited for one (pgxpool's empty acquires, database/sql's waits).", pool, nil),
		waitTime: prometheus.NewDesc("lectern_db_acquire_wait_seconds_total",
			"Time spent in those waits.", pool, nil),
		acquires: prometheus.NewDesc("lectern_db_acquires_total",
			"Connections acquired from the pool (PostgreSQL only).", pool, nil),
		acquireTime: prometheus.NewDesc("lectern_db_acquire_seconds_total",
			"Time spent acquiring them, waits included (PostgreSQL only).", pool, nil),
	})
}

func pgxStats(name string, s *pgxpool.Stat) poolStats {
	return poolStats{name: name, acquired: int64(s.AcquiredConns()), idle: int64(s.IdleConns()),
		building: int64(s.ConstructingConns()), max: int64(s.MaxConns()),
		waits: s.EmptyAcquireCount(), waitSeconds: s.EmptyAcquireWaitTime().Seconds(),
		acquires: s.AcquireCount(), acquireSeconds: s.AcquireDuration().Seconds()}
}

func sqlStats(name string, s sql.DBStats) poolStats {
	return poolStats{name: name, acquired: int64(s.InUse), idle: int64(s.Idle), max: int64(s.MaxOpenConnections),
		waits: s.WaitCount, waitSeconds: s.WaitDuration.Seconds(), acquires: -1}
}

func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.conns, c.max, c.waits, c.waitTime, c.acquires, c.acquireTime} {
		ch <- d
	}
}

func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	gauge, counter := prometheus.GaugeValue, prometheus.CounterValue
	for _, p := range c.stats() {
		ch <- prometheus.MustNewConstMetric(c.conns, gauge, float64(p.acquired), p.name, "acquired")
		ch <- prometheus.MustNewConstMetric(c.conns, gauge, float64(p.idle), p.name, "idle")
		if p.acquires >= 0 {
			ch <- prometheus.MustNewConstMetric(c.conns, gauge, float64(p.building), p.name, "constructing")
		}
		ch <- prometheus.MustNewConstMetric(c.max, gauge, float64(p.max), p.name)
		ch <- prometheus.MustNewConstMetric(c.waits, counter, float64(p.waits), p.name)
		ch <- prometheus.MustNewConstMetric(c.waitTime, counter, p.waitSeconds, p.name)
		if p.acquires >= 0 {
			ch <- prometheus.MustNewConstMetric(c.acquires, counter, float64(p.acquires), p.name)
			ch <- prometheus.MustNewConstMetric(c.acquireTime, counter, p.acquireSeconds, p.name)
		}
	}
}

// tokenRequests counts the identity provider's token requests by grant
// type and result (idp.Config.OnToken).
type tokenRequests struct{ vec *prometheus.CounterVec }

func newTokenRequests(reg prometheus.Registerer) tokenRequests {
	t := tokenRequests{prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lectern_idp_token_requests_total",
		Help: "Requests to the identity provider's token endpoint, by grant_type (client_credentials, authorization_code, other) and result (ok, or the OAuth error code answered).",
	}, []string{"grant_type", "result"})}
	reg.MustRegister(t.vec)
	return t
}

func (t tokenRequests) observe(grantType, result string) {
	t.vec.WithLabelValues(grantType, result).Inc()
}
