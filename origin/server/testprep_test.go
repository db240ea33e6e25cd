package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/auth"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/idp"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/sqlitemeter"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/store/sqlitestore"
	shid "github.com/lectern-api/lectern/shared/id"
	"github.com/lectern-api/lectern/shared/scope"
	"github.com/lectern-api/lectern/tools/corpusgen/gen"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/oauth2/clientcredentials"
)

// prepHarness is the origin wired as origin/cmd/origin wires it — SQLite
// store and meters, the dev identity provider, token authentication —
// over real listeners, with a small generated corpus.
type prepHarness struct {
	t       *testing.T
	api     string // the API's base URL
	issuer  string
	store   store.Store
	meters  meter.Store
	content *atomic.Pointer[Content] // shared by the copies subtests get
	srv     *Server
}

// prepContent generates the small corpus of seed into dir and builds it.
func prepContent(t *testing.T, dir string, seed int64) *Content {
	t.Helper()
	if _, err := gen.Write(dir, gen.Options{Seed: seed, Small: true}); err != nil {
		t.Fatal(err)
	}
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

func newPrepHarness(t *testing.T) *prepHarness {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	h := &prepHarness{t: t, content: new(atomic.Pointer[Content])}
	h.content.Store(prepContent(t, filepath.Join(dir, "corpus"), 1))
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
	h.store, h.meters = st, ms

	idpSrv := httptest.NewUnstartedServer(nil)
	h.issuer = "http://" + idpSrv.Listener.Addr().String()
	provider, err := idp.New(ctx, idp.Config{Issuer: h.issuer, Audience: "lectern-api", Store: st, Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	idpSrv.Config.Handler = provider.Handler()
	idpSrv.Start()
	t.Cleanup(idpSrv.Close)

	apiSrv := httptest.NewUnstartedServer(nil)
	base := "http://" + apiSrv.Listener.Addr().String()
	h.srv = New(Config{
		Store:                st,
		Auth:                 auth.New(auth.Config{Issuer: h.issuer, Audience: "lectern-api", JWKSURL: h.issuer + "/.well-known/jwks.json", Now: time.Now}),
		Content:              h.content.Load,
		Now:                  time.Now,
		Resource:             base,
		AuthorizationServers: []string{h.issuer},
		ResourceMetadataURL:  base + "/.well-known/oauth-protected-resource",
		LicenseURL:           "https://lectern.example/licence",
		Meters:               ms,
		TagKey:               []byte("prep-harness-tag-key-0123456789abcdef"),
		CursorKey:            []byte("prep-harness-cursor-key-0123456789ab"),
	})
	apiSrv.Config.Handler = h.srv
	apiSrv.Start()
	t.Cleanup(apiSrv.Close)
	h.api = base
	return h
}

// org creates an organisation granted every tier, with a test-prep item
// allowance (nil: no cap), and returns a token of its client with scopes.
func (h *prepHarness) org(orgID string, items *int64, scopes ...string) string {
	h.t.Helper()
	ctx := context.Background()
	o := licence.NewOrg(time.Now())
	o.ID, o.Name, o.Grants = orgID, "Org "+orgID, slices.Clone(shid.Tiers)
	o.Quota.TestprepItems = items
	if err := h.store.CreateOrg(ctx, o); err != nil {
		h.t.Fatal(err)
	}
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

// usage reads an organisation's meters now.
func (h *prepHarness) usage(orgID string) meter.Counters {
	h.t.Helper()
	u, _, err := h.meters.Usage(context.Background(), orgID, time.Now(), h.content.Load().ContentVersion)
	if err != nil {
		h.t.Fatal(err)
	}
	return u
}

type prepResp struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request; hdr holds header name/value pairs. The transport
// is asked for no compression unless hdr sets Accept-Encoding, so body is
// the bytes on the wire.
func (h *prepHarness) do(method, path, tok string, body []byte, hdr ...string) prepResp {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, h.api+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Accept-Encoding", "identity")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return prepResp{status: resp.StatusCode, header: resp.Header, body: b}
}

func (h *prepHarness) get(path, tok string, hdr ...string) prepResp {
	h.t.Helper()
	return h.do("GET", path, tok, nil, hdr...)
}

// prepError is the error body's members these tests read.
type prepError struct {
	Code          string   `json:"code"`
	Parameter     string   `json:"parameter"`
	Allowed       []string `json:"allowed"`
	Received      any      `json:"received"`
	Scope         string   `json:"scope"`
	QuotaResetsAt string   `json:"quotaResetsAt"`
	RequestID     string   `json:"requestId"`
}

func (r prepResp) err(t *testing.T) prepError {
	t.Helper()
	var e struct{ Error prepError }
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("status %d: not the error body: %s", r.status, r.body)
	}
	if e.Error.RequestID == "" || e.Error.RequestID != r.header.Get("X-Request-Id") {
		t.Errorf("requestId %q, X-Request-Id %q", e.Error.RequestID, r.header.Get("X-Request-Id"))
	}
	return e.Error
}

func prepWant(t *testing.T, r prepResp, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
}

// TestTestprep runs the test-prep scenarios on one harness (each with its
// own organisations): starting the identity provider costs a bcrypt hash
// at the default cost.
func TestTestprep(t *testing.T) {
	h := newPrepHarness(t)
	for _, c := range []struct {
		name string
		fn   func(*testing.T, *prepHarness)
	}{
		{"catalog", prepCatalog},
		{"refusals", prepItemsRefusals},
		{"walk", prepItemsWalk},
		{"allowance", prepItemsAllowance},
		{"shortened cursor", prepItemsShortenedCursor},
		{"etag", prepItemsETag},
	} {
		t.Run(c.name, func(t *testing.T) {
			hh := *h
			hh.t = t
			c.fn(t, &hh)
		})
	}
}

type prepPage struct {
	Items          []prepItem `json:"items"`
	Total          int        `json:"total"`
	PageNum        int        `json:"pageNum"`
	TotalPages     int        `json:"totalPages"`
	HasMore        bool       `json:"hasMore"`
	NextCursor     *string    `json:"nextCursor"`
	ContentVersion string     `json:"contentVersion"`
	License        *envelope  `json:"_license"`
}

func (r prepResp) page(t *testing.T) prepPage {
	t.Helper()
	var p prepPage
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("page: %v: %s", err, r.body)
	}
	return p
}

func prepPtr(n int64) *int64 { return &n }

func prepCatalog(t *testing.T, h *prepHarness) {
	tok := h.org("cat", nil, scope.ContentRead)
	c := h.content.Load()

	r := h.get("/v1/testprep", tok)
	prepWant(t, r, 200)
	var got struct {
		Items          []prepTest `json:"items"`
		Total          int        `json:"total"`
		HasMore        bool       `json:"hasMore"`
		NextCursor     *string    `json:"nextCursor"`
		ContentVersion string     `json:"contentVersion"`
		License        envelope   `json:"_license"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	specOrder := [][]string{{"digital-sat", "rw", "math"}, {"act", "english", "math", "reading", "science"},
		{"psat-nmsqt", "rw", "math"}, {"caaspp", "ela", "math", "science"}}
	if len(got.Items) != 4 || got.Total != 4 || got.HasMore || got.NextCursor != nil {
		t.Fatalf("catalog: %d tests, total %d, hasMore %v", len(got.Items), got.Total, got.HasMore)
	}
	for i, row := range got.Items {
		ids := []string{row.ID}
		sum := 0
		ct := c.Test(row.ID)
		for _, s := range row.Sections {
			ids = append(ids, s.ID)
			if n := len(ct.Section(s.ID).Items); s.ItemCount != n || n == 0 {
				t.Errorf("%s/%s: itemCount %d, corpus has %d", row.ID, s.ID, s.ItemCount, n)
			}
			if s.Label == "" || s.ItemsURL != "/v1/testprep/"+row.ID+"/items?section="+s.ID {
				t.Errorf("%s/%s: label %q itemsUrl %q", row.ID, s.ID, s.Label, s.ItemsURL)
			}
			sum += s.ItemCount
		}
		if !slices.Equal(ids, specOrder[i]) {
			t.Errorf("catalog row %d: %v, want %v", i, ids, specOrder[i])
		}
		if row.Name != ct.Name || row.ItemCount != sum {
			t.Errorf("%s: name %q itemCount %d (sections sum %d)", row.ID, row.Name, row.ItemCount, sum)
		}
	}
	if got.ContentVersion != c.ContentVersion || got.License.Lic == "" || got.License.Tag == "" {
		t.Errorf("contentVersion %q, _license %+v", got.ContentVersion, got.License)
	}
	tag := r.header.Get("ETag")
	if tag == "" || r.header.Get("X-Service-Content-Version") != c.ContentVersion {
		t.Fatalf("ETag %q, X-Service-Content-Version %q", tag, r.header.Get("X-Service-Content-Version"))
	}
	nm := h.get("/v1/testprep", tok, "If-None-Match", tag)
	prepWant(t, nm, 304)
	if len(nm.body) != 0 || nm.header.Get("ETag") != tag {
		t.Errorf("304: body %q, ETag %q", nm.body, nm.header.Get("ETag"))
	}
	u := h.usage("cat")
	if u.Get(meter.MonthCalls) != 2 || u.Get(meter.HourLessonReads) != 0 || u.Get(meter.MonthTestprepItems) != 0 {
		t.Errorf("meters: calls %d, lesson reads %d, items %d; want 2, 0, 0",
			u.Get(meter.MonthCalls), u.Get(meter.HourLessonReads), u.Get(meter.MonthTestprepItems))
	}
	// The catalog takes no parameters.
	prepWant(t, h.get("/v1/testprep?limit=5", tok), 400)
}

func prepItemsRefusals(t *testing.T, h *prepHarness) {
	tok := h.org("ref", nil, scope.ContentRead, scope.TestprepRead)
	reader := h.org("reader", nil, scope.ContentRead)

	r := h.get("/v1/testprep/gre/items", tok)
	prepWant(t, r, 404)
	if e := r.err(t); e.Code != "UNKNOWN_TEST" || e.Parameter != "test" || e.Received != "gre" ||
		!slices.Equal(e.Allowed, []string{"digital-sat", "act", "psat-nmsqt", "caaspp"}) {
		t.Errorf("unknown test: %+v", e)
	}
	r = h.get("/v1/testprep/digital-sat/items?section=science", tok)
	prepWant(t, r, 404)
	if e := r.err(t); e.Code != "UNKNOWN_SECTION" || e.Parameter != "section" || !slices.Equal(e.Allowed, []string{"rw", "math"}) {
		t.Errorf("unknown section: %+v", e)
	}
	r = h.get("/v1/testprep/caaspp/items?section=english", tok)
	prepWant(t, r, 404)
	if e := r.err(t); !slices.Equal(e.Allowed, []string{"ela", "math", "science"}) {
		t.Errorf("caaspp sections: %v", e.Allowed)
	}
	// Each 404 passed the gate: one call each, no items, no lesson read.
	u := h.usage("ref")
	if u.Get(meter.MonthCalls) != 3 || u.Get(meter.MonthTestprepItems) != 0 || u.Get(meter.HourLessonReads) != 0 {
		t.Errorf("after three 404s: calls %d items %d lesson reads %d", u.Get(meter.MonthCalls), u.Get(meter.MonthTestprepItems), u.Get(meter.HourLessonReads))
	}

	// Refusals before the gate are free.
	r = h.get("/v1/testprep/act/items?section=chemistry", tok)
	prepWant(t, r, 400)
	if e := r.err(t); e.Code != "BAD_REQUEST" || e.Parameter != "section" {
		t.Errorf("section not in the enum: %+v", e)
	}
	prepWant(t, h.get("/v1/testprep/act/items?limit=0", tok), 400)
	prepWant(t, h.get("/v1/testprep/act/items?cursor=garbage", tok), 400)
	r = h.get("/v1/testprep/act/items", reader)
	prepWant(t, r, 403)
	if e := r.err(t); e.Code != "insufficient_scope" || e.Scope != "service-api/testprep.read" {
		t.Errorf("content.read only: %+v", e)
	}
	prepWant(t, h.get("/v1/testprep/act/items", ""), 401)
	if u := h.usage("ref"); u.Get(meter.MonthCalls) != 3 {
		t.Errorf("free refusals billed: calls %d", u.Get(meter.MonthCalls))
	}
	if u := h.usage("reader"); u.Get(meter.MonthCalls) != 0 {
		t.Errorf("insufficient_scope billed: calls %d", u.Get(meter.MonthCalls))
	}
}

// walk follows nextCursor from path until hasMore is false.
func (h *prepHarness) walk(path, tok string) (items []prepItem, pages int) {
	h.t.Helper()
	next := path
	for {
		r := h.get(next, tok)
		prepWant(h.t, r, 200)
		p := r.page(h.t)
		items = append(items, p.Items...)
		pages++
		if !p.HasMore {
			if p.NextCursor != nil {
				h.t.Errorf("last page has nextCursor %q", *p.NextCursor)
			}
			return items, pages
		}
		if p.NextCursor == nil || pages > 100 {
			h.t.Fatalf("page %d: hasMore without nextCursor", pages)
		}
		sep := "?"
		if bytes.ContainsRune([]byte(path), '?') {
			sep = "&"
		}
		next = path + sep + "cursor=" + *p.NextCursor
	}
}

func prepItemsWalk(t *testing.T, h *prepHarness) {
	tok := h.org("walk", nil, scope.TestprepRead)
	c := h.content.Load()
	act := c.Test("act")

	// One section: its items in file order.
	r := h.get("/v1/testprep/act/items?section=math&limit=100", tok)
	prepWant(t, r, 200)
	p := r.page(t)
	math := act.Section("math").Items
	if p.Total != len(math) || len(p.Items) != len(math) || p.HasMore || p.ContentVersion != c.ContentVersion || p.License == nil {
		t.Fatalf("section page: total %d, %d items, hasMore %v", p.Total, len(p.Items), p.HasMore)
	}
	for i, it := range p.Items {
		src := math[i]
		if it.ID != src.ID || it.Section != "math" || it.Domain != src.Domain || it.Difficulty != src.Difficulty ||
			it.Prompt != src.Prompt || !slices.Equal(it.Options, src.Options) || it.AnswerIndex != src.AnswerIndex ||
			it.Rationale != src.Rationale || !slices.Equal(it.OptionRationales, src.OptionRationales) || it.Passage != src.Passage {
			t.Fatalf("item %d: %+v, corpus %+v", i, it, *src)
		}
	}

	// Without section: every section of the test in catalog order, over
	// pages of 7.
	var all []*corpus.Item
	for _, s := range act.Sections {
		all = append(all, s.Items...)
	}
	before := h.usage("walk")
	items, pages := h.walk("/v1/testprep/act/items?limit=7", tok)
	if len(items) != len(all) {
		t.Fatalf("walk: %d items, want %d", len(items), len(all))
	}
	for i := range items {
		if items[i].ID != all[i].ID {
			t.Fatalf("walk item %d: %s, want %s", i, items[i].ID, all[i].ID)
		}
	}
	if wantPages := (len(all) + 6) / 7; pages != wantPages {
		t.Errorf("walk: %d pages, want %d", pages, wantPages)
	}
	after := h.usage("walk")
	if d := after.Get(meter.MonthTestprepItems) - before.Get(meter.MonthTestprepItems); d != int64(len(all)) {
		t.Errorf("walk billed %d items, returned %d", d, len(all))
	}
	if d := after.Get(meter.HourLessonReads) - before.Get(meter.HourLessonReads); d != int64(pages) {
		t.Errorf("walk billed %d lesson reads for %d pages", d, pages)
	}
	if d := after.Get(meter.MonthCalls) - before.Get(meter.MonthCalls); d != int64(pages) {
		t.Errorf("walk billed %d calls for %d pages", d, pages)
	}

	// Reading items carry a passage; some items carry per-option
	// rationales, one per option; absent members are left out.
	r = h.get("/v1/testprep/act/items?section=reading&limit=100", tok)
	prepWant(t, r, 200)
	var raw struct{ Items []map[string]json.RawMessage }
	json.Unmarshal(r.body, &raw)
	withRationales := 0
	for _, it := range raw.Items {
		if _, ok := it["passage"]; !ok {
			t.Errorf("reading item %s has no passage", it["id"])
		}
		if or, ok := it["optionRationales"]; ok {
			withRationales++
			var rs, opts []string
			json.Unmarshal(or, &rs)
			json.Unmarshal(it["options"], &opts)
			if len(rs) != len(opts) {
				t.Errorf("item %s: %d option rationales for %d options", it["id"], len(rs), len(opts))
			}
		}
	}
	if withRationales == 0 || withRationales == len(raw.Items) {
		t.Errorf("%d of %d items carry optionRationales; want some", withRationales, len(raw.Items))
	}
}

func prepItemsAllowance(t *testing.T, h *prepHarness) {
	tok := h.org("quota", prepPtr(25), scope.TestprepRead)
	const first = "/v1/testprep/digital-sat/items?section=rw&limit=10"

	items := func() int64 { u := h.usage("quota"); return u.Get(meter.MonthTestprepItems) }
	r := h.get(first, tok)
	prepWant(t, r, 200)
	full := r.header.Get("ETag")
	p := r.page(t)
	if len(p.Items) != 10 || items() != 10 || !p.HasMore {
		t.Fatalf("first page: %d items, %d billed", len(p.Items), items())
	}
	if r.header.Get("RateLimit") == "" {
		t.Errorf("no RateLimit header on a page under an item allowance")
	}

	// An unchanged page answers 304: one call, no items, no lesson read.
	u0 := h.usage("quota")
	nm := h.get(first, tok, "If-None-Match", full)
	prepWant(t, nm, 304)
	u1 := h.usage("quota")
	if d := u1.Get(meter.MonthCalls) - u0.Get(meter.MonthCalls); d != 1 {
		t.Errorf("304 billed %d calls", d)
	}
	if u1.Get(meter.MonthTestprepItems) != u0.Get(meter.MonthTestprepItems) || u1.Get(meter.HourLessonReads) != u0.Get(meter.HourLessonReads) {
		t.Errorf("304 billed items or a lesson read: %v -> %v", u0, u1)
	}

	r = h.get(first+"&cursor="+*p.NextCursor, tok)
	prepWant(t, r, 200)
	if n := len(r.page(t).Items); n != 10 || items() != 20 {
		t.Fatalf("second page: %d items, %d billed", n, items())
	}

	// 5 left: the same first query is shortened to 5, with another ETag,
	// so the full page's validator no longer matches.
	r = h.get(first, tok, "If-None-Match", full)
	prepWant(t, r, 200)
	short := r.header.Get("ETag")
	sp := r.page(t)
	if len(sp.Items) != 5 || items() != 25 {
		t.Fatalf("shortened page: %d items, %d billed; want 5, 25", len(sp.Items), items())
	}
	if short == "" || short == full {
		t.Errorf("shortened page ETag %q, full page %q: want different", short, full)
	}
	if !sp.HasMore || sp.NextCursor == nil || sp.Total != 20 {
		t.Fatalf("shortened page: hasMore %v total %d", sp.HasMore, sp.Total)
	}

	// Nothing left: 429 QUOTA_EXCEEDED, not a 304 and not an empty page.
	for _, c := range []struct {
		name string
		r    prepResp
	}{
		{"next page", h.get(first+"&cursor="+*sp.NextCursor, tok)},
		{"revalidation", h.get(first, tok, "If-None-Match", short)},
		{"If-None-Match *", h.get(first, tok, "If-None-Match", "*")},
	} {
		if c.r.status != 429 {
			t.Errorf("%s: status %d, want 429", c.name, c.r.status)
			continue
		}
		if e := c.r.err(t); e.Code != "QUOTA_EXCEEDED" || e.QuotaResetsAt == "" || c.r.header.Get("Retry-After") == "" {
			t.Errorf("%s: %+v, Retry-After %q", c.name, e, c.r.header.Get("Retry-After"))
		}
	}
	if items() != 25 {
		t.Errorf("billed %d items after refusals, want 25", items())
	}
}

// A shortened page's cursor continues after the items actually returned.
func prepItemsShortenedCursor(t *testing.T, h *prepHarness) {
	tok := h.org("short", prepPtr(13), scope.TestprepRead)
	const path = "/v1/testprep/act/items?section=science&limit=10"
	src := h.content.Load().Test("act").Section("science").Items

	r := h.get(path, tok)
	prepWant(t, r, 200)
	p := r.page(t)
	r = h.get(path+"&cursor="+*p.NextCursor, tok)
	prepWant(t, r, 200)
	p = r.page(t)
	if len(p.Items) != 3 || p.Items[0].ID != src[10].ID || p.Items[2].ID != src[12].ID {
		t.Fatalf("shortened second page: %d items from %s", len(p.Items), p.Items[0].ID)
	}
	if u := h.usage("short"); u.Get(meter.MonthTestprepItems) != 13 {
		t.Errorf("billed %d items, returned 13", u.Get(meter.MonthTestprepItems))
	}
	// Lift the cap: the walk resumes at item 14.
	if _, err := h.store.UpdateOrg(context.Background(), "short", func(o *store.Org) error {
		o.Quota.TestprepItems = nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r = h.get(path+"&cursor="+*p.NextCursor, tok)
	prepWant(t, r, 200)
	p = r.page(t)
	if len(p.Items) != 7 || p.Items[0].ID != src[13].ID || p.HasMore {
		t.Fatalf("after the cap: %d items from %s, hasMore %v", len(p.Items), p.Items[0].ID, p.HasMore)
	}
	if p.PageNum < 1 || p.TotalPages != 2 || p.Total != len(src) {
		t.Errorf("pageNum %d totalPages %d total %d", p.PageNum, p.TotalPages, p.Total)
	}
}

// The page an ETag describes has the size a fresh request would get.
func prepItemsETag(t *testing.T, h *prepHarness) {
	tok := h.org("tags", nil, scope.TestprepRead)
	get := func(q string) string {
		r := h.get("/v1/testprep/act/items"+q, tok)
		prepWant(t, r, 200)
		return r.header.Get("ETag")
	}
	a, b, c := get(""), get("?limit=25"), get("?section=math")
	if a != b {
		t.Errorf("default limit and limit=25: %s, %s", a, b)
	}
	if a == c {
		t.Errorf("section filter did not move the ETag")
	}
	if get("?limit=24") == a {
		t.Errorf("limit did not move the ETag")
	}
	prepWant(t, h.get("/v1/testprep/act/items?limit="+strconv.Itoa(25), tok, "If-None-Match", a), 304)
}
