package webhook_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/lectern-api/lectern/internal/pgschema"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/store/pgstore"
	"github.com/lectern-api/lectern/origin/store/sqlitestore"
	"github.com/lectern-api/lectern/origin/webhook"
	"github.com/lectern-api/lectern/shared/subkey"
)

// testKey seals the endpoints' secrets, as subkey.Webhooks of a
// deployment secret would.
var testKey = subkey.Derive([]byte("a-test-secret-of-at-least-32-characters"), subkey.Webhooks)

// both is what the stores implement: the organisations and the outbox.
type both interface {
	store.Store
	webhook.Store
}

// backend opens stores on one database: SQLite always, PostgreSQL when
// LECTERN_TEST_PG names one (each store a pool of its own, as each origin
// has).
type backend struct {
	name string
	// open opens a store on the backend's database; the test closes it.
	open func(t *testing.T) both
	// dsn is the database (a SQLite path or a PostgreSQL DSN).
	dsn string
}

func backends(t *testing.T) []backend {
	dir := t.TempDir()
	sqlite := backend{name: "sqlite", dsn: filepath.Join(dir, "lectern.db")}
	var shared both // SQLite: one store per file (it holds the file's lock)
	sqlite.open = func(t *testing.T) both {
		if shared == nil {
			s, err := sqlitestore.New(context.Background(), sqlite.dsn)
			if err != nil {
				t.Fatal(err)
			}
			shared = s
			t.Cleanup(func() { s.Close(); shared = nil })
		}
		return shared
	}
	out := []backend{sqlite}
	if os.Getenv(pgschema.Env) != "" {
		pg := backend{name: "postgres", dsn: pgschema.ForTest(t, "webhook tests")}
		pg.open = func(t *testing.T) both {
			s, err := pgstore.New(context.Background(), pg.dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		out = append(out, pg)
	} else {
		t.Log(pgschema.Env + " not set: the PostgreSQL cases are skipped")
	}
	return out
}

// eachBackend runs f on each backend in a subtest.
func eachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

func createOrg(t *testing.T, s store.Store, id string) {
	t.Helper()
	o := licence.NewOrg(time.Now().UTC())
	o.ID, o.Name = id, "Org "+id
	if err := s.CreateOrg(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

// receiver is a webhook endpoint: answer decides each answer (nil: 204).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []received
	answer func(n int, r received) int
	notify chan received
}

type received struct {
	header http.Header
	body   []byte
	at     time.Time
	path   string
}

func newReceiver(t *testing.T, tlsOn bool, answer func(n int, r received) int) *receiver {
	rc := &receiver{answer: answer, notify: make(chan received, 4096)}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got := received{header: r.Header.Clone(), body: b, at: time.Now(), path: r.URL.Path}
		rc.mu.Lock()
		rc.got = append(rc.got, got)
		n := len(rc.got)
		rc.mu.Unlock()
		rc.notify <- got
		status := http.StatusNoContent
		if rc.answer != nil {
			status = rc.answer(n, got)
		}
		w.WriteHeader(status)
	})
	if tlsOn {
		rc.srv = httptest.NewTLSServer(h)
	} else {
		rc.srv = httptest.NewServer(h)
	}
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) all() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// trust is a TLS configuration trusting srv's certificate.
func trust(srv *httptest.Server) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return &tls.Config{RootCAs: pool}
}

// run runs o's delivery loop until the test ends.
func run(t *testing.T, o *webhook.Outbox) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); o.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// wait returns the next request rc receives, failing t after d.
func (rc *receiver) wait(t *testing.T, d time.Duration) received {
	t.Helper()
	select {
	case r := <-rc.notify:
		return r
	case <-time.After(d):
		t.Fatalf("no delivery within %v", d)
		return received{}
	}
}

