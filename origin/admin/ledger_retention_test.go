package admin_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/admin"
	"github.com/lectern-api/lectern/origin/meter"
)

// writeAt applies an op of the org now stored under id at now writing
// entries, and returns their ids.
func (e *env) writeAt(m meter.Store, id string, now time.Time, entries ...meter.Entry) []int64 {
	e.t.Helper()
	o, err := e.store.GetOrg(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := m.Apply(context.Background(), meter.Op{Org: meter.Key(o), Now: now,
		Stages: []meter.Stage{{{Meter: meter.MonthCalls, N: 1}}}, Ledger: entries})
	if err != nil || len(res.LedgerIDs) != len(entries) {
		e.t.Fatalf("Apply: %v, %v", res.LedgerIDs, err)
	}
	return res.LedgerIDs
}

// archived is a 200 answer of the archive: its header and its lines,
// each a JSON object.
type archived struct {
	header http.Header
	lines  []map[string]any
	raw    []byte
}

// archive GETs the archive before before, which must answer 200, and
// reads its NDJSON.
func (e *env) archive(before string) archived {
	e.t.Helper()
	req, err := http.NewRequest("GET", e.url+"/admin/v1/ledger/archive?before="+url.QueryEscape(before), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("read the archive: %v", err)
	}
	if resp.StatusCode != 200 {
		e.t.Fatalf("archive before %s: %d %s", before, resp.StatusCode, raw)
	}
	a := archived{header: resp.Header, raw: raw, lines: []map[string]any{}}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			e.t.Fatalf("archive line %q: %v", sc.Text(), err)
		}
		a.lines = append(a.lines, line)
	}
	if len(raw) > 0 && raw[len(raw)-1] != '\n' {
		e.t.Errorf("the archive does not end with a newline: %q", raw)
	}
	return a
}

func (a archived) ids() []int64 {
	out := []int64{}
	for _, l := range a.lines {
		out = append(out, int64(l["id"].(float64)))
	}
	return out
}

// The archive streams every organisation's rows created before its time,
// in id order, as NDJSON: the ledger route's fields and orgId (that of
// an organisation deleted since too); later rows are left out.
func TestLedgerArchive(t *testing.T) {
	e, m := ledgerEnv(t)
	for _, id := range []string{"acme", "other"} {
		e.do("POST", "/admin/v1/orgs", `{"orgId":"`+id+`"}`).want(t, 201, "")
	}
	inline := meter.Entry{Kind: meter.KindExport, Target: "high/algebra", Format: "inline", Client: "cl_2",
		ContentVersion: "2030-03-01+abcd", RequestID: "req-2"}
	old := e.writeAt(m, "acme", base.Add(-72*time.Hour+250*time.Millisecond), mediaEntry(0), inline)
	older := e.writeAt(m, "other", base.Add(-96*time.Hour), mediaEntry(1))
	recent := e.writeAt(m, "acme", base.Add(-23*time.Hour), mediaEntry(2))
	e.do("DELETE", "/admin/v1/orgs/other", "").want(t, 204, "")
	e.do("POST", "/admin/v1/orgs", `{"orgId":"other"}`).want(t, 201, "")
	edge := e.writeAt(m, "other", base.Add(-24*time.Hour), mediaEntry(3)) // at before: not before it

	a := e.archive("2030-03-09T12:00:00Z")
	if ct := a.header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("Content-Type = %q", ct)
	}
	if cc := a.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q", cc)
	}
	if got, want := a.ids(), slices.Concat(old, older); !slices.Equal(got, want) {
		t.Fatalf("archived ids %v, want %v (not %v, %v)", got, want, recent, edge)
	}
	jsonEqual(t, a.lines[0], fmt.Sprintf(`{"orgId": "acme", "id": %d, "kind": "media", "target": "high-algebra-1-img-0",
		"format": "url", "clientId": "cl_1", "scopes": ["service-api/media.download"], "contentVersion": "2030-03-01+abcd",
		"requestId": "req-1", "createdAt": "2030-03-07T12:00:00Z", "expiresAt": "2030-03-10T12:15:00Z", "keyId": "k1"}`, old[0]))
	jsonEqual(t, a.lines[1], fmt.Sprintf(`{"orgId": "acme", "id": %d, "kind": "export", "target": "high/algebra",
		"format": "inline", "clientId": "cl_2", "scopes": [], "contentVersion": "2030-03-01+abcd",
		"requestId": "req-2", "createdAt": "2030-03-07T12:00:00Z", "expiresAt": null, "keyId": null}`, old[1]))
	if a.lines[2]["orgId"] != "other" || a.lines[2]["target"] != "high-algebra-1-img-1" {
		t.Errorf("the deleted org's row: %v", a.lines[2])
	}
	// A time with an offset is the same instant; one with a fraction
	// counts to the microsecond.
	if got := e.archive("2030-03-09T14:00:00+02:00").ids(); !slices.Equal(got, slices.Concat(old, older)) {
		t.Errorf("before with an offset: %v", got)
	}
	if got := e.archive("2030-03-07T12:00:00.25Z").ids(); !slices.Equal(got, older) {
		t.Errorf("before at the rows' microsecond: %v, want %v", got, older)
	}
	if got := e.archive("2030-03-07T12:00:00.250001Z").ids(); !slices.Equal(got, slices.Concat(old, older)) {
		t.Errorf("before a microsecond after the rows: %v", got)
	}
	if a := e.archive("2000-01-01T00:00:00Z"); len(a.raw) != 0 {
		t.Errorf("an archive of no rows: %q, want an empty body", a.raw)
	}
	// The ledger itself is untouched.
	if r := e.do("GET", "/admin/v1/orgs/acme/ledger", ""); len(ids(r)) != 3 {
		t.Errorf("acme's ledger after the archive: %s", r.raw)
	}
}

