package gen

import (
	"math/rand/v2"
	"strings"
	"unicode"
	"unicode/utf8"
)

// writer composes one subject's prose from its area's words and its terms.
// Slots: {t} {u} terms ({T} {U} capitalised), {s} subject name, {v} verb,
// {o} object, {p} people ({P} capitalised), {l} learners, {x} a visual.
type writer struct {
	r    *rand.Rand
	s    *subjectPlan
	a    area
	name string
}

func (w *writer) pick(list []string) string { return list[w.r.IntN(len(list))] }

func (w *writer) term() string { return w.s.terms[w.r.IntN(len(w.s.terms))] }

// other returns a term of the subject different from t.
func (w *writer) other(t string) string {
	for {
		u := w.term()
		if u != t {
			return u
		}
	}
}

func capFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 || unicode.IsUpper(r) {
		return s
	}
	// Leave mixed-case terms such as "pH scale" or "iOS" alone.
	if len(s) > n {
		r2, _ := utf8.DecodeRuneInString(s[n:])
		if unicode.IsUpper(r2) {
			return s
		}
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// titleCase capitalises each word of a term for titles.
func titleCase(s string) string {
	small := map[string]bool{"and": true, "of": true, "to": true, "a": true, "the": true, "in": true, "by": true, "as": true, "on": true, "for": true}
	ws := strings.Fields(s)
	for i, x := range ws {
		if i > 0 && small[x] {
			continue
		}
		ws[i] = capFirst(x)
	}
	return strings.Join(ws, " ")
}

func (w *writer) fill(tpl, t, u string) string {
	return fixArticles(w.fill1(tpl, t, u))
}

// fixArticles turns "a" before a vowel-initial word into "an".
func fixArticles(s string) string {
	if !strings.Contains(s, "a ") && !strings.Contains(s, "A ") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		b.WriteByte(c)
		if (c == 'a' || c == 'A') && (i == 0 || s[i-1] == ' ' || s[i-1] == '\n') && i+2 < len(s) && s[i+1] == ' ' && strings.IndexByte("aeiouAEIOU", s[i+2]) >= 0 {
			b.WriteByte('n')
		}
	}
	return b.String()
}

func (w *writer) fill1(tpl, t, u string) string {
	var b strings.Builder
	b.Grow(len(tpl) + 32)
	for i := 0; i < len(tpl); i++ {
		c := tpl[i]
		if c != '{' || i+2 >= len(tpl) || tpl[i+2] != '}' {
			b.WriteByte(c)
			continue
		}
		switch tpl[i+1] {
		case 't':
			b.WriteString(t)
		case 'T':
			b.WriteString(capFirst(t))
		case 'u':
			b.WriteString(u)
		case 'U':
			b.WriteString(capFirst(u))
		case 's':
			b.WriteString(w.name)
		case 'v':
			b.WriteString(w.pick(w.a.Verbs))
		case 'o':
			b.WriteString(w.pick(w.a.Objects))
		case 'p':
			b.WriteString(w.pick(w.a.People))
		case 'P':
			b.WriteString(capFirst(w.pick(w.a.People)))
		case 'l':
			b.WriteString(levelWords[w.s.tier])
		case 'x':
			b.WriteString(w.pick(w.a.Visuals))
		default:
			b.WriteString(tpl[i : i+3])
		}
		i += 2
	}
	return b.String()
}

var definitions = []string{
	"The term **{t}** names a core idea of {s}: the pattern you see when you {v} a {o} step by step.",
	"In {s}, **{t}** refers to one of the building blocks that {p} rely on whenever they {v} a {o}.",
	"We use the term **{t}** for the tool that lets you {v} a {o} without guessing.",
	"Here, **{t}** means the part of {s} that explains how a {o} behaves once you look at it closely.",
	"Put simply, **{t}** is what {p} mean when they talk about the structure behind a {o}.",
	"For {l}, **{t}** describes a relationship met early in {s} and used for years afterwards.",
}

