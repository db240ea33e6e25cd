package admin

import (
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/shared/apierr"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func TestApply(t *testing.T) {
	o := licence.NewOrg(now)
	body := `{"orgId":"acme","orgName":"Acme","contentGrants":["high","college/calculus"],
		"quota":{"calls":1000,"downloads":null},"rateLimits":{"lessonReadsPerHour":50},
		"requiredEclaVersion":2,"renewsAt":"2027-01-01T00:00:00Z","longUrls":true}`
	if err := applyOrg(o, []byte(body), true); err != nil {
		t.Fatal(err)
	}
	if o.ID != "acme" || o.Name != "Acme" || len(o.Grants) != 2 || *o.Quota.Calls != 1000 || o.Quota.Downloads != nil ||
		*o.RateLimits.LessonReadsPerHour != 50 || o.RateLimits.CallsPerHour != nil || o.RequiredEclaVersion != 2 ||
		o.EclaVersion != 1 || !o.LongURLs || o.Status != "active" || o.Tier != licence.DefaultTier {
		t.Errorf("applied: %+v", o)
	}
	// PATCH: absent members keep their value, null clears a cap.
	if err := applyOrg(o, []byte(`{"quota":{"downloads":5},"status":"suspended"}`), false); err != nil {
		t.Fatal(err)
	}
	if *o.Quota.Calls != 1000 || *o.Quota.Downloads != 5 || o.Status != "suspended" {
		t.Errorf("patched: %+v", o)
	}
	if err := applyOrg(o, []byte(`{"quota":{"calls":null}}`), false); err != nil || o.Quota.Calls != nil {
		t.Errorf("null did not clear: %v %v", err, o.Quota.Calls)
	}
	for _, bad := range []struct{ body, param string }{
		{`{"orgId":"other"}`, "orgId"},
		{`{"contentGrants":["elementary"]}`, "contentGrants"},
		{`{"contentGrants":["high/Algebra"]}`, "contentGrants"},
		{`{"quota":{"calls":-1}}`, "quota.calls"},
		{`{"quota":{"callz":1}}`, "quota.callz"},
		{`{"quota":{"calls":1.5}}`, "quota.calls"},
		{`{"quota":7}`, "quota"},
		{`{"quota":{"calls":1,"calls":null}}`, "quota.calls"},
		{`{"renewsAt":"tomorrow"}`, "renewsAt"},
		{`{"eclaVersion":"2"}`, "eclaVersion"},
		{`{"status":""}`, "status"},
		// Issue #13: duplicate members (encoding/json takes the last),
		// any string as a tier or status.
		{`{"status":"active","status":"suspended"}`, "status"},
		{`{"orgName":"a","orgName":"b"}`, "orgName"},
		{`{"status":"paused"}`, "status"},
		{`{"status":"Active"}`, "status"},
		{`{"tier":""}`, "tier"},
		{`{"tier":"Gold Plan!"}`, "tier"},
		{`{"tier":"` + strings.Repeat("a", 33) + `"}`, "tier"},
		{`{"tier":7}`, "tier"},
		{`{"contentGrants":"high"}`, "contentGrants"},
		{`{"contentGrants":null}`, "contentGrants"},
		{`{"longUrls":1}`, "longUrls"},
		{`{"colour":"red"}`, "colour"},
		{`[]`, "body"},
		{`{} {}`, "body"},
	} {
		err := applyOrg(licence.NewOrg(now), []byte(bad.body), false)
		if err == nil || err.Code != apierr.BadRequest || err.Parameter != bad.param {
			t.Errorf("%s: got %v, want BAD_REQUEST naming %s", bad.body, err, bad.param)
		} else if strings.Contains(err.Message, "Go ") || strings.Contains(err.Message, "json:") || strings.Contains(err.Message, "int64") {
			t.Errorf("%s: Go's words in the message: %s", bad.body, err.Message)
		}
	}
	if err := applyOrg(licence.NewOrg(now), []byte(`{"orgId":"Bad Id"}`), true); err == nil {
		t.Error("invalid orgId accepted")
	}
}
