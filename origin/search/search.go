// Package search is the engine of GET /v1/search (route 11): a
// case-insensitive substring match over lesson titles, subtitles, card
// labels, key-point bullets and quiz questions, never card bodies (spec:
// Route rules §1). It answers one hit per lesson, naming the first field
// that matches in that order, in corpus order (tier, subject name, class
// number), filtered to the caller's grants and the tier and subject
// filters before pagination (docs/decisions.md). The handler that reads
// the filters and the page is origin/server's.
//
// The index, built once per corpus (Build runs at start and on reload):
//
//   - every searched field of every lesson, in hit priority order, each
//     naming its distinct folded (lower-cased) text: the generated corpus
//     repeats many bullets, so its 224,745 fields share 111,890 texts;
//   - for every 1-, 2- and 3-byte gram of the folded texts, the bitmap of
//     the lessons holding it (grams never span two fields);
//   - for every 3-byte gram, the sorted list of the texts holding it, and
//     for every text a 256-bit signature of its 4-grams.
//
// A query first ANDs the caller's lesson bitmap (grants and filters) with
// the bitmaps of its grams: up to 3 bytes that is the exact answer and
// only the page's lessons need their field found; beyond 3 bytes it leaves
// candidate lessons. The candidate texts are those in the lists of the
// query's 3 rarest trigrams; a candidate holds the query if its signature
// covers the query's and strings.Contains agrees (remembered per text for
// the query). Then either each candidate lesson's fields are walked in
// order up to the first that holds it, or, when candidates are few or
// mostly false, every candidate text is checked once and marks the lessons
// where it occurs (selective). Only the page's hits are rendered.
// BenchmarkSearch measures it over the deployed-scale corpus.
package search

import (
	"cmp"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/licence"
)

// fieldKind is a searched field; the order is the hit's priority.
type fieldKind uint8

const (
	kindTitle fieldKind = iota
	kindSubtitle
	kindCardLabel
	kindKeyPoint
	kindQuizQuestion
	numKinds
)

// fieldNames are the values of matchedField.
var fieldNames = [numKinds]string{"title", "subtitle", "cardLabel", "keyPoint", "quizQuestion"}

// Index is the search index of one corpus; read-only once built.
type Index struct {
	lessons []*corpus.Lesson
	words   int // uint64 words in a lesson bitmap

	fields   []field  // lesson by lesson, each lesson's in kind, then card order
	fieldOf  []uint32 // lesson L's fields are fields[fieldOf[L]:fieldOf[L+1]]
	texts    string   // the distinct folded texts, concatenated
	textOf   []uint32 // text t is texts[textOf[t]:textOf[t+1]]
	sigs     []sig4   // 4-gram signature of each text
	occ      []uint32 // the fields of text t are occ[occOf[t]:occOf[t+1]], ascending
	occOf    []uint32
	lessonOf []uint32 // lesson of each field

	// Gram ids: uni[b], bi[b0<<8|b1], and tri[biRow[b0<<8|b1]*256+b2]; -1
	// when the gram occurs nowhere. Gram g's lesson bitmap is
	// bitmaps[g*words:(g+1)*words]; a trigram's texts are
	// posts[postOf[g]:postOf[g+1]] (none for shorter grams).
	uni     [256]int32
	bi      []int32
	biRow   []int32
	tri     []int32
	bitmaps []uint64
	postOf  []uint32
	posts   []uint32

	states sync.Pool    // *textState sized for this index
	runs   atomic.Int64 // searches run; a 304 runs none (spec: Conditional requests §5)
}

// Runs is the number of searches run on ix, so a test can hold that a
// 304 runs none.
func (ix *Index) Runs() int64 { return ix.runs.Load() }

// field is one searched string of a lesson: its kind, the index of its
// card (title, subtitle, quiz question: -1), its index within the card
// (key points) or the quiz, and its folded text.
type field struct {
	text      uint32
	card, sub int16
	kind      fieldKind
}

// Hit is a lesson's first matching field, an index into fields.
type Hit struct {
	lesson, field int
}

