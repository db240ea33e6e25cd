package admin

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/lectern-api/lectern/origin/internal/jsonbody"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/id"
)

// orgJSON is an organisation as the admin API reads and writes it; its
// members are the admin API's (docs/operations.md, "The admin API").
type orgJSON struct {
	OrgID               string                 `json:"orgId"`
	OrgName             string                 `json:"orgName"`
	Tier                string                 `json:"tier"`
	Status              string                 `json:"status"`
	ContentGrants       []string               `json:"contentGrants"`
	Quota               quotaJSON              `json:"quota"`
	RateLimits          licence.RateLimitsJSON `json:"rateLimits"`
	EclaVersion         int                    `json:"eclaVersion"`
	RequiredEclaVersion int                    `json:"requiredEclaVersion"`
	RenewsAt            string                 `json:"renewsAt"`
	LongURLs            bool                   `json:"longUrls"`
	CreatedAt           string                 `json:"createdAt"`
	UpdatedAt           string                 `json:"updatedAt"`
}

// quotaJSON holds the monthly limits; null means no cap.
type quotaJSON struct {
	Calls         *int64 `json:"calls"`
	Downloads     *int64 `json:"downloads"`
	Exports       *int64 `json:"exports"`
	TestprepItems *int64 `json:"testprepitems"`
}

// toJSON renders o for the admin API.
func toJSON(o *store.Org) orgJSON {
	grants := o.Grants
	if grants == nil {
		grants = []string{}
	}
	return orgJSON{
		OrgID: o.ID, OrgName: o.Name, Tier: o.Tier, Status: o.Status, ContentGrants: grants,
		Quota: quotaJSON{o.Quota.Calls, o.Quota.Downloads, o.Quota.Exports, o.Quota.TestprepItems},
		RateLimits: licence.RateLimitsJSON{
			CallsPerHour:       o.RateLimits.CallsPerHour,
			LessonReadsPerHour: o.RateLimits.LessonReadsPerHour,
			URLMintsPerHour:    o.RateLimits.URLMintsPerHour,
		},
		EclaVersion:         o.EclaVersion,
		RequiredEclaVersion: o.RequiredEclaVersion,
		RenewsAt:            licence.Timestamp(o.RenewsAt),
		LongURLs:            o.LongURLs,
		CreatedAt:           licence.Timestamp(o.CreatedAt),
		UpdatedAt:           licence.Timestamp(o.UpdatedAt),
	}
}

