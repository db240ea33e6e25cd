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
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/licence"
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
			for i := range reloads {
				to := fmt.Sprintf("2026-12-%02d+feed%02d", i+1, i)
				start := time.Now()
				if v, err := a.Corpus().Reload(ctx, revised(t, i, to)); err != nil || v != to {
					t.Fatalf("reload %d: %s, %v", i, v, err)
				}
				var d delivered
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
					mu.Lock()
					if i := slices.IndexFunc(got, func(d delivered) bool { return d.data.ToVersion == to }); i >= 0 {
						d = got[i]
					}
					mu.Unlock()
					if d.org != "" || time.Now().After(deadline) {
						break
					}
				}
				if d.org != "reader" || d.data.FromVersion != from || len(d.data.Subjects) != 1 ||
					d.data.Subjects[0] != (webhook.SubjectChange{Subject: "high/algebra", Change: "changed", LessonsChanged: 1}) {
					t.Fatalf("reload to %s: delivered %+v, want reader's high/algebra with 1 lesson changed from %s", to, d, from)
				}
				latency = append(latency, d.at.Sub(start))
				from = to
				if len(origins) > 1 { // the other origin follows before the next reload
					for deadline := time.Now().Add(10 * time.Second); origins[1].Content().ContentVersion != to; time.Sleep(10 * time.Millisecond) {
						if time.Now().After(deadline) {
							t.Fatalf("origin B did not follow to %s", to)
						}
					}
				}
			}
			time.Sleep(300 * time.Millisecond) // a second origin's duplicate would arrive by now
			mu.Lock()
			defer mu.Unlock()
			if len(got) != reloads {
				t.Errorf("%d deliveries for %d reloads on %d origins, want one each", len(got), reloads, len(origins))
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
