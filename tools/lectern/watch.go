package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// lectern sync -watch (issue #37, point 3; docs/integrating.md, "Keeping
// a mirror current"): a sync, then a poll of the unmetered GET
// /v1/license every -interval; a sync whenever its contentVersion or the
// grants moved from those of the last sync that completed. A failed poll
// or sync waits longer each time (exponential, with jitter, capped at
// maxBackoff) before the next try. With -listen, a webhook receiver
// (Standard Webhooks signatures, the secret from LECTERN_WEBHOOK_SECRET)
// starts a sync at once on a verified content.changed or license.changed;
// the poll stays the backstop (a webhook may be lost, and is only a
// hint: the sync asks the API what moved). SIGINT or SIGTERM ends the
// watch, the sync under way as a single run's.

// watchOptions are -watch's settings.
type watchOptions struct {
	Interval time.Duration
	Timeout  time.Duration // each sync's -timeout
	Listen   string        // "" for none
	Secret   []byte        // the webhook endpoint's key: the base64 after whsec_
	// listening, when set (tests), is told the receiver's address.
	listening func(addr string)
	// synced, when set, is told each sync's summary and error.
	synced func(summary, error)
	now    func() time.Time
}

// maxBackoff caps the wait after failures.
const maxBackoff = 15 * time.Minute

// backoff is the wait after n failures in a row (n ≥ 1): interval·2^(n-1),
// capped at maxBackoff, drawn uniformly from its upper half (jitter, so
// that a fleet of mirrors does not retry in step).
func backoff(interval time.Duration, n int) time.Duration {
	d := interval
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	d = min(d, maxBackoff)
	return d/2 + rand.N(d/2+1)
}

// watchDir keeps o.Dir current until ctx ends; it returns ctx's cause.
func watchDir(ctx context.Context, cfg clientConfig, o syncOptions, w watchOptions) error {
	if w.now == nil {
		w.now = time.Now
	}
	trigger := make(chan string, 1)
	if w.Listen != "" {
		ln, err := net.Listen("tcp", w.Listen)
		if err != nil {
			return fmt.Errorf("-listen: %w", err)
		}
		rcv := &receiver{secret: w.Secret, now: w.now, seen: map[string]time.Time{}, trigger: trigger}
		srv := &http.Server{Handler: rcv, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, MaxHeaderBytes: 16 << 10}
		go srv.Serve(ln)
		defer srv.Close()
		if w.listening != nil {
			w.listening(ln.Addr().String())
		}
		say(o, "listening for webhooks on %s", ln.Addr())
	}
	tc, err := tokenClient(ctx, cfg, plainClient(), []string{"service-api/content.read"})
	if err != nil {
		return err
	}
	api, err := newAPI(cfg.URL, tc)
	if err != nil {
		return err
	}
	var last license // the licence status of the last sync that completed
	synced := false
	failures := 0
	var fatal error // a selection the organisation cannot take: no retry mends it
	doSync := func(why string) {
		say(o, "sync: %s", why)
		lic, lerr := api.license(ctx)
		sum, err := syncWithin(ctx, w.Timeout, cfg, o)
		if w.synced != nil {
			w.synced(sum, err)
		}
		if o.Progress != nil && !o.JSON {
			fmt.Fprintln(o.Progress, sum.line())
		}
		if errors.As(err, new(*usageError)) {
			fatal = err
			return
		}
		if err != nil || lerr != nil {
			failures++
			if err != nil && ctx.Err() == nil {
				say(o, "sync failed: %v", err)
			}
			return
		}
		failures = 0
		// The version synced to is the one read before it began: a move
		// during the sync is caught by the next poll.
		last, synced = lic, true
	}
	doSync("start")
	for ctx.Err() == nil && fatal == nil {
		wait := w.Interval
		if failures > 0 {
			wait = backoff(w.Interval, failures)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case id := <-trigger:
			t.Stop()
			doSync("webhook " + id)
		case <-t.C:
			lic, err := api.license(ctx)
			switch {
			case err != nil:
				if ctx.Err() == nil {
					failures++
					say(o, "poll failed (%v); next try in about %s", err, backoff(w.Interval, failures).Round(time.Second))
				}
			case !synced || failures > 0:
				doSync("retry")
			case lic.ContentVersion != last.ContentVersion || !sameGrants(lic.ContentGrants, last.ContentGrants):
				doSync(fmt.Sprintf("contentVersion %s, grants %s", lic.ContentVersion, strings.Join(lic.ContentGrants, ",")))
			}
		}
	}
	if fatal != nil {
		return fatal
	}
	return context.Cause(ctx)
}

