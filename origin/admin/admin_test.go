package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/admin"
	"github.com/lectern-api/lectern/origin/clock"
	"github.com/lectern-api/lectern/origin/idp"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/store/sqlitestore"
	"github.com/lectern-api/lectern/shared/logbuftest"
	"golang.org/x/crypto/bcrypt"
)

const token = "s3cret-admin-token"

// base is the wall clock of every test: fixed, so defaults are exact.
var base = time.Date(2030, 3, 10, 12, 0, 0, 0, time.UTC)

// countingClients is the identity provider's real CreateClient over the
// test's store, counting its calls.
type countingClients struct {
	store store.Store
	now   func() time.Time
	mu    sync.Mutex
	calls int
}

func (c *countingClients) create(ctx context.Context, orgID string, scopes, grantTypes, redirectURIs []string) (string, string, error) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return idp.CreateClient(ctx, c.store, c.now(), orgID, scopes, grantTypes, redirectURIs)
}

func (c *countingClients) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

type env struct {
	t       *testing.T
	url     string
	clk     *clock.Clock
	store   store.Store
	clients *countingClients
	logs    *logbuftest.Buffer
}

// newEnv serves the admin API over a real listener and a real SQLite
// store, with a fixed test clock; edit adjusts the config.
func newEnv(t *testing.T, edit func(*admin.Config)) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.New(ctx, filepath.Join(t.TempDir(), "lectern.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, clk: clock.New(func() time.Time { return base }), store: st, logs: &logbuftest.Buffer{}}
	e.clients = &countingClients{store: st, now: e.clk.Now}
	cfg := admin.Config{
		Token: token, Store: st, Clock: e.clk,
		CreateClient: e.clients.create,
		Reload: func(_ context.Context, dir string) (string, error) {
			if dir == "/corpora/broken" {
				return "", errors.New(`lessons/high/algebra.json: classes[3].cards[2].id: "C 2" is not a valid card id`)
			}
			return "2030-03-10+0123abcd", nil
		},
		Ready:  func() bool { return true },
		Logger: slog.New(slog.NewTextHandler(e.logs, nil)),
	}
	if edit != nil {
		edit(&cfg)
	}
	srv := httptest.NewServer(admin.Handler(cfg))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

type response struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

// errField returns error.<name> of an error body.
func (r response) errField(name string) any {
	m, _ := r.body["error"].(map[string]any)
	return m[name]
}

func (e *env) do(method, path, body string, header ...string) response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	r := response{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 && method != http.MethodHead {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			e.t.Fatalf("%s %s: body is not a JSON object: %v\n%s", method, path, err, raw)
		}
	}
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(resp.Header.Get("X-Request-Id")) {
		e.t.Errorf("%s %s: X-Request-Id = %q, want 16 hex digits", method, path, resp.Header.Get("X-Request-Id"))
	}
	if r.status >= 400 {
		if got, want := r.errField("requestId"), resp.Header.Get("X-Request-Id"); got != want {
			e.t.Errorf("%s %s: requestId = %v, want the X-Request-Id %q", method, path, got, want)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			e.t.Errorf("%s %s: error Content-Type = %q", method, path, ct)
		}
	}
	return r
}

// want checks status and, for errors, the code.
func (r response) want(t *testing.T, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.raw)
	}
	if code != "" {
		if got := r.errField("code"); got != code {
			t.Fatalf("code = %v, want %s; body %s", got, code, r.raw)
		}
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t, nil)
	tests := []struct {
		name, path, auth string
		status           int
		challenge        string
	}{
		{"missing", "/admin/v1/health", "", 401, `Bearer realm="lectern-admin"`},
		{"wrong", "/admin/v1/health", "Bearer nope", 401, `Bearer realm="lectern-admin", error="invalid_token"`},
		{"prefix of the token", "/admin/v1/health", "Bearer " + token[:5], 401, `Bearer realm="lectern-admin", error="invalid_token"`},
		{"token plus more", "/admin/v1/health", "Bearer " + token + "x", 401, `Bearer realm="lectern-admin", error="invalid_token"`},
		{"not bearer", "/admin/v1/health", "Basic " + token, 401, `Bearer realm="lectern-admin", error="invalid_token"`},
		{"empty bearer", "/admin/v1/health", "Bearer ", 401, `Bearer realm="lectern-admin", error="invalid_token"`},
		{"unknown path, no token", "/admin/v1/nope", "", 401, `Bearer realm="lectern-admin"`},
		{"right", "/admin/v1/health", "Bearer " + token, 200, ""},
		{"scheme is case-insensitive", "/admin/v1/health", "bearer " + token, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("GET", tt.path, "", "Authorization", tt.auth) // "" removes it
			if tt.status == 401 {
				r.want(t, 401, "invalid_token")
			} else {
				r.want(t, tt.status, "")
			}
			if got := r.header.Get("WWW-Authenticate"); got != tt.challenge {
				t.Errorf("WWW-Authenticate = %q, want %q", got, tt.challenge)
			}
		})
	}
	if strings.Contains(e.logs.String(), token) {
		t.Errorf("the token appears in the log:\n%s", e.logs)
	}
}