// TestDeliveryVerifiesWithStandardWebhooks: a delivery over TLS carries
// webhook-id (the event's id), webhook-timestamp and webhook-signature,
// and the Standard Webhooks library (an independent implementation of
// the scheme) verifies it with the secret the endpoint was given. The
// body is the envelope {type, timestamp, data}.
func TestDeliveryVerifiesWithStandardWebhooks(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		createOrg(t, s, "acme")
		rc := newReceiver(t, true, nil)
		o := webhook.New(webhook.Config{Store: s, Key: testKey, AllowPrivate: true, TLS: trust(rc.srv)})
		ctx := context.Background()
		ep, err := o.AddEndpoint(ctx, "acme", rc.srv.URL+"/hooks", []string{webhook.LicenseChanged})
		if err != nil {
			t.Fatal(err)
		}
		data := webhook.LicenseChange{OrgID: "acme", Status: "active", Tier: "standard", ContentGrants: []string{"high"},
			RenewsAt: "2031-01-01T00:00:00Z", EclaVersion: 2, RequiredEclaVersion: 2, Changed: []string{"contentGrants"}}
		id, err := o.Emit(ctx, "acme", webhook.LicenseChanged, data)
		if err != nil || id == "" {
			t.Fatalf("Emit = %q, %v", id, err)
		}
		run(t, o)
		got := rc.wait(t, 10*time.Second)

		wh, err := standardwebhooks.NewWebhook(ep.SecretText)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(got.body, got.header); err != nil {
			t.Errorf("the Standard Webhooks library refuses the delivery: %v", err)
		}
		if h := got.header.Get("webhook-id"); h != id {
			t.Errorf("webhook-id %q, want the event's id %q", h, id)
		}
		if sig := got.header.Get("webhook-signature"); !strings.HasPrefix(sig, "v1,") || strings.Contains(sig, " ") {
			t.Errorf("webhook-signature %q, want one v1 signature", sig)
		}
		var env struct {
			Type      string                `json:"type"`
			Timestamp time.Time             `json:"timestamp"`
			Data      webhook.LicenseChange `json:"data"`
		}
		if err := json.Unmarshal(got.body, &env); err != nil {
			t.Fatal(err)
		}
		if env.Type != webhook.LicenseChanged || env.Timestamp.IsZero() || env.Data.EclaVersion != 2 ||
			!slices.Equal(env.Data.ContentGrants, []string{"high"}) {
			t.Errorf("body %s", got.body)
		}
		// A secret other than the endpoint's does not verify it.
		other, _ := standardwebhooks.NewWebhook("whsec_" + strings.Repeat("A", 43) + "=")
		if err := other.Verify(got.body, got.header); err == nil {
			t.Error("another secret verifies the delivery")
		}
		waitState(t, o, "acme", ep.ID, webhook.Delivered)
	})
}