// say writes a line of -watch's progress.
func say(o syncOptions, format string, args ...any) {
	if o.Progress != nil && !o.JSON {
		fmt.Fprintf(o.Progress, "lectern sync -watch: "+format+"\n", args...)
	}
}

// Standard Webhooks verification (https://www.standardwebhooks.com, the
// specification's "Verifying webhooks"): the signed content is
// "<webhook-id>.<webhook-timestamp>.<body>", HMAC-SHA256 under the
// secret's key (the base64 after "whsec_"), base64 in webhook-signature
// as "v1,<sig>", several separated by spaces (a secret rotated signs
// with both). A timestamp more than webhookTolerance from now is refused
// (a replay), and so is a body over maxWebhookBody; a webhook-id seen
// within the tolerance is acknowledged and not acted on again (delivery
// is at least once).
const (
	webhookTolerance = 5 * time.Minute
	maxWebhookBody   = 1 << 20
)

// parseWebhookSecret reads an endpoint's secret, "whsec_<base64>".
func parseWebhookSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(strings.TrimSpace(s), "whsec_")
	if !ok {
		return nil, errors.New("LECTERN_WEBHOOK_SECRET is not whsec_<base64>")
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) < 16 {
		return nil, errors.New("LECTERN_WEBHOOK_SECRET is not whsec_<base64> of at least 16 bytes")
	}
	return key, nil
}

// receiver is -listen's handler.
type receiver struct {
	secret  []byte
	now     func() time.Time
	mu      sync.Mutex
	seen    map[string]time.Time // webhook-ids verified, when
	trigger chan<- string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "POST a webhook", http.StatusMethodNotAllowed)
		return
	}
	id, ts, sigs := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" || len(id) > 256 {
		http.Error(w, "missing webhook-id, webhook-timestamp or webhook-signature", http.StatusBadRequest)
		return
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	now := rc.now()
	if err != nil {
		http.Error(w, "webhook-timestamp is not seconds since the epoch", http.StatusBadRequest)
		return
	}
	if d := now.Sub(time.Unix(sec, 0)); d > webhookTolerance || d < -webhookTolerance {
		http.Error(w, "webhook-timestamp is more than 5 minutes from now", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	if err != nil {
		http.Error(w, "the body is over 1 MiB", http.StatusRequestEntityTooLarge)
		return
	}
	if !verifyWebhook(rc.secret, id, ts, body, sigs) {
		http.Error(w, "no valid signature", http.StatusUnauthorized)
		return
	}
	rc.mu.Lock()
	for k, at := range rc.seen {
		if now.Sub(at) > 2*webhookTolerance {
			delete(rc.seen, k)
		}
	}
	_, dup := rc.seen[id]
	rc.seen[id] = now
	rc.mu.Unlock()
	var ev struct {
		Type string `json:"type"`
	}
	json.Unmarshal(body, &ev)
	if !dup && (ev.Type == "content.changed" || ev.Type == "license.changed") {
		select {
		case rc.trigger <- id:
		default: // a sync is already due
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// verifyWebhook reports whether sigs (webhook-signature) holds a v1
// signature of id.ts.body under key, compared in constant time.
func verifyWebhook(key []byte, id, ts string, body []byte, sigs string) bool {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	want := m.Sum(nil)
	ok := false
	for _, s := range strings.Fields(sigs) {
		v, b64, found := strings.Cut(s, ",")
		if !found || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			ok = true
		}
	}
	return ok
}
