package main

import "testing"

// TestStartsWithoutURLKeys: LECTERN_URL_KEYS is not among what an origin
// on PostgreSQL refuses to start without (README, "several origins"):
// with the secret and the issuer its configuration is complete, and the
// links are signed with the key derived from the secret.
func TestStartsWithoutURLKeys(t *testing.T) {
	env := map[string]string{
		"LECTERN_DB":     "postgres://lectern@127.0.0.1:1/none?sslmode=disable", // never reached
		"LECTERN_SECRET": "a-test-secret-of-at-least-32-characters",
		"LECTERN_ISSUER": "https://auth.example",
	}
	cfg, err := parseConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	if cfg.URLKeys != "" {
		t.Errorf("URL keys %q; want none: the key derived from the secret", cfg.URLKeys)
	}
}
