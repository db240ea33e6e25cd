package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/auth"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/idp"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/server"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/wiring"
	"github.com/lectern-api/lectern/shared/id"
)

// testStack is an origin wired in process as origin/cmd/origin wires it
// (public API, identity provider, SQLite store and meters), serving the
// small corpus, with one organisation and its client.
type testStack struct {
	t        *testing.T
	url      string
	store    store.Store
	meters   meter.Store
	content  atomic.Pointer[server.Content]
	corpus   string // the corpus directory being served
	clientID string
	secret   string
}

const testOrg = "syncer"

func newTestStack(t *testing.T, mod func(*store.Org)) *testStack {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	s := &testStack{t: t, corpus: filepath.Join(dir, "corpus")}
	if _, err := gen.Write(s.corpus, gen.Options{Seed: 1, Small: true}); err != nil {
		t.Fatal(err)
	}
	s.load()
	st, m, err := wiring.OpenStores(ctx, filepath.Join(dir, "lectern.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(); m.Close() })
	s.store, s.meters = st, m

	idpSrv := httptest.NewUnstartedServer(nil)
	apiSrv := httptest.NewUnstartedServer(nil)
	issuer := "http://" + idpSrv.Listener.Addr().String()
	s.url = "http://" + apiSrv.Listener.Addr().String()
	d := wiring.Deployment{Secret: []byte("lectern-sync-test-secret-0123456789abcdef"), PublicURL: s.url, Issuer: issuer,
		Audience: "lectern-api", LicenseURL: "https://lectern.example/licence"}
	provider, err := idp.New(ctx, d.IdP(st, time.Now, nil))
	if err != nil {
		t.Fatal(err)
	}
	progress, err := wiring.ProgressOf(st)
	if err != nil {
		t.Fatal(err)
	}
	api := d.API(wiring.Parts{Store: st, Meters: m, Progress: progress, Content: s.content.Load, Now: time.Now,
		Auth: auth.New(auth.Config{Issuer: issuer, Audience: "lectern-api", JWKSURL: issuer + "/.well-known/jwks.json", Now: time.Now})})
	idpSrv.Config.Handler = provider.Handler()
	apiSrv.Config.Handler = api
	idpSrv.Start()
	apiSrv.Start()
	t.Cleanup(idpSrv.Close)
	t.Cleanup(apiSrv.Close)

	o := licence.NewOrg(time.Now())
	o.ID, o.Name, o.Grants = testOrg, "Sync Org", slices.Clone(id.Tiers)
	if mod != nil {
		mod(o)
	}
	if err := st.CreateOrg(ctx, o); err != nil {
		t.Fatal(err)
	}
	s.clientID, s.secret, err = idp.CreateClient(ctx, st, time.Now(), testOrg,
		[]string{"content.read", "content.export", "media.download"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// load (re)loads the corpus directory into the served content.
func (s *testStack) load() {
	s.t.Helper()
	c, err := corpus.Load(s.corpus)
	if err != nil {
		s.t.Fatal(err)
	}
	ct, err := server.Build(c)
	if err != nil {
		s.t.Fatal(err)
	}
	s.content.Store(ct)
}

// rebuild changes one class title of subject tier/slug in the corpus,
// gives the corpus a new contentVersion, and serves it.
func (s *testStack) rebuild(tier, slug string) {
	s.t.Helper()
	p := filepath.Join(s.corpus, "lessons", tier, slug+".json")
	b, err := os.ReadFile(p)
	if err != nil {
		s.t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		s.t.Fatal(err)
	}
	classes := doc["classes"].([]any)
	classes[0].(map[string]any)["title"] = classes[0].(map[string]any)["title"].(string) + " (revised)"
	b, _ = json.Marshal(doc)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		s.t.Fatal(err)
	}
	mp := filepath.Join(s.corpus, "corpus.json")
	mb, _ := os.ReadFile(mp)
	old := s.content.Load().ContentVersion
	mb = []byte(strings.Replace(string(mb), old, "2026-11-02+"+strings.Repeat("a", 12), 1))
	if err := os.WriteFile(mp, mb, 0o644); err != nil {
		s.t.Fatal(err)
	}
	s.load()
	if s.content.Load().ContentVersion == old {
		s.t.Fatal("the rebuild kept the contentVersion")
	}
}

// env is the command's environment against the stack.
func (s *testStack) env() func(string) string {
	return func(k string) string {
		return map[string]string{"LECTERN_URL": s.url, "LECTERN_CLIENT_ID": s.clientID, "LECTERN_CLIENT_SECRET": s.secret}[k]
	}
}

// usage is the organisation's meters now.
func (s *testStack) usage() meter.Usage {
	s.t.Helper()
	o, err := s.store.GetOrg(context.Background(), testOrg)
	if err != nil {
		s.t.Fatal(err)
	}
	u, err := s.meters.Usage(context.Background(), meter.Key(o), time.Now())
	if err != nil {
		s.t.Fatal(err)
	}
	return u
}

// exports is the number of exports in the organisation's ledger.
func (s *testStack) exports() int {
	s.t.Helper()
	o, _ := s.store.GetOrg(context.Background(), testOrg)
	rows, err := s.meters.Ledger(context.Background(), meter.Key(o), 0, 1000)
	if err != nil {
		s.t.Fatal(err)
	}
	n := 0
	for _, r := range rows {
		if r.Kind == meter.KindExport {
			n++
		}
	}
	return n
}

// exportsBySubject counts the organisation's exports by subject.
func (s *testStack) exportsBySubject() map[string]int {
	s.t.Helper()
	o, _ := s.store.GetOrg(context.Background(), testOrg)
	rows, err := s.meters.Ledger(context.Background(), meter.Key(o), 0, 1000)
	if err != nil {
		s.t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range rows {
		if r.Kind == meter.KindExport {
			out[r.Target]++
		}
	}
	return out
}

// update changes the organisation.
func (s *testStack) update(mod func(*store.Org)) {
	s.t.Helper()
	if _, err := s.store.UpdateOrg(context.Background(), testOrg, func(o *store.Org) error { mod(o); return nil }); err != nil {
		s.t.Fatal(err)
	}
}

// subjects are the subjects of the corpus served, as tier/slug.
func (s *testStack) subjects() []string {
	var out []string
	for _, sub := range s.content.Load().Subjects {
		out = append(out, sub.Ref())
	}
	slices.Sort(out)
	return out
}
