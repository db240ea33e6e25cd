// Package licence is the organisation gate (spec: Authentication §8,
// States and transitions): whether a token's organisation may read
// content at all, and whether its grants cover a given tier and subject.
// Entitlements are passed in freshly read for every request, so a change
// applies on the next call.
package licence

import (
	"strconv"
	"strings"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
)

// The plan statuses of the spec. StatusActive is the one that may read
// content. StatusSuspended is set by an operator, and is an active
// organisation's effective status while the enumeration alarm is in force
// (Status): the meter holds the alarm, the stored status stays.
const (
	StatusActive    = "active"
	StatusSuspended = "suspended"
)

// Status is o's effective plan status, given its meters' usage u: its
// stored status, or suspended while the enumeration alarm is in force and
// the stored status is active (a status an operator set stays as set).
func Status(o *store.Org, u meter.Usage) string {
	if u.Alarm != nil && o.Status == StatusActive {
		return StatusSuspended
	}
	return o.Status
}

// Check is the gate for content routes, in this order: no organisation
// (NO_ORGANIZATION), a plan that is not active (ORG_SUSPENDED; the
// enumeration alarm's suspension is held by the meter, which refuses with
// the same code when the request bills), a renewal instant in the past
// (LICENSE_EXPIRED, no grace), an accepted licence-agreement version below
// the required one (LICENSE_REQUIRED, whatever the status says). A nil org
// means the token is bound to no organisation that exists.
func Check(o *store.Org, now time.Time) *apierr.Error {
	switch {
	case o == nil:
		return apierr.New(apierr.NoOrganization, "The token is bound to no licensed organisation.")
	case o.Status != StatusActive:
		return apierr.New(apierr.OrgSuspended, "The organisation's plan is "+o.Status+", not active; content access is suspended. Contact the service operator.")
	case !now.Before(o.RenewsAt):
		return &apierr.Error{Code: apierr.LicenseExpired,
			Message: "The organisation's licence expired at " + o.RenewsAt.UTC().Format(time.RFC3339) + "; there is no grace period."}
	case o.RequiredEclaVersion > o.EclaVersion:
		return &apierr.Error{Code: apierr.LicenseRequired,
			Message: "The organisation must accept version " + strconv.Itoa(o.RequiredEclaVersion) + " of the licence agreement (it has accepted version " + strconv.Itoa(o.EclaVersion) + ")."}
	}
	return nil
}

// Entitled checks that grants cover the subject slug of tier: 403
// TIER_NOT_LICENSED when no grant covers the tier at all, 403
// CONTENT_NOT_GRANTED naming the missing grant when the tier is licensed
// for other subjects only.
func Entitled(grants []string, tier, slug string) *apierr.Error {
	tierSeen := false
	for _, g := range grants {
		t, s, sub := strings.Cut(g, "/")
		if t != tier {
			continue
		}
		if !sub || s == slug {
			return nil
		}
		tierSeen = true
	}
	if !tierSeen {
		return &apierr.Error{Code: apierr.TierNotLicensed, Grant: tier,
			Message: "No content grant covers the " + tier + " tier."}
	}
	return &apierr.Error{Code: apierr.ContentNotGranted, Grant: tier + "/" + slug,
		Message: "The " + tier + " tier is licensed, but not the subject " + slug + "."}
}

// TierGranted reports whether grants cover tier wholly or in part.
func TierGranted(grants []string, tier string) bool {
	for _, g := range grants {
		if t, _, _ := strings.Cut(g, "/"); t == tier {
			return true
		}
	}
	return false
}
