package gen

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/lectern-api/lectern/origin/corpus"
)

// Test prep: the spec's four tests with exactly its sections (spec: "Test
// prep"). Items are original: built from templates with computed answers, so
// every answer key is right by construction.

type testSpec struct {
	id, name string
	sections []sectionSpec
}

type sectionSpec struct {
	id, label string
	kind      string // rw, english, math, reading, science, ela
	domains   []domainSpec
}

type domainSpec struct {
	name string
	gen  string // item generator
}

var satRW = []domainSpec{{"Information and Ideas", "mainidea"}, {"Craft and Structure", "vocab"}, {"Expression of Ideas", "transition"}, {"Standard English Conventions", "agreement"}}
var satMath = []domainSpec{{"Algebra", "linear"}, {"Advanced Math", "quadratic"}, {"Problem-Solving and Data Analysis", "percent"}, {"Geometry and Trigonometry", "geometry"}}

var testSpecs = []testSpec{
	{"digital-sat", "Digital SAT", []sectionSpec{
		{"rw", "Reading and Writing", "rw", satRW},
		{"math", "Math", "math", satMath},
	}},
	{"act", "ACT", []sectionSpec{
		{"english", "English", "english", []domainSpec{{"Production of Writing", "transition"}, {"Knowledge of Language", "vocab"}, {"Conventions of Standard English", "agreement"}, {"Conventions of Standard English", "punctuation"}}},
		{"math", "Mathematics", "math", []domainSpec{{"Number and Quantity", "percent"}, {"Algebra", "linear"}, {"Functions", "quadratic"}, {"Geometry", "geometry"}, {"Statistics and Probability", "stats"}, {"Integrating Essential Skills", "system"}}},
		{"reading", "Reading", "reading", []domainSpec{{"Key Ideas and Details", "mainidea"}, {"Key Ideas and Details", "detail"}, {"Craft and Structure", "purpose"}, {"Integration of Knowledge and Ideas", "inference"}}},
		{"science", "Science", "science", []domainSpec{{"Interpretation of Data", "trend"}, {"Scientific Investigation", "control"}, {"Evaluation of Models, Inferences and Experimental Results", "predict"}}},
	}},
	{"psat-nmsqt", "PSAT/NMSQT", []sectionSpec{
		{"rw", "Reading and Writing", "rw", satRW},
		{"math", "Math", "math", satMath},
	}},
	{"caaspp", "CAASPP", []sectionSpec{
		{"ela", "English Language Arts/Literacy", "ela", []domainSpec{{"Reading", "mainidea"}, {"Reading", "detail"}, {"Writing", "transition"}, {"Writing", "agreement"}, {"Listening", "listening"}, {"Research/Inquiry", "research"}}},
		{"math", "Mathematics", "math", []domainSpec{{"Concepts and Procedures", "linear"}, {"Concepts and Procedures", "geometry"}, {"Problem Solving and Modeling & Data Analysis", "percent"}, {"Problem Solving and Modeling & Data Analysis", "stats"}, {"Communicating Reasoning", "system"}}},
		{"science", "Science", "science", []domainSpec{{"Physical Sciences", "predict"}, {"Life Sciences", "trend"}, {"Earth and Space Sciences", "control"}}},
	}},
}

func genTest(r *rand.Rand, t *testSpec, small bool) (corpus.TestJSON, int) {
	tf := corpus.TestJSON{ID: t.id, Name: t.name}
	total := 0
	for _, s := range t.sections {
		n := between(r, 300, 480)
		if small {
			n = 20
		}
		sec := corpus.SectionJSON{ID: s.id, Label: s.label}
		for i := 0; i < n; i++ {
			d := s.domains[i%len(s.domains)]
			g := &itemGen{r: r, diff: []string{"easy", "medium", "medium", "hard"}[r.IntN(4)]}
			it := g.item(d.gen)
			it.ID = fmt.Sprintf("%s-%s-%04d", t.id, s.id, i+1)
			it.Domain = d.name
			it.Difficulty = g.diff
			if r.IntN(100) >= 65 {
				it.OptionRationales = nil
			}
			sec.Items = append(sec.Items, it)
		}
		total += n
		tf.Sections = append(tf.Sections, sec)
	}
	return tf, total
}