// waitState waits until the newest delivery of endpoint id is in state.
func waitState(t *testing.T, o *webhook.Outbox, org, id, state string) webhook.Delivery {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ds, err := o.Deliveries(context.Background(), org, id, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		// A claimed delivery is pending too: wait for an outcome.
		if len(ds) == 1 && ds[0].State == state && !ds[0].LastTry.IsZero() {
			return ds[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries %+v, want the newest %s", ds, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRetriesUntilDelivered: a receiver that answers 500, then 503, then
// 200 gets the same event three times (the same webhook-id, each attempt
// signed afresh), and the delivery log shows it delivered on its third
// attempt with the status it ended with.
func TestRetriesUntilDelivered(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		createOrg(t, s, "acme")
		rc := newReceiver(t, false, func(n int, _ received) int {
			return []int{500, 503, 200, 200}[min(n-1, 3)]
		})
		var backoffs []int
		var mu sync.Mutex
		o := webhook.New(webhook.Config{Store: s, Key: testKey, AllowPrivate: true, Poll: 20 * time.Millisecond,
			Backoff: func(n int) time.Duration {
				mu.Lock()
				backoffs = append(backoffs, n)
				mu.Unlock()
				return 50 * time.Millisecond
			}})
		ctx := context.Background()
		ep, err := o.AddEndpoint(ctx, "acme", rc.srv.URL, []string{webhook.QuotaThreshold})
		if err != nil {
			t.Fatal(err)
		}
		id, err := o.Emit(ctx, "acme", webhook.QuotaThreshold, webhook.Threshold{OrgID: "acme", Meter: "calls", Percent: 80})
		if err != nil {
			t.Fatal(err)
		}
		run(t, o)
		d := waitState(t, o, "acme", ep.ID, webhook.Delivered)
		got := rc.all()
		if len(got) != 3 {
			t.Fatalf("%d attempts, want 3", len(got))
		}
		wh, _ := standardwebhooks.NewWebhook(ep.SecretText)
		for i, r := range got {
			if r.header.Get("webhook-id") != id {
				t.Errorf("attempt %d: webhook-id %q, want %q", i+1, r.header.Get("webhook-id"), id)
			}
			if err := wh.Verify(r.body, r.header); err != nil {
				t.Errorf("attempt %d: %v", i+1, err)
			}
		}
		if d.Attempts != 3 || d.Status != 200 || d.Error != "" || d.Finished.IsZero() {
			t.Errorf("delivery log %+v, want 3 attempts ending 200", d)
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(backoffs, []int{1, 2}) {
			t.Errorf("backoff asked after attempts %v, want [1 2]", backoffs)
		}
	})
}

// TestBackoffGrowsWithJitterOver24Hours: the waits double from 5 s up to
// an hour, each within ±25%, and the attempts they space cover more than
// a day before RetryFor gives up.
func TestBackoffGrowsWithJitterOver24Hours(t *testing.T) {
	var total time.Duration
	n := 0
	for total < webhook.DefaultRetryFor {
		n++
		d := webhook.Backoff(n)
		base := min(5*time.Second<<min(n-1, 20), time.Hour)
		if d < base*3/4 || d > base*5/4 {
			t.Fatalf("Backoff(%d) = %v, want within 25%% of %v", n, d, base)
		}
		total += d
	}
	if n < 20 || n > 60 {
		t.Errorf("%d attempts within 24 h", n)
	}
	seen := map[time.Duration]bool{}
	for range 20 {
		seen[webhook.Backoff(3)] = true
	}
	if len(seen) < 10 {
		t.Errorf("Backoff(3) gave %d values of 20: no jitter", len(seen))
	}
}

// TestGivesUpAfterRetryFor: a failure once RetryFor has passed since the
// event ends the delivery as failed; until then it is tried again.
func TestGivesUpAfterRetryFor(t *testing.T) {
	b := backends(t)[0]
	s := b.open(t)
	createOrg(t, s, "acme")
	rc := newReceiver(t, false, func(int, received) int { return 500 })
	var now atomic.Pointer[time.Time]
	t0 := time.Now()
	now.Store(&t0)
	clock := func() time.Time { return *now.Load() }
	o := webhook.New(webhook.Config{Store: s, Key: testKey, AllowPrivate: true, Now: clock, Poll: 20 * time.Millisecond,
		RetryFor: time.Hour, Backoff: func(int) time.Duration { return time.Minute }})
	ctx := context.Background()
	ep, _ := o.AddEndpoint(ctx, "acme", rc.srv.URL, []string{webhook.OrgSuspended})
	if _, err := o.Emit(ctx, "acme", webhook.OrgSuspended, webhook.Suspension{OrgID: "acme", Reason: webhook.ReasonOperator}); err != nil {
		t.Fatal(err)
	}
	run(t, o)
	rc.wait(t, 5*time.Second)
	d := waitState(t, o, "acme", ep.ID, webhook.Pending)
	if d.Attempts != 1 || d.Status != 500 || !d.Next.After(t0) {
		t.Fatalf("after one failure: %+v", d)
	}
	later := t0.Add(61 * time.Minute)
	now.Store(&later)
	o.Wake()
	rc.wait(t, 5*time.Second)
	d = waitState(t, o, "acme", ep.ID, webhook.Failed)
	if d.Attempts != 2 || !strings.Contains(d.Error, "given up") {
		t.Errorf("after RetryFor: %+v", d)
	}
}

// TestGoneDisablesTheEndpoint: an answer 410 ends the delivery, disables
// the endpoint and cancels its other pending deliveries; it is sent
// nothing more (Emit queues nothing for it).
func TestGoneDisablesTheEndpoint(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		createOrg(t, s, "acme")
		rc := newReceiver(t, false, func(int, received) int { return http.StatusGone })
		o := webhook.New(webhook.Config{Store: s, Key: testKey, AllowPrivate: true, Workers: 1, Poll: 20 * time.Millisecond})
		ctx := context.Background()
		ep, _ := o.AddEndpoint(ctx, "acme", rc.srv.URL, []string{webhook.LicenseChanged})
		for range 3 {
			if _, err := o.Emit(ctx, "acme", webhook.LicenseChanged, webhook.LicenseChange{OrgID: "acme"}); err != nil {
				t.Fatal(err)
			}
		}
		run(t, o)
		rc.wait(t, 5*time.Second)
		deadline := time.Now().Add(5 * time.Second)
		for {
			es, err := o.Endpoints(ctx, "acme")
			if err != nil {
				t.Fatal(err)
			}
			if !es[0].Disabled.IsZero() {
				if es[0].DisabledReason == "" {
					t.Error("no reason for the disabling")
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the endpoint answered 410 and is not disabled")
			}
			time.Sleep(20 * time.Millisecond)
		}
		ds, err := o.Deliveries(ctx, "acme", ep.ID, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		states := map[string]int{}
		for _, d := range ds {
			states[d.State]++
		}
		if states[webhook.Failed] != 1 || states[webhook.Cancelled] != 2 {
			t.Errorf("delivery states %v, want 1 failed (410), 2 cancelled", states)
		}
		if id, err := o.Emit(ctx, "acme", webhook.LicenseChanged, webhook.LicenseChange{OrgID: "acme"}); err != nil || id != "" {
			t.Errorf("Emit to a disabled endpoint = %q, %v; want nothing queued", id, err)
		}
		time.Sleep(100 * time.Millisecond)
		if n := len(rc.all()); n != 1 {
			t.Errorf("the receiver got %d requests, want 1", n)
		}
	})
}

// TestRotationOverlap: after a rotation deliveries carry two signatures,
// the new secret's and the old one's, and each secret verifies them with
// the Standard Webhooks library; once the overlap (24 h) has passed only
// the new secret does.
func TestRotationOverlap(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		createOrg(t, s, "acme")
		rc := newReceiver(t, false, nil)
		var now atomic.Pointer[time.Time]
		t0 := time.Now()
		now.Store(&t0)
		o := webhook.New(webhook.Config{Store: s, Key: testKey, AllowPrivate: true, Poll: 20 * time.Millisecond,
			Now: func() time.Time { return *now.Load() }})
		ctx := context.Background()
		ep, _ := o.AddEndpoint(ctx, "acme", rc.srv.URL, []string{webhook.LicenseChanged})
		rot, err := o.Rotate(ctx, "acme", ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rot.SecretText == ep.SecretText || !strings.HasPrefix(rot.SecretText, "whsec_") {
			t.Fatalf("rotated secret %q", rot.SecretText)
		}
		// Both stores keep microseconds.
		if got := rot.PreviousUntil.Sub(t0.Truncate(time.Microsecond)); got != webhook.Overlap {
			t.Errorf("the previous secret signs for %v, want %v", got, webhook.Overlap)
		}
		run(t, o)
		oldWH, _ := standardwebhooks.NewWebhook(ep.SecretText)
		newWH, _ := standardwebhooks.NewWebhook(rot.SecretText)

		o.Emit(ctx, "acme", webhook.LicenseChanged, webhook.LicenseChange{OrgID: "acme"})
		got := rc.wait(t, 5*time.Second)
		if n := len(strings.Fields(got.header.Get("webhook-signature"))); n != 2 {
			t.Errorf("during the overlap: %d signatures, want 2", n)
		}
		if err := newWH.Verify(got.body, got.header); err != nil {
			t.Errorf("during the overlap, the new secret: %v", err)
		}
		if err := oldWH.Verify(got.body, got.header); err != nil {
			t.Errorf("during the overlap, the old secret: %v", err)
		}

		after := t0.Add(webhook.Overlap + time.Minute)
		now.Store(&after)
		o.Emit(ctx, "acme", webhook.LicenseChanged, webhook.LicenseChange{OrgID: "acme"})
		got = rc.wait(t, 5*time.Second)
		if err := newWH.Verify(got.body, got.header); err != nil {
			t.Errorf("after the overlap, the new secret: %v", err)
		}
		if err := oldWH.Verify(got.body, got.header); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
			t.Errorf("after the overlap, the old secret: %v, want no matching signature", err)
		}
	})
}

// TestExactlyOnceAcrossOrigins: two origins' delivery loops on one
// database (two PostgreSQL stores on one schema; on SQLite two loops on
// its one store) deliver 200 events emitted from both: every event
// arrives exactly once. It logs the latency from Emit to the receiver
// (the bench row w1's measure, in process).
func TestExactlyOnceAcrossOrigins(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s1, s2 := b.open(t), b.open(t)
		createOrg(t, s1, "acme")
		rc := newReceiver(t, false, nil)
		o1 := webhook.New(webhook.Config{Store: s1, Key: testKey, AllowPrivate: true})
		o2 := webhook.New(webhook.Config{Store: s2, Key: testKey, AllowPrivate: true})
		ctx := context.Background()
		if _, err := o1.AddEndpoint(ctx, "acme", rc.srv.URL, []string{webhook.ContentChanged}); err != nil {
			t.Fatal(err)
		}
		run(t, o1)
		run(t, o2)
		const events = 200
		emitted := map[string]time.Time{}
		for i := range events {
			o := []*webhook.Outbox{o1, o2}[i%2]
			at := time.Now()
			id, err := o.Emit(ctx, "acme", webhook.ContentChanged, webhook.ContentChange{OrgID: "acme",
				FromVersion: fmt.Sprint(i), ToVersion: fmt.Sprint(i + 1)})
			if err != nil {
				t.Fatal(err)
			}
			emitted[id] = at
			time.Sleep(2 * time.Millisecond)
		}
		counts := map[string]int{}
		var lat []time.Duration
		deadline := time.After(30 * time.Second)
		for len(counts) < events {
			select {
			case r := <-rc.notify:
				id := r.header.Get("webhook-id")
				if counts[id] == 0 {
					lat = append(lat, r.at.Sub(emitted[id]))
				}
				counts[id]++
			case <-deadline:
				t.Fatalf("%d of %d events delivered", len(counts), events)
			}
		}
		// Anything sent twice would arrive within this.
		time.Sleep(500 * time.Millisecond)
		for len(rc.notify) > 0 {
			counts[(<-rc.notify).header.Get("webhook-id")]++
		}
		for id, n := range counts {
			if _, ok := emitted[id]; !ok || n != 1 {
				t.Errorf("event %s delivered %d times (emitted: %v)", id, n, ok)
			}
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		t.Logf("%s: Emit to receiver over %d events, two origins: p50 %v, p99 %v", b.name, len(lat),
			lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond))
		if n, _, err := s1.Queue(ctx); err != nil || n != 0 {
			t.Errorf("queue after delivery: %d pending, %v", n, err)
		}
	})
}