func TestEmptyTokenRejectsAll(t *testing.T) {
	e := newEnv(t, func(c *admin.Config) { c.Token = "" })
	e.do("GET", "/admin/v1/health", "", "Authorization", "Bearer ").want(t, 401, "invalid_token")
	e.do("GET", "/admin/v1/health", "", "Authorization", "Bearer x").want(t, 401, "invalid_token")
}

func TestRequestIDsDiffer(t *testing.T) {
	e := newEnv(t, nil)
	a := e.do("GET", "/admin/v1/health", "").header.Get("X-Request-Id")
	b := e.do("GET", "/admin/v1/health", "").header.Get("X-Request-Id")
	if a == b {
		t.Errorf("two requests share the request id %s", a)
	}
}

func TestHealth(t *testing.T) {
	ready := false
	e := newEnv(t, func(c *admin.Config) { c.Ready = func() bool { return ready } })
	r := e.do("GET", "/admin/v1/health", "")
	if r.status != 503 || r.errField("code") != "INTERNAL" || r.header.Get("Retry-After") != "1" {
		t.Errorf("not ready: %d %s (Retry-After %q), want 503 INTERNAL", r.status, r.raw, r.header.Get("Retry-After"))
	}
	ready = true
	r = e.do("GET", "/admin/v1/health", "")
	r.want(t, 200, "")
	if string(r.raw) != `{"status":"ok"}` {
		t.Errorf("body = %s", r.raw)
	}
}

// jsonEqual compares a decoded body with a JSON literal.
func jsonEqual(t *testing.T, got map[string]any, want string) {
	t.Helper()
	var w map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, w) {
		g, _ := json.MarshalIndent(got, "", "  ")
		wb, _ := json.MarshalIndent(w, "", "  ")
		t.Errorf("body:\n%s\nwant:\n%s", g, wb)
	}
}

func TestCreateDefaults(t *testing.T) {
	e := newEnv(t, nil)
	for _, body := range []string{"{}", ""} {
		r := e.do("POST", "/admin/v1/orgs", body)
		r.want(t, 201, "")
		id, _ := r.body["orgId"].(string)
		if !regexp.MustCompile(`^org_[0-9a-f]{12}$`).MatchString(id) {
			t.Errorf("generated orgId = %q, want org_ and 12 hex digits", id)
		}
		if got, want := r.header.Get("Location"), "/admin/v1/orgs/"+id; got != want {
			t.Errorf("Location = %q, want %q", got, want)
		}
		// DESIGN: status active, eclaVersion = requiredEclaVersion = 1,
		// renewsAt a year ahead, no caps, longUrls false.
		jsonEqual(t, r.body, `{"orgId":"`+id+`","orgName":"","tier":"standard","status":"active",
			"contentGrants":[],
			"quota":{"calls":null,"downloads":null,"exports":null,"testprepitems":null},
			"rateLimits":{"callsPerHour":null,"lessonReadsPerHour":null,"urlMintsPerHour":null},
			"eclaVersion":1,"requiredEclaVersion":1,"renewsAt":"2031-03-10T12:00:00Z","longUrls":false,
			"createdAt":"2030-03-10T12:00:00Z","updatedAt":"2030-03-10T12:00:00Z"}`)
		got := e.do("GET", "/admin/v1/orgs/"+id, "")
		got.want(t, 200, "")
		if !reflect.DeepEqual(got.body, r.body) {
			t.Errorf("GET after create:\n%s\nwant the create answer:\n%s", got.raw, r.raw)
		}
	}
}

const fullOrg = `{"orgId":"acme","orgName":"Acme Schools","tier":"enterprise","status":"suspended",
	"contentGrants":["high","college/calculus"],
	"quota":{"calls":1000,"downloads":200,"exports":0,"testprepitems":50},
	"rateLimits":{"callsPerHour":100,"lessonReadsPerHour":60,"urlMintsPerHour":30},
	"eclaVersion":2,"requiredEclaVersion":3,"renewsAt":"2032-01-01T00:00:00Z","longUrls":true}`

