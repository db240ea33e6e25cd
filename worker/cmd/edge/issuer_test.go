package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/internal/cmdline"
)

// Issue #28, point 6: the edge finds the keys from LECTERN_ISSUER alone,
// the one URL in front of every origin's identity provider: its JWKS URL
// is <issuer>/.well-known/jwks.json, and LECTERN_IDP_ADDR only makes the
// issuer of a single dev origin. Without LECTERN_JWKS_URL the issuer is
// the dev provider's, trimmed of a trailing slash as the origin trims it
// (the tokens' iss has none); with it (another OAuth2 server) the issuer
// is taken as written.
func TestEdgeFindsKeysFromIssuer(t *testing.T) {
	for _, tc := range []struct {
		name                string
		env                 map[string]string
		wantIssuer, wantURL string
	}{
		{"make run's one origin", nil, "http://127.0.0.1:9090", "http://127.0.0.1:9090/.well-known/jwks.json"},
		{"the provider's address alone", map[string]string{"LECTERN_IDP_ADDR": "10.0.0.1:9090"},
			"http://10.0.0.1:9090", "http://10.0.0.1:9090/.well-known/jwks.json"},
		{"the issuer in front of several origins", map[string]string{"LECTERN_ISSUER": "https://auth.example.org", "LECTERN_IDP_ADDR": "10.0.0.1:9090"},
			"https://auth.example.org", "https://auth.example.org/.well-known/jwks.json"},
		{"a trailing slash", map[string]string{"LECTERN_ISSUER": "https://auth.example.org/"},
			"https://auth.example.org", "https://auth.example.org/.well-known/jwks.json"},
		{"an issuer with a path", map[string]string{"LECTERN_ISSUER": "https://example.org/auth/"},
			"https://example.org/auth", "https://example.org/auth/.well-known/jwks.json"},
		{"another OAuth2 server", map[string]string{"LECTERN_ISSUER": "https://tenant.auth.example/", "LECTERN_JWKS_URL": "https://tenant.auth.example/keys"},
			"https://tenant.auth.example/", "https://tenant.auth.example/keys"},
	} {
		c, err := parseConfig(nil, env(tc.env))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.Issuer != tc.wantIssuer || c.JWKSURL != tc.wantURL {
			t.Errorf("%s: issuer %q, JWKS %q; want %q, %q", tc.name, c.Issuer, c.JWKSURL, tc.wantIssuer, tc.wantURL)
		}
	}

	// -h says so.
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, env(nil), &out); !errors.Is(err, cmdline.ErrDone) {
		t.Fatal(err)
	}
	help := out.String()
	for _, want := range []string{"the origins' LECTERN_ISSUER", "<issuer>/.well-known/jwks.json", "only the default issuer"} {
		if !strings.Contains(help, want) {
			t.Errorf("-h does not say %q:\n%s", want, help)
		}
	}
}
