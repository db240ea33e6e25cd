package gen

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/lectern-api/lectern/origin/corpus"
)

// Class kinds fix a class's media shape; their mix gives the corpus classes
// with and without video, narration and transcript.
type kind int

const (
	kindFull      kind = iota // every card narrated, some video
	kindNoVideo               // every card narrated, no video
	kindVideoOnly             // voiced video, no narration
	kindNone                  // neither: no transcript at all
	kindPartial               // some cards narrated
)

// kindPattern is dealt over a shuffled list of all classes: 70% full, 10% no
// video, 10% video without narration, 5% without transcript, 5% partial.
var kindPattern = []kind{
	kindFull, kindFull, kindFull, kindFull, kindFull, kindFull, kindFull,
	kindFull, kindFull, kindFull, kindFull, kindFull, kindFull, kindFull,
	kindNoVideo, kindNoVideo, kindVideoOnly, kindVideoOnly, kindNone, kindPartial,
}

type subjectPlan struct {
	fam     *family
	tier    string
	index   int
	terms   []string // the family's terms in this tier's own order
	diff    string
	prereqs []string
	related []string
	classes []classPlan
}

type classPlan struct {
	kind     kind
	cards    int
	narrated int
	video    int
}

func (c classPlan) media() int { return c.cards + c.narrated + c.video }

func (s *subjectPlan) ref() string { return s.tier + "/" + s.fam.Slug }

// classRange is the class count range per tier at full scale.
var classRange = map[string][2]int{
	"topics": {10, 36}, "college": {24, 60}, "high": {22, 50}, "middle": {16, 40}, "primary": {10, 30},
}

func between(r *rand.Rand, lo, hi int) int { return lo + r.IntN(hi-lo+1) }

// planClasses fixes every class's card, narration and video counts so that
// a full corpus at scale k lands exactly on k × FullClasses and k × FullMedia.
func planClasses(r *rand.Rand, subs []*subjectPlan, small bool, k int) error {
	for _, s := range subs {
		s.terms = append([]string(nil), s.fam.Terms...)
		r.Shuffle(len(s.terms), func(i, j int) { s.terms[i], s.terms[j] = s.terms[j], s.terms[i] })
		rg := classRange[s.tier]
		n := between(r, rg[0], rg[1])
		if small {
			n = between(r, 5, 9)
		}
		s.classes = make([]classPlan, n)
	}
	if !small {
		if err := adjust(r, subs, k*FullClasses-totalClasses(subs), func(s *subjectPlan, d int) bool {
			n := len(s.classes) + d
			if n < 10 || n > 60 {
				return false
			}
			s.classes = make([]classPlan, n)
			return true
		}); err != nil {
			return fmt.Errorf("class counts: %w", err)
		}
	}

	var all []*classPlan
	for _, s := range subs {
		for i := range s.classes {
			all = append(all, &s.classes[i])
		}
	}
	order := r.Perm(len(all))
	for i, k := range order {
		all[k].kind = kindPattern[i%len(kindPattern)]
	}
	sum := 0
	var full []*classPlan
	for _, c := range all {
		switch c.kind {
		case kindFull:
			m := 32 + between(r, -3, 3) + between(r, -2, 2)
			c.video = between(r, 1, 4)
			if (m-c.video)%2 != 0 {
				c.video++
			}
			c.cards = (m - c.video) / 2
			c.narrated = c.cards
			full = append(full, c)
		case kindNoVideo:
			c.cards = between(r, 14, 17)
			c.narrated = c.cards
		case kindVideoOnly:
			c.cards = between(r, 18, 24)
			c.video = between(r, 6, 10)
		case kindNone:
			c.cards = between(r, 18, 24)
		case kindPartial:
			c.cards = between(r, 15, 19)
			c.narrated = c.cards - between(r, 2, 5)
			c.video = between(r, 0, 3)
		}
		sum += c.media()
	}
	if small {
		return nil
	}
	// Land exactly on FullMedia by moving video counts of full classes one at
	// a time, in a shuffled but seed-determined order; every full class keeps
	// between 1 and all of its cards on video.
	diff := k*FullMedia - sum
	perm := r.Perm(len(full))
	for pass := 0; diff != 0 && pass < 64; pass++ {
		for _, k := range perm {
			c := full[k]
			switch {
			case diff > 0 && c.video < c.cards:
				c.video++
				diff--
			case diff < 0 && c.video > 1:
				c.video--
				diff++
			}
			if diff == 0 {
				break
			}
		}
	}
	if diff != 0 {
		return fmt.Errorf("media total off by %d", diff)
	}
	return nil
}

