package billing

import (
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/licence"
)

// GrantedLessons counts the lessons of c that grants cover: the
// denominator of the enumeration alarm, which a lesson read bills with
// (meter.Read.Granted; the rule itself is meter.Alarm, applied by the
// store in the read's transaction). It is counted under the corpus the
// request is served from.
func GrantedLessons(c *corpus.Corpus, grants []string) int {
	n := 0
	for _, t := range c.Tiers {
		if !licence.TierGranted(grants, t.Name) {
			continue
		}
		for _, sub := range t.Subjects {
			if licence.Entitled(grants, sub.Tier, sub.Slug) == nil {
				n += len(sub.Lessons)
			}
		}
	}
	return n
}
