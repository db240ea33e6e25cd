package licence

import (
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// The enumeration alarm suspends an active organisation, without
// writing its status; a status an operator set stays as set.
func TestStatus(t *testing.T) {
	alarm := meter.Usage{Alarm: &meter.AlarmState{TrippedAt: now, Day: "2026-11-22"}}
	for _, c := range []struct {
		stored string
		u      meter.Usage
		want   string
	}{
		{StatusActive, meter.Usage{}, StatusActive},
		{StatusActive, alarm, StatusSuspended},
		{StatusSuspended, meter.Usage{}, StatusSuspended},
		{StatusSuspended, alarm, StatusSuspended},
		{"cancelled", alarm, "cancelled"},
	} {
		if got := Status(&store.Org{Status: c.stored}, c.u); got != c.want {
			t.Errorf("Status(%s, alarm %v) = %s, want %s", c.stored, c.u.Alarm != nil, got, c.want)
		}
	}
}

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
