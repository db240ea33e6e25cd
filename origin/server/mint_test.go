package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/forensic"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
	shid "github.com/lectern-api/lectern/shared/id"
	"github.com/lectern-api/lectern/shared/link"
	"github.com/lectern-api/lectern/shared/scope"
)

// testClock is a server clock a test moves.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := new(testClock)
	c.ns.Store(time.Now().Truncate(time.Second).UnixNano())
	return c
}

func (c *testClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// newMintHarness is a harness on a test clock.
func newMintHarness(t *testing.T) (*harness, *testClock) {
	t.Helper()
	clock := newTestClock()
	return newHarnessOpts(t, smallContent(t, ""), harnessOptions{now: clock.now}), clock
}

// mintOrg creates an organisation with grants, changed by mod, and
// returns a token of its client with media.download and content.read.
func (h *harness) mintOrg(orgID string, grants []string, mod func(*store.Org)) string {
	h.t.Helper()
	o := licence.NewOrg(time.Now())
	o.ID, o.Name, o.Grants = orgID, "Org "+orgID, grants
	if mod != nil {
		mod(o)
	}
	if err := h.store.CreateOrg(context.Background(), o); err != nil {
		h.t.Fatal(err)
	}
	return h.token(orgID, scope.MediaDownload, scope.ContentRead)
}

// mintRequest posts a mint of ids (with expiresIn when it is not 0).
func (h *harness) mintRequest(tok string, ids []string, expiresIn int64, hdr ...string) resp {
	h.t.Helper()
	body := map[string]any{"mediaIds": ids}
	if expiresIn != 0 {
		body["expiresIn"] = expiresIn
	}
	b, err := json.Marshal(body)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.do("POST", "/v1/media/urls", tok, b, hdr...)
}

// mintAnswer is a mint's 200 body.
type mintAnswer struct {
	Items []struct {
		MediaID   string `json:"mediaId"`
		URL       string `json:"url"`
		ExpiresAt string `json:"expiresAt"`
	} `json:"items"`
	ExpiresIn      int64              `json:"expiresIn"`
	ContentVersion string             `json:"contentVersion"`
	License        *forensic.Envelope `json:"_license"`
}

// minted wants r to be a mint's 200 and decodes it, refusing unknown
// members.
func minted(t *testing.T, r resp) mintAnswer {
	t.Helper()
	wantStatus(t, r, 200)
	var a mintAnswer
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		t.Fatalf("mint answer: %v: %s", err, r.body)
	}
	return a
}

// assets are n media assets of the corpus from different lessons (of
// the granted tiers when tiers is not empty), in corpus order.
func assets(t *testing.T, c *corpus.Corpus, n int, tiers ...string) []*corpus.Media {
	t.Helper()
	var out []*corpus.Media
	for _, l := range c.Lessons {
		if len(out) == n {
			break
		}
		if len(l.Media) > 0 && (len(tiers) == 0 || slices.Contains(tiers, l.Subject.Tier)) {
			out = append(out, l.Media[len(out)%len(l.Media)])
		}
	}
	if len(out) < n {
		t.Fatalf("%d assets, want %d", len(out), n)
	}
	return out
}

func ids(ms ...*corpus.Media) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// ledger lists the organisation's ledger rows.
func (h *harness) ledger(orgID string) []meter.Row {
	h.t.Helper()
	o, err := h.store.GetOrg(context.Background(), orgID)
	if err != nil {
		h.t.Fatal(err)
	}
	rows, err := h.meters.Ledger(context.Background(), meter.Key(o), 0, 1000)
	if err != nil {
		h.t.Fatal(err)
	}
	return rows
}

// mintBilled checks the meters moved since before by exactly calls, mints
// and downloads, and by no lesson read.
func (h *harness) mintBilled(orgID string, before usage, calls, mints, downloads int64) usage {
	h.t.Helper()
	now := h.billed(orgID, before, calls, 0)
	for _, m := range []struct {
		meter meter.Meter
		want  int64
	}{{meter.HourMints, mints}, {meter.MonthDownloads, downloads}} {
		if got := now.Get(m.meter) - before.Get(m.meter); got != m.want {
			h.t.Errorf("%s billed: got %d, want %d", m.meter, got, m.want)
		}
	}
	return now
}

