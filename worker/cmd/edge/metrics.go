package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lectern-api/lectern/internal/telemetry"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/shared/reqid"
	"github.com/lectern-api/lectern/worker/wazero"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The edge's Prometheus series (docs/operations.md, Metrics), served at
// GET /metrics on a listener of their own (LECTERN_EDGE_METRICS_ADDR, off
// by default), behind the admin token as the origin's admin listener
// serves its own: never on the public listener, where API clients would
// read them.

// metrics are one edge's series, on a registry of their own (no package
// globals: two edges in one test binary count apart). They observe the
// host (wazero.Observer) and, through wrap, every request of the public
// listener.
type metrics struct {
	reg *prometheus.Registry

	duration    *prometheus.HistogramVec
	notModified *prometheus.CounterVec
	leases      *prometheus.CounterVec
	usage       *prometheus.CounterVec
	attempts    *prometheus.CounterVec
	failovers   *prometheus.CounterVec
	ejections   *prometheus.CounterVec
	ejected     *prometheus.GaugeVec
}

var _ wazero.Observer = (*metrics)(nil)

// newMetrics returns the series, registered with the Go runtime's and the
// process's collectors. origins are the origins' base URLs: their
// ejected gauges start at 0.
func newMetrics(origins []string) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "http_server_request_duration_seconds",
			Help: "Duration of the edge's HTTP requests (OpenTelemetry http.server.request.duration), by route template, method and status.",
			// The OpenTelemetry conventions' advised boundaries, as at the origin.
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10},
		}, []string{"http_route", "http_request_method", "http_response_status_code"}),
		notModified: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lectern_edge_not_modified_total",
			Help: "304s answered, by who answered: lease (within a lease, no origin call), gate (after the origin's gate call) or origin (the origin's own, passed through).",
		}, []string{"by"}),
		leases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lectern_edge_lease_requests_total",
			Help: "Lease requests to the origin, by result: granted, none (answered without a lease), refused (another status) or failed (no answer).",
		}, []string{"result"}),
		usage: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lectern_edge_usage_reports_total",
			Help: "Usage reports sent to the origin (the module's, the flushes', the replay of the last run's log), by result: accepted (204), refused (another status) or failed (no answer).",
		}, []string{"result"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lectern_edge_origin_attempts_total",
			Help: "Attempts of subrequests at an origin, by origin, kind (forward, gate, lease, usage, other) and result (answered, whatever the status, or failed).",
		}, []string{"origin", "kind", "result"}),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lectern_edge_failovers_total",
			Help: "Subrequests sent on to the next origin after their attempt at this one failed.",
		}, []string{"origin"}),
		ejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lectern_edge_origin_ejections_total",
			Help: "Origins ejected by the liveness probes (with several origins: tried last until a probe succeeds again).",
		}, []string{"origin"}),
		ejected: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lectern_edge_origin_ejected",
			Help: "1 while the liveness probes hold the origin ejected.",
		}, []string{"origin"}),
	}
	for _, o := range origins {
		m.ejected.WithLabelValues(o)
	}
	m.reg.MustRegister(m.duration, m.notModified, m.leases, m.usage, m.attempts, m.failovers, m.ejections, m.ejected,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// instances registers the instance pool's gauges, read from pool at each
// scrape.
func (m *metrics) instances(pool func() wazero.Pool) {
	m.reg.MustRegister(poolCollector{pool, prometheus.NewDesc("lectern_edge_instances",
		"Module instances, by state: busy (inside a module call) or idle.", []string{"state"}, nil)})
}

type poolCollector struct {
	pool func() wazero.Pool
	desc *prometheus.Desc
}

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.pool()
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(p.Busy), "busy")
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(p.Instances-p.Busy), "idle")
}

func (m *metrics) NotModified(by string) { m.notModified.WithLabelValues(by).Inc() }

func (m *metrics) OriginAttempt(origin, kind string, err error) {
	result := "answered"
	if err != nil {
		result = "failed"
	}
	m.attempts.WithLabelValues(origin, kind, result).Inc()
}

func (m *metrics) Failover(origin string) { m.failovers.WithLabelValues(origin).Inc() }

