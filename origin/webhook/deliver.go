package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Sign is the webhook-signature header of the message id sent at ts with
// body, under each of keys: "v1," and the base64 of
// HMAC-SHA256(key, id + "." + unix seconds + "." + body), space-separated
// (Standard Webhooks, "Signature scheme").
func Sign(id string, ts time.Time, body []byte, keys [][]byte) string {
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		m := hmac.New(sha256.New, k)
		m.Write([]byte(id + "." + strconv.FormatInt(ts.Unix(), 10) + "."))
		m.Write(body)
		b.WriteString("v1,")
		b.WriteString(base64.StdEncoding.EncodeToString(m.Sum(nil)))
	}
	return b.String()
}

// Backoff is the wait after a delivery's attempt n (1 for the first)
// failed: 5 s doubled each attempt up to an hour, within ±25% at random
// (jitter, so that endpoints back up together do not retry together).
// With RetryFor 24 h that is about 35 attempts.
func Backoff(n int) time.Duration {
	d := time.Hour
	if n < 20 {
		d = min(5*time.Second<<max(n-1, 0), time.Hour)
	}
	return time.Duration(float64(d) * (0.75 + rand.Float64()/2))
}

// maxBody bounds what is read of a receiver's answer (then the
// connection may be kept); maxError what is kept of an attempt's error.
const (
	maxBody  = 4 << 10
	maxError = 300
)

// pruneEvery is how often Run prunes the outbox.
const pruneEvery = time.Hour

// Run delivers the outbox until ctx ends, then waits for the attempts in
// flight to record their outcomes. Every origin runs it: a delivery is
// claimed by one of them at a time (Store.Claim), at most Workers
// attempts at once here, and at most PerEndpoint of them to one
// endpoint (a receiver that hangs holds no more than that). It looks for
// due deliveries when Emit wakes it, when an attempt ends, and every
// Poll; once an hour it prunes what Retention no longer keeps.
func (o *Outbox) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, o.cfg.Workers)
	freed := make(chan struct{}, 1)
	// busy counts the attempts in flight to each endpoint, which Claim
	// holds to Config.PerEndpoint.
	var mu sync.Mutex
	busy := map[string]int{}
	poll := time.NewTicker(o.cfg.Poll)
	defer poll.Stop()
	lastPrune := time.Time{}
	for {
		if now := time.Now(); now.Sub(lastPrune) >= pruneEvery {
			lastPrune = now
			o.prune(ctx)
		}
		free := cap(slots) - len(slots)
		full := false
		if free > 0 {
			mu.Lock()
			inFlight := maps.Clone(busy)
			mu.Unlock()
			ds, err := o.claim(ctx, free, inFlight)
			if err != nil && ctx.Err() == nil {
				o.cfg.Log.Warn("webhook: claim deliveries", "err", err)
			}
			full = len(ds) == free
			for _, d := range ds {
				slots <- struct{}{}
				ep := d.Endpoint.ID
				mu.Lock()
				busy[ep]++
				mu.Unlock()
				wg.Go(func() {
					defer func() {
						mu.Lock()
						if busy[ep]--; busy[ep] <= 0 {
							delete(busy, ep)
						}
						mu.Unlock()
						<-slots
						select {
						case freed <- struct{}{}:
						default:
						}
					}()
					o.attempt(ctx, d)
				})
			}
		}
		if full && ctx.Err() == nil {
			// There may be more due: look again once a slot frees.
			select {
			case <-ctx.Done():
				return
			case <-freed:
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-o.wake:
		case <-freed:
		case <-poll.C:
		}
	}
}

// claim claims at most n due deliveries under a new claim token, at
// most PerEndpoint in flight to an endpoint counting busy, those this
// loop has in flight.
func (o *Outbox) claim(ctx context.Context, n int, busy map[string]int) ([]Delivery, error) {
	var b [12]byte
	crand.Read(b[:])
	now := o.cfg.Now()
	return o.cfg.Store.Claim(ctx, now, now.Add(o.cfg.ClaimFor), hex.EncodeToString(b[:]), n, o.cfg.PerEndpoint, busy)
}