func Build(c *corpus.Corpus) *Index {
	n := len(c.Lessons)
	ix := &Index{lessons: c.Lessons, words: (n + 63) / 64, fieldOf: make([]uint32, n+1),
		bi: make([]int32, 1<<16), biRow: make([]int32, 1<<16)}
	for i := range ix.uni {
		ix.uni[i] = -1
	}
	for i := range ix.bi {
		ix.bi[i], ix.biRow[i] = -1, -1
	}
	ids := map[string]uint32{}
	var texts []byte
	var posts [][]uint32 // by gram id
	var folded []byte
	for li, l := range c.Lessons {
		ix.fieldOf[li] = uint32(len(ix.fields))
		add := func(k fieldKind, card, sub int, s string) {
			folded = appendFold(folded[:0], s)
			id, ok := ids[string(folded)]
			if !ok {
				id = uint32(len(ix.textOf))
				ids[string(folded)] = id
				ix.textOf = append(ix.textOf, uint32(len(texts)))
				ix.sigs = append(ix.sigs, signature(string(folded)))
				texts = append(texts, folded...)
				posts = ix.addTrigrams(posts, id, folded)
			}
			ix.addGrams(li, folded)
			ix.fields = append(ix.fields, field{text: id, card: int16(card), sub: int16(sub), kind: k})
		}
		add(kindTitle, -1, 0, l.Title)
		add(kindSubtitle, -1, 0, l.Subtitle)
		for ci, card := range l.Cards {
			add(kindCardLabel, ci, 0, card.Label)
		}
		for ci, card := range l.Cards {
			for pi, kp := range card.KeyPoints {
				add(kindKeyPoint, ci, pi, kp)
			}
		}
		for qi, q := range l.Quiz {
			add(kindQuizQuestion, -1, qi, q.Question)
		}
	}
	ix.fieldOf[n] = uint32(len(ix.fields))
	ix.lessonOf = make([]uint32, len(ix.fields))
	for li := range n {
		for j := ix.fieldOf[li]; j < ix.fieldOf[li+1]; j++ {
			ix.lessonOf[j] = uint32(li)
		}
	}
	ix.occOf = make([]uint32, len(ix.textOf)+1)
	for _, f := range ix.fields {
		ix.occOf[f.text+1]++
	}
	for t := range ix.textOf {
		ix.occOf[t+1] += ix.occOf[t]
	}
	ix.occ = make([]uint32, len(ix.fields))
	next := slices.Clone(ix.occOf)
	for j, f := range ix.fields {
		ix.occ[next[f.text]] = uint32(j)
		next[f.text]++
	}
	ix.textOf = append(ix.textOf, uint32(len(texts)))
	ix.texts = string(texts)
	// The large arrays at their length: grown by append, they would keep
	// up to a quarter more (20 MB on a corpus ten times the deployed one).
	ix.bitmaps, ix.sigs = slices.Clone(ix.bitmaps), slices.Clone(ix.sigs)
	total := 0
	for _, p := range posts {
		total += len(p)
	}
	ix.posts = make([]uint32, 0, total)
	ix.postOf = make([]uint32, len(ix.bitmaps)/ix.words+1)
	for g := range len(ix.bitmaps) / ix.words {
		ix.postOf[g] = uint32(len(ix.posts))
		if g < len(posts) {
			ix.posts = append(ix.posts, posts[g]...)
		}
	}
	ix.postOf[len(ix.postOf)-1] = uint32(len(ix.posts))
	tw := (len(ix.textOf) - 1 + 63) / 64
	ix.states.New = func() any {
		return &textState{cand: make([]uint64, tw), ok: make([]uint64, tw), bad: make([]uint64, tw), first: make([]int32, n)}
	}
	return ix
}

// addGrams marks lesson li in the bitmap of every gram of f.
func (ix *Index) addGrams(li int, f []byte) {
	w, bit := li/64, uint64(1)<<(li%64)
	for i := range f {
		ix.bitmaps[ix.gram(&ix.uni[f[i]])*ix.words+w] |= bit
		if i+1 < len(f) {
			ix.bitmaps[ix.gram(&ix.bi[int(f[i])<<8|int(f[i+1])])*ix.words+w] |= bit
			if i+2 < len(f) {
				ix.bitmaps[ix.gram(ix.triSlot(f[i:i+3]))*ix.words+w] |= bit
			}
		}
	}
}

// addTrigrams appends text id to the lists of its trigrams, once each.
func (ix *Index) addTrigrams(posts [][]uint32, id uint32, f []byte) [][]uint32 {
	for i := 0; i+3 <= len(f); i++ {
		g := ix.gram(ix.triSlot(f[i : i+3]))
		for len(posts) <= g {
			posts = append(posts, nil)
		}
		if p := posts[g]; len(p) == 0 || p[len(p)-1] != id {
			posts[g] = append(p, id)
		}
	}
	return posts
}

