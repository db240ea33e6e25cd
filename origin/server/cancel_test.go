package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/logbuftest"
)

// stallingStore holds GetOrg (the organisation gate) until the request's
// context is done and then fails with the context's error, as a database
// call does when its client goes away; with fail set it fails at once
// instead, as a broken database does.
type stallingStore struct {
	store.Store
	entered chan struct{} // receives once GetOrg is waiting
	fail    error
}

func (s *stallingStore) GetOrg(ctx context.Context, id string) (*store.Org, error) {
	if s.fail != nil {
		return nil, s.fail
	}
	s.entered <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// statusRecorder records the status a handler writes.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

// Issue #14: a client that cancels its request while the handler waits
// on the store is not logged as an internal error (nor answered 500: it
// is gone); it is logged at Info. A store failure with the client still
// there is, as the control shows.
func TestCancelledRequestIsNotAnInternalError(t *testing.T) {
	h := newHarness(t)
	tok := h.org("acme", "high")
	logs := &logbuftest.Buffer{}
	served := make(chan int, 1) // the status each handler wrote, 0 for none
	serve := func(st store.Store) string {
		cfg := h.srv.cfg
		cfg.Store = st
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		srv := New(cfg)
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sw := &statusRecorder{ResponseWriter: w}
			srv.ServeHTTP(sw, r)
			served <- sw.status
		}))
		t.Cleanup(ts.Close)
		return ts.URL
	}
	stall := &stallingStore{Store: h.store, entered: make(chan struct{}, 1)}
	stalled := serve(stall)
	broken := serve(&stallingStore{Store: h.store, fail: errors.New("the database is down")})

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", stalled+"/v1/tiers", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	clientErr := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		clientErr <- err
	}()
	select {
	case <-stall.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the organisation gate")
	}
	cancel()
	if err := <-clientErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the client's request ended with %v, want context.Canceled", err)
	}
	select {
	case status := <-served:
		if status != 0 {
			t.Errorf("the handler answered %d to a client that had gone, want nothing written", status)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not return after its client went away")
	}
	out := logs.String()
	if strings.Contains(out, "level=ERROR") || strings.Contains(out, "internal error") {
		t.Errorf("a cancelled request was logged as an internal error:\n%s", out)
	}
	if !strings.Contains(out, "level=INFO") || !strings.Contains(out, "request cancelled by the client") {
		t.Errorf("the cancelled request was not logged at Info:\n%s", out)
	}

	// The control: the same store failing with the client there is a 500
	// INTERNAL logged at Error.
	req, _ = http.NewRequest("GET", broken+"/v1/tiers", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	<-served
	if res.StatusCode != http.StatusInternalServerError {
		t.Errorf("a store failure answered %d, want 500", res.StatusCode)
	}
	if out := logs.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "the database is down") {
		t.Errorf("a store failure was not logged as an internal error:\n%s", out)
	}
}
