package api_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/auth"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/idp"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/server"
	"github.com/lectern-api/lectern/origin/wiring"
	"github.com/lectern-api/lectern/shared/id"
	"github.com/lectern-api/lectern/shared/scope"
	"github.com/lectern-api/lectern/tools/lectern/api"
	"golang.org/x/oauth2/clientcredentials"
)

// The generated client against a real origin: GET /v1/license with a
// bearer token decodes into LicenseStatus, a subjects page into
// SubjectList, and a refusal into Error.
func TestClient(t *testing.T) {
	ctx := t.Context()
	o := startOrigin(t)

	bearer := func(ctx context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+o.token)
		return nil
	}
	c, err := api.NewClientWithResponses(o.url, api.WithRequestEditorFn(bearer))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.GetLicenseWithResponse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if resp.JSON200 == nil {
		t.Fatalf("GET /v1/license: %s %s", resp.Status(), resp.Body)
	}
	if got, want := resp.JSON200.ContentVersion, o.version; got != want {
		t.Errorf("got contentVersion %q, want %q", got, want)
	}

	// A page of subjects, filtered by a tier constant, each with its digest.
	tier := api.ListSubjectsParamsTierHigh
	subjects, err := c.ListSubjectsWithResponse(ctx, &api.ListSubjectsParams{Tier: &tier})
	if err != nil {
		t.Fatal(err)
	}
	if subjects.JSON200 == nil || len(subjects.JSON200.Items) == 0 {
		t.Fatalf("GET /v1/subjects?tier=high: %s %s", subjects.Status(), subjects.Body)
	}
	for _, s := range subjects.JSON200.Items {
		if s.Tier != api.SubjectRowTierHigh || s.ContentDigest == "" {
			t.Errorf("subject %s/%s: contentDigest %q", s.Tier, s.Slug, s.ContentDigest)
		}
	}

	// No token: 401 and the Error body, its code one of the constants.
	anon, err := api.NewClientWithResponses(o.url)
	if err != nil {
		t.Fatal(err)
	}
	resp, err = anon.GetLicenseWithResponse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if resp.JSON401 == nil {
		t.Fatalf("GET /v1/license without a token: %s %s, want 401 with an Error body", resp.Status(), resp.Body)
	}
	if got := resp.JSON401.Error.Code; !got.Valid() {
		t.Errorf("got error code %q, not one the description lists", got)
	}
}

// origin is an origin serving the small generated corpus, and a token of
// an organisation it licenses every tier to.
type origin struct {
	url, token, version string
}

// startOrigin wires an origin and its identity provider in process as
// origin/wiring wires them (tools/bench/stack.go does the same), each on
// an httptest server, with a SQLite database in a temporary directory.
func startOrigin(t *testing.T) origin {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	if _, err := gen.Write(filepath.Join(dir, "corpus"), gen.Options{Seed: 1, Small: true}); err != nil {
		t.Fatal(err)
	}
	c, err := corpus.Load(filepath.Join(dir, "corpus"))
	if err != nil {
		t.Fatal(err)
	}
	content, err := server.Build(c)
	if err != nil {
		t.Fatal(err)
	}
	s, m, err := wiring.OpenStores(ctx, filepath.Join(dir, "lectern.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	progress, err := wiring.ProgressOf(s)
	if err != nil {
		t.Fatal(err)
	}

	// The servers' URLs are the deployment's: listen first, serve once wired.
	apiSrv, idpSrv := httptest.NewUnstartedServer(nil), httptest.NewUnstartedServer(nil)
	apiURL, issuerURL := "http://"+apiSrv.Listener.Addr().String(), "http://"+idpSrv.Listener.Addr().String()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	d := wiring.Deployment{Secret: []byte("api-client-test-secret-0123456789abcdef"), PublicURL: apiURL,
		Issuer: issuerURL, Audience: "lectern-api"}
	provider, err := idp.New(ctx, d.IdP(s, time.Now, log))
	if err != nil {
		t.Fatal(err)
	}
	apiSrv.Config.Handler = d.API(wiring.Parts{Store: s, Meters: m, Progress: progress,
		Auth:    auth.New(auth.Config{Issuer: issuerURL, Audience: d.Audience, JWKSURL: issuerURL + "/.well-known/jwks.json", Now: time.Now}),
		Content: func() *server.Content { return content }, Now: time.Now, Logger: log})
	idpSrv.Config.Handler = provider.Handler()
	apiSrv.Start()
	idpSrv.Start()
	t.Cleanup(apiSrv.Close)
	t.Cleanup(idpSrv.Close)

	org := licence.NewOrg(time.Now())
	org.ID, org.Name, org.Grants = "acme", "Acme Learning", append([]string(nil), id.Tiers...)
	if err := s.CreateOrg(ctx, org); err != nil {
		t.Fatal(err)
	}
	clientID, secret, err := idp.CreateClient(ctx, s, time.Now(), org.ID, []string{scope.ContentRead}, []string{"client_credentials"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cc := clientcredentials.Config{ClientID: clientID, ClientSecret: secret, TokenURL: issuerURL + "/oauth2/token",
		Scopes: []string{scope.Full(scope.ContentRead)}}
	tok, err := cc.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return origin{url: apiURL, token: tok.AccessToken, version: c.ContentVersion}
}
