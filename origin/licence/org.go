package licence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/id"
)

// OrgJSON is an organisation as the admin API reads and writes it; its
// members are DESIGN.md's (operator contract).
type OrgJSON struct {
	OrgID               string         `json:"orgId"`
	OrgName             string         `json:"orgName"`
	Tier                string         `json:"tier"`
	Status              string         `json:"status"`
	ContentGrants       []string       `json:"contentGrants"`
	Quota               QuotaJSON      `json:"quota"`
	RateLimits          RateLimitsJSON `json:"rateLimits"`
	EclaVersion         int            `json:"eclaVersion"`
	RequiredEclaVersion int            `json:"requiredEclaVersion"`
	RenewsAt            string         `json:"renewsAt"`
	LongURLs            bool           `json:"longUrls"`
	CreatedAt           string         `json:"createdAt"`
	UpdatedAt           string         `json:"updatedAt"`
}

// QuotaJSON holds the monthly limits; null means no cap.
type QuotaJSON struct {
	Calls         *int64 `json:"calls"`
	Downloads     *int64 `json:"downloads"`
	Exports       *int64 `json:"exports"`
	TestprepItems *int64 `json:"testprepitems"`
}

// RateLimitsJSON holds the hourly caps; null means no cap.
type RateLimitsJSON struct {
	CallsPerHour       *int64 `json:"callsPerHour"`
	LessonReadsPerHour *int64 `json:"lessonReadsPerHour"`
	URLMintsPerHour    *int64 `json:"urlMintsPerHour"`
}

// ToJSON renders o for the admin API.
func ToJSON(o *store.Org) OrgJSON {
	grants := o.Grants
	if grants == nil {
		grants = []string{}
	}
	return OrgJSON{
		OrgID: o.ID, OrgName: o.Name, Tier: o.Tier, Status: o.Status, ContentGrants: grants,
		Quota:               QuotaJSON{o.Quota.Calls, o.Quota.Downloads, o.Quota.Exports, o.Quota.TestprepItems},
		RateLimits:          RateLimitsJSON{o.RateLimits.CallsPerHour, o.RateLimits.LessonReadsPerHour, o.RateLimits.URLMintsPerHour},
		EclaVersion:         o.EclaVersion,
		RequiredEclaVersion: o.RequiredEclaVersion,
		RenewsAt:            Timestamp(o.RenewsAt),
		LongURLs:            o.LongURLs,
		CreatedAt:           Timestamp(o.CreatedAt),
		UpdatedAt:           Timestamp(o.UpdatedAt),
	}
}

// Timestamp formats t as the spec's ISO 8601 timestamps: RFC 3339 in UTC,
// to the second.
func Timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Plan defaults for omitted fields (DESIGN.md: operator contract).
const (
	DefaultTier = "standard"
	renewAfter  = 365 * 24 * time.Hour
)

// NewOrg returns an organisation with the plan defaults: status active,
// licence agreement 1 of 1, renewal a year from now, no grants, no caps,
// no long-URL override.
func NewOrg(now time.Time) *store.Org {
	return &store.Org{
		Tier: DefaultTier, Status: StatusActive, Grants: []string{},
		EclaVersion: 1, RequiredEclaVersion: 1,
		RenewsAt:  now.Add(renewAfter).Truncate(time.Second),
		CreatedAt: now, UpdatedAt: now,
	}
}

// Apply applies the members present in a create or PATCH body to o. Member
// names are the admin API's; an unknown member, a wrong type or an invalid
// value is 400 BAD_REQUEST naming the member. orgId is accepted only when
// creating.
func Apply(o *store.Org, body []byte, creating bool) *apierr.Error {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&m); err != nil || m == nil || dec.More() {
		return &apierr.Error{Code: apierr.BadRequest, Parameter: "body", Message: "The body must be one JSON object."}
	}
	for k, raw := range m {
		if err := applyMember(o, k, raw, creating); err != nil {
			return err
		}
	}
	return nil
}

var members = []string{"orgId", "orgName", "tier", "status", "contentGrants", "quota", "rateLimits",
	"eclaVersion", "requiredEclaVersion", "renewsAt", "longUrls"}