func TestCreateEveryField(t *testing.T) {
	e := newEnv(t, nil)
	r := e.do("POST", "/admin/v1/orgs", fullOrg)
	r.want(t, 201, "")
	want := strings.TrimSuffix(fullOrg, "}") + `,"createdAt":"2030-03-10T12:00:00Z","updatedAt":"2030-03-10T12:00:00Z"}`
	jsonEqual(t, r.body, want)
	if got := r.header.Get("Location"); got != "/admin/v1/orgs/acme" {
		t.Errorf("Location = %q", got)
	}
	jsonEqual(t, e.do("GET", "/admin/v1/orgs/acme", "").body, want)

	// A taken id: 409 WRITE_CONFLICT, and nothing changes.
	r = e.do("POST", "/admin/v1/orgs", `{"orgId":"acme","orgName":"Other"}`)
	r.want(t, 409, "WRITE_CONFLICT")
	if r.errField("parameter") != "orgId" || !strings.Contains(r.errField("message").(string), "acme") {
		t.Errorf("duplicate: body %s, want parameter orgId and a message naming acme", r.raw)
	}
	if r.header.Get("Retry-After") != "" {
		t.Errorf("duplicate: Retry-After %q, but retrying cannot succeed", r.header.Get("Retry-After"))
	}
	jsonEqual(t, e.do("GET", "/admin/v1/orgs/acme", "").body, want)
}

func TestCreateBadBodies(t *testing.T) {
	e := newEnv(t, nil)
	tests := []struct{ name, body, param string }{
		{"unknown member", `{"orgId":"x","color":"red"}`, "color"},
		{"not an object", `[1]`, "body"},
		{"null", `null`, "body"},
		{"trailing data", `{"orgId":"x"} {}`, "body"},
		{"bad id", `{"orgId":"Not Valid"}`, "orgId"},
		{"bad grant", `{"contentGrants":["nope/x y"]}`, "contentGrants"},
		{"negative cap", `{"quota":{"calls":-1}}`, "quota.calls"},
		{"bad renewsAt", `{"renewsAt":"next year"}`, "renewsAt"},
		{"wrong type", `{"longUrls":"yes"}`, "longUrls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("POST", "/admin/v1/orgs", tt.body)
			r.want(t, 400, "BAD_REQUEST")
			if got := r.errField("parameter"); got != tt.param {
				t.Errorf("parameter = %v, want %s (%s)", got, tt.param, r.raw)
			}
		})
	}
	r := e.do("POST", "/admin/v1/orgs", `{"orgName":"`+strings.Repeat("x", 2<<20)+`"}`)
	r.want(t, 413, "PAYLOAD_TOO_LARGE")
}

func TestPatch(t *testing.T) {
	e := newEnv(t, nil)
	e.do("POST", "/admin/v1/orgs", fullOrg).want(t, 201, "")
	e.clk.Advance(time.Hour)

	// Reinstating a suspended org.
	r := e.do("PATCH", "/admin/v1/orgs/acme", `{"status":"active"}`)
	r.want(t, 200, "")
	if r.body["status"] != "active" || r.body["updatedAt"] != "2030-03-10T13:00:00Z" || r.body["createdAt"] != "2030-03-10T12:00:00Z" {
		t.Errorf("after reinstating: %s", r.raw)
	}
	if got := e.do("GET", "/admin/v1/orgs/acme", "").body["status"]; got != "active" {
		t.Errorf("GET after reinstating: status %v", got)
	}

	// null lifts a cap; the other members of quota stay.
	r = e.do("PATCH", "/admin/v1/orgs/acme", `{"quota":{"calls":null},"rateLimits":{"urlMintsPerHour":null}}`)
	r.want(t, 200, "")
	jsonEqual(t, r.body["quota"].(map[string]any), `{"calls":null,"downloads":200,"exports":0,"testprepitems":50}`)
	jsonEqual(t, r.body["rateLimits"].(map[string]any), `{"callsPerHour":100,"lessonReadsPerHour":60,"urlMintsPerHour":null}`)
	jsonEqual(t, e.do("GET", "/admin/v1/orgs/acme", "").body["quota"].(map[string]any),
		`{"calls":null,"downloads":200,"exports":0,"testprepitems":50}`)

	tests := []struct {
		name, path, body string
		status           int
		code, param      string
	}{
		{"unknown org", "/admin/v1/orgs/ghost", `{"status":"active"}`, 404, "NOT_FOUND", ""},
		{"orgId is fixed", "/admin/v1/orgs/acme", `{"orgId":"other"}`, 400, "BAD_REQUEST", "orgId"},
		{"bad body before existence", "/admin/v1/orgs/ghost", `{"status":""}`, 400, "BAD_REQUEST", "status"},
		{"unknown member", "/admin/v1/orgs/acme", `{"plan":"gold"}`, 400, "BAD_REQUEST", "plan"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("PATCH", tt.path, tt.body)
			r.want(t, tt.status, tt.code)
			if got := r.errField("parameter"); tt.param != "" && got != tt.param {
				t.Errorf("parameter = %v, want %s", got, tt.param)
			}
			if tt.status == 404 && !strings.Contains(r.errField("message").(string), "ghost") {
				t.Errorf("404 message does not name the org: %s", r.raw)
			}
		})
	}
	// A refused PATCH changes nothing.
	if got := e.do("GET", "/admin/v1/orgs/acme", "").body["orgName"]; got != "Acme Schools" {
		t.Errorf("orgName = %v after refused PATCHes", got)
	}
}

