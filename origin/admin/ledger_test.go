package admin_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/admin"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/sqlitemeter"
)

// ledgerEnv serves the admin API with a real meter store holding the
// ledger.
func ledgerEnv(t *testing.T) (*env, meter.Store) {
	t.Helper()
	m := meterStore(t)
	return newEnv(t, func(c *admin.Config) { c.Meters = m }), m
}

// meterStore is a real meter store, closed when the test ends.
func meterStore(t *testing.T) meter.Store {
	t.Helper()
	m, err := sqlitemeter.New(context.Background(), filepath.Join(t.TempDir(), "meter.db"), sqlitemeter.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// write applies an op of the org now stored under id writing entries, and
// returns their ids.
func (e *env) write(m meter.Store, id string, entries ...meter.Entry) []int64 {
	e.t.Helper()
	o, err := e.store.GetOrg(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := m.Apply(context.Background(), meter.Op{Org: meter.Key(o), Now: base.Add(1500 * time.Millisecond),
		Stages: []meter.Stage{{{Meter: meter.MonthCalls, N: 1}}}, Ledger: entries})
	if err != nil || len(res.LedgerIDs) != len(entries) {
		e.t.Fatalf("Apply: %v, %v", res.LedgerIDs, err)
	}
	return res.LedgerIDs
}

func mediaEntry(i int) meter.Entry {
	return meter.Entry{Kind: meter.KindMedia, Target: fmt.Sprintf("high-algebra-1-img-%d", i), Format: "url", Client: "cl_1",
		Scopes: []string{"service-api/media.download"}, ContentVersion: "2030-03-01+abcd", RequestID: "req-1",
		Expires: base.Add(15 * time.Minute), KeyID: "k1"}
}

// ids are the ids of a page's items.
func ids(r response) []int64 {
	items, _ := r.body["items"].([]any)
	out := []int64{}
	for _, it := range items {
		out = append(out, int64(it.(map[string]any)["id"].(float64)))
	}
	return out
}

func TestLedgerRows(t *testing.T) {
	e, m := ledgerEnv(t)
	e.do("POST", "/admin/v1/orgs", `{"orgId":"acme"}`).want(t, 201, "")
	r := e.do("GET", "/admin/v1/orgs/acme/ledger", "")
	r.want(t, 200, "")
	jsonEqual(t, r.body, `{"items": [], "nextAfter": null}`)

	inline := meter.Entry{Kind: meter.KindExport, Target: "high/algebra", Format: "inline", Client: "cl_2",
		ContentVersion: "2030-03-01+abcd", RequestID: "req-2"}
	got := e.write(m, "acme", mediaEntry(0), inline)
	r = e.do("GET", "/admin/v1/orgs/acme/ledger", "")
	r.want(t, 200, "")
	jsonEqual(t, r.body, fmt.Sprintf(`{"items": [
		{"id": %d, "kind": "media", "target": "high-algebra-1-img-0", "format": "url", "clientId": "cl_1",
		 "scopes": ["service-api/media.download"], "contentVersion": "2030-03-01+abcd", "requestId": "req-1",
		 "createdAt": "2030-03-10T12:00:01Z", "expiresAt": "2030-03-10T12:15:00Z", "keyId": "k1"},
		{"id": %d, "kind": "export", "target": "high/algebra", "format": "inline", "clientId": "cl_2",
		 "scopes": [], "contentVersion": "2030-03-01+abcd", "requestId": "req-2",
		 "createdAt": "2030-03-10T12:00:01Z", "expiresAt": null, "keyId": null}
	], "nextAfter": null}`, got[0], got[1]))
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q", cc)
	}
}

// Pages follow nextAfter in commit order; the last is null, also when the
// rows end exactly at a page's end. Another org's rows are not listed, nor
// those of a deleted org created again under the id.
func TestLedgerPaging(t *testing.T) {
	e, m := ledgerEnv(t)
	e.do("POST", "/admin/v1/orgs", `{"orgId":"acme"}`).want(t, 201, "")
	e.do("POST", "/admin/v1/orgs", `{"orgId":"other"}`).want(t, 201, "")
	var all []int64
	for i := range 5 {
		all = append(all, e.write(m, "acme", mediaEntry(i))...)
		e.write(m, "other", mediaEntry(i))
	}
	var got []int64
	path := "/admin/v1/orgs/acme/ledger?limit=2"
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatalf("more than 3 pages of 2 for 5 rows")
		}
		r := e.do("GET", path, "")
		r.want(t, 200, "")
		page := ids(r)
		got = append(got, page...)
		next, ok := r.body["nextAfter"].(float64)
		if !ok {
			if r.body["nextAfter"] != nil || len(page) != 1 {
				t.Fatalf("last page: %s", r.raw)
			}
			break
		}
		if len(page) != 2 || int64(next) != page[1] {
			t.Fatalf("page of 2 with more to come: %s", r.raw)
		}
		path = fmt.Sprintf("/admin/v1/orgs/acme/ledger?limit=2&after=%d", int64(next))
	}
	if fmt.Sprint(got) != fmt.Sprint(all) {
		t.Errorf("acme's rows by pages: %v, want %v", got, all)
	}
	r := e.do("GET", fmt.Sprintf("/admin/v1/orgs/acme/ledger?after=%d&limit=3", all[1]), "")
	r.want(t, 200, "")
	if fmt.Sprint(ids(r)) != fmt.Sprint(all[2:]) || r.body["nextAfter"] != nil {
		t.Errorf("the last 3 rows in a page of 3: %s, want %v and nextAfter null", r.raw, all[2:])
	}
	e.do("DELETE", "/admin/v1/orgs/acme", "").want(t, 204, "")
	e.do("GET", "/admin/v1/orgs/acme/ledger", "").want(t, 404, "NOT_FOUND")
	e.do("POST", "/admin/v1/orgs", `{"orgId":"acme"}`).want(t, 201, "")
	if r := e.do("GET", "/admin/v1/orgs/acme/ledger", ""); len(ids(r)) != 0 {
		t.Errorf("the org created again lists the deleted one's rows: %s", r.raw)
	}
}

