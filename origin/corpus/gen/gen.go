// Package gen writes Lectern's deterministic synthetic corpus (docs/corpus-format.md,
// the format): at full scale exactly 5 tiers, 125 subjects, 3,680 classes and
// 113,844 media assets, plus original test-prep items for the spec's four
// tests. The format is documented in docs/corpus-format.md; every file is
// encoded from origin/corpus's format types (format.go), the ones
// corpus.Load decodes. tools/corpusgen is its command. Options.Scale K
// writes K times as many subjects per tier, classes and media, the same
// shapes and distributions (the test-prep items are the full corpus's),
// to measure how the origin's costs grow with its corpus.
//
// Output depends only on Options: all randomness comes from math/rand/v2 PCG
// streams seeded from Options.Seed, nothing iterates a map to produce output,
// and those types fix the order of every file's keys.
package gen

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"sync"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/shared/id"
)

// DefaultDate is the date part of contentVersion when Options.Date is empty.
// It is a constant, not today's date, so the default run is reproducible.
const DefaultDate = "2026-11-01"

// Deployed scale (spec: "What the service does", item 5).
const (
	FullSubjects = 125
	FullClasses  = 3680
	FullMedia    = 113844
)

// Options select the corpus.
type Options struct {
	Seed  int64  // default 1 is the caller's choice; 0 is a valid seed too
	Date  string // YYYY-MM-DD; empty means DefaultDate
	Small bool   // a tiny corpus with every feature, for tests
	// Scale, when above 1, writes K = Scale times the full corpus: every
	// family of subjects K times in each of its tiers (the copies after
	// the first slugged "<slug>-2" … "<slug>-K" and named "<Name> 2" …),
	// exactly K × FullClasses classes and K × FullMedia media, drawn as
	// the full corpus is. 0 and 1 are the full corpus itself, byte for
	// byte. Not with Small.
	Scale int
}

// MaxScale bounds Options.Scale (100 × is about 370,000 classes).
const MaxScale = 100

// Summary is what corpusgen prints as its last line.
type Summary struct {
	Tiers          int    `json:"tiers"`
	Subjects       int    `json:"subjects"`
	Classes        int    `json:"classes"`
	Media          int    `json:"media"`
	TestprepItems  int    `json:"testprepItems"`
	ContentVersion string `json:"contentVersion"`
}

var dateRE = regexp.MustCompile(`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$`)

// Write generates the corpus selected by opt into dir, creating it if needed.
// Files of an earlier corpus in dir (corpus.json, tiers.json, subjects.json,
// lessons/, testprep/) are removed first; nothing else in dir is touched.
func Write(dir string, opt Options) (Summary, error) {
	date := opt.Date
	if date == "" {
		date = DefaultDate
	}
	if !dateRE.MatchString(date) {
		return Summary{}, fmt.Errorf("date %q: want YYYY-MM-DD", date)
	}
	if opt.Scale < 0 || opt.Scale > MaxScale || opt.Small && opt.Scale > 1 {
		return Summary{}, fmt.Errorf("scale %d: want 1 to %d, and not with a small corpus", opt.Scale, MaxScale)
	}
	files, counts, err := build(opt)
	if err != nil {
		return Summary{}, err
	}

	for _, p := range []string{"corpus.json", "tiers.json", "subjects.json", "lessons", "testprep"} {
		if err := os.RemoveAll(filepath.Join(dir, p)); err != nil {
			return Summary{}, err
		}
	}
	// Hash order: paths sorted bytewise (docs/corpus-format.md, contentVersion).
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	h := sha256.New()
	var n [8]byte
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f.path
		h.Write([]byte(f.path))
		h.Write([]byte{0})
		binary.BigEndian.PutUint64(n[:], uint64(len(f.data)))
		h.Write(n[:])
		h.Write(f.data)
	}
	version := date + "+" + hex.EncodeToString(h.Sum(nil))[:12]
	man, err := marshalIndent(corpus.ManifestJSON{
		Format: corpus.Format, ContentVersion: version, Files: paths,
		Counts: &corpus.CountsJSON{
			Tiers: new(counts.Tiers), Subjects: new(counts.Subjects), Classes: new(counts.Classes),
			Media: new(counts.Media), TestprepItems: new(counts.TestprepItems),
		},
	})
	if err != nil {
		return Summary{}, err
	}
	files = append(files, outFile{"corpus.json", man})
	made := map[string]bool{}
	for _, f := range files {
		full := filepath.Join(dir, filepath.FromSlash(f.path))
		if d := filepath.Dir(full); !made[d] {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return Summary{}, err
			}
			made[d] = true
		}
		if err := os.WriteFile(full, f.data, 0o644); err != nil {
			return Summary{}, err
		}
	}
	return Summary{
		Tiers: counts.Tiers, Subjects: counts.Subjects, Classes: counts.Classes,
		Media: counts.Media, TestprepItems: counts.TestprepItems, ContentVersion: version,
	}, nil
}

type outFile struct {
	path string
	data []byte
}

// tierLabels are the tiers' display labels.
var tierLabels = map[string]string{
	"topics": "Topics", "college": "College", "high": "High School", "middle": "Middle School", "primary": "Primary",
}

