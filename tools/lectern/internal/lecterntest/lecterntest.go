// Package lecterntest is the lectern command's test kit: an origin and its
// identity provider wired in process as origin/wiring wires them, each on
// an httptest server, with a SQLite database in a temporary directory,
// serving the small generated corpus to one organisation and its client.
package lecterntest

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"slices"
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

// Org is the organisation the stack licenses, every tier granted unless
// Start's mod changes it.
const Org = "syncer"

// Stack is a running origin.
type Stack struct {
	URL, Issuer string // the API's and the identity provider's base URLs
	Store       store.Store
	Meters      meter.Store
	// Corpus is the directory of the corpus served; Load serves it again.
	Corpus  string
	Content atomic.Pointer[server.Content]
	// ClientID and Secret are Org's client, with content.read,
	// content.export and media.download.
	ClientID, Secret string

	t testing.TB
}

// Start starts a stack for the test; mod, when not nil, changes Org before
// it is created.
func Start(t testing.TB, mod func(*store.Org)) *Stack {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	s := &Stack{t: t, Corpus: filepath.Join(dir, "corpus")}
	if _, err := gen.Write(s.Corpus, gen.Options{Seed: 1, Small: true}); err != nil {
		t.Fatal(err)
	}
	s.Load()
	st, m, err := wiring.OpenStores(ctx, filepath.Join(dir, "lectern.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(); m.Close() })
	s.Store, s.Meters = st, m
	s.pin(s.Content.Load())
	progress, err := wiring.ProgressOf(st)
	if err != nil {
		t.Fatal(err)
	}

	// The servers' URLs are the deployment's: listen first, serve once wired.
	apiSrv, idpSrv := httptest.NewUnstartedServer(nil), httptest.NewUnstartedServer(nil)
	s.URL, s.Issuer = "http://"+apiSrv.Listener.Addr().String(), "http://"+idpSrv.Listener.Addr().String()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	d := wiring.Deployment{Secret: []byte("lectern-test-secret-0123456789abcdef"), PublicURL: s.URL, Issuer: s.Issuer,
		Audience: "lectern-api", LicenseURL: "https://lectern.example/licence"}
	provider, err := idp.New(ctx, d.IdP(st, time.Now, log))
	if err != nil {
		t.Fatal(err)
	}
	apiSrv.Config.Handler = d.API(wiring.Parts{Store: st, Meters: m, Progress: progress, Content: s.Content.Load, Now: time.Now, Logger: log,
		Auth: auth.New(auth.Config{Issuer: s.Issuer, Audience: d.Audience, JWKSURL: s.Issuer + "/.well-known/jwks.json", Now: time.Now})})
	idpSrv.Config.Handler = provider.Handler()
	apiSrv.Start()
	idpSrv.Start()
	t.Cleanup(apiSrv.Close)
	t.Cleanup(idpSrv.Close)

	o := licence.NewOrg(time.Now())
	o.ID, o.Name, o.Grants = Org, "Sync Org", slices.Clone(id.Tiers)
	if mod != nil {
		mod(o)
	}
	if err := st.CreateOrg(ctx, o); err != nil {
		t.Fatal(err)
	}
	s.ClientID, s.Secret, err = idp.CreateClient(ctx, st, time.Now(), Org,
		[]string{"content.read", "content.export", "media.download"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Load (re)loads the corpus directory into the content served.
func (s *Stack) Load() {
	s.t.Helper()
	c, err := corpus.Load(s.Corpus)
	if err != nil {
		s.t.Fatal(err)
	}
	ct, err := server.Build(c)
	if err != nil {
		s.t.Fatal(err)
	}
	if s.Store != nil {
		s.pin(ct)
	}
	s.Content.Store(ct)
}

// pin records ct's parts for the change feed, as a deployment does when
// it first serves a version (origin/corpus/follow).
func (s *Stack) pin(ct *server.Content) {
	s.t.Helper()
	if _, err := s.Store.PinCorpusVersion(context.Background(), ct.ContentVersion, ct.ContentDigest, ct.Parts.Encode(), time.Now()); err != nil {
		s.t.Fatal(err)
	}
}