func bad(member, msg string) *apierr.Error {
	return &apierr.Error{Code: apierr.BadRequest, Parameter: member, Message: msg}
}

func applyMember(o *store.Org, k string, raw json.RawMessage, creating bool) *apierr.Error {
	strict := func(v any) *apierr.Error {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(v); err != nil {
			return bad(k, fmt.Sprintf("%s has the wrong shape: %v", k, err))
		}
		return nil
	}
	switch k {
	case "orgId":
		if !creating {
			return bad(k, "orgId cannot be changed.")
		}
		var s string
		if err := strict(&s); err != nil {
			return err
		}
		if !ValidOrgID(s) {
			return bad(k, "orgId must be 1 to 64 characters of a-z, 0-9, '-' and '_', starting with a letter or digit.")
		}
		o.ID = s
	case "orgName", "tier", "status":
		var s string
		if err := strict(&s); err != nil {
			return err
		}
		if strings.TrimSpace(s) == "" || len(s) > 200 {
			return bad(k, k+" must be a non-empty string of at most 200 bytes.")
		}
		switch k {
		case "orgName":
			o.Name = s
		case "tier":
			o.Tier = s
		case "status":
			o.Status = s
		}
	case "contentGrants":
		var gs []string
		if err := strict(&gs); err != nil {
			return err
		}
		for _, g := range gs {
			if !ValidGrant(g) {
				return &apierr.Error{Code: apierr.BadRequest, Parameter: k, Received: g, Allowed: id.Tiers,
					Message: "Each grant is a tier or <tier>/<subjectSlug>."}
			}
		}
		if gs == nil {
			gs = []string{}
		}
		o.Grants = gs
	case "quota":
		return limits(k, raw, map[string]**int64{"calls": &o.Quota.Calls, "downloads": &o.Quota.Downloads,
			"exports": &o.Quota.Exports, "testprepitems": &o.Quota.TestprepItems})
	case "rateLimits":
		return limits(k, raw, map[string]**int64{"callsPerHour": &o.RateLimits.CallsPerHour,
			"lessonReadsPerHour": &o.RateLimits.LessonReadsPerHour, "urlMintsPerHour": &o.RateLimits.URLMintsPerHour})
	case "eclaVersion", "requiredEclaVersion":
		var n int
		if err := strict(&n); err != nil {
			return err
		}
		if n < 0 {
			return bad(k, k+" must be a non-negative integer.")
		}
		if k == "eclaVersion" {
			o.EclaVersion = n
		} else {
			o.RequiredEclaVersion = n
		}
	case "renewsAt":
		var s string
		if err := strict(&s); err != nil {
			return err
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return bad(k, "renewsAt must be an RFC 3339 timestamp.")
		}
		o.RenewsAt = t.UTC()
	case "longUrls":
		if err := strict(&o.LongURLs); err != nil {
			return err
		}
	default:
		return &apierr.Error{Code: apierr.BadRequest, Parameter: k, Allowed: members,
			Message: "Unknown member " + k + "."}
	}
	return nil
}

// limits applies a quota or rateLimits object: each member is a
// non-negative integer or null (no cap); absent members keep their value.
func limits(member string, raw json.RawMessage, fields map[string]**int64) *apierr.Error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return bad(member, member+" must be an object.")
	}
	for name, v := range m {
		dst, ok := fields[name]
		if !ok {
			return bad(member, "Unknown member "+name+" in "+member+".")
		}
		if string(bytes.TrimSpace(v)) == "null" {
			*dst = nil
			continue
		}
		var n int64
		if err := json.Unmarshal(v, &n); err != nil || n < 0 {
			return bad(member, member+"."+name+" must be a non-negative integer or null.")
		}
		*dst = &n
	}
	return nil
}

// ValidOrgID reports whether s can be an organisation id.
func ValidOrgID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '-' || c == '_')
		if !ok {
			return false
		}
	}
	return true
}

// ValidGrant reports whether g is a tier or <tier>/<subjectSlug>.
func ValidGrant(g string) bool {
	t, s, sub := strings.Cut(g, "/")
	return id.ValidTier(t) && (!sub || id.ValidSlug(s))
}