// smallSubjects picks the Small corpus: every tier, two slugs in several tiers.
var smallSubjects = []string{
	"topics/photography", "topics/chess", "college/algebra", "college/computer-science",
	"high/algebra", "high/biology", "high/spanish", "high/world-history",
	"middle/algebra", "middle/world-history", "primary/fractions", "primary/phonics",
}

func build(opt Options) ([]outFile, corpus.Counts, error) {
	k := max(opt.Scale, 1)
	fams := scaleFamilies(parseFamilies(), k)
	master := rand.New(rand.NewPCG(uint64(opt.Seed), 0x9e3779b97f4a7c15))

	// Subjects in canonical tier order, then family order (a family's
	// copies follow it).
	var subs []*subjectPlan
	for _, t := range id.Tiers {
		for i := range fams {
			f := &fams[i]
			for _, ft := range f.Tiers {
				if ft == t {
					subs = append(subs, &subjectPlan{fam: f, tier: t})
				}
			}
		}
	}
	if opt.Small {
		keep := map[string]bool{}
		for _, s := range smallSubjects {
			keep[s] = true
		}
		var k []*subjectPlan
		for _, s := range subs {
			if keep[s.tier+"/"+s.fam.Slug] {
				k = append(k, s)
			}
		}
		subs = k
	}
	for i, s := range subs {
		s.index = i
	}
	if err := planClasses(master, subs, opt.Small, k); err != nil {
		return nil, corpus.Counts{}, err
	}
	planSubjectLinks(master, subs)

	var files []outFile
	tf := corpus.TiersJSON{}
	for _, t := range id.Tiers {
		tf.Tiers = append(tf.Tiers, corpus.TierJSON{Tier: t, Label: tierLabels[t]})
	}
	b, err := marshalIndent(tf)
	if err != nil {
		return nil, corpus.Counts{}, err
	}
	files = append(files, outFile{"tiers.json", b})
	sf := corpus.SubjectsJSON{}
	for _, s := range subs {
		sf.Subjects = append(sf.Subjects, s.row())
	}
	if b, err = marshalIndent(sf); err != nil {
		return nil, corpus.Counts{}, err
	}
	files = append(files, outFile{"subjects.json", b})

	// Lessons and tests are independent: generate them in parallel, each from
	// its own PCG stream, and collect by index so the order never depends on
	// scheduling.
	type job struct {
		sub  *subjectPlan
		test *testSpec
	}
	var jobs []job
	for _, s := range subs {
		jobs = append(jobs, job{sub: s})
	}
	for i := range testSpecs {
		jobs = append(jobs, job{test: &testSpecs[i]})
	}
	out := make([]outFile, len(jobs))
	errs := make([]error, len(jobs))
	items := make([]int, len(jobs))
	media := make([]int, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := jobs[i]
				if j.sub != nil {
					r := rand.New(rand.NewPCG(uint64(opt.Seed), 0x51ed270b+uint64(j.sub.index)*0x2545f491))
					lf, m := genLessons(r, j.sub)
					media[i] = m
					out[i].path = path.Join("lessons", j.sub.tier, j.sub.fam.Slug+".json")
					out[i].data, errs[i] = marshalCompact(lf)
				} else {
					// The tests' streams as the full corpus's (its
					// jobs list its 125 subjects first), at any scale.
					t := i
					if !opt.Small {
						t += FullSubjects - len(subs)
					}
					r := rand.New(rand.NewPCG(uint64(opt.Seed), 0x7e57+uint64(t)*0x9e37))
					tf, n := genTest(r, j.test, opt.Small)
					items[i] = n
					out[i].path = path.Join("testprep", j.test.id+".json")
					out[i].data, errs[i] = marshalCompact(tf)
				}
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	counts := corpus.Counts{Tiers: len(id.Tiers), Subjects: len(subs)}
	for i := range jobs {
		if errs[i] != nil {
			return nil, corpus.Counts{}, errs[i]
		}
		counts.Media += media[i]
		counts.TestprepItems += items[i]
	}
	for _, s := range subs {
		counts.Classes += len(s.classes)
	}
	if !opt.Small && (counts.Subjects != k*FullSubjects || counts.Classes != k*FullClasses || counts.Media != k*FullMedia) {
		return nil, corpus.Counts{}, fmt.Errorf("internal: generated %d subjects, %d classes, %d media", counts.Subjects, counts.Classes, counts.Media)
	}
	files = append(files, out...)
	return files, counts, nil
}

// scaleFamilies is fams with every family k times: the first as it is,
// copy c (2 … k) slugged "<slug>-c" and named "<Name> c", the same tiers,
// area and terms, right after it.
func scaleFamilies(fams []family, k int) []family {
	if k <= 1 {
		return fams
	}
	out := make([]family, 0, k*len(fams))
	for _, f := range fams {
		out = append(out, f)
		for c := 2; c <= k; c++ {
			g := f
			g.Slug, g.Name = fmt.Sprintf("%s-%d", f.Slug, c), fmt.Sprintf("%s %d", f.Name, c)
			out = append(out, g)
		}
	}
	return out
}

func marshalIndent(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(v)
	return buf.Bytes(), err
}

func marshalCompact(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return buf.Bytes(), err
}
