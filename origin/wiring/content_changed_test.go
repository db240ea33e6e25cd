package wiring

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/lectern-api/lectern/internal/pgschema"
	"github.com/lectern-api/lectern/origin/corpus/follow"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/store/sqlitestore"
	"github.com/lectern-api/lectern/origin/webhook"
)

// revised writes the small corpus with class 2 of high/algebra retitled
// (n: the title's mark) under contentVersion version into a new directory.
func revised(t *testing.T, n int, version string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), fmt.Sprint("corpus-", n))
	if _, err := gen.Write(dir, gen.Options{Seed: 1, Small: true}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "lessons", "high", "algebra.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	c := doc["classes"].([]any)[1].(map[string]any)
	c["title"] = fmt.Sprintf("%s (revision %d)", c["title"], n)
	b, _ = json.Marshal(doc)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	mp := filepath.Join(dir, "corpus.json")
	mb, _ := os.ReadFile(mp)
	var m map[string]any
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	m["contentVersion"] = version
	mb, _ = json.Marshal(m)
	if err := os.WriteFile(mp, mb, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// delivered is a content.changed the receiver verified.
type delivered struct {
	org  string
	data webhook.ContentChange
	at   time.Time
}

// Issue #37, point 3: a corpus reload sends content.changed to each
// organisation whose granted subjects changed, with the changed subjects
// and their lessons' counts, verified by the Standard Webhooks library;
// an organisation whose grants saw no change is sent nothing; with two
// origins on one PostgreSQL database, both swapping, each organisation
// is sent one event per version. It logs the time from the reload's call
// to the delivery (bench row w1, docs/bench.md).
func TestContentChangedWebhook(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			dsn := ""
			if db == "postgres" {
				dsn = pgschema.ForTest(t, "content.changed from two origins")
			}
			edit := func(o *Options) {
				o.Webhooks.AllowPrivate = true
				o.CorpusSync = 50 * time.Millisecond
				if dsn != "" {
					o.DB = dsn
				}
			}
			a := openOrigin(t, edit)
			origins := []*Origin{a}
			if dsn != "" {
				origins = append(origins, openOrigin(t, edit))
			}
			ctx := context.Background()
			var (
				mu  sync.Mutex
				got []delivered
			)
			secrets := map[string]string{}
			recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				org := strings.TrimPrefix(r.URL.Path, "/")
				wh, err := standardwebhooks.NewWebhook(secrets[org])
				if err != nil || wh.Verify(body, r.Header) != nil {
					t.Errorf("a delivery to %s does not verify: %v", org, err)
					w.WriteHeader(400)
					return
				}
				var env struct {
					Type string
					Data webhook.ContentChange
				}
				if err := json.Unmarshal(body, &env); err != nil || env.Type != webhook.ContentChanged {
					t.Errorf("delivery to %s: %v %s", org, err, body)
				}
				mu.Lock()
				got = append(got, delivered{org, env.Data, time.Now()})
				mu.Unlock()
			}))
			defer recv.Close()
			for org, grants := range map[string][]string{"reader": {"high"}, "bystander": {"middle", "primary"}} {
				o := licence.NewOrg(time.Now())
				o.ID, o.Name, o.Grants = org, org, grants
				if err := a.Store().CreateOrg(ctx, o); err != nil {
					t.Fatal(err)
				}
				ep, err := a.Webhooks().AddEndpoint(ctx, org, recv.URL+"/"+org, []string{webhook.ContentChanged})
				if err != nil {
					t.Fatal(err)
				}
				secrets[org] = ep.SecretText
			}

			const reloads = 12
			var latency []time.Duration
			from := a.Content().ContentVersion
			// reload has reload swap to dir (of version to) and waits for
			// its event, the change marked announced, and every origin on
			// to.
			reload := func(reload func(context.Context, string) (string, error), dir, to string) time.Duration {
				t.Helper()
				start := time.Now()
				if v, err := reload(ctx, dir); err != nil || v != to {
					t.Fatalf("reload to %s: %s, %v", to, v, err)
				}
				var d delivered
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
					mu.Lock()
					n := 0
					for _, g := range got {
						if g.data.ToVersion == to && g.data.FromVersion == from {
							d = g
							n++
						}
					}
					mu.Unlock()
					if n > 0 || time.Now().After(deadline) {
						break
					}
				}
				if d.org != "reader" || len(d.data.Subjects) != 1 ||
					d.data.Subjects[0] != (webhook.SubjectChange{Subject: "high/algebra", Change: "changed", LessonsChanged: 1}) {
					t.Fatalf("reload to %s: delivered %+v, want reader's high/algebra with 1 lesson changed from %s", to, d, from)
				}
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
					rec, err := a.Store().Corpus(ctx)
					done := err == nil && rec.Announced == to && rec.AnnouncedFor.Equal(rec.LoadedAt)
					for _, o := range origins {
						done = done && o.Content().ContentVersion == to
					}
					if done {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s not announced or not followed: %+v, %v", to, rec, err)
					}
				}
				from = to
				return d.at.Sub(start)
			}
			dirs := map[string]string{}
			for i := range reloads {
				to := fmt.Sprintf("2026-12-%02d+feed%02d", i+1, i)
				dirs[to] = revised(t, i, to)
				latency = append(latency, reload(a.Corpus().Reload, dirs[to], to))
			}
			// Back to an earlier version: a change of its own.
			back := "2026-12-01+feed00"
			reload(a.Corpus().Reload, dirs[back], back)
			// A reload by an origin that announces nothing (as one of the
			// previous release would, or one killed after recording):
			// the others announce it when they follow.
			bare, err := follow.Open(ctx, follow.Config{Store: a.Store(), Dir: dirs[back]})
			if err != nil {
				t.Fatal(err)
			}
			defer bare.Close()
			last := "2026-12-31+feed99"
			reload(bare.Reload, revised(t, 99, last), last)

			time.Sleep(300 * time.Millisecond) // a second origin's duplicate would arrive by now
			mu.Lock()
			defer mu.Unlock()
			if len(got) != reloads+2 {
				t.Errorf("%d deliveries for %d changes on %d origins, want one each", len(got), reloads+2, len(origins))
			}
			for _, d := range got {
				if d.org != "reader" {
					t.Errorf("sent to %s, whose grants saw no change: %+v", d.org, d.data)
				}
			}
			slices.Sort(latency)
			t.Logf("w1 %s, %d origins: reload to content.changed delivered: p50 %v, p99 %v (of %d)", db, len(origins),
				latency[len(latency)/2], latency[len(latency)-1], len(latency))
		})
	}
}