type itemGen struct {
	r    *rand.Rand
	diff string
}

func (g *itemGen) pick(l []string) string { return l[g.r.IntN(len(l))] }

func (g *itemGen) scale() int {
	switch g.diff {
	case "easy":
		return 1
	case "medium":
		return 2
	}
	return 4
}

type study struct {
	field, phenomenon, cause, rival, place string
}

var studies = []study{
	{"marine biology", "coral spawning", "the timing of the full moon", "water clarity", "the Ningaloo coast"},
	{"ornithology", "the departure dates of migrating swifts", "day length", "food supply", "the Camargue wetlands"},
	{"glaciology", "the retreat of small mountain glaciers", "summer air temperature", "winter snowfall", "the Tian Shan range"},
	{"urban ecology", "the spread of street trees' roots", "soil compaction", "tree species", "older city districts"},
	{"astronomy", "the dimming of a young star", "a surrounding dust disk", "sunspot activity", "the Taurus star-forming region"},
	{"economic history", "the growth of medieval market towns", "river access", "royal charters", "northern Europe"},
	{"linguistics", "the loss of regional dialect words", "school attendance", "radio broadcasting", "rural valleys"},
	{"agronomy", "yields of drought-tolerant millet", "the depth of the root zone", "seed price", "the Sahel"},
	{"entomology", "the foraging range of bumblebees", "the spacing of flower patches", "hive size", "alpine meadows"},
	{"archaeology", "the layout of early farming villages", "access to fresh water", "defensive needs", "the Jordan valley"},
	{"materials science", "cracking in concrete bridges", "repeated freeze-thaw cycles", "traffic load", "coastal highways"},
	{"musicology", "the spread of a folk melody", "seasonal labour migration", "printed songbooks", "the Balkan mountains"},
	{"neuroscience", "how well adults recall new vocabulary", "the amount of sleep after study", "study duration", "a university language lab"},
	{"hydrology", "flash flooding in small catchments", "the amount of paved surface", "total rainfall", "suburban creeks"},
	{"art history", "the use of ultramarine in altarpieces", "the wealth of the patron", "the painter's training", "Renaissance Florence"},
	{"plant physiology", "the opening of leaf pores", "morning humidity", "leaf size", "a cloud-forest canopy"},
	{"seismology", "small earthquakes near reservoirs", "changes in water level", "rock type", "mountain dams"},
	{"sociology", "participation in neighbourhood councils", "meeting times", "residents' income", "mid-sized towns"},
}

var firstNames = []string{"Amara", "Tomas", "Leila", "Kenji", "Ines", "Dmitri", "Sofia", "Kwame", "Priya", "Mateo", "Hana", "Olu", "Freya", "Rafael", "Mei", "Jonah", "Zainab", "Lukas", "Nadia", "Emeka"}
var lastNames = []string{"Okafor", "Lindqvist", "Haddad", "Moreau", "Tanaka", "Varga", "Ruiz", "Mensah", "Iyer", "Kowalski", "Sato", "Adeyemi", "Novak", "Castellanos", "Berg", "Quispe", "Farouk", "Holm", "Achebe", "Petrov"}

func numWord(n int) string {
	w := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen"}
	if n < len(w) {
		return w[n]
	}
	return strconv.Itoa(n)
}

type passage struct {
	st          study
	first, last string
	seasons     int
	sites       int
	text        string
}

