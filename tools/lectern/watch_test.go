package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Issue #37, point 3: lectern sync -watch.

// watching runs watchDir on dir against s until the test ends (or
// stop), returning each sync's summary as it completes and the
// receiver's address (with listen).
type watching struct {
	synced chan summary
	addr   string
	stop   func()
	done   chan error
}

func startWatch(t *testing.T, s *testStack, dir string, w watchOptions) *watching {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	wt := &watching{synced: make(chan summary, 16), done: make(chan error, 1)}
	wt.stop = func() { cancel(&interrupted{os.Interrupt}) }
	addr := make(chan string, 1)
	w.listening = func(a string) { addr <- a }
	w.synced = func(sum summary, err error) { wt.synced <- sum }
	cfg := clientConfig{URL: s.URL, ClientID: s.ClientID, Secret: s.Secret, Limits: defaultLimits}
	go func() { wt.done <- watchDir(ctx, cfg, syncOptions{Dir: dir, JSON: true}, w) }()
	t.Cleanup(func() { wt.stop(); <-wt.done })
	if w.Listen != "" {
		wt.addr = <-addr
	}
	return wt
}

// next is the next sync's summary, or fails after d.
func (wt *watching) next(t *testing.T, d time.Duration) summary {
	t.Helper()
	select {
	case sum := <-wt.synced:
		return sum
	case <-time.After(d):
		t.Fatalf("no sync within %v", d)
	}
	return summary{}
}

// none checks that no sync happens within d.
func (wt *watching) none(t *testing.T, d time.Duration, what string) {
	t.Helper()
	select {
	case sum := <-wt.synced:
		t.Errorf("%s: a sync ran (%+v)", what, sum.Subjects)
	case <-time.After(d):
	}
}

// A version change is picked up by the poll; SIGINT ends the watch with
// the interrupt as its cause (exit 130).
func TestWatchPoll(t *testing.T) {
	s := newTestStack(t, nil)
	dir := t.TempDir()
	wt := startWatch(t, s, dir, watchOptions{Interval: 100 * time.Millisecond})
	if sum := wt.next(t, 10*time.Second); !sum.Complete {
		t.Fatalf("first sync: %+v", sum)
	}
	wt.none(t, 500*time.Millisecond, "nothing moved")
	s.editCorpus(revise("high/algebra", 1))
	sum := wt.next(t, 5*time.Second)
	if !sum.Complete || sum.Subjects.Fetched != 1 || sum.Feed != "feed" || sum.ContentVersion != s.Content.Load().ContentVersion {
		t.Fatalf("after the rebuild: %+v", sum)
	}
	wt.stop()
	var in *interrupted
	if err := <-wt.done; !errors.As(err, &in) || in.code() != 130 {
		t.Errorf("the watch ended with %v, want the interrupt (130)", err)
	}
	wt.done <- nil // for the cleanup
}

