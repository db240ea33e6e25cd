package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/lectern-api/lectern/shared/scope"
	"github.com/lectern-api/lectern/tools/lectern/api"
	"github.com/lectern-api/lectern/tools/lectern/internal/lecterntest"
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

// origin is the test kit's origin, and a content.read token of its
// organisation (licensed every tier).
type origin struct {
	url, token, version string
}

func startOrigin(t *testing.T) origin {
	t.Helper()
	s := lecterntest.Start(t, nil)
	cc := clientcredentials.Config{ClientID: s.ClientID, ClientSecret: s.Secret, TokenURL: s.Issuer + "/oauth2/token",
		Scopes: []string{scope.Full(scope.ContentRead)}}
	tok, err := cc.Token(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return origin{url: s.URL, token: tok.AccessToken, version: s.Content.Load().ContentVersion}
}