var sentences = []string{
	"{P} often begin with {t} because it connects so many other ideas in {s}.",
	"To {v} a question about {t}, first decide which {o} you are working with.",
	"It is tempting to confuse {t} with {u}, but they answer different questions.",
	"Notice how {t} changes when the {o} changes, and how parts of it stay the same.",
	"A quick way to remember {t} is to link it to a picture or a story of your own.",
	"In practice, {t} rarely appears alone: it usually arrives together with {u}.",
	"Try to explain {t} to a friend in two sentences; if you cannot, reread this card.",
	"Most errors with {t} come from skipping a step, not from misunderstanding the idea.",
	"{P} use {t} every day, often without naming it.",
	"The next cards build on {t}, so take a moment to make sure it is clear.",
	"Compare two examples of {t} side by side and list what they share.",
	"If you {v} the {o} slowly, the role of {t} becomes visible.",
	"There is more than one good way to approach {t}; pick the one you can check.",
	"Later in {s} you will meet {t} again in a more demanding form.",
	"Keep a short note of where {t} appeared in this class; it helps with revision.",
	"Ask yourself what would happen without {t}: the answer shows why it matters.",
	"A well-chosen {o} makes {t} much easier to see.",
	"The key question is not what {t} is called but what it lets you do.",
	"Good habits around {t} save a lot of time on longer tasks.",
	"Think of {u} as the neighbour of {t}: close and related, but not the same.",
	"For {l}, the first encounter with {t} is usually through a concrete {o}.",
	"One reliable routine is to {v} first, then check the result against {u}.",
	"When two sources describe {t} differently, look at the {o} each one used.",
	"The {x} on this card shows {t} next to {u} so the contrast is easy to see.",
	"Experienced {p} can spot {t} quickly because they have practised on many cases.",
	"If a result involving {t} looks surprising, {v} the {o} again before moving on.",
	"Understanding {t} well makes {u} far less mysterious.",
	"Write down one question you still have about {t} and return to it at the end.",
}

var keyPointTpl = []string{
	"{T} connects directly to {u}",
	"Always {v} the {o} before drawing conclusions about {t}",
	"Do not confuse {t} with {u}",
	"{P} rely on {t} in real work",
	"Practise {t} in short, frequent sessions",
	"{T}: identify the {o}, then {v} it",
	"Check every step that involves {t}",
	"{T} shows up again when you study {u}",
}

// body writes a card body of roughly want bytes. def, when not empty, is the
// term this card introduces: its definition sentence opens the body and
// marks it in bold, which is how key terms are found (docs/corpus-format.md).
func (w *writer) body(t, def string, want int) string {
	var b strings.Builder
	b.Grow(want + 200)
	inPara := 0
	paraLen := between(w.r, 3, 5)
	if def != "" {
		b.WriteString(w.fill(w.pick(definitions), def, w.other(def)))
		inPara = 1
	}
	used := make([]bool, len(sentences)+len(w.a.Extra))
	for b.Len() < want {
		if inPara == paraLen {
			b.WriteString("\n\n")
			inPara = 0
			paraLen = between(w.r, 3, 5)
		} else if b.Len() > 0 {
			b.WriteByte(' ')
		}
		// Draw templates without repeats until all are used.
		k := w.r.IntN(len(used))
		for tries := 0; used[k] && tries < len(used); tries++ {
			k = (k + 1) % len(used)
		}
		used[k] = true
		tpl := ""
		if k < len(sentences) {
			tpl = sentences[k]
		} else {
			tpl = w.a.Extra[k-len(sentences)]
		}
		b.WriteString(w.fill(tpl, t, w.other(t)))
		inPara++
	}
	return b.String()
}

func (w *writer) sentencesAbout(t string, n int, opener string) string {
	var b strings.Builder
	b.WriteString(w.fill(opener, t, w.other(t)))
	for i := 0; i < n; i++ {
		b.WriteByte(' ')
		b.WriteString(w.fill(w.pick(sentences), t, w.other(t)))
	}
	return b.String()
}

var narrationOpeners = []string{
	"In this part of the class we turn to {t}.",
	"Let's slow down and talk through {t} together.",
	"Listen for the moment where {t} and {u} meet.",
	"Here is the short version of {t}, in plain words.",
}

var voiceoverOpeners = []string{
	"This short video shows {t} in action.",
	"Watch how the {o} changes as {t} comes into play.",
	"On screen you will see {t} worked through from start to finish.",
	"The animation follows a single {o} to make {t} visible.",
}

func words(s string) int { return len(strings.Fields(s)) }