func (g *itemGen) passage(long bool) passage {
	p := passage{st: studies[g.r.IntN(len(studies))], first: g.pick(firstNames), last: g.pick(lastNames), seasons: between(g.r, 2, 9), sites: between(g.r, 3, 14)}
	s := p.st
	parts := []string{
		fmt.Sprintf("%s %s, a researcher in %s, spent %s seasons studying %s in %s.", p.first, p.last, s.field, numWord(p.seasons), s.phenomenon, s.place),
		fmt.Sprintf("Earlier accounts had attributed the pattern mainly to %s.", s.rival),
		fmt.Sprintf("By comparing %s sites, %s found that %s tracked %s far more closely than %s.", numWord(p.sites), p.last, s.phenomenon, s.cause, s.rival),
	}
	if long {
		parts = append(parts,
			fmt.Sprintf("At each site the team kept the same schedule of observations, so that differences in %s could not be blamed on the method.", s.phenomenon),
			fmt.Sprintf("Where %s changed sharply from one year to the next, %s shifted with it, usually within a few weeks.", s.cause, s.phenomenon),
			fmt.Sprintf("By contrast, sites with very different levels of %s showed almost the same pattern once %s was taken into account.", s.rival, s.cause),
			fmt.Sprintf("%s is careful to note that %s is not irrelevant; it simply explains far less than had been assumed.", p.last, s.rival),
		)
	}
	parts = append(parts, fmt.Sprintf("The finding suggests that models of %s should treat %s as a primary factor.", s.phenomenon, s.cause))
	p.text = strings.Join(parts, " ")
	return p
}

// rat builds per-option rationales: "Correct." for the answer, why-not for the rest.
func rat(opts []string, ans *int, right string, wrong func(o string) string) []string {
	out := make([]string, len(opts))
	for i, o := range opts {
		if i == *ans {
			out[i] = "Correct. " + right
		} else {
			out[i] = "Incorrect. " + wrong(o)
		}
	}
	return out
}