// triSlot is the id slot of trigram t, making room for it.
func (ix *Index) triSlot(t []byte) *int32 {
	b := int(t[0])<<8 | int(t[1])
	if ix.biRow[b] < 0 {
		ix.biRow[b] = int32(len(ix.tri) / 256)
		for range 256 {
			ix.tri = append(ix.tri, -1)
		}
	}
	return &ix.tri[int(ix.biRow[b])*256+int(t[2])]
}

// gram returns the gram id in *slot, allocating one when it has none.
func (ix *Index) gram(slot *int32) int {
	if *slot < 0 {
		*slot = int32(len(ix.bitmaps) / ix.words)
		ix.bitmaps = append(ix.bitmaps, make([]uint64, ix.words)...)
	}
	return int(*slot)
}

// gramID returns the id of a 1- to 3-byte gram, or -1 when no field holds
// it.
func (ix *Index) gramID(g string) int {
	id := int32(-1)
	switch len(g) {
	case 1:
		id = ix.uni[g[0]]
	case 2:
		id = ix.bi[int(g[0])<<8|int(g[1])]
	case 3:
		if row := ix.biRow[int(g[0])<<8|int(g[1])]; row >= 0 {
			id = ix.tri[int(row)*256+int(g[2])]
		}
	}
	return int(id)
}

func (ix *Index) text(t uint32) string { return ix.texts[ix.textOf[t]:ix.textOf[t+1]] }

// textState is what one query knows of the distinct texts: the
// candidates (in the lists of its rarest trigrams), and which candidates
// were found to hold it or not.
type textState struct {
	cand, ok, bad []uint64
	exact         bool    // every candidate holds the query
	first         []int32 // by lesson: its first matching field, or -1
	sig           sig4    // the query's 4-gram signature
}

// sig4 is a 256-bit signature of a text's 4-grams: a text can hold a
// query only if its signature covers the query's. Checking that costs a
// few instructions against tens of nanoseconds for strings.Contains on a
// text that is most likely not in cache, and it throws out most
// candidates that share the query's trigrams but not the query (a query
// of common words such as "the the").
type sig4 [4]uint64

func signature(s string) sig4 {
	var g sig4
	for i := 0; i+4 <= len(s); i++ {
		h := (uint32(s[i]) | uint32(s[i+1])<<8 | uint32(s[i+2])<<16 | uint32(s[i+3])<<24) * 0x9E3779B1 >> 24
		g[h/64] |= 1 << (h % 64)
	}
	return g
}

// holds reports whether text t holds fq, whose signature is q.
func (ix *Index) holds(t uint32, fq string, q *sig4) bool {
	g := &ix.sigs[t]
	if g[0]&q[0] != q[0] || g[1]&q[1] != q[1] || g[2]&q[2] != q[2] || g[3]&q[3] != q[3] {
		return false
	}
	return strings.Contains(ix.text(t), fq)
}

func has(b []uint64, i uint32) bool { return b[i/64]&(1<<(i%64)) != 0 }
func set(b []uint64, i uint32)      { b[i/64] |= 1 << (i % 64) }

// candidates fills st from the lists of the (at most 3) rarest trigrams
// of fq, whose length is at least 3 and whose trigrams all occur.
func (ix *Index) candidates(st *textState, fq string) {
	size := func(g int) uint32 { return ix.postOf[g+1] - ix.postOf[g] }
	var grams []int
	for i := 0; i+3 <= len(fq); i++ {
		if g := ix.gramID(fq[i : i+3]); !slices.Contains(grams, g) {
			grams = append(grams, g)
		}
	}
	slices.SortFunc(grams, func(a, b int) int { return cmp.Compare(size(a), size(b)) })
	clear(st.cand)
	for _, t := range ix.posts[ix.postOf[grams[0]]:ix.postOf[grams[0]+1]] {
		set(st.cand, t)
	}
	for _, g := range grams[1:min(3, len(grams))] {
		clear(st.ok) // scratch
		for _, t := range ix.posts[ix.postOf[g]:ix.postOf[g+1]] {
			set(st.ok, t)
		}
		for i := range st.cand {
			st.cand[i] &= st.ok[i]
		}
	}
	clear(st.ok)
	clear(st.bad)
	st.exact = len(fq) == 3
	st.sig = signature(fq)
}

