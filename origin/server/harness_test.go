package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/lectern-api/lectern/origin/auth"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/forensic"
	"github.com/lectern-api/lectern/origin/idp"
	"github.com/lectern-api/lectern/origin/idp/idptest"
	"github.com/lectern-api/lectern/origin/lease"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/sqlitemeter"
	"github.com/lectern-api/lectern/origin/progress"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/store/sqlitestore"
	"github.com/lectern-api/lectern/shared/edgesig"
	shid "github.com/lectern-api/lectern/shared/id"
	"github.com/lectern-api/lectern/shared/link"
	"github.com/lectern-api/lectern/shared/scope"
)

// harness is the origin wired as origin/cmd/origin wires it (SQLite store
// and meters, the dev identity provider, token authentication) over real
// listeners, serving a generated corpus that a test can swap as a reload
// would.
type harness struct {
	t      testing.TB
	api    string // the API's base URL
	issuer string
	store  store.Store
	meters meter.Store
	// progress is the progress store (harness.progress stays the store
	// itself when harnessOptions.progress wraps it).
	progress progress.Store
	srv      *Server
	content  *atomic.Pointer[Content] // shared by the copies subtests get
	client   *http.Client             // no transparent gzip: the test sees the wire
	now      func() time.Time         // the server's clock
	// leases and leaseStore are the lease manager and its store, with
	// harnessOptions.leases (nil without).
	leases     *lease.Manager
	leaseStore meter.LeaseStore
}

// testEdgeKey is the edge key of every harness: tests sign the edge's
// calls with it.
var testEdgeKeys = edgesig.KeysOf([]byte("test-harness-edge-key-0123456789abcd"))

// buildContent generates the corpus of o into dir and builds it.
func buildContent(t testing.TB, dir string, o gen.Options) *Content {
	t.Helper()
	if _, err := gen.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	return loadContent(t, dir)
}

// loadContent loads the corpus in dir and builds it.
func loadContent(t testing.TB, dir string) *Content {
	t.Helper()
	c, err := corpus.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := Build(c)
	if err != nil {
		t.Fatal(err)
	}
	return ct
}

var (
	smallContentMu    sync.Mutex
	smallContentCache = map[string]*Content{}
)