// orgs is an admin.Orgs of functions.
type orgs struct {
	extras    func(ctx context.Context, o *store.Org) (string, map[string]any, error)
	reinstate func(ctx context.Context, o *store.Org) error
}

func (f orgs) OrgExtras(ctx context.Context, o *store.Org) (string, map[string]any, error) {
	return f.extras(ctx, o)
}

func (f orgs) Reinstate(ctx context.Context, o *store.Org) error { return f.reinstate(ctx, o) }

// docs/operations.md, "The admin API": PATCH status "active" reinstates a suspended org: the
// origin's enumeration alarm is lifted before the status is stored, and
// only by that PATCH; every PATCH answers the effective status.
func TestPatchReinstates(t *testing.T) {
	var e *env
	var mu sync.Mutex
	alarms := map[string]bool{"acme": true, "other": true}
	var fail atomic.Bool
	var reinstated []string
	lifted := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(reinstated) }
	e = newEnv(t, func(c *admin.Config) {
		c.Orgs = orgs{
			extras: func(_ context.Context, o *store.Org) (string, map[string]any, error) {
				mu.Lock()
				defer mu.Unlock()
				if alarms[o.ID] && o.Status == "active" {
					return "suspended", nil, nil
				}
				return o.Status, nil, nil
			},
			reinstate: func(ctx context.Context, o *store.Org) error {
				mu.Lock()
				defer mu.Unlock()
				if fail.Load() {
					return errors.New("meters unreachable")
				}
				// Before the status is stored.
				if cur, err := e.store.GetOrg(ctx, o.ID); err != nil || cur.Status != "suspended" {
					t.Errorf("Reinstate(%s) with the stored status %v (%v), want still suspended", o.ID, cur.Status, err)
				}
				reinstated = append(reinstated, o.ID)
				delete(alarms, o.ID)
				return nil
			},
		}
	})
	e.do("POST", "/admin/v1/orgs", `{"orgId":"acme","status":"suspended"}`).want(t, 201, "")
	e.do("POST", "/admin/v1/orgs", `{"orgId":"other","status":"suspended"}`).want(t, 201, "")
	// Other members, or another status, lift nothing.
	for _, body := range []string{`{"orgName":"Acme"}`, `{"status":"suspended"}`, `{"quota":{"calls":5}}`} {
		r := e.do("PATCH", "/admin/v1/orgs/acme", body)
		r.want(t, 200, "")
		if got := lifted(); len(got) != 0 {
			t.Fatalf("PATCH %s reinstated %v", body, got)
		}
	}
	// The status is stored active, but the alarm is in force: suspended.
	e.do("PATCH", "/admin/v1/orgs/acme", `{"status":"suspended"}`).want(t, 200, "")
	if _, err := e.store.UpdateOrg(context.Background(), "acme", func(o *store.Org) error { o.Status = "active"; return nil }); err != nil {
		t.Fatal(err)
	}
	if got := e.do("GET", "/admin/v1/orgs/acme", "").body["status"]; got != "suspended" {
		t.Errorf("GET with the alarm in force: status %v", got)
	}
	r := e.do("PATCH", "/admin/v1/orgs/acme", `{"orgName":"Acme"}`)
	if r.want(t, 200, ""); r.body["status"] != "suspended" {
		t.Errorf("PATCH with the alarm in force answers status %v, want suspended", r.body["status"])
	}
	if _, err := e.store.UpdateOrg(context.Background(), "acme", func(o *store.Org) error { o.Status = "suspended"; return nil }); err != nil {
		t.Fatal(err)
	}

	// A failed reinstatement stores nothing.
	fail.Store(true)
	e.do("PATCH", "/admin/v1/orgs/acme", `{"status":"active"}`).want(t, 500, "INTERNAL")
	if o, _ := e.store.GetOrg(context.Background(), "acme"); o.Status != "suspended" {
		t.Errorf("status %q after a failed reinstatement", o.Status)
	}
	fail.Store(false)
	r = e.do("PATCH", "/admin/v1/orgs/acme", `{"status":"active"}`)
	r.want(t, 200, "")
	if got := lifted(); r.body["status"] != "active" || len(got) != 1 || got[0] != "acme" {
		t.Errorf("reinstating: status %v, reinstated %v", r.body["status"], got)
	}
	if got := e.do("GET", "/admin/v1/orgs/acme", "").body["status"]; got != "active" {
		t.Errorf("GET after reinstating: status %v", got)
	}
	mu.Lock()
	if !alarms["other"] {
		t.Errorf("another org's alarm was lifted")
	}
	mu.Unlock()
	e.do("PATCH", "/admin/v1/orgs/ghost", `{"status":"active"}`).want(t, 404, "NOT_FOUND")
}