func totalClasses(subs []*subjectPlan) int {
	n := 0
	for _, s := range subs {
		n += len(s.classes)
	}
	return n
}

// adjust applies diff as ±1 steps to subjects in a seed-determined order.
func adjust(r *rand.Rand, subs []*subjectPlan, diff int, step func(*subjectPlan, int) bool) error {
	perm := r.Perm(len(subs))
	for pass := 0; diff != 0 && pass < 100; pass++ {
		for _, k := range perm {
			if diff == 0 {
				break
			}
			d := 1
			if diff < 0 {
				d = -1
			}
			if step(subs[k], d) {
				diff -= d
			}
		}
	}
	if diff != 0 {
		return fmt.Errorf("off by %d", diff)
	}
	return nil
}

// planSubjectLinks chooses difficulty, prerequisites and related subjects.
// Every reference names a subject of this corpus.
func planSubjectLinks(r *rand.Rand, subs []*subjectPlan) {
	lower := map[string]string{"college": "high", "high": "middle", "middle": "primary"}
	byRef := map[string]*subjectPlan{}
	for _, s := range subs {
		byRef[s.ref()] = s
	}
	for i, s := range subs {
		switch s.tier {
		case "primary":
			s.diff = "beginner"
		case "middle":
			s.diff = []string{"beginner", "intermediate"}[r.IntN(2)]
		case "high":
			s.diff = []string{"intermediate", "intermediate", "advanced"}[r.IntN(3)]
		case "college":
			s.diff = []string{"intermediate", "advanced", "advanced"}[r.IntN(3)]
		default:
			s.diff = []string{"beginner", "intermediate", "advanced"}[r.IntN(3)]
		}
		used := map[string]bool{s.ref(): true}
		if lt, ok := lower[s.tier]; ok {
			if p := byRef[lt+"/"+s.fam.Slug]; p != nil {
				s.prereqs = append(s.prereqs, p.ref())
				used[p.ref()] = true
			}
		}
		var same, other []*subjectPlan
		for j, o := range subs {
			if o.fam.Area != s.fam.Area || used[o.ref()] {
				continue
			}
			if o.tier == s.tier && j < i {
				same = append(same, o)
			} else if j != i {
				other = append(other, o)
			}
		}
		for _, k := range r.Perm(len(same))[:min(len(same), r.IntN(3))] {
			s.prereqs = append(s.prereqs, same[k].ref())
			used[same[k].ref()] = true
		}
		for _, k := range r.Perm(len(other))[:min(len(other), r.IntN(4))] {
			s.related = append(s.related, other[k].ref())
		}
	}
}

var levelWords = map[string]string{
	"topics": "curious adults", "college": "university students", "high": "high-school students",
	"middle": "middle-school students", "primary": "young learners",
}

func (s *subjectPlan) row() corpus.SubjectJSON {
	a := areas[s.fam.Area]
	t := s.terms
	desc := fmt.Sprintf("%s for %s: %s, %s and %s, taught through short cards, worked examples and practice checks.",
		s.fam.Name, levelWords[s.tier], t[0], t[1], t[2])
	tags := []string{a.Tag, slugify(t[0]), slugify(t[1])}
	if s.prereqs == nil {
		s.prereqs = []string{}
	}
	if s.related == nil {
		s.related = []string{}
	}
	return corpus.SubjectJSON{
		Slug: s.fam.Slug, Tier: s.tier, Name: s.fam.Name, Description: desc, Difficulty: s.diff,
		Tags: tags, Prerequisites: s.prereqs, Related: s.related,
	}
}

// slugify lowercases s and joins its letters and digits with single hyphens.
func slugify(s string) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(s) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(c)
		} else {
			dash = true
		}
	}
	return b.String()
}
