package gen

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/lectern-api/lectern/origin/corpus"
)

var titleTpl = map[string][]string{
	"primary": {"Fun with {P}", "Let's Explore {P}", "{P}", "{P} and {Q}", "Meet {P}", "Playing with {P}", "{P} All Around Us"},
	"middle":  {"{P}", "Introduction to {P}", "{P} and {Q}", "Working with {P}", "Understanding {P}", "{P} Step by Step", "{P} Through Examples"},
	"high":    {"{P}", "{P} and {Q}", "Working with {P}", "{P} in Practice", "Understanding {P}", "From {P} to {Q}", "Why {P} Matters", "A Closer Look at {P}"},
	"college": {"{P}", "{P} and {Q}", "Advanced {P}", "{P}: Theory and Application", "From {P} to {Q}", "Rigorous {P}", "{P} Revisited", "Applying {P}"},
	"topics":  {"{P}", "Getting Started with {P}", "{P} and {Q}", "{P} in Practice", "Mastering {P}", "{P}: Tips and Pitfalls", "A Closer Look at {P}"},
}

var subtitleTpl = []string{
	"How {t} connects to {u} in {s}",
	"{S} for {l}: {t} with worked examples",
	"A focused look at {t}, with practice on {u}",
	"Building on {u} to understand {t}",
	"What {p} know about {t}, and how to use it",
	"{T} explained through short cards and checks",
}

// genLessons writes one subject's lesson file; it returns the file and the
// number of media assets in it.
func genLessons(r *rand.Rand, s *subjectPlan) (corpus.LessonFileJSON, int) {
	w := &writer{r: r, s: s, a: areas[s.fam.Area], name: s.fam.Name}
	lf := corpus.LessonFileJSON{Tier: s.tier, Slug: s.fam.Slug}
	nmedia := 0
	for i, cp := range s.classes {
		c := genClass(w, i, cp)
		for _, cd := range c.Cards {
			nmedia += len(cd.Media)
		}
		lf.Classes = append(lf.Classes, c)
	}
	return lf, nmedia
}

