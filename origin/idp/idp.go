package idp

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/scope"
	"golang.org/x/crypto/bcrypt"
)

// Defaults of Config.
const (
	DefaultTokenTTL    = 900 * time.Second   // spec: Authentication §4
	DefaultRotateAfter = 30 * 24 * time.Hour // signing key lifetime
	// DefaultPublishAhead is how long a new key is published before it
	// signs: twice shared/token's DefaultMaxAge, the longest a verifier
	// keeps a JWKS before refetching it (docs/decisions.md).
	DefaultPublishAhead = 2 * time.Hour
)

// codeTTL is how long an authorization code may wait for its exchange.
const codeTTL = 60 * time.Second

// Config configures an IdP.
type Config struct {
	Issuer      string // e.g. "http://127.0.0.1:9090": the iss claim and the metadata issuer
	Audience    string // the aud claim, e.g. "lectern-api"
	Store       store.Store
	Now         func() time.Time // the clock; time.Now when nil
	Logger      *slog.Logger     // discards when nil
	TokenTTL    time.Duration    // DefaultTokenTTL when zero
	RotateAfter time.Duration    // DefaultRotateAfter when zero
	Limits      Limits           // zero fields take their defaults
	// PublishAhead is how long a new key is in the JWKS before it signs;
	// DefaultPublishAhead when zero. It must be shorter than RotateAfter.
	PublishAhead time.Duration
	// SealKey (32 bytes, AES-256-GCM) seals the signing keys in the
	// store, so that a copy of the database alone cannot mint tokens.
	// Required; cmd/origin derives it from LECTERN_SECRET.
	SealKey []byte
	// AcceptedSealKey (32 bytes, or none), derived from the secret
	// accepted beside LECTERN_SECRET while it is rotated
	// (LECTERN_SECRET_ACCEPT), opens the keys sealed under it too; each
	// such key is sealed again with SealKey once opened. Nothing is
	// sealed with it.
	AcceptedSealKey []byte
	// OnToken, when set, is told of every request to the token endpoint:
	// its grant type (client_credentials, authorization_code, or "other"
	// for one missing or unsupported) and its result ("ok", the OAuth
	// error code answered, or server_error). The origin's metrics.
	OnToken func(grantType, result string)
	// BcryptSecrets keeps client secrets in bcrypt, as releases up to
	// 0.4.0 stored them and as the only form those releases check: new
	// clients (Config.CreateClient) get bcrypt hashes, and a bcrypt hash
	// is not replaced by the keyed form at a successful check. For a
	// rolling upgrade from 0.4.0 with its origins still on the same
	// database (docs/decisions/identity-provider.md, "Client secrets");
	// keyed hashes are checked either way.
	BcryptSecrets bool

	// compare checks a secret against a stored bcrypt hash; tests count
	// or hold the calls. bcrypt.CompareHashAndPassword when nil.
	compare func(hash, secret []byte) error
}

// IdP is the identity provider. Safe for concurrent use.
type IdP struct {
	issuer       string
	audience     string
	store        store.Store
	now          func() time.Time
	log          *slog.Logger
	ttl          time.Duration
	rotateAfter  time.Duration
	publishAhead time.Duration
	aead         cipher.AEAD // seals the signing keys at rest
	accepted     cipher.AEAD // opens those sealed under the accepted secret; nil: none
	limits       Limits
	onToken      func(grantType, result string) // Config.OnToken, never nil

	compare  func(hash, secret []byte) error
	gate     *gate     // bounds the concurrent bcrypt comparisons
	failures *failures // failed authentications per address, and per client id and address

	// Client secrets (secrets.go): hashed under secretKey; a hash under
	// acceptedSecretKey (LECTERN_SECRET_ACCEPT's, nil: none) is checked
	// and upgraded. dummyHash, a keyed hash of random bytes, is what an
	// unknown client id is checked against, so that it costs what a
	// wrong secret does; dummyMAC stands for a hash of no known form.
	// Under Config.BcryptSecrets, when a known id costs a bcrypt check,
	// an unknown id is checked against dummyBcrypt instead (nil
	// otherwise).
	secretKey, acceptedSecretKey *secretKey
	dummyHash                    []byte
	dummyMAC                     [32]byte
	dummyBcrypt                  []byte
	bcryptSecrets                bool

	mu       sync.Mutex
	keys     []signingKey          // newest first
	loadedAt time.Time             // when keys were read from the store
	opened   map[string]signingKey // unsealed keys by kid
}