func TestGetWithExtras(t *testing.T) {
	extras := map[string]any{
		"meters":      map[string]any{"month": map[string]int{"calls": 7}},
		"enumeration": map[string]any{"day": "2030-03-10", "lessonsRead": 2, "grantedLessons": 100},
	}
	e := newEnv(t, func(c *admin.Config) {
		c.Orgs = orgs{extras: func(_ context.Context, o *store.Org) (string, map[string]any, error) {
			switch o.ID {
			case "clash":
				return o.Status, map[string]any{"status": "x"}, nil
			case "alarmed":
				return "suspended", extras, nil
			}
			return o.Status, extras, nil
		}}
	})
	e.do("POST", "/admin/v1/orgs", `{"orgId":"acme","orgName":"Acme"}`).want(t, 201, "")
	r := e.do("GET", "/admin/v1/orgs/acme", "")
	r.want(t, 200, "")
	if r.body["orgName"] != "Acme" || r.body["status"] != "active" {
		t.Errorf("org members missing: %s", r.raw)
	}
	// The status is the effective one the origin reports.
	e.do("POST", "/admin/v1/orgs", `{"orgId":"alarmed"}`).want(t, 201, "")
	if got := e.do("GET", "/admin/v1/orgs/alarmed", "").body["status"]; got != "suspended" {
		t.Errorf("GET of an org the origin suspends: status %v, want suspended", got)
	}
	jsonEqual(t, r.body["meters"].(map[string]any), `{"month":{"calls":7}}`)
	jsonEqual(t, r.body["enumeration"].(map[string]any), `{"day":"2030-03-10","lessonsRead":2,"grantedLessons":100}`)
	if !bytes.HasPrefix(r.raw, []byte(`{"orgId":"acme",`)) {
		t.Errorf("org members should come first: %s", r.raw)
	}

	// Extras that collide with org members are a wiring fault: 500, with
	// the cause in the log and not in the body.
	e.do("POST", "/admin/v1/orgs", `{"orgId":"clash"}`).want(t, 201, "")
	r = e.do("GET", "/admin/v1/orgs/clash", "")
	r.want(t, 500, "INTERNAL")
	if bytes.Contains(r.raw, []byte("collides")) {
		t.Errorf("the cause leaked to the client: %s", r.raw)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "collides") || !strings.Contains(logs, r.header.Get("X-Request-Id")) {
		t.Errorf("the log lacks the cause or the request id:\n%s", logs)
	}
	e.do("GET", "/admin/v1/orgs/ghost", "").want(t, 404, "NOT_FOUND")
}

func TestDelete(t *testing.T) {
	e := newEnv(t, nil)
	e.do("POST", "/admin/v1/orgs", `{"orgId":"acme"}`).want(t, 201, "")
	r := e.do("DELETE", "/admin/v1/orgs/acme", "")
	r.want(t, 204, "")
	if len(r.raw) != 0 {
		t.Errorf("204 with a body: %s", r.raw)
	}
	r = e.do("GET", "/admin/v1/orgs/acme", "")
	r.want(t, 404, "NOT_FOUND")
	if !strings.Contains(r.errField("message").(string), "acme") {
		t.Errorf("404 message does not name the org: %s", r.raw)
	}
	e.do("DELETE", "/admin/v1/orgs/acme", "").want(t, 404, "NOT_FOUND")
}

// storedClient is what the store must hold after a creation.
type storedClient struct {
	OrgID                            string
	Scopes, GrantTypes, RedirectURIs []string
}