// applyOrg applies the members present in a create or PATCH body to o. Member
// names are the admin API's. The body is read as strictly as the public
// API reads its own (origin/internal/jsonbody): a repeated or unknown
// member, a wrong type or an invalid value is 400 BAD_REQUEST naming the
// member. orgId is accepted only when creating.
func applyOrg(o *store.Org, body []byte, creating bool) *apierr.Error {
	var (
		orgID, name, tier, status, renewsAt string
		grants                              []string
		quota, rateLimits                   json.RawMessage
		ecla, requiredEcla                  int
		longURLs                            bool
	)
	present, err := jsonbody.Object(body, "", map[string]jsonbody.Field{
		"orgId": jsonbody.String(&orgID), "orgName": jsonbody.String(&name), "tier": jsonbody.String(&tier),
		"status": jsonbody.String(&status), "contentGrants": jsonbody.Strings(&grants),
		"quota": jsonbody.Raw(&quota), "rateLimits": jsonbody.Raw(&rateLimits),
		"eclaVersion": jsonbody.Int(&ecla), "requiredEclaVersion": jsonbody.Int(&requiredEcla),
		"renewsAt": jsonbody.String(&renewsAt), "longUrls": jsonbody.Bool(&longURLs),
	})
	if err != nil {
		return err
	}
	// In the order of the members' list, so that of several faults the
	// same one is reported every time.
	for _, k := range members {
		if !present[k] {
			continue
		}
		switch k {
		case "orgId":
			if !creating {
				return badRequest(k, "orgId cannot be changed.")
			}
			if !validOrgID(orgID) {
				return badRequest(k, "orgId must be 1 to 64 characters of a-z, 0-9, '-' and '_', starting with a letter or digit.")
			}
			o.ID = orgID
		case "orgName":
			if strings.TrimSpace(name) == "" || len(name) > 200 {
				return badRequest(k, "orgName must be a non-empty string of at most 200 bytes.")
			}
			o.Name = name
		case "tier":
			if !validPlanTier(tier) {
				return &apierr.Error{Code: apierr.BadRequest, Parameter: k, Received: tier,
					Message: "tier is the plan's name: 1 to 32 lowercase letters, digits and single hyphens, such as standard or enterprise."}
			}
			o.Tier = tier
		case "status":
			if !slices.Contains(statuses, status) {
				return &apierr.Error{Code: apierr.BadRequest, Parameter: k, Received: status, Allowed: statuses,
					Message: "status must be one of " + strings.Join(statuses, ", ") + "."}
			}
			o.Status = status
		case "contentGrants":
			for _, g := range grants {
				if !validGrant(g) {
					return &apierr.Error{Code: apierr.BadRequest, Parameter: k, Received: g, Allowed: id.Tiers,
						Message: "Each grant is a tier or <tier>/<subjectSlug>."}
				}
			}
			o.Grants = grants
		case "quota":
			if err := limits(k, quota, map[string]**int64{"calls": &o.Quota.Calls, "downloads": &o.Quota.Downloads,
				"exports": &o.Quota.Exports, "testprepitems": &o.Quota.TestprepItems}); err != nil {
				return err
			}
		case "rateLimits":
			if err := limits(k, rateLimits, map[string]**int64{"callsPerHour": &o.RateLimits.CallsPerHour,
				"lessonReadsPerHour": &o.RateLimits.LessonReadsPerHour, "urlMintsPerHour": &o.RateLimits.URLMintsPerHour}); err != nil {
				return err
			}
		case "eclaVersion", "requiredEclaVersion":
			n := ecla
			if k == "requiredEclaVersion" {
				n = requiredEcla
			}
			if n < 0 {
				return badRequest(k, k+" must be a non-negative integer.")
			}
			if k == "eclaVersion" {
				o.EclaVersion = n
			} else {
				o.RequiredEclaVersion = n
			}
		case "renewsAt":
			t, err := time.Parse(time.RFC3339, renewsAt)
			if err != nil {
				return &apierr.Error{Code: apierr.BadRequest, Parameter: k, Received: renewsAt,
					Message: "renewsAt must be an RFC 3339 timestamp, such as 2031-01-01T00:00:00Z."}
			}
			o.RenewsAt = t.UTC()
		case "longUrls":
			o.LongURLs = longURLs
		}
	}
	return nil
}

var members = []string{"orgId", "orgName", "tier", "status", "contentGrants", "quota", "rateLimits",
	"eclaVersion", "requiredEclaVersion", "renewsAt", "longUrls"}

// statuses are the plan statuses an operator may set (docs/operations.md,
// "The admin API"; docs/decisions/admin-api-and-the-licence-envelope.md). Any
// but active answers ORG_SUSPENDED on content routes.
var statuses = []string{licence.StatusActive, licence.StatusSuspended}

// maxPlanTier bounds a plan tier's name.
const maxPlanTier = 32

// validPlanTier reports whether s can be a plan tier: the spec leaves the
// values open ("not shown"), so a plan's name in the shape of a slug, 1 to
// maxPlanTier bytes: standard, enterprise, district-2030.
func validPlanTier(s string) bool { return len(s) <= maxPlanTier && id.ValidSlug(s) }

// limits applies a quota or rateLimits object: each member is a
// non-negative integer or null (no cap); absent members keep their value.
func limits(member string, raw json.RawMessage, fields map[string]**int64) *apierr.Error {
	// Decoded apart from fields, so that a refusal changes none of them.
	vals := make(map[string]**int64, len(fields))
	dsts := make(map[string]jsonbody.Field, len(fields))
	for name := range fields {
		vals[name] = new(*int64)
		dsts[name] = jsonbody.NullableInt64(vals[name])
	}
	present, err := jsonbody.Object(raw, member+".", dsts)
	if err != nil {
		return err
	}
	for name := range present {
		if v := *vals[name]; v != nil && *v < 0 {
			return &apierr.Error{Code: apierr.BadRequest, Parameter: member + "." + name, Min: apierr.Int(0),
				Message: member + "." + name + " must be a non-negative integer or null (no cap)."}
		}
	}
	for name := range present {
		*fields[name] = *vals[name]
	}
	return nil
}

// validOrgID reports whether s can be an organisation id.
func validOrgID(s string) bool {
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

// validGrant reports whether g is a tier or <tier>/<subjectSlug>.
func validGrant(g string) bool {
	t, s, sub := strings.Cut(g, "/")
	return id.ValidTier(t) && (!sub || id.ValidSlug(s))
}
