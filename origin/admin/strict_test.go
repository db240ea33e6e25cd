package admin_test

import (
	"strings"
	"testing"
)

// Issue #13: the admin API took duplicate members (the last won), any
// string as a tier or status, and answered wrong types with Go's type
// names. Every body is now read as strictly as the public API reads its
// own, with the same error body: 400 BAD_REQUEST naming the member.
func TestStrictBodies(t *testing.T) {
	e := newEnv(t, nil)
	e.do("POST", "/admin/v1/orgs", `{"orgId":"acme"}`).want(t, 201, "")
	tests := []struct {
		name, method, path, body, param string
	}{
		{"create: repeated orgId", "POST", "/admin/v1/orgs", `{"orgId":"first","orgId":"second"}`, "orgId"},
		{"create: repeated in quota", "POST", "/admin/v1/orgs", `{"quota":{"calls":1,"calls":2}}`, "quota.calls"},
		{"create: tier not a plan name", "POST", "/admin/v1/orgs", `{"tier":"<script>"}`, "tier"},
		{"create: tier empty", "POST", "/admin/v1/orgs", `{"tier":""}`, "tier"},
		{"create: unknown status", "POST", "/admin/v1/orgs", `{"status":"paused"}`, "status"},
		{"create: grant not a tier", "POST", "/admin/v1/orgs", `{"contentGrants":["gold"]}`, "contentGrants"},
		{"create: grant slug shape", "POST", "/admin/v1/orgs", `{"contentGrants":["high/Al--gebra"]}`, "contentGrants"},
		{"create: string for an integer", "POST", "/admin/v1/orgs", `{"eclaVersion":"2"}`, "eclaVersion"},
		{"create: number for a string", "POST", "/admin/v1/orgs", `{"orgName":42}`, "orgName"},
		{"create: object for a list", "POST", "/admin/v1/orgs", `{"contentGrants":{"high":true}}`, "contentGrants"},
		{"create: fraction in quota", "POST", "/admin/v1/orgs", `{"quota":{"calls":0.5}}`, "quota.calls"},
		{"patch: repeated status", "PATCH", "/admin/v1/orgs/acme", `{"status":"suspended","status":"active"}`, "status"},
		{"patch: unknown status", "PATCH", "/admin/v1/orgs/acme", `{"status":"ACTIVE"}`, "status"},
		{"patch: repeated in rateLimits", "PATCH", "/admin/v1/orgs/acme", `{"rateLimits":{"callsPerHour":1,"callsPerHour":null}}`, "rateLimits.callsPerHour"},
		{"clients: repeated scopes", "POST", "/admin/v1/orgs/acme/clients", `{"scopes":["content.read"],"scopes":["media.download"]}`, "scopes"},
		{"clients: number in scopes", "POST", "/admin/v1/orgs/acme/clients", `{"scopes":[1]}`, "scopes"},
		{"reload: repeated dir", "POST", "/admin/v1/corpus/reload", `{"dir":"/corpora/a","dir":"/corpora/b"}`, "dir"},
		{"reload: number for dir", "POST", "/admin/v1/corpus/reload", `{"dir":7}`, "dir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(tt.method, tt.path, tt.body)
			r.want(t, 400, "BAD_REQUEST")
			if got := r.errField("parameter"); got != tt.param {
				t.Errorf("parameter = %v, want %s (%s)", got, tt.param, r.raw)
			}
			msg, _ := r.errField("message").(string)
			for _, goWord := range []string{"Go ", "json:", "unmarshal", "int64", "[]string", "struct"} {
				if strings.Contains(msg, goWord) {
					t.Errorf("message %q has Go's words (%q)", msg, goWord)
				}
			}
		})
	}
	// Nothing of a refused body was saved.
	e.do("GET", "/admin/v1/orgs/first", "").want(t, 404, "NOT_FOUND")
	e.do("GET", "/admin/v1/orgs/second", "").want(t, 404, "NOT_FOUND")
	if r := e.do("GET", "/admin/v1/orgs/acme", ""); r.body["status"] != "active" {
		t.Errorf("a refused patch changed the org: %s", r.raw)
	}
	// The plan tier takes a plan's name; the status its values.
	r := e.do("PATCH", "/admin/v1/orgs/acme", `{"tier":"district-2030","status":"suspended"}`)
	r.want(t, 200, "")
	if r.body["tier"] != "district-2030" || r.body["status"] != "suspended" {
		t.Errorf("patch: %s", r.raw)
	}
}