// linkOf parses a minted URL, which must be absolute on the API's base
// under /files/, and returns its path and query and its fields.
func (h *harness) linkOf(u string) (string, link.Link) {
	h.t.Helper()
	rest, ok := strings.CutPrefix(u, h.api+link.Prefix)
	if !ok {
		h.t.Fatalf("url %q is not under %s%s", u, h.api, link.Prefix)
	}
	p, err := url.Parse(link.Prefix + rest)
	if err != nil {
		h.t.Fatal(err)
	}
	l, err := link.Parse(p.EscapedPath(), p.RawQuery)
	if err != nil {
		h.t.Fatalf("url %q: %v", u, err)
	}
	return link.Prefix + rest, l
}

// spec: Route rules §4; issue #16, point 1: a clean batch is minted in
// request order, each URL downloads, the batch bills one call and a mint
// and a download per URL, and writes a ledger row per URL.
func TestMintBatch(t *testing.T) {
	h, clock := newMintHarness(t)
	tok := h.mintOrg("mint", slices.Clone(shid.Tiers), nil)
	ms := assets(t, h.corpus(), 3)
	before := h.usage("mint")
	r := h.mintRequest(tok, ids(ms...), 0)
	a := minted(t, r)
	after := h.mintBilled("mint", before, 1, 3, 3)

	for name, want := range map[string]string{
		"Cache-Control":             "no-store",
		"ETag":                      "",
		"Content-Type":              "application/json",
		"X-Service-Content-Version": h.content.Load().ContentVersion,
	} {
		if got := r.header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	o, err := h.store.GetOrg(context.Background(), "mint")
	if err != nil {
		t.Fatal(err)
	}
	wantLicense := forensic.Envelope{Lic: forensic.Licence(o.ID, o.EclaVersion),
		Tag: forensic.Tag([]byte("test-harness-tag-key-0123456789abcdef"), o.ID, scope.Of(scope.MediaDownload, scope.ContentRead))}
	if a.License == nil || *a.License != wantLicense {
		t.Errorf("_license %+v, want %+v", a.License, wantLicense)
	}
	expires := clock.now().Add(900 * time.Second)
	if a.ExpiresIn != 900 || a.ContentVersion != h.content.Load().ContentVersion || len(a.Items) != 3 {
		t.Fatalf("expiresIn %d, contentVersion %q, %d items", a.ExpiresIn, a.ContentVersion, len(a.Items))
	}
	rows := h.ledger("mint")
	if len(rows) != 3 {
		t.Fatalf("%d ledger rows, want 3", len(rows))
	}
	for i, it := range a.Items {
		m := ms[i]
		if it.MediaID != m.ID || it.ExpiresAt != expires.UTC().Format(time.RFC3339) {
			t.Errorf("item %d: mediaId %q, expiresAt %q; want %q, %s", i, it.MediaID, it.ExpiresAt, m.ID, expires.UTC().Format(time.RFC3339))
		}
		if !bytes.Contains(r.body, []byte(`"url":"`+it.URL+`"`)) {
			t.Errorf("item %d: the body does not hold the URL as it is (escaped?): %s", i, r.body)
		}
		p, l := h.linkOf(it.URL)
		row := rows[i]
		want := meter.Entry{Kind: meter.KindMedia, Target: m.ID, Format: "url", Client: "lc_test_mint",
			Scopes: []string{scope.Full(scope.ContentRead), scope.Full(scope.MediaDownload)}, ContentVersion: a.ContentVersion,
			RequestID: r.header.Get("X-Request-Id"), Expires: expires.UTC(), KeyID: link.DerivedID}
		if !equalEntry(row.Entry, want) || row.Org != meter.Key(o) || !row.Created.Equal(clock.now()) {
			t.Errorf("ledger row %d: %+v, want %+v, org %s, created %v", i, row, want, meter.Key(o), clock.now())
		}
		if l.Kind != link.Media || l.Media != m.ID || l.Name != mediaFileName(m) || l.Org != o.ID || l.Gen != o.Generation || l.Row != row.ID || l.Expires != expires.Unix() || l.KeyID != link.DerivedID {
			t.Errorf("link %d: %+v; want media %s, row %d, expires %d", i, l, m.ID, row.ID, expires.Unix())
		}
		// The link is the capability: no token, and nothing metered.
		d := h.get(p, "")
		wantStatus(t, d, 200)
		if int64(len(d.body)) != m.Bytes || d.header.Get("Content-Type") != m.MIME {
			t.Errorf("download %d: %d bytes of %s; want %d of %s", i, len(d.body), d.header.Get("Content-Type"), m.Bytes, m.MIME)
		}
		want0, _ := io.ReadAll(newSynthetic(m.ID, m.Bytes))
		if !bytes.Equal(d.body, want0) {
			t.Errorf("download %d: not the asset's bytes", i)
		}
	}
	h.mintBilled("mint", after, 0, 0, 0)

	// Conditional headers change nothing: a mint has no validator and is
	// never a 304.
	again := h.mintRequest(tok, ids(ms[0]), 0, "If-None-Match", "*")
	if b := minted(t, again); len(b.Items) != 1 || b.Items[0].URL == a.Items[0].URL {
		t.Errorf("a second mint of one id: %+v", b.Items)
	}
	h.mintBilled("mint", after, 1, 1, 1)

	// Compressed like any content answer, over 384 bytes.
	gz := h.mintRequest(tok, ids(ms...), 0, "Accept-Encoding", "gzip")
	wantStatus(t, gz, 200)
	if gz.header.Get("Content-Encoding") != "gzip" || gz.header.Get("Cache-Control") != "no-store" {
		t.Errorf("gzip: Content-Encoding %q, Cache-Control %q", gz.header.Get("Content-Encoding"), gz.header.Get("Cache-Control"))
	}
}

func equalEntry(a, b meter.Entry) bool {
	return a.Kind == b.Kind && a.Target == b.Target && a.Format == b.Format && a.Client == b.Client &&
		slices.Equal(a.Scopes, b.Scopes) && a.ContentVersion == b.ContentVersion && a.RequestID == b.RequestID &&
		a.Expires.Equal(b.Expires) && a.KeyID == b.KeyID
}

// Duplicate ids are not collapsed: each occurrence is minted, metered
// and written to the ledger, with a link of its own.
func TestMintDuplicates(t *testing.T) {
	h, _ := newMintHarness(t)
	tok := h.mintOrg("dup", slices.Clone(shid.Tiers), nil)
	ms := assets(t, h.corpus(), 2)
	before := h.usage("dup")
	a := minted(t, h.mintRequest(tok, ids(ms[0], ms[1], ms[0], ms[0]), 0))
	h.mintBilled("dup", before, 1, 4, 4)
	if len(a.Items) != 4 {
		t.Fatalf("%d items, want 4", len(a.Items))
	}
	seen := map[string]bool{}
	var bodies [][]byte
	for i, it := range a.Items {
		if want := ids(ms[0], ms[1], ms[0], ms[0])[i]; it.MediaID != want {
			t.Errorf("item %d: %q, want %q (request order)", i, it.MediaID, want)
		}
		if seen[it.URL] {
			t.Errorf("item %d: the URL of an earlier item", i)
		}
		seen[it.URL] = true
		p, _ := h.linkOf(it.URL)
		d := h.get(p, "")
		wantStatus(t, d, 200)
		bodies = append(bodies, d.body)
	}
	if !bytes.Equal(bodies[0], bodies[2]) || !bytes.Equal(bodies[0], bodies[3]) || bytes.Equal(bodies[0], bodies[1]) {
		t.Error("duplicates' links do not read one asset")
	}
	if rows := h.ledger("dup"); len(rows) != 4 || rows[0].Target != rows[2].Target || rows[0].ID == rows[2].ID {
		t.Errorf("ledger: %+v", rows)
	}
}

// The refusals over the whole batch, in the request pipeline's order, and what each
// bills (spec: Route rules §4, Limits: Effects of refusals). None mints
// anything or writes a ledger row.
func TestMintRefusals(t *testing.T) {
	h, _ := newMintHarness(t)
	c := h.corpus()
	// Two high subjects: one granted (two of its assets), one not.
	var highSub *corpus.Subject
	var sibling *corpus.Media
	for _, sub := range c.Subjects {
		switch {
		case sub.Tier != "high" || len(sub.Lessons) < 2 || len(sub.Lessons[1].Media) == 0:
		case highSub == nil:
			highSub = sub
		case sibling == nil:
			sibling = sub.Lessons[0].Media[0]
		}
	}
	if sibling == nil {
		t.Fatal("the small corpus has not two high subjects")
	}
	high := []*corpus.Media{highSub.Lessons[0].Media[0], highSub.Lessons[1].Media[0]}
	other := assets(t, c, 1, "middle")[0]
	tok := h.mintOrg("ref", []string{"high/" + highSub.Slug}, nil)
	unknown := high[0].Lesson.ID + "#no-such-card#video"

	for _, c := range []struct {
		name   string
		ids    []string
		status int
		code   string
		calls  int64
		check  func(*testing.T, apiError)
	}{
		{name: "malformed id", ids: []string{high[0].ID, "high/" + highSub.Slug + "/0#c#video"}, status: 400, code: "BAD_LESSON_ID", calls: 1,
			check: func(t *testing.T, e apiError) {
				if e.Parameter != "mediaIds" || e.Received != "high/"+highSub.Slug+"/0" {
					t.Errorf("parameter %q, received %v", e.Parameter, e.Received)
				}
			}},
		{name: "no card", ids: []string{high[0].Lesson.ID}, status: 400, code: "BAD_LESSON_ID", calls: 1},
		// Every id is parsed before any is entitled: the bad id wins over
		// the ungranted one before it.
		{name: "ungranted then malformed", ids: []string{other.ID, "nope"}, status: 400, code: "BAD_LESSON_ID", calls: 1},
		{name: "tier not licensed", ids: []string{high[0].ID, other.ID}, status: 403, code: "TIER_NOT_LICENSED",
			check: func(t *testing.T, e apiError) {
				if e.Grant != "middle" {
					t.Errorf("grant %q", e.Grant)
				}
			}},
		{name: "subject not granted", ids: []string{high[0].ID, sibling.ID}, status: 403, code: "CONTENT_NOT_GRANTED",
			check: func(t *testing.T, e apiError) {
				if want := "high/" + sibling.Lesson.Subject.Slug; e.Grant != want {
					t.Errorf("grant %q, want %q", e.Grant, want)
				}
			}},
		// Every id is entitled before any is looked up.
		{name: "unknown then ungranted", ids: []string{unknown, other.ID}, status: 403, code: "TIER_NOT_LICENSED"},
		{name: "unknown media", ids: []string{high[0].ID, unknown, high[1].ID}, status: 404, code: "UNKNOWN_MEDIA", calls: 1,
			check: func(t *testing.T, e apiError) {
				if e.Parameter != "mediaIds" || e.Received != unknown || !strings.Contains(e.Message, unknown) {
					t.Errorf("parameter %q, received %v, message %q", e.Parameter, e.Received, e.Message)
				}
			}},
		{name: "unknown lesson", ids: []string{"high/" + highSub.Slug + "/999#c1#video"}, status: 404, code: "UNKNOWN_MEDIA", calls: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := *h
			h.t = t
			before := h.usage("ref")
			e := h.mintRequest(tok, c.ids, 0).wantError(t, c.status, c.code)
			if c.check != nil {
				c.check(t, e)
			}
			h.mintBilled("ref", before, c.calls, 0, 0)
			if rows := h.ledger("ref"); len(rows) != 0 {
				t.Errorf("%d ledger rows", len(rows))
			}
		})
	}
}