// TestEmitOnce: an event emitted with one key from two origins is queued
// once, under one id.
func TestEmitOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s1, s2 := b.open(t), b.open(t)
		createOrg(t, s1, "acme")
		o1 := webhook.New(webhook.Config{Store: s1, Key: testKey, AllowPrivate: true})
		o2 := webhook.New(webhook.Config{Store: s2, Key: testKey, AllowPrivate: true})
		ctx := context.Background()
		ep, _ := o1.AddEndpoint(ctx, "acme", "https://hooks.example.com/x", []string{webhook.ContentChanged})
		data := webhook.ContentChange{OrgID: "acme", FromVersion: "a", ToVersion: "b"}
		id1, err1 := o1.EmitOnce(ctx, "a..b", "acme", webhook.ContentChanged, data)
		id2, err2 := o2.EmitOnce(ctx, "a..b", "acme", webhook.ContentChanged, data)
		if err1 != nil || err2 != nil || id1 == "" || id2 != "" {
			t.Errorf("EmitOnce twice = (%q, %v), (%q, %v); want one id, then nothing", id1, err1, id2, err2)
		}
		if ds, _ := o1.Deliveries(ctx, "acme", ep.ID, 0, 10); len(ds) != 1 || ds[0].Event.ID != id1 {
			t.Errorf("deliveries %+v, want one of %s", ds, id1)
		}
	})
}

