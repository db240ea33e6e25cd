package corpus

import (
	"fmt"
	"sort"
	"strings"

	"github.com/lectern-api/lectern/shared/id"
)

func (c *Corpus) loadTiers(read func(string) ([]byte, error)) error {
	const file = "tiers.json"
	b, err := read(file)
	if err != nil {
		return err
	}
	var tj TiersJSON
	if err := decode(file, b, &tj); err != nil {
		return err
	}
	if len(tj.Tiers) == 0 {
		return errf(file, "tiers", "no tiers")
	}
	for i, t := range tj.Tiers {
		f := fmt.Sprintf("tiers[%d]", i)
		if !id.ValidTier(t.Tier) {
			return errf(file, f+".tier", "%q is not a tier (want one of %s)", t.Tier, strings.Join(id.Tiers, ", "))
		}
		if c.tiers[t.Tier] != nil {
			return errf(file, f+".tier", "duplicate tier %q", t.Tier)
		}
		if strings.TrimSpace(t.Label) == "" {
			return errf(file, f+".label", "missing")
		}
		c.tiers[t.Tier] = &Tier{Name: t.Tier, Label: t.Label}
	}
	for _, name := range id.Tiers {
		if t := c.tiers[name]; t != nil {
			c.Tiers = append(c.Tiers, t)
		}
	}
	return nil
}

func (c *Corpus) loadSubjects(read func(string) ([]byte, error), listed map[string]int, files []string) error {
	const file = "subjects.json"
	b, err := read(file)
	if err != nil {
		return err
	}
	var sj SubjectsJSON
	if err := decode(file, b, &sj); err != nil {
		return err
	}
	index := map[string]int{}
	var subs []*Subject
	for i, s := range sj.Subjects {
		f := fmt.Sprintf("subjects[%d]", i)
		if !id.ValidSlug(s.Slug) {
			return errf(file, f+".slug", "%q is not a valid slug (^[a-z0-9]+(-[a-z0-9]+)*$, at most %d bytes)", s.Slug, id.MaxSlugLen)
		}
		if !id.ValidTier(s.Tier) {
			return errf(file, f+".tier", "%q is not a tier (want one of %s)", s.Tier, strings.Join(id.Tiers, ", "))
		}
		if c.tiers[s.Tier] == nil {
			return errf(file, f+".tier", "tier %q is not in tiers.json", s.Tier)
		}
		ref := s.Tier + "/" + s.Slug
		if j, dup := index[ref]; dup {
			return errf(file, f+".slug", "duplicate slug %q in tier %q (also subjects[%d])", s.Slug, s.Tier, j)
		}
		index[ref] = i
		if strings.TrimSpace(s.Name) == "" {
			return errf(file, f+".name", "missing")
		}
		if !oneOf(s.Difficulty, Difficulties) {
			return errf(file, f+".difficulty", "%q is not one of %s", s.Difficulty, strings.Join(Difficulties, ", "))
		}
		for k, t := range s.Tags {
			if strings.TrimSpace(t) == "" {
				return errf(file, fmt.Sprintf("%s.tags[%d]", f, k), "empty tag")
			}
		}
		lf := "lessons/" + ref + ".json"
		if _, ok := listed[lf]; !ok {
			return errf("corpus.json", "files", "%s (classes of subjects[%d] %s) is not listed", lf, i, ref)
		}
		subs = append(subs, &Subject{
			Tier: s.Tier, Slug: s.Slug, Name: s.Name, Description: s.Description,
			Difficulty: s.Difficulty, Tags: nonNil(s.Tags),
		})
	}
	// References resolve only once every subject is known.
	for i, s := range sj.Subjects {
		var err error
		if subs[i].Prerequisites, err = refs(file, fmt.Sprintf("subjects[%d].prerequisites", i), s.Prerequisites, index, subs[i].Ref()); err != nil {
			return err
		}
		if subs[i].Related, err = refs(file, fmt.Sprintf("subjects[%d].related", i), s.Related, index, subs[i].Ref()); err != nil {
			return err
		}
	}
	// Every lessons/ file must belong to a subject.
	for i, f := range files {
		if !strings.HasPrefix(f, "lessons/") {
			continue
		}
		ref := strings.TrimSuffix(strings.TrimPrefix(f, "lessons/"), ".json")
		if _, ok := index[ref]; !ok || !strings.HasSuffix(f, ".json") {
			return errf("corpus.json", fmt.Sprintf("files[%d]", i), "%q is not the lesson file of any subject in subjects.json", f)
		}
	}

	sort.SliceStable(subs, func(i, j int) bool {
		a, b := subs[i], subs[j]
		if ra, rb := id.TierRank(a.Tier), id.TierRank(b.Tier); ra != rb {
			return ra < rb
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Slug < b.Slug
	})
	c.Subjects = subs
	for _, s := range subs {
		c.subjects[s.Ref()] = s
		t := c.tiers[s.Tier]
		t.Subjects = append(t.Subjects, s)
		c.slugs[s.Slug] = append(c.slugs[s.Slug], s.Tier) // canonical order: subs is tier-sorted
	}
	return nil
}

func refs(file, field string, in []string, index map[string]int, self string) ([]SubjectRef, error) {
	out := make([]SubjectRef, 0, len(in))
	seen := map[string]bool{}
	for k, r := range in {
		f := fmt.Sprintf("%s[%d]", field, k)
		if _, ok := index[r]; !ok {
			return nil, errf(file, f, "%q does not name a subject (want <tier>/<slug> of a subject in this file)", r)
		}
		if r == self {
			return nil, errf(file, f, "a subject cannot refer to itself")
		}
		if seen[r] {
			return nil, errf(file, f, "%q is listed twice", r)
		}
		seen[r] = true
		tier, slug, _ := strings.Cut(r, "/")
		out = append(out, SubjectRef{Tier: tier, Slug: slug})
	}
	return out, nil
}