// The body is checked before the organisation gate: its 400s are free,
// and a suspended organisation's oversized batch is still
// BATCH_TOO_LARGE (spec: Limits, meters: a 400 on a parameter is not
// billed; the request pipeline's order, docs/edge.md).
func TestMintBody(t *testing.T) {
	h, _ := newMintHarness(t)
	tok := h.mintOrg("body", slices.Clone(shid.Tiers), nil)
	susp := h.mintOrg("body-susp", slices.Clone(shid.Tiers), func(o *store.Org) { o.Status = licence.StatusSuspended })
	m := assets(t, h.corpus(), 1)[0]
	many := make([]string, 101)
	for i := range many {
		many[i] = m.ID
	}
	for _, c := range []struct {
		name, tok, body, code, param string
	}{
		{"101 ids", tok, string(must(json.Marshal(map[string]any{"mediaIds": many}))), "BATCH_TOO_LARGE", "mediaIds"},
		{"101 ids, suspended", susp, string(must(json.Marshal(map[string]any{"mediaIds": many}))), "BATCH_TOO_LARGE", "mediaIds"},
		{"no ids", tok, `{"mediaIds":[]}`, "BAD_REQUEST", "mediaIds"},
		{"expiresIn 59", tok, `{"mediaIds":["` + m.ID + `"],"expiresIn":59}`, "BAD_REQUEST", "expiresIn"},
		{"expiresIn 90.5", tok, `{"mediaIds":["` + m.ID + `"],"expiresIn":90.5}`, "BAD_REQUEST", "expiresIn"},
		// Not JSON numbers, though fastjson reads them as numbers: the
		// 400's body stays JSON (no bare NaN echoed as received).
		{"expiresIn NaN", tok, `{"mediaIds":["` + m.ID + `"],"expiresIn":NaN}`, "BAD_REQUEST", "expiresIn"},
		{"expiresIn +900", tok, `{"mediaIds":["` + m.ID + `"],"expiresIn":+900}`, "BAD_REQUEST", "expiresIn"},
		{"expiresIn 0900", tok, `{"mediaIds":["` + m.ID + `"],"expiresIn":0900}`, "BAD_REQUEST", "expiresIn"},
		{"not JSON", tok, `{"mediaIds":`, "BAD_REQUEST", "body"},
		{"unknown member", susp, `{"mediaIds":["` + m.ID + `"],"ttl":60}`, "BAD_REQUEST", "ttl"},
		{"oversized body", tok, `{"mediaIds":["` + strings.Repeat("a", 70<<10) + `"]}`, "BAD_REQUEST", "body"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := *h
			h.t = t
			before := h.usage("body")
			e := h.do("POST", "/v1/media/urls", c.tok, []byte(c.body)).wantError(t, 400, c.code)
			if e.Parameter != c.param {
				t.Errorf("parameter %q, want %q", e.Parameter, c.param)
			}
			h.mintBilled("body", before, 0, 0, 0)
		})
	}
	// Past the body, the gate answers the suspended organisation.
	h.mintRequest(susp, ids(m), 0).wantError(t, 403, "ORG_SUSPENDED")
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// expiresIn defaults to 900 and is clamped to 900, or to 3600 with the
// long-URL override (spec: Route rules §4); the answer, the links and the
// ledger carry the lifetime as applied.
func TestMintExpiresIn(t *testing.T) {
	h, clock := newMintHarness(t)
	tok := h.mintOrg("short", slices.Clone(shid.Tiers), nil)
	long := h.mintOrg("long", slices.Clone(shid.Tiers), func(o *store.Org) { o.LongURLs = true })
	m := assets(t, h.corpus(), 1)[0]
	for _, c := range []struct {
		name      string
		tok, org  string
		requested int64 // 0: absent
		want      int64
	}{
		{"default", tok, "short", 0, 900},
		{"minimum", tok, "short", 60, 60},
		{"below the cap", tok, "short", 899, 899},
		{"clamped", tok, "short", 901, 900},
		{"clamped, huge", tok, "short", 1 << 62, 900},
		{"long, default", long, "long", 0, 900},
		{"long, 3600", long, "long", 3600, 3600},
		{"long, clamped", long, "long", 86400, 3600},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := *h
			h.t = t
			a := minted(t, h.mintRequest(c.tok, ids(m), c.requested))
			expires := clock.now().Add(time.Duration(c.want) * time.Second)
			_, l := h.linkOf(a.Items[0].URL)
			rows := h.ledger(c.org)
			last := rows[len(rows)-1]
			if a.ExpiresIn != c.want || a.Items[0].ExpiresAt != expires.UTC().Format(time.RFC3339) ||
				l.Expires != expires.Unix() || !last.Expires.Equal(expires) {
				t.Errorf("expiresIn %d, expiresAt %s, link %d, ledger %v; want %d, %v", a.ExpiresIn, a.Items[0].ExpiresAt, l.Expires, last.Expires, c.want, expires)
			}
		})
	}
}

