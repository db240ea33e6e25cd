package webhook

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the delivery series (docs/operations.md, Metrics).
type metrics struct {
	sent     prometheus.Counter
	failed   *prometheus.CounterVec
	duration prometheus.Histogram
	latency  prometheus.Histogram
}

func newMetrics() *metrics {
	return &metrics{
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lectern_webhook_sent_total",
			Help: "Webhook deliveries an endpoint answered 2xx.",
		}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lectern_webhook_failed_total",
			Help: "Webhook attempts that failed, by reason: status (answered, not 2xx), gone (410: endpoint disabled), " +
				"network (no answer within 10 s, TLS, DNS), refused_address (the endpoint resolved to a non-public address), " +
				"secret (the endpoint's secret opens under neither LECTERN_SECRET nor LECTERN_SECRET_ACCEPT: rotate it).",
		}, []string{"reason"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lectern_webhook_attempt_duration_seconds",
			Help:    "Duration of one webhook attempt, from the request to the answer's end.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lectern_webhook_delivery_latency_seconds",
			Help:    "Time from an event's emission to its delivery (2xx), retries included.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 12),
		}),
	}
}

// Register registers the delivery series on reg (the origin's registry),
// and two read from the outbox at each scrape: lectern_webhook_pending
// (the retry queue's depth) and lectern_webhook_oldest_pending_seconds.
func (o *Outbox) Register(reg prometheus.Registerer) {
	reg.MustRegister(o.m.sent, o.m.failed, o.m.duration, o.m.latency, &queueCollector{o: o,
		pending: prometheus.NewDesc("lectern_webhook_pending",
			"Webhook deliveries not yet delivered nor given up, in the whole deployment's outbox: the retry queue's depth.", nil, nil),
		oldest: prometheus.NewDesc("lectern_webhook_oldest_pending_seconds",
			"Age of the oldest pending webhook delivery's event (0 when none is pending).", nil, nil),
	})
}

// queueCollector reads the outbox's queue at each scrape, in one query.
type queueCollector struct {
	o               *Outbox
	pending, oldest *prometheus.Desc
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.pending; ch <- c.oldest }

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, oldest, err := c.o.cfg.Store.Queue(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.pending, err)
		return
	}
	age := 0.0
	if !oldest.IsZero() {
		age = max(c.o.cfg.Now().Sub(oldest).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
}