// The default page is DefaultLedgerLimit rows.
func TestLedgerDefaultLimit(t *testing.T) {
	e, m := ledgerEnv(t)
	e.do("POST", "/admin/v1/orgs", `{"orgId":"acme"}`).want(t, 201, "")
	var entries []meter.Entry
	for i := range meter.MaxLedger {
		entries = append(entries, mediaEntry(i))
	}
	first := e.write(m, "acme", entries...)
	e.write(m, "acme", mediaEntry(100))
	r := e.do("GET", "/admin/v1/orgs/acme/ledger", "")
	r.want(t, 200, "")
	if n := len(ids(r)); n != admin.DefaultLedgerLimit || r.body["nextAfter"] != float64(first[99]) {
		t.Errorf("default page: %d rows, nextAfter %v; want %d, %d", n, r.body["nextAfter"], admin.DefaultLedgerLimit, first[99])
	}
	r = e.do("GET", fmt.Sprintf("/admin/v1/orgs/acme/ledger?limit=%d", admin.MaxLedgerLimit), "")
	if n := len(ids(r)); n != 101 || r.body["nextAfter"] != nil {
		t.Errorf("a page of the largest limit: %d rows, nextAfter %v; want 101, null", n, r.body["nextAfter"])
	}
}

// Bad parameters are 400 naming the parameter, checked before the org is
// looked up; an unknown org is 404.
func TestLedgerBadQuery(t *testing.T) {
	e, _ := ledgerEnv(t)
	e.do("POST", "/admin/v1/orgs", `{"orgId":"acme"}`).want(t, 201, "")
	for _, tc := range []struct{ query, param string }{
		{"limit=0", "limit"},
		{"limit=1001", "limit"},
		{"limit=ten", "limit"},
		{"limit=", "limit"},
		{"limit=1.5", "limit"},
		{"after=-1", "after"},
		{"after=", "after"},
		{"after=1e3", "after"},
		{"after=99999999999999999999", "after"},
		{"limit=2&limit=3", "limit"},
		{"cursor=abc", "cursor"},
		{"after=%zz", "after"},
	} {
		for _, org := range []string{"acme", "nobody"} {
			r := e.do("GET", "/admin/v1/orgs/"+org+"/ledger?"+tc.query, "")
			r.want(t, 400, "BAD_REQUEST")
			if r.errField("parameter") != tc.param {
				t.Errorf("?%s: parameter %v, want %s", tc.query, r.errField("parameter"), tc.param)
			}
		}
	}
	r := e.do("GET", "/admin/v1/orgs/acme/ledger?limit=1001", "")
	if r.errField("max") != float64(admin.MaxLedgerLimit) || r.errField("min") != float64(1) {
		t.Errorf("limit out of range: %s, want min 1 and max %d", r.raw, admin.MaxLedgerLimit)
	}
	r = e.do("GET", "/admin/v1/orgs/nobody/ledger?limit=5&after=0", "")
	r.want(t, 404, "NOT_FOUND")
	if !strings.Contains(r.errField("message").(string), "nobody") {
		t.Errorf("404 does not name the org: %s", r.raw)
	}
	e.do("POST", "/admin/v1/orgs/acme/ledger", "").want(t, 405, "METHOD_NOT_ALLOWED")
}

// Without a meter store the route is not served.
func TestLedgerUnconfigured(t *testing.T) {
	e := newEnv(t, nil)
	e.do("POST", "/admin/v1/orgs", `{"orgId":"acme"}`).want(t, 201, "")
	e.do("GET", "/admin/v1/orgs/acme/ledger", "").want(t, 404, "NOT_FOUND")
}