// TestEndpointsCapAndSecretsSealed: an organisation has at most
// MaxEndpoints endpoints, an unknown one none; the stored secret is
// sealed (the key does not appear in the row) and opens only with the
// deployment's key.
func TestEndpointsCapAndSecretsSealed(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		createOrg(t, s, "acme")
		o := webhook.New(webhook.Config{Store: s, Key: testKey, MaxEndpoints: 2})
		ctx := context.Background()
		var eps []webhook.NewEndpoint
		for i := range 2 {
			ep, err := o.AddEndpoint(ctx, "acme", fmt.Sprintf("https://hooks.example.com/%d", i), webhook.Types)
			if err != nil {
				t.Fatal(err)
			}
			eps = append(eps, ep)
		}
		if _, err := o.AddEndpoint(ctx, "acme", "https://hooks.example.com/3", webhook.Types); !errors.Is(err, webhook.ErrTooMany) {
			t.Errorf("a third endpoint: %v, want ErrTooMany", err)
		}
		if _, err := o.AddEndpoint(ctx, "nobody", "https://hooks.example.com/", webhook.Types); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("an unknown org: %v, want ErrNotFound", err)
		}
		es, err := o.Endpoints(ctx, "acme")
		if err != nil || len(es) != 2 {
			t.Fatalf("Endpoints = %d, %v", len(es), err)
		}
		key, err := webhook.ParseSecret(eps[0].SecretText)
		if err != nil || len(key) != 32 {
			t.Fatalf("secret %q: %v, %d bytes", eps[0].SecretText, err, len(key))
		}
		if strings.Contains(string(es[0].Secret), string(key)) || len(es[0].Secret) < 32+16 {
			t.Error("the stored secret holds the key in the clear")
		}
		if err := o.DeleteEndpoint(ctx, "acme", es[0].ID); err != nil {
			t.Fatal(err)
		}
		if err := o.DeleteEndpoint(ctx, "acme", es[0].ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("deleting again: %v, want ErrNotFound", err)
		}
		if _, err := o.Rotate(ctx, "other", es[1].ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("rotating another org's endpoint: %v, want ErrNotFound", err)
		}
	})
}