// dummyBcrypt is a bcrypt hash, at bcrypt.DefaultCost (secretCost), of
// a random secret nobody kept: comparing a secret against it costs what
// checking a client stored in bcrypt costs, and never passes (an unknown
// id fails whatever the comparison says). A constant, because making one
// costs as much as a comparison (about a second under the race
// detector).
const dummyBcrypt = "$2a$10$mvpiwazMDdA/P8MWXYMxke2BjsZpd5EMKDMrLjTGSfxQPotn7JFJu"

// New returns an IdP over cfg.Store. It loads the signing keys, creating
// the first one on an empty store and the next one when the newest is due
// for a successor (keys.go: the key schedule). A key that does not open
// with cfg.SealKey nor cfg.AcceptedSealKey (the deployment secret
// changed, and the old one is not accepted) is an error: the
// provider does not start rather than sign with a new key that tokens and
// verifiers do not know.
func New(ctx context.Context, cfg Config) (*IdP, error) {
	p, err := newIdP(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := p.signingKey(ctx); err != nil {
		return nil, fmt.Errorf("idp: %w", err)
	}
	return p, nil
}

// gcm is AES-256-GCM under key.
func gcm(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("idp: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("idp: %w", err)
	}
	return aead, nil
}

// newIdP checks cfg and returns a provider that has read no key yet.
func newIdP(cfg Config) (*IdP, error) {
	if cfg.Issuer == "" || cfg.Audience == "" || cfg.Store == nil {
		return nil, errors.New("idp: Issuer, Audience and Store are required")
	}
	if len(cfg.SealKey) != 32 {
		return nil, errors.New("idp: SealKey of 32 bytes is required")
	}
	if n := len(cfg.AcceptedSealKey); n != 0 && n != 32 {
		return nil, errors.New("idp: AcceptedSealKey is not 32 bytes")
	}
	aead, err := gcm(cfg.SealKey)
	if err != nil {
		return nil, err
	}
	var accepted cipher.AEAD
	if len(cfg.AcceptedSealKey) > 0 {
		if accepted, err = gcm(cfg.AcceptedSealKey); err != nil {
			return nil, err
		}
	}
	p := &IdP{
		issuer:            strings.TrimSuffix(cfg.Issuer, "/"),
		audience:          cfg.Audience,
		store:             cfg.Store,
		now:               cfg.Now,
		log:               cfg.Logger,
		ttl:               cfg.TokenTTL,
		rotateAfter:       cfg.RotateAfter,
		publishAhead:      cfg.PublishAhead,
		aead:              aead,
		accepted:          accepted,
		opened:            map[string]signingKey{},
		limits:            cfg.Limits.withDefaults(),
		compare:           cfg.compare,
		onToken:           cfg.OnToken,
		secretKey:         newSecretKey(cfg.SealKey),
		acceptedSecretKey: newSecretKey(cfg.AcceptedSealKey),
		dummyMAC:          newDummyMAC(),
		bcryptSecrets:     cfg.BcryptSecrets,
	}
	p.dummyHash = p.secretKey.hash(rand.Text(), rand.Text())
	if p.bcryptSecrets {
		p.dummyBcrypt = []byte(dummyBcrypt)
		if secretCost != bcrypt.DefaultCost { // a test's lower cost
			if p.dummyBcrypt, err = bcrypt.GenerateFromPassword([]byte(rand.Text()), secretCost); err != nil {
				return nil, fmt.Errorf("idp: dummy hash: %w", err)
			}
		}
	}
	if p.compare == nil {
		p.compare = bcrypt.CompareHashAndPassword
	}
	if p.onToken == nil {
		p.onToken = func(string, string) {}
	}
	p.gate = newGate(p.limits.SecretChecks, p.limits.SecretWaiters, p.limits.SecretWait)
	p.failures = newFailures(p.limits)
	if p.now == nil {
		p.now = time.Now
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.ttl <= 0 {
		p.ttl = DefaultTokenTTL
	}
	if p.rotateAfter <= 0 {
		p.rotateAfter = DefaultRotateAfter
	}
	if p.publishAhead <= 0 {
		p.publishAhead = DefaultPublishAhead
	}
	if p.publishAhead >= p.rotateAfter {
		return nil, fmt.Errorf("idp: PublishAhead (%v) must be shorter than RotateAfter (%v)", p.publishAhead, p.rotateAfter)
	}
	return p, nil
}

// Handler serves the four endpoints of the provider.
func (p *IdP) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/oauth2/token", p.handleToken)
	mux.HandleFunc("/oauth2/authorize", p.handleAuthorize)
	mux.HandleFunc("/.well-known/oauth-authorization-server", p.handleMetadata)
	mux.HandleFunc("/.well-known/jwks.json", p.handleJWKS)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &oauthError{status: http.StatusNotFound, code: "not_found", desc: "no such endpoint"})
	})
	return mux
}