// An archive of more rows than a page of the store is every row, once,
// in id order.
func TestLedgerArchivePages(t *testing.T) {
	e, m := ledgerEnv(t)
	e.do("POST", "/admin/v1/orgs", `{"orgId":"acme"}`).want(t, 201, "")
	var entries []meter.Entry
	for i := range meter.MaxLedger {
		entries = append(entries, mediaEntry(i))
	}
	var want []int64
	for i := range admin.ArchivePage/meter.MaxLedger + 2 {
		want = append(want, e.writeAt(m, "acme", base.Add(-48*time.Hour+time.Duration(i)*time.Second), entries...)...)
	}
	if got := e.archive("2030-03-09T00:00:00Z").ids(); !slices.Equal(got, want) {
		t.Errorf("archived %d rows, want %d", len(got), len(want))
	}
}

// failingLedger fails LedgerBefore after its first page.
type failingLedger struct {
	meter.Store
	calls int
}

func (f *failingLedger) LedgerBefore(ctx context.Context, before time.Time, after int64, limit int) ([]meter.Row, error) {
	f.calls++
	if f.calls > 1 {
		return nil, fmt.Errorf("the database went away")
	}
	return f.Store.LedgerBefore(ctx, before, after, limit)
}

// A store failure after the archive began cuts the answer short: the
// client's read fails, so a partial archive is never taken for a whole
// one; a failure before it is the error body.
func TestLedgerArchiveCutShort(t *testing.T) {
	m := meterStore(t)
	f := &failingLedger{Store: m}
	e := newEnv(t, func(c *admin.Config) { c.Meters = f })
	e.do("POST", "/admin/v1/orgs", `{"orgId":"acme"}`).want(t, 201, "")
	var entries []meter.Entry
	for i := range meter.MaxLedger {
		entries = append(entries, mediaEntry(i))
	}
	for range admin.ArchivePage/meter.MaxLedger + 1 {
		e.writeAt(m, "acme", base.Add(-48*time.Hour), entries...)
	}
	req, _ := http.NewRequest("GET", e.url+"/admin/v1/ledger/archive?before=2030-03-09T00:00:00Z", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || err == nil {
		t.Errorf("archive with a failure after its first page: %d, %d bytes, read error %v; want 200 and a failed read", resp.StatusCode, len(body), err)
	}
	if !strings.Contains(e.logs.String(), "the database went away") {
		t.Errorf("the cause is not logged:\n%s", e.logs.String())
	}
	f.calls = 1 // the next call fails: before the first page
	e.do("GET", "/admin/v1/ledger/archive?before=2030-03-09T00:00:00Z", "").want(t, 500, "INTERNAL")
}

// The trim deletes every organisation's rows created before its time and
// answers how many; later rows stay, and trimming again deletes none.
func TestLedgerTrim(t *testing.T) {
	e, m := ledgerEnv(t)
	for _, id := range []string{"acme", "other"} {
		e.do("POST", "/admin/v1/orgs", `{"orgId":"`+id+`"}`).want(t, 201, "")
	}
	e.writeAt(m, "acme", base.Add(-72*time.Hour), mediaEntry(0), mediaEntry(1))
	e.writeAt(m, "other", base.Add(-25*time.Hour), mediaEntry(2))
	kept := e.writeAt(m, "acme", base.Add(-24*time.Hour), mediaEntry(3))
	kept = append(kept, e.writeAt(m, "other", base.Add(-time.Hour), mediaEntry(4))...)

	r := e.do("POST", "/admin/v1/ledger/trim", `{"before":"2030-03-09T12:00:00Z"}`)
	r.want(t, 200, "")
	jsonEqual(t, r.body, `{"deleted": 3}`)
	if got := e.archive("2030-03-09T12:00:00Z").ids(); len(got) != 0 {
		t.Errorf("archive after the trim: %v", got)
	}
	acme := ids(e.do("GET", "/admin/v1/orgs/acme/ledger", ""))
	other := ids(e.do("GET", "/admin/v1/orgs/other/ledger", ""))
	if !slices.Equal(acme, kept[:1]) || !slices.Equal(other, kept[1:]) {
		t.Errorf("after the trim: acme %v, other %v; want %v, %v", acme, other, kept[:1], kept[1:])
	}
	r = e.do("POST", "/admin/v1/ledger/trim", `{"before":"2030-03-09T12:00:00Z"}`)
	r.want(t, 200, "")
	jsonEqual(t, r.body, `{"deleted": 0}`)
	if !strings.Contains(e.logs.String(), "ledger trimmed") {
		t.Errorf("the trim is not logged:\n%s", e.logs.String())
	}
}

// A before that is missing, not RFC 3339, or later than 24 hours before
// the clock is 400 naming it, and so is any parameter or member the
// routes do not take; nothing is deleted.
func TestLedgerRetentionBadBefore(t *testing.T) {
	e, m := ledgerEnv(t)
	e.do("POST", "/admin/v1/orgs", `{"orgId":"acme"}`).want(t, 201, "")
	e.writeAt(m, "acme", base.Add(-72*time.Hour), mediaEntry(0))
	e.writeAt(m, "acme", base.Add(-time.Minute), mediaEntry(1))
	bad := []struct{ before, param string }{
		{"", "before"},
		{" ", "before"},
		{"2030-03-01", "before"},
		{"yesterday", "before"},
		{"2030-13-01T00:00:00Z", "before"},
		{"2030-03-01T00:00:00", "before"},
		{"1709985600", "before"},
		{"2030-03-09T12:00:01Z", "before"},        // a second inside the 24 hours
		{"2030-03-09T14:00:00.5+02:00", "before"}, // half a second inside, with an offset
		{"2030-03-10T12:00:00Z", "before"},        // now
		{"2031-01-01T00:00:00Z", "before"},        // the future
	}
	for _, tc := range bad {
		r := e.do("GET", "/admin/v1/ledger/archive?before="+url.QueryEscape(tc.before), "")
		r.want(t, 400, "BAD_REQUEST")
		if r.errField("parameter") != tc.param {
			t.Errorf("archive ?before=%q: parameter %v, want %s", tc.before, r.errField("parameter"), tc.param)
		}
		body, _ := json.Marshal(map[string]string{"before": tc.before})
		r = e.do("POST", "/admin/v1/ledger/trim", string(body))
		r.want(t, 400, "BAD_REQUEST")
		if r.errField("parameter") != tc.param {
			t.Errorf("trim %s: parameter %v, want %s", body, r.errField("parameter"), tc.param)
		}
	}
	r := e.do("POST", "/admin/v1/ledger/trim", `{"before":"2030-03-09T12:00:01Z"}`)
	if msg, _ := r.errField("message").(string); !strings.Contains(msg, "24 hours") || !strings.Contains(msg, "2030-03-09T12:00:00Z") {
		t.Errorf("the floor's message does not say it: %s", r.raw)
	}
	for _, tc := range []struct{ query, param string }{
		{"", "before"},
		{"before=2030-03-01T00:00:00Z&after=5", "after"},
		{"before=2030-03-01T00:00:00Z&before=2030-03-02T00:00:00Z", "before"},
		{"limit=5", "limit"},
	} {
		r := e.do("GET", "/admin/v1/ledger/archive?"+tc.query, "")
		r.want(t, 400, "BAD_REQUEST")
		if r.errField("parameter") != tc.param {
			t.Errorf("archive ?%s: parameter %v, want %s", tc.query, r.errField("parameter"), tc.param)
		}
	}
	for _, tc := range []struct{ path, body, param string }{
		{"/admin/v1/ledger/trim", ``, "before"},
		{"/admin/v1/ledger/trim", `{}`, "before"},
		{"/admin/v1/ledger/trim", `{"before":null}`, "before"},
		{"/admin/v1/ledger/trim", `{"before":1709985600}`, "before"},
		{"/admin/v1/ledger/trim", `{"before":"2030-03-01T00:00:00Z","before":"2030-03-02T00:00:00Z"}`, "before"},
		{"/admin/v1/ledger/trim", `{"before":"2030-03-01T00:00:00Z","dryRun":true}`, "dryRun"},
		{"/admin/v1/ledger/trim", `["2030-03-01T00:00:00Z"]`, "body"},
		{"/admin/v1/ledger/trim?before=2030-03-01T00:00:00Z", `{"before":"2030-03-01T00:00:00Z"}`, "before"},
	} {
		r := e.do("POST", tc.path, tc.body)
		r.want(t, 400, "BAD_REQUEST")
		if r.errField("parameter") != tc.param {
			t.Errorf("POST %s %s: parameter %v, want %s", tc.path, tc.body, r.errField("parameter"), tc.param)
		}
	}
	if n := len(ids(e.do("GET", "/admin/v1/orgs/acme/ledger", ""))); n != 2 {
		t.Fatalf("a refused trim deleted rows: %d left", n)
	}
	// Exactly 24 hours back is allowed.
	r = e.do("POST", "/admin/v1/ledger/trim", `{"before":"2030-03-09T12:00:00Z"}`)
	r.want(t, 200, "")
	jsonEqual(t, r.body, `{"deleted": 1}`)
	if got := e.archive("2030-03-09T12:00:00Z").ids(); len(got) != 0 {
		t.Errorf("archive at the floor: %v", got)
	}
}

// Both routes need the admin token, and their methods; without a meter
// store they are not served.
func TestLedgerRetentionAuth(t *testing.T) {
	e, m := ledgerEnv(t)
	e.do("POST", "/admin/v1/orgs", `{"orgId":"acme"}`).want(t, 201, "")
	e.writeAt(m, "acme", base.Add(-72*time.Hour), mediaEntry(0))
	for _, auth := range []string{"", "Bearer nope"} {
		e.do("GET", "/admin/v1/ledger/archive?before=2030-03-01T00:00:00Z", "", "Authorization", auth).want(t, 401, "invalid_token")
		e.do("POST", "/admin/v1/ledger/trim", `{"before":"2030-03-09T00:00:00Z"}`, "Authorization", auth).want(t, 401, "invalid_token")
	}
	if n := len(ids(e.do("GET", "/admin/v1/orgs/acme/ledger", ""))); n != 1 {
		t.Errorf("an unauthenticated trim deleted rows: %d left", n)
	}
	r := e.do("GET", "/admin/v1/ledger/trim", "")
	r.want(t, 405, "METHOD_NOT_ALLOWED")
	if r.header.Get("Allow") != "POST" {
		t.Errorf("GET trim: Allow %q", r.header.Get("Allow"))
	}
	e.do("POST", "/admin/v1/ledger/archive?before=2030-03-01T00:00:00Z", "").want(t, 405, "METHOD_NOT_ALLOWED")

	bare := newEnv(t, nil)
	bare.do("GET", "/admin/v1/ledger/archive?before=2030-03-01T00:00:00Z", "").want(t, 404, "NOT_FOUND")
	bare.do("POST", "/admin/v1/ledger/trim", `{"before":"2030-03-01T00:00:00Z"}`).want(t, 404, "NOT_FOUND")
}
