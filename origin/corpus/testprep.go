package corpus

import (
	"fmt"
	"strings"

	"github.com/lectern-api/lectern/shared/id"
)

func (c *Corpus) loadTests(read func(string) ([]byte, error), files []string) error {
	known := map[string]int{}
	for i, ts := range TestSections {
		known[ts.Test] = i
	}
	byRank := make([]*Test, len(TestSections))
	itemIDs := map[string]string{}
	for _, file := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(file, "testprep/"), ".json")
		rank, ok := known[name]
		if !ok {
			return errf(file, "", "unknown test %q (want one of digital-sat, act, psat-nmsqt, caaspp)", name)
		}
		b, err := read(file)
		if err != nil {
			return err
		}
		t, err := parseTest(file, b, rank, itemIDs)
		if err != nil {
			return err
		}
		byRank[rank] = t
	}
	for _, t := range byRank {
		if t != nil {
			c.Tests = append(c.Tests, t)
			c.tests[t.ID] = t
			for _, s := range t.Sections {
				c.Counts.TestprepItems += len(s.Items)
			}
		}
	}
	return nil
}

// parseTest decodes and validates one test file, the test at rank in
// TestSections; itemIDs spans every test, as item ids are unique across them.
func parseTest(file string, data []byte, rank int, itemIDs map[string]string) (*Test, error) {
	spec := TestSections[rank]
	var tj TestJSON
	if err := decode(file, data, &tj); err != nil {
		return nil, err
	}
	if tj.ID != spec.Test {
		return nil, errf(file, "id", "%q does not match the file name (want %q)", tj.ID, spec.Test)
	}
	if strings.TrimSpace(tj.Name) == "" {
		return nil, errf(file, "name", "missing")
	}
	if len(tj.Sections) == 0 {
		return nil, errf(file, "sections", "a test needs at least one section")
	}
	t := &Test{ID: tj.ID, Name: tj.Name}
	bySection := make([]*Section, len(spec.Sections))
	for i := range tj.Sections {
		sj := &tj.Sections[i]
		f := fmt.Sprintf("sections[%d]", i)
		r := -1
		for k, s := range spec.Sections {
			if s == sj.ID {
				r = k
			}
		}
		if r < 0 {
			return nil, errf(file, f+".id", "unknown section %q for test %s (want one of %s)", sj.ID, tj.ID, strings.Join(spec.Sections, ", "))
		}
		if bySection[r] != nil {
			return nil, errf(file, f+".id", "duplicate section %q", sj.ID)
		}
		if strings.TrimSpace(sj.Label) == "" {
			return nil, errf(file, f+".label", "missing")
		}
		sec := &Section{ID: sj.ID, Label: sj.Label, Test: t}
		for k := range sj.Items {
			item, err := parseItem(file, fmt.Sprintf("%s.items[%d]", f, k), &sj.Items[k], sec, itemIDs)
			if err != nil {
				return nil, err
			}
			sec.Items = append(sec.Items, item)
		}
		bySection[r] = sec
	}
	for _, s := range bySection {
		if s != nil {
			t.Sections = append(t.Sections, s)
		}
	}
	return t, nil
}

// parseItem validates one item of section sec at field itf; itemIDs maps
// the item ids seen so far, in every test, to their file.
func parseItem(file, itf string, it *ItemJSON, sec *Section, itemIDs map[string]string) (*Item, error) {
	if !id.ValidSlug(it.ID) {
		return nil, errf(file, itf+".id", "%q is not a valid item id (lowercase letters and digits joined by hyphens)", it.ID)
	}
	if prev, dup := itemIDs[it.ID]; dup {
		return nil, errf(file, itf+".id", "duplicate item id %q (also in %s)", it.ID, prev)
	}
	itemIDs[it.ID] = file
	if strings.TrimSpace(it.Domain) == "" {
		return nil, errf(file, itf+".domain", "missing")
	}
	if !oneOf(it.Difficulty, ItemDifficulties) {
		return nil, errf(file, itf+".difficulty", "%q is not one of %s", it.Difficulty, strings.Join(ItemDifficulties, ", "))
	}
	if strings.TrimSpace(it.Prompt) == "" {
		return nil, errf(file, itf+".prompt", "missing")
	}
	if err := choices(file, itf, it.Options, it.AnswerIndex); err != nil {
		return nil, err
	}
	if strings.TrimSpace(it.Rationale) == "" {
		return nil, errf(file, itf+".rationale", "missing")
	}
	if it.OptionRationales != nil && len(it.OptionRationales) != len(it.Options) {
		return nil, errf(file, itf+".optionRationales", "%d rationales for %d options", len(it.OptionRationales), len(it.Options))
	}
	return &Item{
		ID: it.ID, Test: sec.Test.ID, Section: sec.ID, Domain: it.Domain, Difficulty: it.Difficulty,
		Passage: it.Passage, Prompt: it.Prompt, Options: it.Options, AnswerIndex: *it.AnswerIndex,
		Rationale: it.Rationale, OptionRationales: it.OptionRationales,
	}, nil
}