// smallContent is the small corpus of seed 1 generated with date, built.
// A Content is read-only, so one is shared by every test of the process;
// its files are removed once loaded.
func smallContent(t testing.TB, date string) *Content {
	t.Helper()
	smallContentMu.Lock()
	defer smallContentMu.Unlock()
	if ct := smallContentCache[date]; ct != nil {
		return ct
	}
	dir, err := os.MkdirTemp("", "lectern-small-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ct := buildContent(t, dir, gen.Options{Seed: 1, Date: date, Small: true})
	smallContentCache[date] = ct
	return ct
}

// newHarness serves the small corpus.
func newHarness(t testing.TB) *harness {
	t.Helper()
	return newHarnessWith(t, smallContent(t, ""))
}

func newHarnessWith(t testing.TB, ct *Content) *harness {
	t.Helper()
	return newHarnessOpts(t, ct, harnessOptions{})
}

// harnessOptions adjust the wiring of newHarnessOpts.
type harnessOptions struct {
	// meters, when set, wraps the meters the server bills through
	// (harness.meters stays the store itself).
	meters func(meter.Store) meter.Store
	logger *slog.Logger     // the server's (nil: none)
	now    func() time.Time // the server's clock (nil: time.Now)
	// urlKeys sign the download links, canaryKey the export canaries;
	// inlineCeiling bounds an inline export (0: the default).
	urlKeys       link.Keys
	canaryKey     []byte
	inlineCeiling int64
	// progress, when set, wraps the progress store the server uses.
	progress func(progress.Store) progress.Store
	// leases, when set, has the server grant leases on the meters' own
	// lease store (its Store, EdgeKeys and Now are the harness's).
	leases *lease.Config
	// originHosts are the server's names for the edge's signatures.
	originHosts []string
	// started is the server's Config.Started (zero: when New runs).
	started time.Time
	// acceptV2 is the server's EdgeAcceptV2.
	acceptV2 bool
}

func newHarnessOpts(t testing.TB, ct *Content, opts harnessOptions) *harness {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	h := &harness{t: t, content: new(atomic.Pointer[Content]), client: &http.Client{Transport: tr}, now: opts.now}
	if h.now == nil {
		h.now = time.Now
	}
	h.content.Store(ct)
	st, ms := openStores(t, dir)
	h.store, h.meters, h.progress = st, ms, st

	idpSrv := httptest.NewUnstartedServer(nil)
	h.issuer = "http://" + idpSrv.Listener.Addr().String()
	provider, err := idp.New(ctx, idp.Config{Issuer: h.issuer, Audience: "lectern-api", Store: st, Now: time.Now,
		SealKey: []byte("test-harness-idp-seal-key-012345")})
	if err != nil {
		t.Fatal(err)
	}
	idpSrv.Config.Handler = provider.Handler()
	idpSrv.Start()
	t.Cleanup(idpSrv.Close)

	apiSrv := httptest.NewUnstartedServer(nil)
	base := "http://" + apiSrv.Listener.Addr().String()
	var billed meter.Store = ms
	urlKeys := opts.urlKeys
	if urlKeys.IsZero() {
		urlKeys = link.Derived([]byte("test-harness-url-secret-0123456789ab"))
	}
	if opts.leases != nil {
		h.leaseStore = ms
		cfg := *opts.leases
		cfg.Store, cfg.EdgeKeys, cfg.Now = ms, testEdgeKeys, h.now
		h.leases = lease.New(cfg)
	}
	if opts.meters != nil {
		billed = opts.meters(ms)
	}
	progressStore := h.progress
	if opts.progress != nil {
		progressStore = opts.progress(progressStore)
	}
	h.srv = New(Config{
		Store:                st,
		Auth:                 auth.New(auth.Config{Issuer: h.issuer, Audience: "lectern-api", JWKSURL: h.issuer + "/.well-known/jwks.json", Now: time.Now}),
		Content:              h.content.Load,
		Now:                  h.now,
		Resource:             base,
		AuthorizationServers: []string{h.issuer},
		ResourceMetadataURL:  base + "/.well-known/oauth-protected-resource",
		LicenseURL:           "https://lectern.example/licence",
		Meters:               billed,
		Logger:               opts.logger,
		TagKey:               []byte("test-harness-tag-key-0123456789abcdef"),
		CursorKey:            []byte("test-harness-cursor-key-0123456789ab"),
		ChangesKey:           []byte("test-harness-changes-key-0123456789a"),
		URLKeys:              urlKeys,
		CanaryKey:            opts.canaryKey,
		InlineCeiling:        opts.inlineCeiling,
		Progress:             progressStore,
		EdgeKeys:             testEdgeKeys,
		OriginHosts:          opts.originHosts,
		EdgeAcceptV2:         opts.acceptV2,
		Started:              opts.started,
		Leases:               h.leases,
	})
	apiSrv.Config.Handler = h.srv
	apiSrv.Start()
	t.Cleanup(apiSrv.Close)
	h.api = base
	return h
}

// openStores opens a SQLite store and its meters in dir, closed when the
// test ends.
func openStores(t testing.TB, dir string) (*sqlitestore.Store, *sqlitemeter.Store) {
	t.Helper()
	ctx := context.Background()
	db := filepath.Join(dir, "lectern.db")
	st, err := sqlitestore.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ms, err := sqlitemeter.New(ctx, db, sqlitemeter.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	return st, ms
}

// corpus is the corpus being served.
func (h *harness) corpus() *corpus.Corpus { return h.content.Load().Corpus }

// org creates an organisation with grants and returns a content.read
// token of its client.
func (h *harness) org(orgID string, grants ...string) string {
	h.t.Helper()
	h.createOrg(orgID, grants, nil)
	return h.token(orgID, scope.ContentRead)
}

// scopedOrg creates an organisation granted every tier, with a test-prep
// item allowance (nil: no cap), and returns a token of its client with
// scopes.
func (h *harness) scopedOrg(orgID string, items *int64, scopes ...string) string {
	h.t.Helper()
	h.createOrg(orgID, slices.Clone(shid.Tiers), items)
	return h.token(orgID, scopes...)
}

func (h *harness) createOrg(orgID string, grants []string, items *int64) {
	h.t.Helper()
	o := licence.NewOrg(time.Now())
	o.ID, o.Name, o.Grants = orgID, "Org "+orgID, grants
	o.Quota.TestprepItems = items
	if err := h.store.CreateOrg(context.Background(), o); err != nil {
		h.t.Fatal(err)
	}
}

// token creates the organisation's client with scopes and returns a token
// the identity provider issues it.
func (h *harness) token(orgID string, scopes ...string) string {
	h.t.Helper()
	ctx := context.Background()
	// The client is stored directly with bcrypt's minimum cost: the
	// identity provider's default cost takes seconds under -race.
	id, secret := "lc_test_"+orgID, "secret-of-"+orgID
	hash, err := bcrypt.GenerateFromPassword([]byte(secret), bcrypt.MinCost)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.store.CreateClient(ctx, &store.Client{ID: id, OrgID: orgID, SecretHash: hash, Scopes: scopes,
		GrantTypes: []string{"client_credentials"}, CreatedAt: time.Now()}); err != nil {
		h.t.Fatal(err)
	}
	full := make([]string, len(scopes))
	for i, s := range scopes {
		full[i] = scope.Full(s)
	}
	cc := clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: h.issuer + "/oauth2/token", Scopes: full}
	tok, err := cc.Token(ctx)
	if err != nil {
		h.t.Fatalf("token: %v", err)
	}
	return tok.AccessToken
}

// learnerRedirect is the redirect URI of the harness's learner apps.
const learnerRedirect = "https://app.test/callback"

// learnerApps numbers the learner apps the harnesses register.
var learnerApps atomic.Int64

// learnerToken registers a learner app (an authorization_code client) of
// the organisation with scopes and returns the token the identity
// provider issues it for learner: the authorization request with PKCE
// S256 and login_hint (the dev provider approves at once), then the
// code's exchange.
func (h *harness) learnerToken(orgID, learner string, scopes ...string) string {
	h.t.Helper()
	ctx := context.Background()
	id, secret := fmt.Sprintf("lc_app_%s_%d", orgID, learnerApps.Add(1)), "secret-of-app-"+orgID
	hash, err := bcrypt.GenerateFromPassword([]byte(secret), bcrypt.MinCost)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.store.CreateClient(ctx, &store.Client{ID: id, OrgID: orgID, SecretHash: hash, Scopes: scopes,
		GrantTypes: []string{"authorization_code"}, RedirectURIs: []string{learnerRedirect}, CreatedAt: time.Now()}); err != nil {
		h.t.Fatal(err)
	}
	tok, err := idptest.LearnerToken(ctx, idptest.LearnerApp(h.issuer, id, secret, learnerRedirect, scopes...), learner)
	if err != nil {
		h.t.Fatal(err)
	}
	return tok.AccessToken
}

// usage is what the meters hold for an organisation now.
type usage struct {
	meter.Counters
	distinct int // distinct lessons read today (the enumeration alarm)
}

func (h *harness) usage(orgID string) usage {
	h.t.Helper()
	o, err := h.store.GetOrg(context.Background(), orgID)
	if err != nil {
		h.t.Fatal(err)
	}
	u, err := h.meters.Usage(context.Background(), meter.Key(o), h.now())
	if err != nil {
		h.t.Fatal(err)
	}
	return usage{u.Counters, u.LessonsRead}
}

// calls is the organisation's monthly call meter.
func (h *harness) calls(orgID string) int64 {
	h.t.Helper()
	u := h.usage(orgID)
	return u.Get(meter.MonthCalls)
}

// billed checks the meters moved by exactly calls and lesson reads since
// before.
func (h *harness) billed(orgID string, before usage, calls, reads int64) usage {
	h.t.Helper()
	now := h.usage(orgID)
	if got := now.Get(meter.MonthCalls) - before.Get(meter.MonthCalls); got != calls {
		h.t.Errorf("calls billed: got %d, want %d", got, calls)
	}
	if got := now.Get(meter.HourLessonReads) - before.Get(meter.HourLessonReads); got != reads {
		h.t.Errorf("lesson reads billed: got %d, want %d", got, reads)
	}
	return now
}

// resp is an answer as sent on the wire.
type resp struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request with tok (none if empty); hdr holds header
// name/value pairs. Nothing asks for compression unless hdr sets
// Accept-Encoding, so body is the bytes on the wire.
func (h *harness) do(method, path, tok string, body []byte, hdr ...string) resp {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, h.api+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return h.send(req)
}

// send sends req and reads its whole answer.
func (h *harness) send(req *http.Request) resp {
	h.t.Helper()
	res, err := h.client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// get sends a GET with tok and header pairs.
func (h *harness) get(path, tok string, hdr ...string) resp {
	h.t.Helper()
	return h.do("GET", path, tok, nil, hdr...)
}

// ok gets path, wants 200 with an identity JSON body, and decodes it.
func (h *harness) ok(path, tok string) map[string]any {
	h.t.Helper()
	r := h.get(path, tok)
	if r.status != 200 {
		h.t.Fatalf("GET %s: got %d %s, want 200", path, r.status, r.body)
	}
	return jsonObject(h.t, r.body)
}

// fails gets path and wants the error status and code.
func (h *harness) fails(path, tok string, status int, code string) apiError {
	h.t.Helper()
	r := h.get(path, tok)
	var e struct{ Error apiError }
	if err := json.Unmarshal(r.body, &e); err != nil || r.status != status || e.Error.Code != code {
		h.t.Fatalf("GET %s: got %d %s, want %d %s", path, r.status, r.body, status, code)
	}
	if e.Error.RequestID == "" || e.Error.RequestID != r.header.Get("X-Request-Id") {
		h.t.Errorf("GET %s: requestId %q, X-Request-Id %q", path, e.Error.RequestID, r.header.Get("X-Request-Id"))
	}
	return e.Error
}

// jsonObject decodes b, a JSON object, keeping numbers as json.Number.
func jsonObject(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("not a JSON object: %v: %.300s", err, b)
	}
	return m
}

// apiError is the error member of an error body.
type apiError struct {
	Code          string   `json:"code"`
	Message       string   `json:"message"`
	RequestID     string   `json:"requestId"`
	Parameter     string   `json:"parameter"`
	Allowed       []string `json:"allowed"`
	Received      any      `json:"received"`
	Min           *int64   `json:"min"`
	Max           *int64   `json:"max"`
	Tiers         []string `json:"tiers"`
	Grant         string   `json:"grant"`
	Scope         string   `json:"scope"`
	QuotaResetsAt string   `json:"quotaResetsAt"`
	RetryAfter    *int64   `json:"retryAfterSeconds"`
}

// wantStatus checks r has status.
func wantStatus(t testing.TB, r resp, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
}

// errorBody decodes r's error member and checks its requestId is the
// X-Request-Id header.
func (r resp) errorBody(t testing.TB) apiError {
	t.Helper()
	var e struct{ Error apiError }
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("status %d: not the error body: %s", r.status, r.body)
	}
	if e.Error.RequestID == "" || e.Error.RequestID != r.header.Get("X-Request-Id") {
		t.Errorf("requestId %q, X-Request-Id %q", e.Error.RequestID, r.header.Get("X-Request-Id"))
	}
	return e.Error
}