func (o *Outbox) prune(ctx context.Context) {
	n, err := o.cfg.Store.Prune(ctx, o.cfg.Now().Add(-o.cfg.Retention))
	switch {
	case err != nil && ctx.Err() == nil:
		o.cfg.Log.Warn("webhook: prune the outbox", "err", err)
	case n > 0:
		o.cfg.Log.Info("webhook: pruned the outbox", "events", n)
	}
}

// attempt sends claimed delivery d once and records the outcome. An
// attempt cut short by ctx (the origin stopping) is recorded as due at
// once, for another origin to make.
func (o *Outbox) attempt(ctx context.Context, d Delivery) {
	start := time.Now()
	status, err := o.send(ctx, d)
	now := o.cfg.Now()
	out := Outcome{ID: d.ID, Claim: d.Claim, At: now, Status: status, Endpoint: d.Endpoint.ID}
	switch {
	case err == nil && status >= 200 && status < 300:
		out.State = Delivered
		o.m.sent.Inc()
		o.m.latency.Observe(time.Since(d.Event.Created).Seconds())
	case ctx.Err() != nil:
		out.State, out.Next, out.Error = Pending, now, "the origin stopped during the attempt"
	case err == nil && status == http.StatusGone:
		out.State, out.Disable, out.Error = Failed, true, "410 Gone: the endpoint is disabled"
		o.m.failed.WithLabelValues("gone").Inc()
	default:
		reason := "status"
		if err != nil {
			out.Error = clip(err.Error())
			reason = "network"
			switch {
			case errors.Is(err, ErrPrivateAddress):
				reason = "refused_address"
			case errors.Is(err, errOpen):
				reason = "secret"
			}
		} else {
			out.Error = "answered " + strconv.Itoa(status) + ", not 2xx"
		}
		o.m.failed.WithLabelValues(reason).Inc()
		if now.Sub(d.Event.Created) >= o.cfg.RetryFor {
			out.State = Failed
			out.Error += "; given up after " + o.cfg.RetryFor.String()
		} else {
			out.State, out.Next = Pending, now.Add(o.cfg.Backoff(d.Attempts))
		}
	}
	o.m.duration.Observe(time.Since(start).Seconds())
	// Recorded even when ctx has ended: the outcome is what the next
	// claimer goes by.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := o.cfg.Store.Complete(rctx, out); err != nil {
		o.cfg.Log.Error("webhook: record a delivery's outcome", "delivery", d.ID, "event", d.Event.ID, "err", err)
	}
	if out.Disable {
		o.cfg.Log.Warn("webhook: endpoint answered 410 Gone and is disabled", "org", d.Endpoint.Org, "endpoint", d.Endpoint.ID)
	}
}

// send posts d's event to its endpoint, signed, and returns the answer's
// status; the answer's body is read up to maxBody and dropped.
func (o *Outbox) send(ctx context.Context, d Delivery) (int, error) {
	// The timestamp is the wall clock's, whatever the origin's clock (the
	// test clock): receivers compare it with theirs.
	ts := time.Now()
	keys, err := o.keysOf(ctx, d.Endpoint, o.cfg.Now())
	if err != nil {
		return 0, err
	}
	actx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, d.Endpoint.URL, bytes.NewReader(d.Event.Payload))
	if err != nil {
		return 0, err
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "Lectern-Webhooks/1")
	h.Set("webhook-id", d.Event.ID)
	h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("webhook-signature", Sign(d.Event.ID, ts, d.Event.Payload, keys))
	resp, err := o.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	return resp.StatusCode, nil
}

func clip(s string) string {
	if len(s) > maxError {
		return s[:maxError] + "…"
	}
	return s
}