func (g *itemGen) item(kind string) corpus.ItemJSON {
	r := g.r
	switch kind {
	case "mainidea", "detail", "purpose", "inference", "listening":
		p := g.passage(g.diff == "hard" || kind == "inference" || kind == "purpose")
		s := p.st
		var it corpus.ItemJSON
		it.Passage = p.text
		if kind == "listening" {
			it.Passage = "Transcript of a short class presentation: " + p.text
		}
		var right string
		var wrong []string
		switch kind {
		case "mainidea", "listening":
			it.Prompt = "Which choice best states the main idea of the text?"
			if kind == "listening" {
				it.Prompt = "Which choice best states the speaker's main point?"
			}
			right = capFirst(fmt.Sprintf("%s is more closely linked to %s than earlier accounts assumed.", s.phenomenon, s.cause))
			wrong = []string{
				fmt.Sprintf("Earlier accounts of %s were right to emphasise %s.", s.phenomenon, s.rival),
				fmt.Sprintf("%s was unable to compare more than one site.", p.last),
				capFirst(fmt.Sprintf("%s occurs only in %s.", s.phenomenon, s.place)),
			}
		case "detail":
			it.Prompt = "According to the text, what had earlier accounts mainly attributed the pattern to?"
			right = capFirst(s.rival)
			wrong = []string{capFirst(s.cause)}
			for len(wrong) < 3 {
				o := capFirst(studies[r.IntN(len(studies))].rival)
				if o != right && !contains(wrong, o) {
					wrong = append(wrong, o)
				}
			}
		case "purpose":
			it.Prompt = "Which choice best describes the function of the second sentence in the text?"
			right = "It presents the explanation that the researcher's findings challenge."
			wrong = []string{"It states the researcher's final conclusion.", "It describes the method used at each site.", "It offers an example that supports the researcher's conclusion."}
		default:
			it.Prompt = fmt.Sprintf("Based on the text, how many sites did %s compare?", p.last)
			right = capFirst(numWord(p.sites))
			for _, d := range []int{-2, -1, 1, 2, 3} {
				if len(wrong) < 3 && p.sites+d > 0 && p.sites+d != p.seasons {
					wrong = append(wrong, capFirst(numWord(p.sites+d)))
				}
			}
		}
		it.Options, it.AnswerIndex = shuffled(r, right, wrong)
		it.Rationale = fmt.Sprintf("The text reports that %s compared %s sites and found that %s tracked %s more closely than %s.", p.last, numWord(p.sites), s.phenomenon, s.cause, s.rival)
		it.OptionRationales = rat(it.Options, it.AnswerIndex, "This is what the text says or implies directly.", func(o string) string {
			return fmt.Sprintf("The text does not support %q.", o)
		})
		return it
	case "vocab":
		v := vocabBank[r.IntN(len(vocabBank))]
		st := studies[r.IntN(len(studies))]
		it := corpus.ItemJSON{
			Passage: fmt.Sprintf(v.context, st.field, st.phenomenon),
			Prompt:  fmt.Sprintf("As used in the text, what does the word %q most nearly mean?", v.word),
		}
		it.Options, it.AnswerIndex = shuffled(r, v.meaning, v.wrong)
		it.Rationale = fmt.Sprintf("In this context %q means %q; the other choices are meanings the word has elsewhere or does not have.", v.word, v.meaning)
		it.OptionRationales = rat(it.Options, it.AnswerIndex, "It fits the sentence's meaning.", func(o string) string {
			return fmt.Sprintf("%q does not fit how the word is used here.", o)
		})
		return it
	case "transition":
		st := studies[r.IntN(len(studies))]
		tr := transitions[r.IntN(len(transitions))]
		it := corpus.ItemJSON{
			Passage: fmt.Sprintf(tr.text, st.phenomenon, st.cause, st.rival, st.place),
			Prompt:  "Which choice completes the text with the most logical transition?",
		}
		var wrong []string
		for _, o := range transitions {
			if o.word != tr.word && len(wrong) < 3 && !contains(wrong, o.word) {
				wrong = append(wrong, o.word)
			}
		}
		r.Shuffle(len(wrong), func(i, j int) { wrong[i], wrong[j] = wrong[j], wrong[i] })
		it.Options, it.AnswerIndex = shuffled(r, tr.word, wrong)
		it.Rationale = fmt.Sprintf("The second sentence %s, so %q is the logical transition.", tr.relation, tr.word)
		it.OptionRationales = rat(it.Options, it.AnswerIndex, "It signals the relationship between the sentences.", func(o string) string {
			return fmt.Sprintf("%q signals a different relationship.", o)
		})
		return it
	case "agreement":
		head := g.pick([]string{"The collection of", "Each of the", "The list of", "The box of", "One of the", "The set of"})
		noun := g.pick([]string{"antique maps", "rare seeds", "field notebooks", "student essays", "glass slides", "old photographs", "pressed flowers", "handwritten letters"})
		pred := g.pick([]string{"displayed in the museum's east gallery", "stored in a climate-controlled room", "catalogued by volunteers last spring", "available to visiting researchers", "scheduled for digitization"})
		past := strings.Contains(pred, "last")
		right, wrong := "is", []string{"are", "were", "have been"}
		if past {
			right, wrong = "was", []string{"were", "are", "have been"}
		}
		it := corpus.ItemJSON{
			Passage: fmt.Sprintf("%s %s ______ %s.", head, noun, pred),
			Prompt:  "Which choice completes the text so that it conforms to the conventions of Standard English?",
		}
		it.Options, it.AnswerIndex = shuffled(r, right, wrong)
		it.Rationale = fmt.Sprintf("The subject is the singular %q, not the plural %q, so the verb must be singular: %q.", strings.ToLower(strings.Fields(head)[len(strings.Fields(head))-1]), noun, right)
		it.OptionRationales = rat(it.Options, it.AnswerIndex, "It agrees with the singular subject.", func(o string) string {
			return fmt.Sprintf("%q does not agree with the singular subject or uses the wrong tense.", o)
		})
		return it
	case "punctuation":
		st := studies[r.IntN(len(studies))]
		it := corpus.ItemJSON{
			Passage: capFirst(fmt.Sprintf("%s was studied for years______ the clearest signal turned out to be %s.", st.phenomenon, st.cause)),
			Prompt:  "Which choice completes the text so that it conforms to the conventions of Standard English?",
		}
		it.Options, it.AnswerIndex = shuffled(r, "years;", []string{"years,", "years", "years, and,"})
		it.Rationale = "The text joins two independent clauses without a conjunction, so a semicolon is required."
		it.OptionRationales = rat(it.Options, it.AnswerIndex, "A semicolon correctly joins the two independent clauses.", func(o string) string {
			return fmt.Sprintf("%q produces a comma splice, a run-on, or stray punctuation.", o)
		})
		return it
	case "research":
		st := studies[r.IntN(len(studies))]
		it := corpus.ItemJSON{
			Prompt: fmt.Sprintf("A student is writing a report arguing that %s depends on %s. Which source would best support the claim?", st.phenomenon, st.cause),
		}
		right := fmt.Sprintf("A field study that measured %s and %s at several sites over many years", st.phenomenon, st.cause)
		wrong := []string{
			fmt.Sprintf("A travel blog describing a visit to %s", st.place),
			fmt.Sprintf("An opinion column about the history of %s", st.field),
			fmt.Sprintf("A short video about %s with no data", st.rival),
		}
		it.Options, it.AnswerIndex = shuffled(r, right, wrong)
		it.Rationale = "Only a study that measures both variables across sites and years can provide evidence for the claimed relationship."
		it.OptionRationales = rat(it.Options, it.AnswerIndex, "It provides measured evidence about both variables.", func(o string) string {
			return "It offers no measured evidence linking the two variables."
		})
		return it
	case "trend", "predict", "control":
		return g.science(kind)
	}
	return g.math(kind)
}

