package licence

import (
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// spec: Authentication §8 and the States table, one transition per row.
func TestCheck(t *testing.T) {
	active := func(mod func(o *store.Org)) *store.Org {
		o := NewOrg(now)
		o.ID = "acme"
		if mod != nil {
			mod(o)
		}
		return o
	}
	tests := []struct {
		name string
		org  *store.Org
		want apierr.Code
	}{
		{"active", active(nil), ""},
		{"no organisation", nil, apierr.NoOrganization},
		{"suspended", active(func(o *store.Org) { o.Status = "suspended" }), apierr.OrgSuspended},
		{"any other status", active(func(o *store.Org) { o.Status = "cancelled" }), apierr.OrgSuspended},
		{"expired a second ago", active(func(o *store.Org) { o.RenewsAt = now.Add(-time.Second) }), apierr.LicenseExpired},
		{"expires exactly now: no grace", active(func(o *store.Org) { o.RenewsAt = now }), apierr.LicenseExpired},
		{"renews in a second", active(func(o *store.Org) { o.RenewsAt = now.Add(time.Second) }), ""},
		// status still reads active while the agreement is outstanding.
		{"agreement outstanding", active(func(o *store.Org) { o.RequiredEclaVersion = 2 }), apierr.LicenseRequired},
		{"agreement accepted", active(func(o *store.Org) { o.RequiredEclaVersion, o.EclaVersion = 2, 2 }), ""},
		{"agreement ahead", active(func(o *store.Org) { o.EclaVersion = 3 }), ""},
		{"suspended beats expired", active(func(o *store.Org) { o.Status = "suspended"; o.RenewsAt = now.Add(-time.Hour) }), apierr.OrgSuspended},
	}
	for _, tt := range tests {
		err := Check(tt.org, now)
		var got apierr.Code
		if err != nil {
			got = err.Code
			if err.Status() != 403 {
				t.Errorf("%s: status %d", tt.name, err.Status())
			}
		}
		if got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestEntitled(t *testing.T) {
	grants := []string{"college", "high/algebra", "high/geometry"}
	tests := []struct {
		tier, slug string
		code       apierr.Code
		grant      string
	}{
		{"college", "calculus", "", ""},
		{"high", "algebra", "", ""},
		{"high", "geometry", "", ""},
		{"high", "biology", apierr.ContentNotGranted, "high/biology"},
		{"middle", "algebra", apierr.TierNotLicensed, "middle"},
	}
	for _, tt := range tests {
		err := Entitled(grants, tt.tier, tt.slug)
		if tt.code == "" {
			if err != nil {
				t.Errorf("%s/%s: %v", tt.tier, tt.slug, err)
			}
			continue
		}
		if err == nil || err.Code != tt.code || err.Grant != tt.grant {
			t.Errorf("%s/%s: got %+v, want %s grant %s", tt.tier, tt.slug, err, tt.code, tt.grant)
		}
	}
	if err := Entitled(nil, "high", "algebra"); err == nil || err.Code != apierr.TierNotLicensed {
		t.Errorf("no grants: %v", err)
	}
	if !TierGranted(grants, "high") || TierGranted(grants, "primary") {
		t.Error("TierGranted")
	}
}

func TestApply(t *testing.T) {
	o := NewOrg(now)
	body := `{"orgId":"acme","orgName":"Acme","contentGrants":["high","college/calculus"],
		"quota":{"calls":1000,"downloads":null},"rateLimits":{"lessonReadsPerHour":50},
		"requiredEclaVersion":2,"renewsAt":"2027-01-01T00:00:00Z","longUrls":true}`
	if err := Apply(o, []byte(body), true); err != nil {
		t.Fatal(err)
	}
	if o.ID != "acme" || o.Name != "Acme" || len(o.Grants) != 2 || *o.Quota.Calls != 1000 || o.Quota.Downloads != nil ||
		*o.RateLimits.LessonReadsPerHour != 50 || o.RateLimits.CallsPerHour != nil || o.RequiredEclaVersion != 2 ||
		o.EclaVersion != 1 || !o.LongURLs || o.Status != "active" || o.Tier != DefaultTier {
		t.Errorf("applied: %+v", o)
	}
	// PATCH: absent members keep their value, null clears a cap.
	if err := Apply(o, []byte(`{"quota":{"downloads":5},"status":"suspended"}`), false); err != nil {
		t.Fatal(err)
	}
	if *o.Quota.Calls != 1000 || *o.Quota.Downloads != 5 || o.Status != "suspended" {
		t.Errorf("patched: %+v", o)
	}
	if err := Apply(o, []byte(`{"quota":{"calls":null}}`), false); err != nil || o.Quota.Calls != nil {
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
		err := Apply(NewOrg(now), []byte(bad.body), false)
		if err == nil || err.Code != apierr.BadRequest || err.Parameter != bad.param {
			t.Errorf("%s: got %v, want BAD_REQUEST naming %s", bad.body, err, bad.param)
		} else if strings.Contains(err.Message, "Go ") || strings.Contains(err.Message, "json:") || strings.Contains(err.Message, "int64") {
			t.Errorf("%s: Go's words in the message: %s", bad.body, err.Message)
		}
	}
	if err := Apply(NewOrg(now), []byte(`{"orgId":"Bad Id"}`), true); err == nil {
		t.Error("invalid orgId accepted")
	}
}
