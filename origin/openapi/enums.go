// The values the loaded corpus decides: the enumerated tiers, tests and
// sections, x-service-sections and the assets' MIME types.

package openapi

import (
	"slices"

	"github.com/lectern-api/lectern/origin/corpus"
)

// oaEnums are the enumerated values the corpus decides.
type oaEnums struct {
	tiers    []string
	tests    []string
	sections []string            // union over tests, in order of first appearance
	byTest   map[string][]string // x-service-sections
	mimes    []string            // the assets' MIME types, sorted
}

func oaEnumsOf(c *corpus.Corpus) oaEnums {
	e := oaEnums{tiers: []string{}, tests: []string{}, sections: []string{}, byTest: map[string][]string{}}
	for _, t := range c.Tiers {
		e.tiers = append(e.tiers, t.Name)
	}
	mimes := map[string]bool{}
	for _, l := range c.Lessons {
		for _, m := range l.Media {
			if !mimes[m.MIME] {
				mimes[m.MIME] = true
				e.mimes = append(e.mimes, m.MIME)
			}
		}
	}
	slices.Sort(e.mimes)
	seen := map[string]bool{}
	for _, t := range c.Tests {
		e.tests = append(e.tests, t.ID)
		e.byTest[t.ID] = t.SectionIDs()
		for _, s := range t.Sections {
			if !seen[s.ID] {
				seen[s.ID] = true
				e.sections = append(e.sections, s.ID)
			}
		}
	}
	return e
}