// Search finds q among the lessons of the bitmap allowed, which it
// consumes: total counts every lesson that matches, and hits are the
// matches ranked from to to (exclusive), in corpus order.
func (ix *Index) Search(q string, allowed []uint64, from, to int) (total int, hits []Hit) {
	ix.runs.Add(1)
	fq := Fold(q)
	for i := 0; i+min(len(fq), 3) <= len(fq); i++ {
		g := ix.gramID(fq[i : i+min(len(fq), 3)])
		if g < 0 {
			return 0, nil
		}
		b := ix.bitmaps[g*ix.words : (g+1)*ix.words]
		for i := range allowed {
			allowed[i] &= b[i]
		}
	}
	// Up to 3 bytes the grams are the query: every candidate lesson
	// matches, and only the page's need their field found.
	exact := len(fq) <= 3
	var st *textState
	if len(fq) >= 3 {
		st = ix.states.Get().(*textState)
		defer ix.states.Put(st)
		ix.candidates(st, fq)
	}
	if st != nil && ix.selective(st, fq, allowed) {
		return ix.byTexts(st, fq, allowed, from, to)
	}
	for w, word := range allowed {
		for word != 0 {
			li := w*64 + bits.TrailingZeros64(word)
			word &= word - 1
			inPage := total >= from && total < to
			if exact && !inPage {
				total++
				continue
			}
			f, ok := ix.locate(li, fq, st)
			if !ok {
				continue
			}
			if inPage {
				hits = append(hits, Hit{lesson: li, field: f})
			}
			total++
		}
	}
	return total, hits
}

// selective reports whether checking every candidate text and marking
// the lessons of its fields (byTexts) should cost less than walking each
// candidate lesson's fields up to its first match (locate). The walk
// stops early in a lesson that matches, but walks all of one that does
// not, checking its candidate texts on the way; byTexts checks each
// candidate once but must also mark every field of the texts that match.
// So byTexts is chosen when candidates are few against the lessons (at
// most about 1.25 per lesson, a threshold measured with BenchmarkSearch)
// or when a sample of them shows that most do not hold the query. An
// exact 3-byte query needs no checks and always walks.
func (ix *Index) selective(st *textState, fq string, lessons []uint64) bool {
	if st.exact {
		return false
	}
	texts, ls := 0, 0
	for _, w := range st.cand {
		texts += bits.OnesCount64(w)
	}
	for _, w := range lessons {
		ls += bits.OnesCount64(w)
	}
	if texts <= ls+ls/4+256 {
		return true
	}
	// Sample samples candidates evenly; the results are kept for both
	// ways.
	const samples = 32
	step, seen, held, checked := texts/samples, 0, 0, 0
	for w, word := range st.cand {
		for word != 0 && checked < samples {
			t := uint32(w*64 + bits.TrailingZeros64(word))
			word &= word - 1
			if seen++; seen%step != 0 {
				continue
			}
			checked++
			if ix.holds(t, fq, &st.sig) {
				set(st.ok, t)
				held++
			} else {
				set(st.bad, t)
			}
		}
	}
	return held*4 < checked
}

// byTexts finds the hits from the candidate texts: each that holds fq
// marks, in every lesson of allowed where it occurs, the field if it is
// the lesson's first so far.
func (ix *Index) byTexts(st *textState, fq string, allowed []uint64, from, to int) (total int, hits []Hit) {
	for i := range st.first {
		st.first[i] = -1
	}
	for w, word := range st.cand {
		for word != 0 {
			t := uint32(w*64 + bits.TrailingZeros64(word))
			word &= word - 1
			if !st.exact && !has(st.ok, t) && (has(st.bad, t) || !ix.holds(t, fq, &st.sig)) {
				continue
			}
			for _, j := range ix.occ[ix.occOf[t]:ix.occOf[t+1]] {
				li := ix.lessonOf[j]
				if has(allowed, li) && (st.first[li] < 0 || int32(j) < st.first[li]) {
					st.first[li] = int32(j)
				}
			}
		}
	}
	for w, word := range allowed {
		for word != 0 {
			li := w*64 + bits.TrailingZeros64(word)
			word &= word - 1
			if st.first[li] < 0 {
				continue
			}
			if total >= from && total < to {
				hits = append(hits, Hit{lesson: li, field: int(st.first[li])})
			}
			total++
		}
	}
	return total, hits
}