func genClass(w *writer, i int, cp classPlan) corpus.ClassJSON {
	r, s := w.r, w.s
	num := i + 1
	p := s.terms[i%len(s.terms)]
	terms := []string{p}
	for len(terms) < between(r, 3, 5) {
		u := w.term()
		if !contains(terms, u) {
			terms = append(terms, u)
		}
	}
	tpls := titleTpl[s.tier]
	tpl := tpls[r.IntN(len(tpls))]
	if i >= len(s.terms) && !strings.Contains(tpl, "{Q}") {
		tpl = "{P} and {Q}"
		if i >= 2*len(s.terms) {
			tpl = "From {P} to {Q}"
		}
	}
	title := strings.ReplaceAll(strings.ReplaceAll(tpl, "{P}", titleCase(p)), "{Q}", titleCase(terms[1]))
	subtitle := w.fill(w.pick(subtitleTpl), p, terms[1])
	subtitle = strings.ReplaceAll(subtitle, "{S}", capFirst(s.fam.Name))
	subtitle = capFirst(subtitle)

	c := corpus.ClassJSON{Number: new(num), Title: title, Subtitle: subtitle}
	var hasVideo, hasNarration, hasTranscript bool
	narrated := pickSet(r, cp.cards, cp.narrated)
	video := pickSet(r, cp.cards, cp.video)
	base := fmt.Sprintf("media/%s/%s/%d/", s.tier, s.fam.Slug, num)
	for j := 0; j < cp.cards; j++ {
		t := terms[j%len(terms)]
		def := ""
		if j < len(terms) {
			def = t
		}
		// 40% of bodies are long enough to exceed a standard-level cap of
		// about 600 characters, a fifth of those much longer.
		want := between(r, 100, 350)
		if r.IntN(100) < 40 {
			want = between(r, 700, 1200)
			if r.IntN(5) == 0 {
				want = between(r, 1200, 2500)
			}
		}
		cid := fmt.Sprintf("c%d", j+1)
		label := capFirst(t) + ": " + w.pick(w.a.Aspects)
		if j == 0 {
			label = "Overview: " + capFirst(t)
		}
		cd := corpus.CardJSON{
			ID: cid, Label: label, Body: w.body(t, def, want),
			IllustrationAlt: capFirst(w.fill("{x} showing {t} alongside {u}", t, w.other(t))),
		}
		for _, k := range r.Perm(len(keyPointTpl))[:between(r, 2, 3)] {
			cd.KeyPoints = append(cd.KeyPoints, w.fill(keyPointTpl[k], t, w.other(t)))
		}
		if video[j] {
			if cp.kind == kindVideoOnly || r.IntN(100) < 85 {
				cd.VideoVoiceover = w.sentencesAbout(t, between(r, 1, 4), w.pick(voiceoverOpeners))
			}
			d := between(r, 40, 300)
			cd.Media = append(cd.Media, corpus.MediaJSON{Type: "video", Location: base + cid + ".mp4",
				Bytes: new(int64(d * between(r, 180_000, 320_000))), DurationSec: d, MIME: "video/mp4"})
		}
		if narrated[j] {
			cd.Narrated = true
			spoken := cd.Body
			if r.IntN(100) < 25 {
				cd.NarrationScript = w.sentencesAbout(t, between(r, 2, 5), w.pick(narrationOpeners))
				spoken = cd.NarrationScript
			}
			d := max(8, words(spoken)*60/150)
			cd.Media = append(cd.Media, corpus.MediaJSON{Type: "audio", Location: base + cid + ".mp3",
				Bytes: new(int64(d * 16_000)), DurationSec: d, MIME: "audio/mpeg"})
		}
		cd.Media = append(cd.Media, corpus.MediaJSON{Type: "image", Location: base + cid + ".png",
			Bytes: new(int64(between(r, 40_000, 900_000))), MIME: "image/png"})
		hasVideo = hasVideo || video[j]
		hasNarration = hasNarration || cd.Narrated
		hasTranscript = hasTranscript || cd.Narrated || cd.VideoVoiceover != ""
		c.Cards = append(c.Cards, cd)
	}
	c.HasVideo, c.HasNarration, c.HasTranscript = new(hasVideo), new(hasNarration), new(hasTranscript)

	for q := between(r, 3, 5); q > 0; q-- {
		c.Quiz = append(c.Quiz, w.quiz(terms[r.IntN(len(terms))], terms))
	}
	c.InlineChecks = []corpus.CheckJSON{}
	if r.IntN(10) > 0 || num == 1 {
		for k := between(r, 1, 3); k > 0; k-- {
			j := between(r, 1, max(1, cp.cards-2))
			c.InlineChecks = append(c.InlineChecks, w.check(c.Cards[j], terms[j%len(terms)]))
		}
	}
	c.Interactives = []corpus.InteractiveJSON{}
	if r.IntN(100) < 40 || num == 3 {
		for k := 0; k < between(r, 1, 2); k++ {
			j := r.IntN(cp.cards)
			c.Interactives = append(c.Interactives, w.interactive(k+1, c.Cards[j].ID, terms[j%len(terms)], terms))
		}
	}
	if r.IntN(100) < 35 || num == 2 {
		c.WorkedExample = w.worked(p)
	}
	return c
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// pickSet marks k of n positions, chosen by r.
func pickSet(r *rand.Rand, n, k int) []bool {
	set := make([]bool, n)
	for _, i := range r.Perm(n)[:k] {
		set[i] = true
	}
	return set
}

// shuffled places correct among wrong at a random index and returns the
// options and that index, as the format's answerIndex holds it.
func shuffled(r *rand.Rand, correct string, wrong []string) ([]string, *int) {
	opts := append([]string{correct}, wrong...)
	r.Shuffle(len(opts), func(i, j int) { opts[i], opts[j] = opts[j], opts[i] })
	for i, o := range opts {
		if o == correct {
			return opts, new(i)
		}
	}
	return opts, new(0)
}

func (w *writer) quiz(t string, terms []string) corpus.QuizJSON {
	u := w.other(t)
	var q, right string
	var wrong []string
	switch w.r.IntN(4) {
	case 0:
		q = w.fill("Which statement about {t} is accurate?", t, u)
		right = w.fill("{T} is closely connected to {u} in {s}.", t, u)
		wrong = []string{
			w.fill("{T} is unrelated to any {o} in {s}.", t, u),
			w.fill("{T} only matters outside {s}.", t, u),
			w.fill("{T} means exactly the same thing as {u}.", t, w.other(u)),
		}
	case 1:
		q = w.fill("What is a sensible first step when you {v} a {o} that involves {t}?", t, u)
		right = w.fill("Identify the {o} and check how {t} applies to it.", t, u)
		wrong = []string{"Skip straight to the final answer.", w.fill("Ignore {t} and hope for the best.", t, u), w.fill("Memorise an unrelated rule about {u}.", t, u)}
	case 2:
		q = w.fill("Why do {p} pay close attention to {t}?", t, u)
		right = w.fill("Because {t} helps them {v} a {o} reliably.", t, u)
		wrong = []string{
			w.fill("Because {t} is purely decorative.", t, u),
			w.fill("Because {t} removes any need for {u}.", t, u),
			w.fill("Because {t} is only a historical curiosity.", t, u),
		}
	default:
		var others []string
		for _, x := range terms {
			if x != t {
				others = append(others, x)
			}
		}
		q = w.fill("Which term from this class is introduced together with {t}?", t, u)
		right = others[w.r.IntN(len(others))]
		for len(wrong) < 3 {
			x := w.other(t)
			if !contains(terms, x) && !contains(wrong, x) {
				wrong = append(wrong, x)
			}
		}
	}
	opts, ans := shuffled(w.r, right, wrong)
	return corpus.QuizJSON{Question: q, Options: opts, AnswerIndex: ans}
}

func (w *writer) check(cd corpus.CardJSON, t string) corpus.CheckJSON {
	u := w.other(t)
	right := w.fill("{T} works hand in hand with {u}.", t, u)
	wrong := []string{
		w.fill("{T} can be ignored once the {o} is written down.", t, u),
		w.fill("{T} belongs to a different subject than {s}.", t, u),
	}
	if w.r.IntN(2) == 0 {
		wrong = append(wrong, w.fill("{T} is just another name for the final answer.", t, u))
	}
	opts, ans := shuffled(w.r, right, wrong)
	hints := []string{
		w.fill("Think about what {t} is used for in {s}.", t, u),
		fmt.Sprintf("Reread the opening of the card %q.", cd.Label),
	}
	if w.r.IntN(3) > 0 {
		hints = append(hints, w.fill("The right option mentions {u}.", t, u))
	}
	return corpus.CheckJSON{
		AfterCard: cd.ID,
		Question:  fmt.Sprintf("Quick check on %q: which statement about %s is right?", cd.Label, t),
		Options:   opts, AnswerIndex: ans, Hints: hints,
		Rationale: w.fill("“{T} works hand in hand with {u}” is right: the two are introduced together in this class. The other options cut {t} off from {s} or confuse it with something else.", t, u),
	}
}

func (w *writer) interactive(n int, card, t string, terms []string) corpus.InteractiveJSON {
	kind := w.pick(w.a.Interact)
	var cfg any
	r := w.r
	switch kind {
	case "graph-plotter":
		cfg = map[string]any{"xMin": -10, "xMax": 10, "expression": fmt.Sprintf("%d*x%+d", between(r, -5, 5), between(r, -9, 9))}
	case "number-line":
		cfg = map[string]any{"min": -10, "max": 10, "marks": []int{between(r, -10, -1), 0, between(r, 1, 10)}}
	case "slider", "calculator":
		lo := between(r, 0, 10)
		cfg = map[string]any{"parameter": t, "min": lo, "max": lo + between(r, 10, 100), "step": 1}
	case "simulation":
		cfg = map[string]any{"model": slugify(t), "parameters": []map[string]any{{"name": t, "min": 0, "max": between(r, 5, 50)}}}
	case "timeline":
		var ev []map[string]any
		y := between(r, 1000, 1900)
		for _, x := range terms {
			ev = append(ev, map[string]any{"label": x, "order": y})
			y += between(r, 5, 60)
		}
		cfg = map[string]any{"events": ev}
	case "matching":
		var pairs [][2]string
		for _, x := range terms {
			pairs = append(pairs, [2]string{x, w.fill("an example of {t}", x, x)})
		}
		cfg = map[string]any{"pairs": pairs}
	case "code-runner":
		cfg = map[string]any{"language": "python", "starter": fmt.Sprintf("# explore %s\ndef main():\n    pass\n", t)}
	default:
		cfg = map[string]any{"items": terms}
	}
	b, _ := json.Marshal(cfg)
	return corpus.InteractiveJSON{
		ID: fmt.Sprintf("i%d", n), Card: card, Kind: kind,
		Prompt: w.fill("Use the {x} to explore how {t} relates to {u}.", t, w.other(t)),
		Config: b,
	}
}

func (w *writer) worked(t string) *corpus.WorkedJSON {
	r := w.r
	switch w.s.fam.Area {
	case "math":
		a, x, b := between(r, 2, 9), between(r, -12, 12), between(r, 1, 30)
		c := a*x + b
		return &corpus.WorkedJSON{
			Problem: fmt.Sprintf("Using what you know about %s, solve %dx + %d = %d.", t, a, b, c),
			Steps: []string{
				fmt.Sprintf("Subtract %d from both sides: %dx = %d.", b, a, c-b),
				fmt.Sprintf("Divide both sides by %d: x = %d.", a, x),
				fmt.Sprintf("Check: %d × %d + %d = %d.", a, x, b, c),
			},
			Answer: fmt.Sprintf("x = %d", x),
		}
	case "econ":
		p, pct := between(r, 20, 400)*5, between(r, 2, 30)
		np := float64(p) * float64(100+pct) / 100
		return &corpus.WorkedJSON{
			Problem: fmt.Sprintf("A value of $%d rises by %d%%. Thinking about %s, what is the new value?", p, pct, t),
			Steps: []string{
				fmt.Sprintf("Write the increase as a multiplier: 1 + %d/100 = %.2f.", pct, float64(100+pct)/100),
				fmt.Sprintf("Multiply: $%d × %.2f = $%.2f.", p, float64(100+pct)/100, np),
				fmt.Sprintf("Interpret the result in terms of %s.", t),
			},
			Answer: fmt.Sprintf("$%.2f", np),
		}
	case "sci":
		m, v := between(r, 10, 500), between(r, 2, 50)
		return &corpus.WorkedJSON{
			Problem: fmt.Sprintf("A sample in a study of %s has mass %d g and volume %d cm³. What is its density?", t, m, v),
			Steps: []string{
				"Recall that density = mass ÷ volume.",
				fmt.Sprintf("Substitute: %d g ÷ %d cm³.", m, v),
				fmt.Sprintf("Compute and round to two decimals: %.2f g/cm³.", float64(m)/float64(v)),
			},
			Answer: fmt.Sprintf("%.2f g/cm³", float64(m)/float64(v)),
		}
	}
	u := w.other(t)
	steps := []string{
		w.fill("Identify where {t} appears in the {o}.", t, u),
		w.fill("Describe how {t} relates to {u}.", t, u),
		w.fill("{V} the {o} again with that relationship in mind.", t, u),
	}
	steps[2] = capFirst(strings.Replace(steps[2], "{V}", w.pick(w.a.Verbs), 1))
	if r.IntN(2) == 0 {
		steps = append(steps, w.fill("Summarise what {t} shows in one sentence.", t, u))
	}
	return &corpus.WorkedJSON{
		Problem: w.fill("Here is a {o} to work through. How does {t} shape it, and what does that tell you about {u}?", t, u),
		Steps:   steps,
		Answer:  w.fill("{T} determines the structure of the {o}, and it explains the role of {u}.", t, u),
	}
}