// TestPrune: a delivered event older than the retention goes, with its
// deliveries; a pending one stays.
func TestPrune(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		createOrg(t, s, "acme")
		ctx := context.Background()
		o := webhook.New(webhook.Config{Store: s, Key: testKey})
		if _, err := o.AddEndpoint(ctx, "acme", "https://hooks.example.com/", webhook.Types); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-48 * time.Hour)
		for i, id := range []string{"msg_done", "msg_pending"} {
			if n, err := s.Enqueue(ctx, webhook.Event{ID: id, Org: "acme", Type: webhook.LicenseChanged,
				Payload: []byte("{}"), Created: old.Add(time.Duration(i) * time.Second)}); err != nil || n != 1 {
				t.Fatalf("Enqueue = %d, %v", n, err)
			}
		}
		ds, err := s.Claim(ctx, time.Now(), time.Now().Add(time.Minute), "c", 1, 1, nil)
		if err != nil || len(ds) != 1 || ds[0].Event.ID != "msg_done" {
			t.Fatalf("Claim = %+v, %v", ds, err)
		}
		if ok, err := s.Complete(ctx, webhook.Outcome{ID: ds[0].ID, Claim: "c", At: old.Add(time.Minute), State: webhook.Delivered, Status: 200}); !ok || err != nil {
			t.Fatalf("Complete = %v, %v", ok, err)
		}
		n, err := s.Prune(ctx, time.Now().Add(-24*time.Hour))
		if err != nil || n != 1 {
			t.Errorf("Prune = %d, %v; want the delivered event", n, err)
		}
		if pending, oldest, err := s.Queue(ctx); err != nil || pending != 1 || oldest.Sub(old) > 2*time.Second {
			t.Errorf("Queue = %d, %v, %v; want the pending event kept", pending, oldest, err)
		}
	})
}

// TestPruneFromTheLastDelivery: an event is kept Retention after its
// last delivery finished, not after it was created: one created 48 h
// ago and delivered an hour ago is kept by a retention of a day, and
// goes once a day has passed since its delivery; one whose endpoint was
// deleted (no delivery left) goes a day after it was created.
func TestPruneFromTheLastDelivery(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		createOrg(t, s, "acme")
		ctx := context.Background()
		o := webhook.New(webhook.Config{Store: s, Key: testKey})
		ep1, err := o.AddEndpoint(ctx, "acme", "https://hooks.example.com/1", webhook.Types)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		created := now.Add(-48 * time.Hour)
		if n, err := s.Enqueue(ctx, webhook.Event{ID: "msg_late", Org: "acme", Type: webhook.LicenseChanged,
			Payload: []byte("{}"), Created: created}); err != nil || n != 1 {
			t.Fatalf("Enqueue = %d, %v", n, err)
		}
		ds, err := s.Claim(ctx, now, now.Add(time.Minute), "c", 10, 10, nil)
		if err != nil || len(ds) != 1 {
			t.Fatalf("Claim = %+v, %v", ds, err)
		}
		delivered := now.Add(-time.Hour)
		if ok, err := s.Complete(ctx, webhook.Outcome{ID: ds[0].ID, Claim: "c", At: delivered, State: webhook.Delivered, Status: 200}); !ok || err != nil {
			t.Fatalf("Complete = %v, %v", ok, err)
		}
		if n, err := s.Prune(ctx, now.Add(-24*time.Hour)); err != nil || n != 0 {
			t.Errorf("Prune a day back = %d, %v; want the event delivered an hour ago kept", n, err)
		}
		if ds, err := o.Deliveries(ctx, "acme", ep1.ID, 0, 10); err != nil || len(ds) != 1 {
			t.Errorf("the delivery log after the prune: %+v, %v", ds, err)
		}
		if n, err := s.Prune(ctx, delivered.Add(time.Second)); err != nil || n != 1 {
			t.Errorf("Prune once the retention passed since the delivery = %d, %v; want 1", n, err)
		}

		ep2, err := o.AddEndpoint(ctx, "acme", "https://hooks.example.com/2", webhook.Types)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := s.Enqueue(ctx, webhook.Event{ID: "msg_orphan", Org: "acme", Type: webhook.LicenseChanged,
			Payload: []byte("{}"), Created: created}); err != nil || n != 2 {
			t.Fatalf("Enqueue = %d, %v", n, err)
		}
		for _, id := range []string{ep1.ID, ep2.ID} {
			if err := o.DeleteEndpoint(ctx, "acme", id); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := s.Prune(ctx, now.Add(-24*time.Hour)); err != nil || n != 1 {
			t.Errorf("Prune of an event with no delivery left = %d, %v; want 1", n, err)
		}
	})
}