// metadata is the authorization server metadata document (RFC 8414 §2).
type metadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	JWKSURI                           string   `json:"jwks_uri"`
	ResponseTypesSupported            []string `json:"response_types_supported"`
	GrantTypesSupported               []string `json:"grant_types_supported"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported"`
	ScopesSupported                   []string `json:"scopes_supported"`
}

// discovery returns the provider's RFC 8414 metadata.
func (p *IdP) discovery() metadata {
	scopes := make([]string, len(scope.All))
	for i, s := range scope.All {
		scopes[i] = scope.Full(s)
	}
	return metadata{
		Issuer:                            p.issuer,
		AuthorizationEndpoint:             p.issuer + "/oauth2/authorize",
		TokenEndpoint:                     p.issuer + "/oauth2/token",
		JWKSURI:                           p.issuer + "/.well-known/jwks.json",
		ResponseTypesSupported:            []string{"code"},
		GrantTypesSupported:               []string{grantClientCredentials, grantAuthorizationCode},
		TokenEndpointAuthMethodsSupported: []string{"client_secret_basic", "client_secret_post"},
		CodeChallengeMethodsSupported:     []string{"S256"},
		ScopesSupported:                   scopes,
	}
}

func (p *IdP) handleMetadata(w http.ResponseWriter, r *http.Request) {
	if !allowGet(w, r) {
		return
	}
	body, err := json.Marshal(p.discovery())
	if err != nil {
		p.serverError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeJSON(w, http.StatusOK, body)
}

func (p *IdP) handleJWKS(w http.ResponseWriter, r *http.Request) {
	if !allowGet(w, r) {
		return
	}
	body, err := p.JWKS(r.Context())
	if err != nil {
		p.serverError(w, r, err)
		return
	}
	// Verifiers refetch on an unknown kid (shared/token Cache), so a
	// short max-age only bounds how long a retired key lingers in caches.
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeJSON(w, http.StatusOK, body)
}

// allowGet answers 405 to anything but GET and HEAD.
func allowGet(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	writeError(w, &oauthError{status: http.StatusMethodNotAllowed, code: errInvalidRequest, desc: "method not allowed"})
	return false
}

// OAuth error codes (RFC 6749 §4.1.2.1, §5.2).
const (
	errInvalidRequest          = "invalid_request"
	errInvalidClient           = "invalid_client"
	errInvalidGrant            = "invalid_grant"
	errUnauthorizedClient      = "unauthorized_client"
	errUnsupportedGrantType    = "unsupported_grant_type"
	errUnsupportedResponseType = "unsupported_response_type"
	errInvalidScope            = "invalid_scope"
	errServerError             = "server_error"
	errTemporarilyUnavailable  = "temporarily_unavailable"
)

// oauthError is an error answered with an RFC 6749 §5.2 body.
type oauthError struct {
	status     int
	code       string
	desc       string
	retryAfter int // seconds; sent as Retry-After when positive
}

func (e *oauthError) Error() string { return e.code + ": " + e.desc }

func badRequest(code, desc string) *oauthError {
	return &oauthError{status: http.StatusBadRequest, code: code, desc: desc}
}

// writeError writes e as {"error", "error_description"}. invalid_client
// answers 401 with a Basic challenge (RFC 6749 §5.2).
func writeError(w http.ResponseWriter, e *oauthError) {
	if e.code == errInvalidClient {
		w.Header().Set("WWW-Authenticate", `Basic realm="lectern"`)
	}
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	body, _ := json.Marshal(struct {
		Error       string `json:"error"`
		Description string `json:"error_description,omitempty"`
	}{e.code, e.desc})
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, e.status, body)
}

// serverError logs the cause and answers 500 server_error without it.
func (p *IdP) serverError(w http.ResponseWriter, r *http.Request, err error) {
	p.log.ErrorContext(r.Context(), "idp", "path", r.URL.Path, "err", err)
	writeError(w, &oauthError{status: http.StatusInternalServerError, code: errServerError, desc: "internal error"})
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}