// A change recorded by an origin that announced nothing before it died
// (or by an origin of the previous release) is announced by the next
// origin to serve it, here the same one restarted: at-least-once, from
// the database's record.
func TestContentChangedAfterRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "lectern.db")
	v1, v2 := "2026-11-20+aa01", "2026-11-21+aa02"
	first := revised(t, 200, v1)
	edit := func(o *Options) {
		o.Webhooks.AllowPrivate = true
		o.CorpusSync = 50 * time.Millisecond
		o.DB, o.Corpus = db, first
	}
	events := make(chan webhook.ContentChange, 8)
	var secret string
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil || wh.Verify(body, r.Header) != nil {
			t.Errorf("a delivery does not verify: %v", err)
			return
		}
		var env struct{ Data webhook.ContentChange }
		json.Unmarshal(body, &env)
		events <- env.Data
	}))
	defer recv.Close()

	a := openOrigin(t, edit)
	o := licence.NewOrg(time.Now())
	o.ID, o.Name, o.Grants = "reader", "reader", []string{"high"}
	if err := a.Store().CreateOrg(ctx, o); err != nil {
		t.Fatal(err)
	}
	ep, err := a.Webhooks().AddEndpoint(ctx, "reader", recv.URL, []string{webhook.ContentChanged})
	if err != nil {
		t.Fatal(err)
	}
	secret = ep.SecretText
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) { // the first record, marked
		if rec, err := a.Store().Corpus(ctx); err == nil && rec.AnnouncedFor.Equal(rec.LoadedAt) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first record was not marked announced")
		}
	}
	a.Close()

	st, err := sqlitestore.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	bare, err := follow.Open(ctx, follow.Config{Store: st, Dir: first})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := bare.Reload(ctx, revised(t, 201, v2)); err != nil || v != v2 {
		t.Fatalf("reload: %s, %v", v, err)
	}
	bare.Close()
	st.Close()

	openOrigin(t, edit) // restarted on the record: no swap
	select {
	case ev := <-events:
		if ev.FromVersion != v1 || ev.ToVersion != v2 || len(ev.Subjects) != 1 || ev.Subjects[0].LessonsChanged != 1 {
			t.Errorf("announced %+v, want %s to %s, high/algebra's lesson", ev, v1, v2)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the change recorded while no origin announced was never sent")
	}
}
