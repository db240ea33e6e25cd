package licence

import (
	"time"

	"github.com/lectern-api/lectern/origin/store"
)

// RateLimitsJSON holds the hourly caps; null means no cap. The admin API
// and /v1/license name them alike, so both write this one shape.
type RateLimitsJSON struct {
	CallsPerHour       *int64 `json:"callsPerHour"`
	LessonReadsPerHour *int64 `json:"lessonReadsPerHour"`
	URLMintsPerHour    *int64 `json:"urlMintsPerHour"`
}

// Timestamp formats t as the spec's ISO 8601 timestamps: RFC 3339 in UTC,
// to the second.
func Timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Plan defaults for omitted fields (docs/operations.md, the admin API).
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