type vocab struct {
	word, context, meaning string
	wrong                  []string
}

var vocabBank = []vocab{
	{"novel", "Researchers in %s proposed a novel explanation for %s, one that no earlier study had considered.", "new", []string{"fictional", "lengthy", "popular"}},
	{"sound", "Reviewers agreed that the argument about %s and %s was sound, resting on careful measurements.", "valid", []string{"loud", "healthy", "asleep"}},
	{"check", "Specialists in %s hoped the new rules would check the rapid rise in %s.", "restrain", []string{"inspect", "mark", "pay"}},
	{"reserved", "The conference on %s reserved its final session for new work on %s.", "set aside", []string{"shy", "booked by phone", "cautious"}},
	{"qualified", "The team's support for the theory of %s was qualified: they accepted it only for %s in warm years.", "limited", []string{"certified", "competent", "eligible"}},
	{"arrest", "Experts in %s looked for ways to arrest the decline in %s.", "stop", []string{"detain", "capture", "charge"}},
	{"figure", "A leading figure in %s, she published widely on %s.", "person", []string{"number", "shape", "diagram"}},
	{"grave", "Observers of %s described the drop in %s as a grave concern.", "serious", []string{"burial", "dull", "engraved"}},
	{"channel", "The survey of %s tried to channel public interest in %s into volunteer work.", "direct", []string{"broadcast", "dig", "imitate"}},
	{"yield", "Work in %s suggests that patience can yield new insight into %s.", "produce", []string{"surrender", "slow down", "bend"}},
	{"bear out", "Later data in %s did bear out the early claims about %s.", "confirm", []string{"carry away", "tolerate", "give birth to"}},
	{"exhaustive", "An exhaustive review of %s covered every known record of %s.", "thorough", []string{"tiring", "empty", "quick"}},
}

type transition struct {
	word, relation, text string
}

var transitions = []transition{
	{"However,", "contrasts with the first", "Early studies linked %[1]s to %[3]s. ______ newer measurements point instead to %[2]s."},
	{"Therefore,", "states a result of the first", "Across every site, %[1]s rose and fell with %[2]s. ______ the authors treat %[2]s as the main driver."},
	{"For example,", "gives an instance of the first", "%[1]s varies from place to place. ______ in %[4]s it follows %[2]s closely."},
	{"Moreover,", "adds a further point in the same direction", "Changes in %[2]s predicted %[1]s well. ______ they did so in every season of the study."},
	{"Similarly,", "describes a comparable case", "In %[4]s, %[1]s tracked %[2]s. ______ a second region showed the same link."},
}