// TestCreateClient runs client creation against the identity provider's
// real CreateClient and validator over the real store.
func TestCreateClient(t *testing.T) {
	e := newEnv(t, nil)
	e.do("POST", "/admin/v1/orgs", `{"orgId":"acme"}`).want(t, 201, "")
	long := "https://a.example/" + strings.Repeat("x", 3000)
	tests := []struct {
		name, org, body string
		status          int
		param           string
		received        string
		want            *storedClient // what the store must hold
		answer          string        // scopes, grantTypes, redirectUris of the answer
	}{
		{name: "suffixes", org: "acme", body: `{"scopes":["content.read","media.download"]}`, status: 201,
			want:   &storedClient{"acme", []string{"content.read", "media.download"}, []string{"client_credentials"}, []string{}},
			answer: `{"scopes":["service-api/content.read","service-api/media.download"],"grantTypes":["client_credentials"],"redirectUris":[]}`},
		{name: "full names, repeats, any order", org: "acme",
			body: `{"scopes":["service-api/progress.write","content.read","service-api/content.read"]}`, status: 201,
			want:   &storedClient{"acme", []string{"content.read", "progress.write"}, []string{"client_credentials"}, []string{}},
			answer: `{"scopes":["service-api/content.read","service-api/progress.write"],"grantTypes":["client_credentials"],"redirectUris":[]}`},
		{name: "null grantTypes", org: "acme", body: `{"scopes":["content.read"],"grantTypes":null}`, status: 400, param: "grantTypes"},
		{name: "null redirectUris", org: "acme", body: `{"scopes":["content.read"],"redirectUris":null}`, status: 400, param: "redirectUris"},
		{name: "learner app", org: "acme",
			body:   `{"scopes":["progress.read"],"grantTypes":["authorization_code","client_credentials"],"redirectUris":["http://127.0.0.1:5000/cb","https://app.example/cb?x=1","http://[::1]/cb","http://localhost:8080/cb","https://app.example/cb?x=1"]}`,
			status: 201,
			want:   &storedClient{"acme", []string{"progress.read"}, []string{"client_credentials", "authorization_code"}, []string{"http://127.0.0.1:5000/cb", "https://app.example/cb?x=1", "http://[::1]/cb", "http://localhost:8080/cb"}},
			answer: `{"scopes":["service-api/progress.read"],"grantTypes":["client_credentials","authorization_code"],"redirectUris":["http://127.0.0.1:5000/cb","https://app.example/cb?x=1","http://[::1]/cb","http://localhost:8080/cb"]}`},
		// Issue #13 point 8: these answered 500.
		{name: "redirect without authorization_code", org: "acme",
			body: `{"scopes":["content.read"],"redirectUris":["https://a.test/cb"]}`, status: 400, param: "redirectUris", received: "https://a.test/cb"},
		{name: "redirect with client_credentials only", org: "acme",
			body: `{"scopes":["content.read"],"grantTypes":["client_credentials"],"redirectUris":["https://a.test/cb"]}`, status: 400, param: "redirectUris"},
		{name: "unknown scope", org: "acme", body: `{"scopes":["content.read","content.write"]}`, status: 400, param: "scopes", received: "content.write"},
		{name: "unknown full name", org: "acme", body: `{"scopes":["other-api/content.read"]}`, status: 400, param: "scopes"},
		{name: "no scopes", org: "acme", body: `{"scopes":[]}`, status: 400, param: "scopes"},
		{name: "scopes missing", org: "acme", body: `{}`, status: 400, param: "scopes"},
		{name: "scopes not a list", org: "acme", body: `{"scopes":"content.read"}`, status: 400, param: "scopes"},
		{name: "authorization_code without redirect", org: "acme",
			body: `{"scopes":["content.read"],"grantTypes":["authorization_code"]}`, status: 400, param: "redirectUris"},
		{name: "empty grantTypes", org: "acme", body: `{"scopes":["content.read"],"grantTypes":[]}`, status: 400, param: "grantTypes"},
		{name: "unknown grant", org: "acme", body: `{"scopes":["content.read"],"grantTypes":["password"]}`, status: 400, param: "grantTypes", received: "password"},
		{name: "redirect with fragment", org: "acme",
			body: `{"scopes":["content.read"],"grantTypes":["authorization_code"],"redirectUris":["https://a.example/cb#x"]}`, status: 400, param: "redirectUris"},
		{name: "relative redirect", org: "acme",
			body: `{"scopes":["content.read"],"grantTypes":["authorization_code"],"redirectUris":["/cb"]}`, status: 400, param: "redirectUris"},
		{name: "non-http redirect", org: "acme",
			body: `{"scopes":["content.read"],"grantTypes":["authorization_code"],"redirectUris":["ftp://a.example/cb"]}`, status: 400, param: "redirectUris"},
		{name: "plain http off loopback", org: "acme",
			body: `{"scopes":["content.read"],"grantTypes":["authorization_code"],"redirectUris":["http://app.example/cb"]}`, status: 400, param: "redirectUris", received: "http://app.example/cb"},
		{name: "user info", org: "acme",
			body: `{"scopes":["content.read"],"grantTypes":["authorization_code"],"redirectUris":["https://u:p@a.example/cb"]}`, status: 400, param: "redirectUris"},
		{name: "custom scheme", org: "acme",
			body: `{"scopes":["content.read"],"grantTypes":["authorization_code"],"redirectUris":["com.example.app:/cb"]}`, status: 400, param: "redirectUris"},
		{name: "overlong redirect", org: "acme",
			body: `{"scopes":["content.read"],"grantTypes":["authorization_code"],"redirectUris":["` + long + `"]}`, status: 400, param: "redirectUris", received: long[:200]},
		{name: "case-folded member name", org: "acme", body: `{"Scopes":["content.read"]}`, status: 400, param: "Scopes"},
		{name: "unknown org", org: "ghost", body: `{"scopes":["content.read"]}`, status: 404},
		{name: "bad body before existence", org: "ghost", body: `{"scopes":["nope"]}`, status: 400, param: "scopes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.clients.count()
			r := e.do("POST", "/admin/v1/orgs/"+tt.org+"/clients", tt.body)
			if tt.status != 201 {
				code := "BAD_REQUEST"
				if tt.status == 404 {
					code = "NOT_FOUND"
				}
				r.want(t, tt.status, code)
				if tt.param != "" && r.errField("parameter") != tt.param {
					t.Errorf("parameter = %v, want %s (%s)", r.errField("parameter"), tt.param, r.raw)
				}
				if tt.received != "" && r.errField("received") != tt.received {
					t.Errorf("received = %v, want %s", r.errField("received"), tt.received)
				}
				if strings.HasPrefix(tt.name, "unknown scope") && r.errField("allowed") == nil {
					t.Errorf("no allowed list: %s", r.raw)
				}
				if e.clients.count() != before {
					t.Errorf("CreateClient was called for a refused request")
				}
				return
			}
			r.want(t, 201, "")
			if e.clients.count() != before+1 {
				t.Fatalf("CreateClient called %d times, want once", e.clients.count()-before)
			}
			id, _ := r.body["clientId"].(string)
			secret, _ := r.body["clientSecret"].(string)
			want := strings.TrimSuffix(tt.answer, "}") +
				fmt.Sprintf(`,"clientId":%q,"clientSecret":%q,"orgId":"acme"}`, id, secret)
			jsonEqual(t, r.body, want)
			c, err := e.store.GetClient(t.Context(), id)
			if err != nil {
				t.Fatalf("the created client is not stored: %v", err)
			}
			got := storedClient{c.OrgID, c.Scopes, c.GrantTypes, c.RedirectURIs}
			if !reflect.DeepEqual(got, *tt.want) {
				t.Errorf("stored %+v, want %+v", got, *tt.want)
			}
			if bcrypt.CompareHashAndPassword(c.SecretHash, []byte(secret)) != nil {
				t.Errorf("the answered secret does not match the stored hash")
			}
			if r.header.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control = %q, want no-store", r.header.Get("Cache-Control"))
			}
			if strings.Contains(e.logs.String(), secret) {
				t.Errorf("a secret appears in the log")
			}
			if g := e.do("GET", "/admin/v1/orgs/acme", ""); bytes.Contains(g.raw, []byte(secret)) {
				t.Errorf("GET org shows a secret: %s", g.raw)
			}
		})
	}
}

