package admin_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/lectern-api/lectern/origin/admin"
	"github.com/lectern-api/lectern/origin/webhook"
	"github.com/lectern-api/lectern/shared/subkey"
)

// webhookEnv is newEnv with webhooks on, their delivery loop running,
// and a receiver whose requests arrive on got.
func webhookEnv(t *testing.T) (*env, *webhook.Outbox, string, chan *http.Request) {
	got := make(chan *http.Request, 64)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		got <- r
	}))
	t.Cleanup(rc.Close)
	var o *webhook.Outbox
	e := newEnv(t, func(c *admin.Config) {
		o = webhook.New(webhook.Config{Store: c.Store.(webhook.Store), Now: c.Clock.Now, AllowPrivate: true,
			Key: subkey.Derive([]byte("a-test-secret-of-at-least-32-characters"), subkey.Webhooks), Poll: 20 * time.Millisecond})
		c.Webhooks = o
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); o.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e, o, rc.URL, got
}

var secretPattern = regexp.MustCompile(`^whsec_[A-Za-z0-9+/]{43}=$`)

// TestWebhookRoutes: the webhook routes over a real listener: an
// endpoint is made (201, its secret shown once: whsec_ and 32 bytes of
// base64), listed without its secret, its bad bodies refused naming the
// member, an unknown org or endpoint 404; a PATCH suspending the org
// sends license.changed and org.suspended (reason operator), signed so
// that the Standard Webhooks library verifies them with that secret, and
// the delivery log lists both delivered; a rotation gives a new secret
// and keeps the old one signing for 24 h; delete is 204, then 404; the
// eleventh endpoint is 409.
func TestWebhookRoutes(t *testing.T) {
	e, _, recvURL, got := webhookEnv(t)
	e.do("POST", "/admin/v1/orgs", `{"orgId":"acme","orgName":"Acme"}`).want(t, 201, "")

	e.do("POST", "/admin/v1/orgs/nobody/webhooks", `{"url":"https://hooks.example.com/","events":["org.suspended"]}`).want(t, 404, "NOT_FOUND")
	for _, bad := range []struct{ body, param string }{
		{`{"url":"ftp://hooks.example.com/","events":["org.suspended"]}`, "url"},
		{`{"url":"https://hooks.example.com/","events":["org.deleted"]}`, "events"},
		{`{"url":"https://hooks.example.com/","events":[]}`, "events"},
		{`{"url":"https://hooks.example.com/"}`, "events"},
		{`{"events":["org.suspended"]}`, "url"},
		{`{"url":"https://hooks.example.com/","events":["org.suspended"],"secret":"x"}`, "secret"},
	} {
		r := e.do("POST", "/admin/v1/orgs/acme/webhooks", bad.body)
		r.want(t, 400, "BAD_REQUEST")
		if p := r.errField("parameter"); p != bad.param {
			t.Errorf("%s: parameter %v, want %s", bad.body, p, bad.param)
		}
	}

	r := e.do("POST", "/admin/v1/orgs/acme/webhooks",
		fmt.Sprintf(`{"url":%q,"events":["license.changed","org.suspended"]}`, recvURL))
	r.want(t, 201, "")
	id, _ := r.body["id"].(string)
	secret, _ := r.body["secret"].(string)
	if !strings.HasPrefix(id, "wh_") || !secretPattern.MatchString(secret) {
		t.Fatalf("created %s", r.raw)
	}
	if k, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_")); len(k) != 32 {
		t.Errorf("the secret holds %d bytes, want 32", len(k))
	}
	if loc := r.header.Get("Location"); loc != "/admin/v1/orgs/acme/webhooks/"+id {
		t.Errorf("Location %q", loc)
	}
	list := e.do("GET", "/admin/v1/orgs/acme/webhooks", "")
	list.want(t, 200, "")
	if strings.Contains(string(list.raw), secret) || strings.Contains(string(list.raw), `"secret"`) ||
		!strings.Contains(string(list.raw), id) {
		t.Errorf("the list shows a secret, or not the endpoint: %s", list.raw)
	}
	e.do("GET", "/admin/v1/orgs/nobody/webhooks", "").want(t, 404, "NOT_FOUND")

	// The operator suspends the org: two events, verified.
	e.do("PATCH", "/admin/v1/orgs/acme", `{"status":"suspended"}`).want(t, 200, "")
	wh, _ := standardwebhooks.NewWebhook(secret)
	types := map[string]map[string]any{}
	for range 2 {
		var req *http.Request
		select {
		case req = <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("no delivery after the PATCH")
		}
		body, _ := io.ReadAll(req.Body)
		if err := wh.Verify(body, req.Header); err != nil {
			t.Errorf("the Standard Webhooks library refuses the delivery: %v", err)
		}
		var env struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		json.Unmarshal(body, &env)
		types[env.Type] = env.Data
	}
	if d := types["org.suspended"]; d["reason"] != "operator" || d["orgId"] != "acme" {
		t.Errorf("org.suspended data %v", d)
	}
	if d := types["license.changed"]; d["status"] != "suspended" || fmt.Sprint(d["changed"]) != "[status]" {
		t.Errorf("license.changed data %v", d)
	}
	// A PATCH that changes nothing of the licence sends nothing.
	e.do("PATCH", "/admin/v1/orgs/acme", `{"orgName":"Acme Schools"}`).want(t, 200, "")

	deadline := time.Now().Add(5 * time.Second)
	var log response
	for {
		log = e.do("GET", "/admin/v1/orgs/acme/webhooks/"+id+"/deliveries", "")
		log.want(t, 200, "")
		items, _ := log.body["items"].([]any)
		delivered := 0
		for _, it := range items {
			if m := it.(map[string]any); m["state"] == "delivered" && m["responseStatus"] == 200.0 && m["attempts"] == 1.0 {
				delivered++
			}
		}
		if len(items) == 2 && delivered == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery log %s, want two delivered", log.raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
	page := e.do("GET", "/admin/v1/orgs/acme/webhooks/"+id+"/deliveries?limit=1", "")
	page.want(t, 200, "")
	if items, _ := page.body["items"].([]any); len(items) != 1 || page.body["nextBefore"] == nil {
		t.Errorf("a page of 1: %s", page.raw)
	}
	e.do("GET", "/admin/v1/orgs/acme/webhooks/"+id+"/deliveries?limit=0", "").want(t, 400, "BAD_REQUEST")
	e.do("GET", "/admin/v1/orgs/acme/webhooks/wh_none/deliveries", "").want(t, 404, "NOT_FOUND")

	rot := e.do("POST", "/admin/v1/orgs/acme/webhooks/"+id+"/rotate", "")
	rot.want(t, 200, "")
	if s, _ := rot.body["secret"].(string); !secretPattern.MatchString(s) || s == secret {
		t.Errorf("rotated: %s", rot.raw)
	}
	if until := rot.body["previousSecretExpiresAt"]; until != base.Add(24*time.Hour).Format(time.RFC3339) {
		t.Errorf("previousSecretExpiresAt %v, want 24 h ahead", until)
	}
	e.do("POST", "/admin/v1/orgs/acme/webhooks/wh_none/rotate", "").want(t, 404, "NOT_FOUND")

	e.do("DELETE", "/admin/v1/orgs/acme/webhooks/"+id, "").want(t, 204, "")
	e.do("DELETE", "/admin/v1/orgs/acme/webhooks/"+id, "").want(t, 404, "NOT_FOUND")

	for i := range webhook.DefaultMaxEndpoints {
		e.do("POST", "/admin/v1/orgs/acme/webhooks", fmt.Sprintf(`{"url":"https://hooks.example.com/%d","events":["quota.threshold"]}`, i)).want(t, 201, "")
	}
	e.do("POST", "/admin/v1/orgs/acme/webhooks", `{"url":"https://hooks.example.com/x","events":["quota.threshold"]}`).want(t, 409, "WRITE_CONFLICT")
}

// TestWebhookRoutesNeedWebhooks: without Config.Webhooks the routes are
// not served.
func TestWebhookRoutesNeedWebhooks(t *testing.T) {
	e := newEnv(t, nil)
	e.do("POST", "/admin/v1/orgs", `{"orgId":"acme","orgName":"Acme"}`).want(t, 201, "")
	e.do("GET", "/admin/v1/orgs/acme/webhooks", "").want(t, 404, "NOT_FOUND")
}