func (g *itemGen) science(kind string) corpus.ItemJSON {
	r := g.r
	st := studies[r.IntN(len(studies))]
	a, b := between(r, 5, 40), between(r, 1, 6)*g.scale()
	dec := r.IntN(2) == 0
	xs := []int{10, 20, 30, 40}
	ys := make([]int, len(xs))
	var rows []string
	for i, x := range xs {
		if dec {
			ys[i] = a + 200 - b*x/2
		} else {
			ys[i] = a + b*x/2
		}
		rows = append(rows, fmt.Sprintf("level %d: %d units", x, ys[i]))
	}
	it := corpus.ItemJSON{Passage: fmt.Sprintf("In a study of %s, students varied %s across four levels and recorded the response. Results: %s.", st.phenomenon, st.cause, strings.Join(rows, "; "))}
	switch kind {
	case "trend":
		it.Prompt = fmt.Sprintf("According to the results, as %s increased, the recorded response:", st.cause)
		right, wrong := "increased only", []string{"decreased only", "stayed the same", "increased and then decreased"}
		if dec {
			right, wrong = "decreased only", []string{"increased only", "stayed the same", "decreased and then increased"}
		}
		it.Options, it.AnswerIndex = shuffled(r, right, wrong)
		it.Rationale = fmt.Sprintf("The response went from %d to %d as the level rose from 10 to 40, changing in one direction only.", ys[0], ys[3])
	case "predict":
		x := 50
		y := a + b*x/2
		if dec {
			y = a + 200 - b*x/2
		}
		step := max(2, b*5)
		it.Prompt = fmt.Sprintf("If the pattern continues, what response would most likely be recorded at level %d?", x)
		it.Options, it.AnswerIndex = shuffled(r, strconv.Itoa(y), []string{strconv.Itoa(y + step), strconv.Itoa(y + 2*step), strconv.Itoa(y - 2*step)})
		it.Rationale = fmt.Sprintf("Each 10-level step changes the response by %d, so level 50 gives %d.", ys[1]-ys[0], y)
	default:
		it.Prompt = "Which factor was deliberately varied by the students in this study?"
		it.Options, it.AnswerIndex = shuffled(r, capFirst(st.cause), []string{capFirst(st.rival), capFirst(st.phenomenon), "The number of students"})
		it.Rationale = fmt.Sprintf("The students varied %s (the independent variable) and recorded %s as the response.", st.cause, st.phenomenon)
	}
	it.OptionRationales = rat(it.Options, it.AnswerIndex, "It matches the data.", func(o string) string {
		return fmt.Sprintf("%q is not supported by the recorded results.", o)
	})
	return it
}

// coef writes a coefficient, leaving out a 1.
func coef(n int) string {
	if n == 1 {
		return ""
	}
	return strconv.Itoa(n)
}

// numOpts returns the answer and three distinct wrong numbers near it.
func numOpts(r *rand.Rand, ans int, near []int) (string, []string) {
	var wrong []string
	seen := map[int]bool{ans: true}
	for _, d := range append(near, 1, -1, 2, -2, 3, 5, 7, 10) {
		if len(wrong) == 3 {
			break
		}
		v := ans + d
		if !seen[v] {
			seen[v] = true
			wrong = append(wrong, strconv.Itoa(v))
		}
	}
	return strconv.Itoa(ans), wrong
}