// wantError checks r is the error status with code, and returns its body.
func (r resp) wantError(t testing.TB, status int, code string) apiError {
	t.Helper()
	e := r.errorBody(t)
	if r.status != status || e.Code != code {
		t.Fatalf("got %d %s, want %d %s: %s", r.status, e.Code, status, code, r.body)
	}
	return e
}

// pageOf is the list envelope with rows of T.
type pageOf[T any] struct {
	Items          []T                `json:"items"`
	Total          int                `json:"total"`
	PageNum        int                `json:"pageNum"`
	TotalPages     int                `json:"totalPages"`
	HasMore        bool               `json:"hasMore"`
	NextCursor     *string            `json:"nextCursor"`
	ContentVersion string             `json:"contentVersion"`
	License        *forensic.Envelope `json:"_license"`
}

// strictPage decodes r's body as a page, refusing unknown members.
func strictPage[T any](t testing.TB, r resp) pageOf[T] {
	t.Helper()
	var p pageOf[T]
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("page: %v: %s", err, r.body)
	}
	return p
}

var (
	fullOnce sync.Once
	full     *Content
)

// fullContent is the deployed-scale corpus of seed 1, generated once per
// test binary (it lives in memory; its directory may go).
func fullContent(t testing.TB) *Content {
	t.Helper()
	fullOnce.Do(func() { full = buildContent(t, filepath.Join(t.TempDir(), "full"), gen.Options{Seed: 1}) })
	if full == nil {
		t.Fatal("the full corpus failed to build")
	}
	return full
}

// sharedSlug is a slug of c in several tiers and those tiers.
func sharedSlug(t testing.TB, c *corpus.Corpus) (string, []string) {
	t.Helper()
	for _, sub := range c.Subjects {
		if ts := c.SlugTiers(sub.Slug); len(ts) > 1 {
			return sub.Slug, ts
		}
	}
	t.Fatal("the corpus has no slug in several tiers")
	return "", nil
}