func (m *metrics) Ejected(origin string, ejected bool) {
	if ejected {
		m.ejections.WithLabelValues(origin).Inc()
		m.ejected.WithLabelValues(origin).Set(1)
		return
	}
	m.ejected.WithLabelValues(origin).Set(0)
}

func (m *metrics) LeaseRequest(result string) { m.leases.WithLabelValues(result).Inc() }

func (m *metrics) UsageReport(result string) { m.usage.WithLabelValues(result).Inc() }

// wrap counts every request h answers by its route's template (as the
// access log names it), method and status.
func (m *metrics) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		route := telemetry.Template(r.Method, r.URL.EscapedPath())
		if r.URL.Path == lease.RevokePath {
			route = lease.RevokePath // the origin's revoke push (the module's 404 when not the origin's)
		}
		m.duration.WithLabelValues(route, telemetry.Method(r.Method), strconv.Itoa(sw.status)).Observe(time.Since(start).Seconds())
	})
}

// statusWriter records the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// ReadFrom passes a copy on to the writer underneath (a passthrough body).
func (w *statusWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(w.ResponseWriter, r)
}

// Flush passes a flush on.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// metricsRealm is the metrics listener's Bearer challenge (RFC 6750 §3).
const metricsRealm = `Bearer realm="lectern-edge-metrics"`

// handler serves GET (and HEAD) /metrics to a caller bearing token, which
// is checked first, in constant time: without it every path is 401, so
// nothing about the listener is visible. Anything else is 404 (405 for
// another method on /metrics), in the API's error body.
func (m *metrics) handler(token string) http.Handler {
	sum := sha256.Sum256([]byte(token))
	prom := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := reqid.NewOf("edge_", 8)
		w.Header().Set("X-Request-Id", id)
		w.Header().Set("Cache-Control", "no-store")
		scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		tok = strings.TrimSpace(tok)
		got := sha256.Sum256([]byte(tok))
		if !strings.EqualFold(scheme, "Bearer") || tok == "" || token == "" || subtle.ConstantTimeCompare(got[:], sum[:]) != 1 {
			if r.Header.Get("Authorization") == "" {
				w.Header().Set("WWW-Authenticate", metricsRealm)
			} else {
				w.Header().Set("WWW-Authenticate", metricsRealm+`, error="invalid_token"`)
			}
			if r.ContentLength != 0 {
				w.Header().Set("Connection", "close") // the body is not read
			}
			writeMetricsError(w, id, apierr.New(apierr.InvalidToken, "The edge's metrics need Authorization: Bearer <LECTERN_ADMIN_TOKEN>."))
			return
		}
		switch {
		case r.URL.Path != "/metrics":
			writeMetricsError(w, id, apierr.New(apierr.NotFound, "The edge's metrics listener serves GET /metrics only."))
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			w.Header().Set("Allow", "GET, HEAD")
			writeMetricsError(w, id, apierr.New(apierr.MethodNotAllowed, "GET /metrics only."))
		default:
			prom.ServeHTTP(w, r)
		}
	})
}

func writeMetricsError(w http.ResponseWriter, id string, e *apierr.Error) {
	body := e.AppendJSON(nil, id)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.Status())
	w.Write(body)
}

// adminTokenFile is where the origin keeps its admin token when
// LECTERN_ADMIN_TOKEN is unset (origin/internal/private/kept.go). The edge
// only reads it: the origin creates it.
const adminTokenFile = "var/admin-token"

// loadMetricsToken is the token the metrics listener wants: LECTERN_ADMIN_TOKEN
// (configured), or the origin's in var/admin-token.
func loadMetricsToken(configured string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	b, err := os.ReadFile(adminTokenFile)
	if t := strings.TrimSpace(string(b)); err == nil && t != "" {
		return t, nil
	}
	if err == nil {
		err = errors.New("empty")
	}
	return "", fmt.Errorf("LECTERN_EDGE_METRICS_ADDR needs the admin token: LECTERN_ADMIN_TOKEN is unset and %s is unreadable (start the origin first: it creates it): %w",
		adminTokenFile, err)
}