// A minted link works while the stack's clock is before its expiry and
// answers 404 NOT_FOUND from then on (spec: States and transitions,
// Signed media URL), 3600 s with the long-URL override.
func TestMintLinkExpires(t *testing.T) {
	h, clock := newMintHarness(t)
	tok := h.mintOrg("exp", slices.Clone(shid.Tiers), nil)
	long := h.mintOrg("exp-long", slices.Clone(shid.Tiers), func(o *store.Org) { o.LongURLs = true })
	m := assets(t, h.corpus(), 1)[0]
	short, _ := h.linkOf(minted(t, h.mintRequest(tok, ids(m), 60)).Items[0].URL)
	hour, _ := h.linkOf(minted(t, h.mintRequest(long, ids(m), 3600)).Items[0].URL)
	usage := h.usage("exp")

	wantStatus(t, h.get(short, ""), 200)
	clock.advance(59 * time.Second)
	wantStatus(t, h.get(short, ""), 200)
	clock.advance(time.Second)
	if e := h.get(short, "").wantError(t, 404, "NOT_FOUND"); !strings.Contains(e.Message, "expired") {
		t.Errorf("message %q does not say the link expired", e.Message)
	}
	wantStatus(t, h.get(hour, ""), 200)
	clock.advance(3600*time.Second - 61*time.Second)
	wantStatus(t, h.get(hour, ""), 200)
	clock.advance(time.Second)
	h.get(hour, "").wantError(t, 404, "NOT_FOUND")
	// Downloads, refused or not, bill nothing.
	clock.advance(-3600 * time.Second)
	h.mintBilled("exp", usage, 0, 0, 0)
}