// locate finds the first field of lesson li whose text holds fq.
func (ix *Index) locate(li int, fq string, st *textState) (int, bool) {
	for j := ix.fieldOf[li]; j < ix.fieldOf[li+1]; j++ {
		t := ix.fields[j].text
		switch {
		case st == nil: // a query of 1 or 2 bytes
			if strings.Contains(ix.text(t), fq) {
				return int(j), true
			}
		case !has(st.cand, t), has(st.bad, t):
		case st.exact, has(st.ok, t):
			return int(j), true
		case ix.holds(t, fq, &st.sig):
			set(st.ok, t)
			return int(j), true
		default:
			set(st.bad, t)
		}
	}
	return 0, false
}

// Fold lower-cases s rune by rune wherever the lower-case rune has the
// same UTF-8 length (ASCII, and most Latin, Greek and Cyrillic letters),
// so that byte offsets in the folded text are offsets in the original.
func Fold(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			return string(appendFold(make([]byte, 0, len(s)), s))
		}
	}
	return s
}

func appendFold(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if l := unicode.ToLower(r); r != utf8.RuneError && utf8.RuneLen(l) == n {
			dst = utf8.AppendRune(dst, l)
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return dst
}

// Row is a row of GET /v1/search.
type Row struct {
	LessonID     string  `json:"lessonId"`
	Tier         string  `json:"tier"`
	Subject      string  `json:"subject"`
	ClassNum     int     `json:"classNum"`
	Title        string  `json:"title"`
	MatchedField string  `json:"matchedField"`
	CardID       *string `json:"cardId"` // null for title, subtitle and quiz question
	Snippet      string  `json:"snippet"`
}

func (ix *Index) Render(h Hit, fq string) Row {
	l := ix.lessons[h.lesson]
	f := ix.fields[h.field]
	var text string
	var cardID *string
	switch f.kind {
	case kindTitle:
		text = l.Title
	case kindSubtitle:
		text = l.Subtitle
	case kindCardLabel:
		text, cardID = l.Cards[f.card].Label, &l.Cards[f.card].ID
	case kindKeyPoint:
		text, cardID = l.Cards[f.card].KeyPoints[f.sub], &l.Cards[f.card].ID
	case kindQuizQuestion:
		text = l.Quiz[f.sub].Question
	}
	// Folding keeps byte lengths, so the match's offset in the folded
	// text is its offset in the original.
	pos := strings.Index(ix.text(f.text), fq)
	return Row{LessonID: l.ID, Tier: l.Subject.Tier, Subject: l.Subject.Slug, ClassNum: l.Number,
		Title: l.Title, MatchedField: fieldNames[f.kind], CardID: cardID, Snippet: snippet(text, pos, len(fq))}
}

// SnippetMax is the longest field returned whole as a snippet; a longer
// one is cut to snippetContext bytes either side of the match.
const (
	SnippetMax     = 200
	snippetContext = 80
)

// snippet is the matched field's text, or for a long field the match with
// some context, cut on rune boundaries and marked with ellipses.
func snippet(text string, pos, n int) string {
	if len(text) <= SnippetMax {
		return text
	}
	from, to := max(0, pos-snippetContext), min(len(text), pos+n+snippetContext)
	for from > 0 && !utf8.RuneStart(text[from]) {
		from--
	}
	for to < len(text) && !utf8.RuneStart(text[to]) {
		to++
	}
	out := text[from:to]
	if from > 0 {
		out = "…" + out
	}
	if to < len(text) {
		out += "…"
	}
	return out
}

// Allowed is the lesson bitmap of the subjects of subs that grants
// cover. A subject's lessons are consecutive in corpus order.
func (ix *Index) Allowed(subs []*corpus.Subject, grants []string) []uint64 {
	b := make([]uint64, ix.words)
	for _, sub := range subs {
		if len(sub.Lessons) == 0 || licence.Entitled(grants, sub.Tier, sub.Slug) != nil {
			continue
		}
		for i := sub.Lessons[0].Ordinal; i <= sub.Lessons[len(sub.Lessons)-1].Ordinal; i++ {
			b[i/64] |= 1 << (i % 64)
		}
	}
	return b
}