func TestReload(t *testing.T) {
	e := newEnv(t, nil)
	r := e.do("POST", "/admin/v1/corpus/reload", `{"dir":"/corpora/next"}`)
	r.want(t, 200, "")
	jsonEqual(t, r.body, `{"contentVersion":"2030-03-10+0123abcd"}`)

	r = e.do("POST", "/admin/v1/corpus/reload", `{"dir":"/corpora/broken"}`)
	r.want(t, 400, "BAD_REQUEST")
	msg, _ := r.errField("message").(string)
	if r.errField("parameter") != "dir" || !strings.Contains(msg, `lessons/high/algebra.json: classes[3].cards[2].id`) {
		t.Errorf("load failure: %s, want parameter dir and the loader's message", r.raw)
	}
	for _, body := range []string{`{}`, `{"dir":""}`, `{"dir":7}`, `{"dir":"/x","force":true}`} {
		e.do("POST", "/admin/v1/corpus/reload", body).want(t, 400, "BAD_REQUEST")
	}
	e.do("GET", "/admin/v1/corpus/reload", "").want(t, 405, "METHOD_NOT_ALLOWED")
}

func TestClockDisabled(t *testing.T) {
	e := newEnv(t, nil)
	unknown := e.do("GET", "/admin/v1/nowhere", "")
	unknown.want(t, 404, "NOT_FOUND")
	for _, m := range []string{"GET", "POST", "PUT"} {
		r := e.do(m, "/admin/v1/clock", `{"advanceSeconds":60}`)
		r.want(t, 404, "NOT_FOUND")
		if r.header.Get("Allow") != "" {
			t.Errorf("%s: Allow %q reveals the clock", m, r.header.Get("Allow"))
		}
	}
	if got := e.clk.Offset(); got != 0 {
		t.Errorf("the disabled clock moved by %v", got)
	}
}

