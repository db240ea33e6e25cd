package telemetry

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are an origin's Prometheus series, on a registry of their own
// (no package globals: two origins in one test binary count apart). The
// HTTP series follow the OpenTelemetry HTTP semantic conventions
// (http.server.request.duration in seconds, attributes http.route,
// http.request.method, http.response.status_code) as Prometheus names
// them: dots become underscores, the unit a suffix.
type Metrics struct {
	reg *prometheus.Registry

	duration   *prometheus.HistogramVec
	refusals   *prometheus.CounterVec
	edgeCalls  *prometheus.CounterVec
	sigRefused *prometheus.CounterVec
	jwks       *prometheus.CounterVec
	meterApply *prometheus.HistogramVec
	batchSize  prometheus.Histogram
	commit     *prometheus.HistogramVec
	revoke     *prometheus.HistogramVec

	corpus     *prometheus.Desc
	corpusMu   sync.Mutex
	corpusFrom func() string // the contentVersion served; "" for none
}

// NewMetrics returns the series, registered with the Go runtime's and the
// process's collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "http_server_request_duration_seconds",
			Help: "Duration of HTTP server requests (OpenTelemetry http.server.request.duration), by route template, method and status.",
			// The OpenTelemetry conventions' advised boundaries.
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10},
		}, []string{"http_route", "http_request_method", "http_response_status_code"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lectern_refusals_total",
			Help: "Requests answered with an error body, by its code (spec: Errors).",
		}, []string{"error_code"}),
		edgeCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lectern_edge_calls_total",
			Help: "Requests the edge signed, as the origin answered them: kind gate (POST /internal/gate), lease (POST /internal/lease), usage (POST /internal/usage) or forward.",
		}, []string{"kind", "http_response_status_code"}),
		sigRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lectern_edge_signatures_refused_total",
			Help: "Internal calls whose X-Lectern-Edge signature the origin refused, by purpose (forward, gate, lease, usage) and reason " +
				"(malformed, stale: outside the time window, mismatch: signed over something else or with another key, host: signed for another origin, replayed).",
		}, []string{"purpose", "reason"}),
		jwks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lectern_jwks_fetches_total",
			Help: "Fetches of the token-verification keys (from the JWKS URL, or the dev provider's from the database), by result.",
		}, []string{"source", "result"}),
		meterApply: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lectern_meter_apply_duration_seconds",
			Help:    "Time a request waits for its meter op: the queue, then its batch's transaction; by result (ok, refused, duplicate: billed by another origin, error).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"result"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lectern_meter_commit_batch_size",
			Help:    "Meter ops committed in one transaction (group commit).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		commit: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lectern_meter_commit_duration_seconds",
			Help:    "Duration of one meter transaction, retries included, by result (ok, error).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"result"}),
		revoke: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lectern_lease_revoke_duration_seconds",
			Help: "Time a change that revokes leases (an admin change, a reload, the alarm) waited before it was answered, by how it ended: " +
				"waited=push (every lease that still served taken back by a push its edge answered), expiry (waited for a lease no push could reach to expire: " +
				"no revoke URL, or a push refused or not sent) or push_timeout (waited for a lease whose edge did not answer its push, a frozen edge's, to expire).",
			Buckets: []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 13, 21, 34, 61},
		}, []string{"waited"}),
		corpus: prometheus.NewDesc("lectern_corpus_content_version",
			"The corpus contentVersion being served: 1 on the series of its version.", []string{"content_version"}, nil),
	}
	m.reg.MustRegister(m.duration, m.refusals, m.edgeCalls, m.sigRefused, m.jwks, m.meterApply, m.batchSize, m.commit, m.revoke, corpusCollector{m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the series in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Registry is where the series are registered, for a test to gather.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// request counts one request of the access log.
func (m *Metrics) request(rec *Record, method string, status int, d time.Duration) {
	if m == nil {
		return
	}
	code := strconv.Itoa(status)
	m.duration.WithLabelValues(rec.route, method, code).Observe(d.Seconds())
	if rec.code != "" {
		m.refusals.WithLabelValues(rec.code).Inc()
	}
	if rec.edge != "" {
		m.edgeCalls.WithLabelValues(rec.edge, code).Inc()
	}
	if rec.refused[0] != "" {
		m.sigRefused.WithLabelValues(rec.refused[0], rec.refused[1]).Inc()
	}
}

// JWKSFetch counts a fetch of the verification keys from source ("url"
// or "store") that failed with err (nil: it succeeded).
func (m *Metrics) JWKSFetch(source string, err error) {
	if m == nil {
		return
	}
	m.jwks.WithLabelValues(source, result(err)).Inc()
}

// MeterApply records one meter op that took d, by its result: "ok",
// "refused" (a quota, cap or suspension) or "error".
func (m *Metrics) MeterApply(result string, d time.Duration) {
	if m == nil {
		return
	}
	m.meterApply.WithLabelValues(result).Observe(d.Seconds())
}

// MeterCommit records one meter transaction of ops ops that took d and
// failed with err (nil: committed). It has the signature of the meter
// stores' commit hook.
func (m *Metrics) MeterCommit(ops int, d time.Duration, err error) {
	if m == nil {
		return
	}
	m.batchSize.Observe(float64(ops))
	m.commit.WithLabelValues(result(err)).Observe(d.Seconds())
}

// LeaseRevoke records one revocation of leases that took d, and how it
// ended: waited is "push", "expiry" or "push_timeout" (lease.WaitedPush,
// WaitedExpiry, WaitedPushTimeout). It has the signature of
// lease.Config.OnRevoke.
func (m *Metrics) LeaseRevoke(d time.Duration, waited string) {
	if m == nil {
		return
	}
	m.revoke.WithLabelValues(waited).Observe(d.Seconds())
}

// CorpusVersion makes version the reader of the contentVersion served,
// read at every scrape (a reload moves it): its series is 1, and there is
// none while version returns "".
func (m *Metrics) CorpusVersion(version func() string) {
	if m == nil {
		return
	}
	m.corpusMu.Lock()
	m.corpusFrom = version
	m.corpusMu.Unlock()
}

// corpusCollector collects lectern_corpus_content_version.
type corpusCollector struct{ m *Metrics }

func (c corpusCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.m.corpus }

func (c corpusCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.corpusMu.Lock()
	from := c.m.corpusFrom
	c.m.corpusMu.Unlock()
	if from == nil {
		return
	}
	if v := from(); v != "" {
		ch <- prometheus.MustNewConstMetric(c.m.corpus, prometheus.GaugeValue, 1, v)
	}
}

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}
