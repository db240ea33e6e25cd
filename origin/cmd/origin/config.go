package main

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"strings"
	"time"

	"github.com/lectern-api/lectern/origin/httpsrv"
)

// config is the operator contract of DESIGN.md: environment variables,
// mirrored by flags.
type config struct {
	OriginAddr string // LECTERN_ORIGIN_ADDR
	IdPAddr    string // LECTERN_IDP_ADDR
	AdminAddr  string // LECTERN_ADMIN_ADDR
	AdminToken string // LECTERN_ADMIN_TOKEN; generated and printed when unset
	DB         string // LECTERN_DB: a SQLite path or a postgres:// URL
	Corpus     string // LECTERN_CORPUS: generated when missing
	TestClock  bool   // LECTERN_TEST_CLOCK=1

	// Token verification. By default the dev identity provider's; point
	// them at any OAuth2 server with a JWKS endpoint to replace it.
	Issuer   string // LECTERN_ISSUER: default http://<IdPAddr>
	JWKSURL  string // LECTERN_JWKS_URL: default <issuer>/.well-known/jwks.json
	Audience string // LECTERN_AUDIENCE: default lectern-api

	// Secret keys the forensic tags, cursors and the edge's gate calls;
	// every origin (and edge) of one deployment needs the same. When unset
	// it is kept in var/secret, created on first start (dev only).
	Secret string // LECTERN_SECRET

	PublicURL  string // LECTERN_PUBLIC_URL: the API's base URL; default http://<OriginAddr>
	LicenseURL string // LECTERN_LICENSE_URL

	// Limits bound what a client may take of each listener; not from the
	// environment: zero fields are httpsrv.Default's, tests set short ones.
	Limits httpsrv.Limits
	// CorpusSync is how often the origin reads the deployment's corpus
	// record (corpus.go); not from the environment: zero is corpusSync,
	// tests set a long one to hold an origin on its version.
	CorpusSync time.Duration

	generatedToken bool
}

type setting struct {
	env, flag, def, usage string
	dst                   *string
}

func parseConfig(args []string, getenv func(string) string) (config, error) {
	var c config
	var testClock string
	settings := []setting{
		{"LECTERN_ORIGIN_ADDR", "origin-addr", "127.0.0.1:8080", "origin address (public API, direct mode)", &c.OriginAddr},
		{"LECTERN_IDP_ADDR", "idp-addr", "127.0.0.1:9090", "identity provider address", &c.IdPAddr},
		{"LECTERN_ADMIN_ADDR", "admin-addr", "127.0.0.1:8081", "admin API address", &c.AdminAddr},
		{"LECTERN_ADMIN_TOKEN", "admin-token", "", "admin API bearer token (generated when empty)", &c.AdminToken},
		{"LECTERN_DB", "db", "var/lectern.db", "SQLite path or postgres:// URL", &c.DB},
		{"LECTERN_CORPUS", "corpus", "var/corpus", "corpus directory (generated when missing)", &c.Corpus},
		{"LECTERN_TEST_CLOCK", "test-clock", "", "1 enables the admin test clock; never in production", &testClock},
		{"LECTERN_ISSUER", "issuer", "", "token issuer (default: the dev identity provider)", &c.Issuer},
		{"LECTERN_JWKS_URL", "jwks-url", "", "JWKS URL of the issuer (default: <issuer>/.well-known/jwks.json)", &c.JWKSURL},
		{"LECTERN_AUDIENCE", "audience", "lectern-api", "token audience", &c.Audience},
		{"LECTERN_SECRET", "secret", "", "deployment secret, at least 32 characters (default: var/secret, created)", &c.Secret},
		{"LECTERN_PUBLIC_URL", "public-url", "", "the API's public base URL (default: http://<origin-addr>)", &c.PublicURL},
		{"LECTERN_LICENSE_URL", "license-url", "https://lectern.example/licence", "link to the licence terms", &c.LicenseURL},
	}
	fs := flag.NewFlagSet("origin", flag.ContinueOnError)
	for _, s := range settings {
		def := s.def
		if v := getenv(s.env); v != "" {
			def = v
		}
		fs.StringVar(s.dst, s.flag, def, s.usage+" ($"+s.env+")")
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.TestClock = testClock == "1"
	if c.Issuer == "" {
		c.Issuer = "http://" + c.IdPAddr
	}
	if c.JWKSURL == "" {
		c.JWKSURL = strings.TrimSuffix(c.Issuer, "/") + "/.well-known/jwks.json"
	}
	if c.AdminToken == "" {
		var b [24]byte
		rand.Read(b[:])
		c.AdminToken = hex.EncodeToString(b[:])
		c.generatedToken = true
	}
	return c, nil
}