func TestClock(t *testing.T) {
	e := newEnv(t, func(c *admin.Config) { c.TestClock = true })
	r := e.do("GET", "/admin/v1/clock", "")
	r.want(t, 200, "")
	jsonEqual(t, r.body, `{"now":"2030-03-10T12:00:00Z","offsetSeconds":0}`)

	r = e.do("POST", "/admin/v1/clock", `{"advanceSeconds":3600}`)
	r.want(t, 200, "")
	jsonEqual(t, r.body, `{"now":"2030-03-10T13:00:00Z","offsetSeconds":3600}`)

	r = e.do("POST", "/admin/v1/clock", `{"now":"2030-04-01T00:00:00Z"}`)
	r.want(t, 200, "")
	jsonEqual(t, r.body, `{"now":"2030-04-01T00:00:00Z","offsetSeconds":1857600}`)
	jsonEqual(t, e.do("GET", "/admin/v1/clock", "").body, `{"now":"2030-04-01T00:00:00Z","offsetSeconds":1857600}`)

	// The admin API follows its clock: a new org's defaults are from it.
	r = e.do("POST", "/admin/v1/orgs", `{"orgId":"late"}`)
	if r.body["createdAt"] != "2030-04-01T00:00:00Z" || r.body["renewsAt"] != "2031-04-01T00:00:00Z" {
		t.Errorf("org created under the moved clock: %s", r.raw)
	}

	tests := []struct{ name, body, param string }{
		{"in the past", `{"now":"2030-03-31T23:59:59Z"}`, "now"},
		{"not RFC 3339", `{"now":"April 2"}`, "now"},
		{"zero", `{"advanceSeconds":0}`, "advanceSeconds"},
		{"negative", `{"advanceSeconds":-60}`, "advanceSeconds"},
		{"fraction", `{"advanceSeconds":1.5}`, "advanceSeconds"},
		{"string", `{"advanceSeconds":"60"}`, "advanceSeconds"},
		{"huge", `{"advanceSeconds":99999999999999}`, "advanceSeconds"},
		{"both", `{"advanceSeconds":60,"now":"2031-01-01T00:00:00Z"}`, "body"},
		{"neither", `{}`, "body"},
		{"unknown member", `{"rewind":true}`, "rewind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("POST", "/admin/v1/clock", tt.body)
			r.want(t, 400, "BAD_REQUEST")
			if got := r.errField("parameter"); got != tt.param {
				t.Errorf("parameter = %v, want %s (%s)", got, tt.param, r.raw)
			}
		})
	}
	jsonEqual(t, e.do("GET", "/admin/v1/clock", "").body, `{"now":"2030-04-01T00:00:00Z","offsetSeconds":1857600}`)
	e.do("DELETE", "/admin/v1/clock", "").want(t, 405, "METHOD_NOT_ALLOWED")
}

func TestRouting(t *testing.T) {
	e := newEnv(t, nil)
	tests := []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/", 404, ""},
		{"GET", "/admin/v1/nope", 404, ""},
		{"GET", "/v1/subjects", 404, ""},
		{"GET", "/admin/v1/orgs/", 404, ""},
		{"GET", "//admin/v1/health", 404, ""},
		{"GET", "/admin/v1/./health", 404, ""},
		{"GET", "/admin/v1/orgs/acme/clients", 405, "POST"},
		{"POST", "/admin/v1/health", 405, "GET, HEAD"},
		{"GET", "/admin/v1/orgs", 405, "POST"},
		{"PUT", "/admin/v1/orgs/acme", 405, "DELETE, GET, HEAD, PATCH"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := e.do(tt.method, tt.path, "")
			if tt.status == 404 {
				r.want(t, 404, "NOT_FOUND")
				return
			}
			r.want(t, 405, "METHOD_NOT_ALLOWED")
			if got := r.header.Get("Allow"); got != tt.allow {
				t.Errorf("Allow = %q, want %q", got, tt.allow)
			}
			if got := fmt.Sprint(r.errField("allow")); got != fmt.Sprint(strings.Split(tt.allow, ", ")) {
				t.Errorf("body allow = %v, want %s", got, tt.allow)
			}
		})
	}
}

func TestUnconfiguredRoutes(t *testing.T) {
	e := newEnv(t, func(c *admin.Config) { c.CreateClient, c.Reload = nil, nil })
	e.do("POST", "/admin/v1/orgs", `{"orgId":"acme"}`).want(t, 201, "")
	e.do("POST", "/admin/v1/orgs/acme/clients", `{"scopes":["content.read"]}`).want(t, 404, "NOT_FOUND")
	e.do("POST", "/admin/v1/corpus/reload", `{"dir":"/x"}`).want(t, 404, "NOT_FOUND")
}

func TestPanicIsInternal(t *testing.T) {
	e := newEnv(t, func(c *admin.Config) {
		c.Orgs = orgs{extras: func(context.Context, *store.Org) (string, map[string]any, error) { panic("boom") }}
	})
	e.do("POST", "/admin/v1/orgs", `{"orgId":"acme"}`).want(t, 201, "")
	r := e.do("GET", "/admin/v1/orgs/acme", "")
	r.want(t, 500, "INTERNAL")
	if bytes.Contains(r.raw, []byte("boom")) || !strings.Contains(e.logs.String(), "boom") {
		t.Errorf("the panic should be logged, not sent: %s", r.raw)
	}
	e.do("GET", "/admin/v1/health", "").want(t, 200, "")
}