// TestLecternSecretRotation: an endpoint made under one deployment
// secret is delivered to, verified by the Standard Webhooks library with
// the secret it was given, at every step docs/operations.md ("Rotating
// keys") takes: the old secret alone; accepting the new one
// (LECTERN_SECRET=old, LECTERN_SECRET_ACCEPT=new); swapping them
// (new, accepting old), where each origin's start seals the secrets
// again under the new one (Reseal), an endpoint in a rotation's overlap
// both of its secrets; and the new secret alone, once the old one is
// dropped. A secret sealed under a third secret is reported, not
// sealed, and its delivery fails.
func TestLecternSecretRotation(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		createOrg(t, s, "acme")
		ctx := context.Background()
		rc := newReceiver(t, false, nil)
		derive := func(secret string) []byte {
			return subkey.Derive([]byte(secret+"-a-deployment-secret-of-32-characters"), subkey.Webhooks)
		}
		oldKey, newKey := derive("old"), derive("new")
		origin := func(key, accepted []byte) *webhook.Outbox {
			return webhook.New(webhook.Config{Store: s, Key: key, Accepted: accepted, AllowPrivate: true,
				Poll: 20 * time.Millisecond})
		}
		o := origin(oldKey, nil)
		plain, err := o.AddEndpoint(ctx, "acme", rc.srv.URL+"/plain", []string{webhook.LicenseChanged})
		if err != nil {
			t.Fatal(err)
		}
		rotating, err := o.AddEndpoint(ctx, "acme", rc.srv.URL+"/rotating", []string{webhook.LicenseChanged})
		if err != nil {
			t.Fatal(err)
		}
		first := rotating.SecretText
		if rotating, err = o.Rotate(ctx, "acme", rotating.ID); err != nil {
			t.Fatal(err)
		}
		verify := map[string][]string{"/plain": {plain.SecretText}, "/rotating": {rotating.SecretText, first}}

		// deliver runs an origin of key and accepted until the event it
		// emits reaches both endpoints, each verified with every secret
		// the endpoint was given.
		deliver := func(step string, key, accepted []byte) webhook.Resealed {
			t.Helper()
			o := origin(key, accepted)
			r, err := o.Reseal(ctx)
			if err != nil {
				t.Fatalf("%s: Reseal: %v", step, err)
			}
			id, err := o.Emit(ctx, "acme", webhook.LicenseChanged, webhook.LicenseChange{OrgID: "acme", Status: step})
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); o.Run(rctx) }()
			defer func() { cancel(); <-done }()
			for range 2 {
				select {
				case got := <-rc.notify:
					if got.header.Get("webhook-id") != id {
						t.Errorf("%s: webhook-id %s, want %s", step, got.header.Get("webhook-id"), id)
					}
					path := got.path
					for _, secret := range verify[path] {
						wh, _ := standardwebhooks.NewWebhook(secret)
						if err := wh.Verify(got.body, got.header); err != nil {
							t.Errorf("%s: %s: the Standard Webhooks library refuses the delivery: %v", step, path, err)
						}
					}
				case <-time.After(5 * time.Second):
					for _, ep := range []string{plain.ID, rotating.ID} {
						ds, _ := o.Deliveries(ctx, "acme", ep, 0, 1)
						t.Errorf("%s: not delivered to %s: %+v", step, ep, ds)
					}
					t.FailNow()
				}
			}
			// Stopped only once both outcomes are recorded: an attempt
			// cut short would be made again by the next step's origin.
			waitState(t, o, "acme", plain.ID, webhook.Delivered)
			waitState(t, o, "acme", rotating.ID, webhook.Delivered)
			return r
		}
		deliver("old", oldKey, nil)
		if r := deliver("1: old, accepting new", oldKey, newKey); r.Sealed != 0 || len(r.Unopened) != 0 {
			t.Errorf("step 1: Reseal = %+v, want nothing to do", r)
		}
		if r := deliver("2: new, accepting old", newKey, oldKey); r.Sealed != 3 || len(r.Unopened) != 0 {
			t.Errorf("step 2: Reseal = %+v, want 3 secrets sealed again (one endpoint's, the other's two)", r)
		}
		if r := deliver("3: new", newKey, nil); r.Sealed != 0 || len(r.Unopened) != 0 {
			t.Errorf("step 3: Reseal = %+v, want nothing to do", r)
		}

		// A secret sealed under a secret no longer configured.
		stray := origin(derive("stray"), nil)
		lost, err := stray.AddEndpoint(ctx, "acme", rc.srv.URL+"/lost", []string{webhook.OrgSuspended})
		if err != nil {
			t.Fatal(err)
		}
		o = origin(newKey, oldKey)
		r, err := o.Reseal(ctx)
		if err != nil || r.Sealed != 0 || len(r.Unopened) != 1 || r.Unopened[0].ID != lost.ID {
			t.Errorf("Reseal with an endpoint sealed under neither key = %+v, %v; want it reported", r, err)
		}
		if _, err := o.Emit(ctx, "acme", webhook.OrgSuspended, webhook.Suspension{OrgID: "acme", Reason: webhook.ReasonOperator}); err != nil {
			t.Fatal(err)
		}
		run(t, o)
		if d := waitState(t, o, "acme", lost.ID, webhook.Pending); !strings.Contains(d.Error, "cannot be opened") {
			t.Errorf("the delivery to an endpoint whose secret opens under neither key: %+v", d)
		}
	})
}