// A webhook signed as Standard Webhooks sign (the library's Sign, not
// this client's code) starts a sync at once; one badly signed, stale,
// unsigned or too large is refused and starts nothing; a webhook-id seen
// already is acknowledged and starts nothing.
func TestWatchWebhook(t *testing.T) {
	s := newTestStack(t, nil)
	dir := t.TempDir()
	key := bytes.Repeat([]byte{7}, 32)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	wt := startWatch(t, s, dir, watchOptions{Interval: time.Hour, Listen: "127.0.0.1:0", Secret: key})
	wt.next(t, 10*time.Second)
	signer, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := standardwebhooks.NewWebhook("whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{8}, 32)))
	body := []byte(`{"type":"content.changed","timestamp":"2026-11-02T00:00:00Z","data":{"orgId":"syncer"}}`)
	post := func(id string, at time.Time, sig string, body []byte) int {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+wt.addr+"/", bytes.NewReader(body))
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
		if sig != "" {
			req.Header.Set("webhook-signature", sig)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	sign := func(wh *standardwebhooks.Webhook, id string, at time.Time, body []byte) string {
		sig, err := wh.Sign(id, at, body)
		if err != nil {
			t.Fatal(err)
		}
		return sig
	}

	s.editCorpus(revise("high/algebra", 1))
	now := time.Now()
	big := append(bytes.Repeat([]byte(" "), maxWebhookBody), body...)
	for _, tc := range []struct {
		name string
		code int
		send func() int
	}{
		{"another secret's signature", 401, func() int { return post("msg_1", now, sign(other, "msg_1", now, body), body) }},
		{"a body not the one signed", 401, func() int {
			return post("msg_1", now, sign(signer, "msg_1", now, body), bytes.Replace(body, []byte("syncer"), []byte("other"), 1))
		}},
		{"another id than the one signed", 401, func() int { return post("msg_2", now, sign(signer, "msg_1", now, body), body) }},
		{"stale: 6 minutes old", 400, func() int {
			at := now.Add(-6 * time.Minute)
			return post("msg_3", at, sign(signer, "msg_3", at, body), body)
		}},
		{"6 minutes ahead", 400, func() int {
			at := now.Add(6 * time.Minute)
			return post("msg_4", at, sign(signer, "msg_4", at, body), body)
		}},
		{"unsigned", 400, func() int { return post("msg_5", now, "", body) }},
		{"over 1 MiB", 413, func() int { return post("msg_6", now, sign(signer, "msg_6", now, big), big) }},
	} {
		if got := tc.send(); got != tc.code {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.code)
		}
	}
	wt.none(t, 300*time.Millisecond, "refused webhooks")

	// Signed: a sync at once (the poll is an hour away).
	sig := sign(signer, "msg_ok", now, body)
	if got := post("msg_ok", now, sig, body); got != http.StatusNoContent {
		t.Fatalf("a signed webhook: %d", got)
	}
	if sum := wt.next(t, 5*time.Second); !sum.Complete || sum.Subjects.Fetched != 1 {
		t.Fatalf("the sync the webhook started: %+v", sum)
	}
	// Delivered again (at least once): acknowledged, nothing started.
	if got := post("msg_ok", now, sig, body); got != http.StatusNoContent {
		t.Errorf("a webhook delivered again: %d", got)
	}
	wt.none(t, 300*time.Millisecond, "a webhook-id seen already")
	// A rotated secret signs with both: the one that matches is enough.
	both := sign(other, "msg_rot", now, body) + " " + sign(signer, "msg_rot", now, body)
	if got := post("msg_rot", now, both, body); got != http.StatusNoContent {
		t.Errorf("two signatures, one valid: %d", got)
	}
	wt.next(t, 5*time.Second)
}

func TestBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{1: time.Minute, 2: 2 * time.Minute, 4: 8 * time.Minute, 5: maxBackoff, 30: maxBackoff} {
		for range 20 {
			if got := backoff(time.Minute, n); got < want/2 || got > want {
				t.Fatalf("backoff after %d failures: %v, want %v to %v", n, got, want/2, want)
			}
		}
	}
}

func TestParseWebhookSecret(t *testing.T) {
	if _, err := parseWebhookSecret("whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 32))); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", "secret", "whsec_!!", "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 4))} {
		if _, err := parseWebhookSecret(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// -watch's flags: -interval and -listen only with -watch, -listen only
// with a whsec_ secret, no -dry-run: each a usage error (2), before
// anything is asked.
func TestWatchFlags(t *testing.T) {
	env := func(secret string) func(string) string {
		return func(k string) string {
			return map[string]string{"LECTERN_URL": "http://127.0.0.1:1", "LECTERN_CLIENT_ID": "id", "LECTERN_CLIENT_SECRET": "s",
				"LECTERN_WEBHOOK_SECRET": secret}[k]
		}
	}
	for _, tc := range []struct {
		args   []string
		secret string
	}{
		{[]string{"-listen", "127.0.0.1:0"}, "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 32))},
		{[]string{"-interval", "5s"}, ""},
		{[]string{"-watch", "-listen", "127.0.0.1:0"}, ""},
		{[]string{"-watch", "-listen", "127.0.0.1:0"}, "not-a-secret"},
		{[]string{"-watch", "-dry-run"}, ""},
		{[]string{"-watch", "-interval", "10ms"}, ""},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), append(append([]string{"sync"}, tc.args...), t.TempDir()), env(tc.secret), &out, &errb); code != 2 {
			t.Errorf("lectern sync %v: exit %d, want 2 (%s)", tc.args, code, errb.String())
		}
	}
}