// The hourly mint cap and the monthly download quota (spec: Limits,
// Effects of refusals): the mints are reserved before the downloads;
// RATE_LIMITED bills the call only, QUOTA_EXCEEDED the call and the
// hourly reservation; neither mints anything or writes a ledger row.
func TestMintCaps(t *testing.T) {
	h, _ := newMintHarness(t)
	ms := assets(t, h.corpus(), 3)
	five := int64(5)
	four := int64(4)

	rate := h.mintOrg("rate", slices.Clone(shid.Tiers), func(o *store.Org) { o.RateLimits.URLMintsPerHour = &five })
	before := h.usage("rate")
	minted(t, h.mintRequest(rate, ids(ms...), 0))
	after := h.mintBilled("rate", before, 1, 3, 3)
	r := h.mintRequest(rate, ids(ms...), 0)
	r.wantError(t, 429, "RATE_LIMITED")
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 || s > 3600 {
		t.Errorf("Retry-After %q", r.header.Get("Retry-After"))
	}
	h.mintBilled("rate", after, 1, 0, 0)
	if rows := h.ledger("rate"); len(rows) != 3 {
		t.Errorf("%d ledger rows, want 3", len(rows))
	}
	minted(t, h.mintRequest(rate, ids(ms[:2]...), 0)) // exactly the cap

	quota := h.mintOrg("quota", slices.Clone(shid.Tiers), func(o *store.Org) { o.Quota.Downloads = &four })
	before = h.usage("quota")
	minted(t, h.mintRequest(quota, ids(ms...), 0))
	after = h.mintBilled("quota", before, 1, 3, 3)
	q := h.mintRequest(quota, ids(ms[:2]...), 0)
	e := q.wantError(t, 429, "QUOTA_EXCEEDED")
	if e.QuotaResetsAt == "" || q.header.Get("Retry-After") == "" {
		t.Errorf("quotaResetsAt %q, Retry-After %q", e.QuotaResetsAt, q.header.Get("Retry-After"))
	}
	h.mintBilled("quota", after, 1, 2, 0)
	if rows := h.ledger("quota"); len(rows) != 3 {
		t.Errorf("%d ledger rows, want 3", len(rows))
	}
}