// TestSlowEndpointDelaysNoOther: one endpoint's receiver hangs (until
// the test ends, or each attempt's 10 s timeout) and its events, the
// oldest, outnumber the workers; another organisation's endpoint, whose
// events come after, is delivered all of its events while every attempt
// to the hanging one still hangs (none has timed out: without the cap
// the others wait for that), and the hanging one never has more than
// PerEndpoint attempts in flight.
func TestSlowEndpointDelaysNoOther(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		createOrg(t, s, "slow")
		createOrg(t, s, "fast")
		ctx := context.Background()
		release := make(chan struct{})
		var hanging, most, ended atomic.Int32
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := hanging.Add(1)
			defer hanging.Add(-1)
			defer ended.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer slow.Close()
		defer close(release)
		fast := newReceiver(t, false, nil)
		o := webhook.New(webhook.Config{Store: s, Key: testKey, AllowPrivate: true, Workers: 4, Poll: 20 * time.Millisecond})
		if _, err := o.AddEndpoint(ctx, "slow", slow.URL, []string{webhook.LicenseChanged}); err != nil {
			t.Fatal(err)
		}
		if _, err := o.AddEndpoint(ctx, "fast", fast.srv.URL, []string{webhook.LicenseChanged}); err != nil {
			t.Fatal(err)
		}
		for range 10 {
			if _, err := o.Emit(ctx, "slow", webhook.LicenseChanged, webhook.LicenseChange{OrgID: "slow"}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(10 * time.Millisecond) // the fast organisation's events are the newest
		run(t, o)
		for range 5 {
			if _, err := o.Emit(ctx, "fast", webhook.LicenseChanged, webhook.LicenseChange{OrgID: "fast"}); err != nil {
				t.Fatal(err)
			}
			fast.wait(t, time.Minute)
		}
		if n := ended.Load(); n != 0 {
			t.Errorf("the other endpoint's events were delivered after %d attempts to the hanging one ended, want while all hang", n)
		}
		if n := most.Load(); n != webhook.DefaultPerEndpoint {
			t.Errorf("at most %d attempts in flight to the hanging endpoint, want %d", n, webhook.DefaultPerEndpoint)
		}
	})
}