func (g *itemGen) math(kind string) corpus.ItemJSON {
	r := g.r
	k := g.scale()
	var it corpus.ItemJSON
	var right string
	var wrong []string
	switch kind {
	case "linear":
		a, x, b := between(r, 2, 4+3*k), between(r, -5*k, 5*k), between(r, 1, 20*k)
		c := a*x + b
		it.Prompt = fmt.Sprintf("If %dx + %d = %d, what is the value of x?", a, b, c)
		right, wrong = numOpts(r, x, []int{b / a, -2 * x, 1})
		it.Rationale = fmt.Sprintf("Subtract %d from both sides to get %dx = %d, then divide by %d: x = %d.", b, a, c-b, a, x)
	case "system":
		x, y := between(r, -4*k, 6*k), between(r, -4*k, 6*k)
		a, b := between(r, 1, 5), between(r, 1, 5)
		it.Prompt = fmt.Sprintf("In the system x + y = %d and %sx - %sy = %d, what is the value of x?", x+y, coef(a), coef(b), a*x-b*y)
		right, wrong = numOpts(r, x, []int{y - x, 1, -1})
		it.Rationale = fmt.Sprintf("From the first equation y = %d - x. Substituting gives %dx - %d(%d - x) = %d, so x = %d (and y = %d).", x+y, a, b, x+y, a*x-b*y, x, y)
	case "quadratic":
		p, q := between(r, 1, 4*k+2), between(r, 1, 4*k+2)
		if p == q {
			q++
		}
		it.Prompt = fmt.Sprintf("What is the sum of the solutions of x² - %dx + %d = 0?", p+q, p*q)
		right, wrong = numOpts(r, p+q, []int{p*q - (p + q), -(p + q) - (p + q), p - q})
		it.Rationale = fmt.Sprintf("The equation factors as (x - %d)(x - %d) = 0, so the solutions are %d and %d and their sum is %d.", p, q, p, q, p+q)
	case "percent":
		base, pct := between(r, 4, 40)*25, []int{10, 20, 25, 40, 15, 30}[r.IntN(6)]
		inc := r.IntN(2) == 0
		v := base * (100 - pct) / 100
		verb := "decreases"
		if inc {
			v, verb = base*(100+pct)/100, "increases"
		}
		it.Prompt = fmt.Sprintf("A quantity of %d %s by %d%%. What is the new quantity?", base, verb, pct)
		right, wrong = numOpts(r, v, []int{base*pct/100 - v, 2*base - v - v, pct})
		it.Rationale = fmt.Sprintf("%d%% of %d is %d; the quantity %s to %d.", pct, base, base*pct/100, verb, v)
	case "geometry":
		a, b := between(r, 3, 8*k), between(r, 3, 8*k)
		if r.IntN(2) == 0 {
			it.Prompt = fmt.Sprintf("A right triangle has legs of length %d and %d. What is its area?", 2*a, b)
			right, wrong = numOpts(r, a*b, []int{a * b, 2*a + b - a*b, a})
			it.Rationale = fmt.Sprintf("Area = ½ × %d × %d = %d.", 2*a, b, a*b)
		} else {
			it.Prompt = fmt.Sprintf("A rectangle has a perimeter of %d and a width of %d. What is its length?", 2*(a+b), a)
			right, wrong = numOpts(r, b, []int{2*(a+b) - a - b, a - b, b})
			it.Rationale = fmt.Sprintf("Perimeter = 2(length + width), so length = %d/2 - %d = %d.", 2*(a+b), a, b)
		}
	default: // stats
		n := 5
		vals := make([]int, n)
		sum := 0
		for i := range vals {
			vals[i] = between(r, 2, 20*k)
			sum += vals[i]
		}
		fix := (n - sum%n) % n
		vals[n-1] += fix
		sum += fix
		var parts []string
		for _, v := range vals {
			parts = append(parts, strconv.Itoa(v))
		}
		it.Prompt = fmt.Sprintf("What is the mean of the data set %s?", strings.Join(parts, ", "))
		right, wrong = numOpts(r, sum/n, []int{vals[n/2] - sum/n, 2, -3})
		it.Rationale = fmt.Sprintf("The sum is %d and there are %d values, so the mean is %d.", sum, n, sum/n)
	}
	it.Options, it.AnswerIndex = shuffled(r, right, wrong)
	it.OptionRationales = rat(it.Options, it.AnswerIndex, it.Rationale, func(o string) string {
		return fmt.Sprintf("%s results from an arithmetic or setup error.", o)
	})
	return it
}
