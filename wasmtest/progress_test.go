package wasmtest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/lectern-api/lectern/origin/idp/idptest"
)

// learnerRedirect is the redirect URI of the suite's learner apps.
const learnerRedirect = "https://app.test/callback"

// learnerToken registers a learner app (an authorization_code client) of
// org through the admin API and returns the token the identity provider
// issues it for learner: the authorization request with PKCE S256 and
// login_hint (the dev provider approves at once), then the code's
// exchange.
func (o *origin) learnerToken(t *testing.T, org, learner string, scopes ...string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"scopes": scopes, "grantTypes": []string{"authorization_code"}, "redirectUris": []string{learnerRedirect}})
	code, m := o.adminCall(t, "POST", "/admin/v1/orgs/"+org+"/clients", string(b))
	if code != 201 {
		t.Fatalf("create learner app: %d %v", code, m)
	}
	tok, err := idptest.LearnerToken(context.Background(), idptest.LearnerApp(o.idp, m["clientId"].(string), m["clientSecret"].(string), learnerRedirect, scopes...), learner)
	if err != nil {
		t.Fatal(err)
	}
	return tok.AccessToken
}

// progressScenarios are the progress routes (17 and 18) through the edge
// and directly, with learner tokens of f's organisation. Each scenario
// runs through the edge first: the edge's PUT saves, and the direct one,
// the same body on the same day, is the harmless retry that answers alike.
func progressScenarios(t *testing.T, o *origin, f fixture) []scenario {
	t.Helper()
	f.tokens["learner"] = o.learnerToken(t, f.org, "parity-learner", "progress.read", "progress.write")
	f.tokens["learner-read"] = o.learnerToken(t, f.org, "parity-learner", "progress.read")
	mid, msec := o.org(t, `{"orgId":"`+f.org+`-machine","contentGrants":`+allTiers+`}`, "progress.read", "progress.write")
	f.tokens["machine-progress"] = o.token(t, mid, msec, "progress.read", "progress.write")
	sub := content.Subjects[0]
	lesson := fmt.Sprintf("/v1/progress/%s/%s/", sub.Tier, sub.Slug)
	ct := []string{"Content-Type", "application/json"}
	return []scenario{
		{name: "progress PUT, machine token", method: "PUT", target: lesson + "1", auth: "machine-progress", hdr: ct, body: `{"score":50}`, status: 403, code: "LEARNER_REQUIRED"},
		{name: "progress PUT, no write scope", method: "PUT", target: lesson + "1", auth: "learner-read", hdr: ct, body: `{"score":50}`, status: 403, code: "insufficient_scope"},
		{name: "progress PUT, score out of range", method: "PUT", target: lesson + "1", auth: "learner", hdr: ct, body: `{"score":101}`, status: 400, code: "BAD_REQUEST"},
		{name: "progress PUT, not JSON", method: "PUT", target: lesson + "1", auth: "learner", hdr: ct, body: `score=1`, status: 400, code: "BAD_REQUEST"},
		{name: "progress PUT, another learner", method: "PUT", target: lesson + "1", auth: "learner", hdr: ct, body: `{"learnerId":"someone-else"}`, status: 400, code: "BAD_REQUEST"},
		{name: "progress PUT, bad lesson id", method: "PUT", target: "/v1/progress/nope/" + sub.Slug + "/1", auth: "learner", hdr: ct, body: `{}`, status: 400, code: "BAD_LESSON_ID"},
		{name: "progress PUT, unknown class", method: "PUT", target: lesson + "999", auth: "learner", hdr: ct, body: `{}`, status: 404, code: "LESSON_NOT_FOUND"},
		{name: "progress PUT", method: "PUT", target: lesson + "1", auth: "learner", hdr: ct, body: `{"score":80,"learnerId":"parity-learner"}`, status: 200},
		{name: "progress PUT, gzip asked", method: "PUT", target: lesson + "2", auth: "learner", hdr: append([]string{"Accept-Encoding", "gzip"}, ct...), body: `{"score":95.5}`, status: 200},
		{name: "progress PUT, empty body", method: "PUT", target: lesson + "3", auth: "learner", status: 200},
		{name: "progress GET, machine token", method: "GET", target: "/v1/progress", auth: "machine-progress", status: 403, code: "LEARNER_REQUIRED"},
		{name: "progress GET", method: "GET", target: "/v1/progress", auth: "learner", status: 200},
		{name: "progress GET gzip", method: "GET", target: "/v1/progress?limit=2", auth: "learner", hdr: []string{"Accept-Encoding", "gzip"}, status: 200},
		{name: "progress GET, If-None-Match: *", method: "GET", target: "/v1/progress", auth: "learner", hdr: []string{"If-None-Match", "*"}, status: 304},
		{name: "progress GET, unknown parameter", method: "GET", target: "/v1/progress?learner=someone-else", auth: "learner", status: 400, code: "BAD_REQUEST"},
		{name: "progress GET, bad cursor", method: "GET", target: "/v1/progress?cursor=abc", auth: "learner", status: 400, code: "BAD_REQUEST"},
	}
}