// A mint is never a lesson read: it bills no lesson read and the
// enumeration alarm does not see it, however many lessons its assets
// come from.
func TestMintIsNotALessonRead(t *testing.T) {
	h, _ := newMintHarness(t)
	_, path, crossing := alarmOrg(t, h, "unused")
	sub := h.corpus().Subject("topics", "photography")
	tok := h.mintOrg("reads", []string{sub.Ref()}, nil)
	for n := 1; n < crossing; n++ {
		h.ok(path(n), tok)
	}
	before := h.usage("reads")
	var all []string // an asset of every lesson of the subject
	for _, l := range sub.Lessons {
		if len(l.Media) > 0 {
			all = append(all, l.Media[0].ID)
		}
	}
	if len(all) <= crossing || len(all) > 100 {
		t.Fatalf("%d lessons with assets, crossing %d", len(all), crossing)
	}
	minted(t, h.mintRequest(tok, all, 0))
	h.mintBilled("reads", before, 1, int64(len(all)), int64(len(all)))
	if d := h.usage("reads").distinct; d != crossing-1 {
		t.Errorf("distinct lessons read %d, want %d", d, crossing-1)
	}
	h.ok(path(1), tok) // still active: not suspended
}

// A minted link's file name is its lesson's id and its file, safe to
// save as it is; every lesson's assets save under distinct names.
func TestMintFileName(t *testing.T) {
	sub := &corpus.Subject{Tier: "high", Slug: "algebra"}
	l := &corpus.Lesson{Subject: sub, Number: 3}
	for _, tc := range []struct {
		m    corpus.Media
		want string
	}{
		{corpus.Media{Lesson: l, Location: "media/high/algebra/3/c1.mp3"}, "high-algebra-3-c1.mp3"},
		{corpus.Media{Lesson: l, Location: "c1.png"}, "high-algebra-3-c1.png"},
		{corpus.Media{Lesson: l, Location: "", CardID: "c2", Type: "video"}, "high-algebra-3-c2-video"},
	} {
		if got := mediaFileName(&tc.m); got != tc.want {
			t.Errorf("mediaFileName(%q) = %q, want %q", tc.m.Location, got, tc.want)
		}
	}
}

// BenchmarkMint100 is a 100-id mint over a real listener with its 100
// ledger rows committed (SQLite meters), reporting the p50 and p99 of
// its latency (issue #16, performance (i), whose goal is p50 under 2 ms;
// `make bench` does not run it yet).
func BenchmarkMint100(b *testing.B) {
	h := newHarness(b)
	tok := h.mintOrg("bench", slices.Clone(shid.Tiers), nil)
	var all []string
	for _, l := range h.corpus().Lessons {
		for _, m := range l.Media {
			if len(all) < 100 {
				all = append(all, m.ID)
			}
		}
	}
	body := must(json.Marshal(map[string]any{"mediaIds": all}))
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		r := h.do("POST", "/v1/media/urls", tok, body)
		lat = append(lat, time.Since(start))
		if r.status != 200 {
			b.Fatalf("%d %s", r.status, r.body)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99-ms")
}
