package lessondoc

import (
	"strconv"
	"strings"

	"github.com/lectern-api/lectern/origin/corpus"
)

// Rendering: each render appends one document to dst from the lesson's
// texts and what Build prepared, then tail.

// AppendLesson appends the lesson at a detail level with the include
// sections, then tail.
func (d *Doc) AppendLesson(dst []byte, level Level, include Include, tail []byte) []byte {
	return d.appendLesson(dst, level, include, d.lesson.Cards, tail)
}

// AppendFullAs appends the lesson at full detail, every include, as
// AppendLesson does, but with the cards of m, a copy of d's lesson whose
// cards differ from it at most in their bodies, narration scripts and
// voiceovers (an export's class, marked for its organisation); every
// other member is d's lesson's. Then tail. It is what preparing m and
// appending it at full detail gives, without preparing it.
func (d *Doc) AppendFullAs(dst []byte, m *corpus.Lesson, tail []byte) []byte {
	return d.appendLesson(dst, Full, 0, m.Cards, tail)
}

// appendLesson is AppendLesson with the card texts of cards, d's lesson's
// or a copy's (AppendFullAs).
func (d *Doc) appendLesson(dst []byte, level Level, include Include, cards []*corpus.Card, tail []byte) []byte {
	l := d.lesson
	dst = appendLessonHead(dst, l)
	switch level {
	case Brief:
		// No prose: every member present, empty (spec: detail changes how
		// much, never which fields exist).
		dst = append(dst, `[],"cards":[`...)
		for i, c := range cards {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCardHead(dst, &d.cards[i], c)
			dst = append(dst, `"","keyPoints":[],"illustrationAlt":""}`...)
		}
		dst = append(dst, `],"truncated":false`...)
	case Standard:
		dst, _ = appendKeyTerms(dst, l.KeyTerms, d.stdTermCut)
		dst = append(dst, `,"cards":[`...)
		for i, c := range cards {
			cd := &d.cards[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCardHead(dst, cd, c)
			if cd.stdCut > 0 {
				dst = append(dst, '"')
				dst = appendInner(dst, c.Body[:cd.stdCut])
				dst = append(dst, `…"`...)
			} else {
				dst = appendString(dst, c.Body)
			}
			dst = appendRest(dst, c, cd.restCut)
		}
		dst = append(dst, `],"truncated":`...)
		dst = strconv.AppendBool(dst, d.stdTruncated)
	default:
		dst, _ = appendKeyTerms(dst, l.KeyTerms, false)
		dst = append(dst, `,"cards":[`...)
		for i, c := range cards {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCardHead(dst, &d.cards[i], c)
			dst = appendString(dst, c.Body)
			dst = appendRest(dst, c, false)
		}
		dst = append(dst, `],"truncated":false`...)
		include = incAll // full adds every include section
	}
	if include&incQuiz != 0 {
		dst = append(dst, `,"quiz":`...)
		dst = appendQuizItems(dst, l.Quiz)
	}
	if include&incInlineChecks != 0 {
		dst = append(dst, `,"inlineChecks":`...)
		dst = appendInlineChecks(dst, l.InlineChecks)
	}
	if include&incInteractives != 0 {
		dst = append(dst, `,"interactives":`...)
		dst = append(dst, d.interactives...)
	}
	if include&incNarrationText != 0 {
		dst = append(dst, `,"narrationText":`...)
		dst = appendSpoken(dst, false, cards)
	}
	if include&incVideoTranscript != 0 {
		dst = append(dst, `,"videoTranscript":`...)
		dst = appendSpoken(dst, true, cards)
	}
	if include&incMedia != 0 {
		dst = append(dst, `,"media":[`...)
		dst = d.AppendAssets(dst, "", 0, len(l.Media))
		dst = append(dst, ']')
	}
	if include&incWorkedExample != 0 {
		dst = append(dst, `,"workedExample":`...)
		dst = appendWorkedExample(dst, l.WorkedExample)
	}
	return append(dst, tail...)
}

// appendRest appends the members of card c after its body,
// `,"keyPoints":[…],"illustrationAlt":…}`, each text cut at its standard
// cap when capped.
func appendRest(dst []byte, c *corpus.Card, capped bool) []byte {
	if !capped {
		dst = append(dst, `,"keyPoints":`...)
		dst = appendStrings(dst, c.KeyPoints)
		dst = append(dst, `,"illustrationAlt":`...)
		dst = appendString(dst, c.IllustrationAlt)
		return append(dst, '}')
	}
	dst = append(dst, `,"keyPoints":[`...)
	for i, k := range c.KeyPoints {
		if i > 0 {
			dst = append(dst, ',')
		}
		k, _ = capText(k, CapKeyPoint)
		dst = appendString(dst, k)
	}
	dst = append(dst, `],"illustrationAlt":`...)
	alt, _ := capText(c.IllustrationAlt, CapAlt)
	dst = appendString(dst, alt)
	return append(dst, '}')
}

// appendSpoken appends the narrationText (or, with video, the
// videoTranscript) section: [{cardId, text}] for the cards that have
// that text, in card order; complete, never capped.
func appendSpoken(dst []byte, video bool, cards []*corpus.Card) []byte {
	dst = append(dst, '[')
	first := true
	for _, c := range cards {
		t := c.Narration()
		if video {
			t = c.VideoVoiceover
		}
		if t == "" {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, `{"cardId":`...)
		dst = appendString(dst, c.ID)
		dst = append(dst, `,"text":"`...)
		dst = appendSpokenInner(dst, t)
		dst = append(dst, `"}`...)
	}
	return append(dst, ']')
}

// AppendTranscript appends the transcript: {lessonId, title, items[,
// markdown]}, then tail. items holds one row per card that is narrated or
// has a video voiceover, in card order; a card with neither is omitted
// (spec: Transcript). Text is complete and the rows are not paginated.
func (d *Doc) AppendTranscript(dst []byte, markdown bool, tail []byte) []byte {
	dst = d.appendIDTitle(dst)
	dst = append(dst, `,"items":[`...)
	first := true
	for _, c := range d.lesson.Cards {
		if !c.InTranscript() {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, `{"cardId":`...)
		dst = appendString(dst, c.ID)
		dst = append(dst, `,"label":`...)
		dst = appendString(dst, c.Label)
		dst = append(dst, `,"narration":`...)
		dst = appendSpokenOrNull(dst, c.Narration())
		dst = append(dst, `,"videoVoiceover":`...)
		dst = appendSpokenOrNull(dst, c.VideoVoiceover)
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	if markdown {
		// AppendMarkdown's text as a JSON string: "## <label>", the
		// narration, the voiceover as a block quote ("> " after every
		// line break); blocks end with a blank line.
		dst = append(dst, `,"markdown":"`...)
		for _, c := range d.lesson.Cards {
			if !c.InTranscript() {
				continue
			}
			dst = append(dst, "## "...)
			dst = appendInner(dst, c.Label)
			dst = append(dst, `\n\n`...)
			if n := c.Narration(); n != "" {
				dst = appendSpokenInner(dst, n)
				dst = append(dst, `\n\n`...)
			}
			if v := c.VideoVoiceover; v != "" {
				dst = append(dst, "> "...)
				for {
					line, rest, more := strings.Cut(v, "\n")
					dst = appendSpokenInner(dst, line)
					if !more {
						break
					}
					dst = append(dst, `\n> `...)
					v = rest
				}
				dst = append(dst, `\n\n`...)
			}
		}
		dst = append(dst, '"')
	}
	return append(dst, tail...)
}

// appendIDTitle appends `{"lessonId":…,"title":…`, the opening of the
// transcript and quiz documents.
func (d *Doc) appendIDTitle(dst []byte) []byte {
	dst = append(dst, `{"lessonId":`...)
	dst = appendString(dst, d.lesson.ID)
	dst = append(dst, `,"title":`...)
	return appendString(dst, d.lesson.Title)
}

// AppendMarkdown appends the transcript's markdown as text, the value
// AppendTranscript's markdown member decodes to: for a document made once
// (an export's transcript file) without escaping it as a JSON string and
// decoding it again. Its layout is AppendTranscript's, from the texts of
// the lesson d renders.
func (d *Doc) AppendMarkdown(dst []byte) []byte { return AppendMarkdown(dst, d.lesson) }

// AppendMarkdown appends l's transcript markdown as text: what the
// markdown member of its transcript document decodes to.
func AppendMarkdown(dst []byte, l *corpus.Lesson) []byte {
	for _, c := range l.Cards {
		narration, voiceover := c.Narration(), c.VideoVoiceover
		if narration == "" && voiceover == "" {
			continue
		}
		dst = append(dst, "## "...)
		dst = append(dst, c.Label...)
		dst = append(dst, "\n\n"...)
		if narration != "" {
			dst = appendSpokenText(dst, narration)
			dst = append(dst, "\n\n"...)
		}
		if voiceover != "" {
			dst = append(dst, "> "...)
			for {
				line, rest, more := strings.Cut(voiceover, "\n")
				dst = appendSpokenText(dst, line)
				if !more {
					break
				}
				dst = append(dst, "\n> "...)
				voiceover = rest
			}
			dst = append(dst, "\n\n"...)
		}
	}
	return dst
}

// appendSpokenText appends spokenText(s) without making it: s without
// its "**" markers, taken from the left as strings.ReplaceAll does. s is
// text, or escaped JSON text, which it leaves valid: escaping never
// writes a '*', so a run of them is the same escaped or not.
func appendSpokenText[S ~string | ~[]byte](dst []byte, s S) []byte {
	from := 0
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '*' && s[i+1] == '*' {
			dst = append(dst, s[from:i]...)
			i++
			from = i + 1
		}
	}
	return append(dst, s[from:]...)
}

// appendSpokenInner appends spokenText(s) escaped as in a JSON string,
// without the quotes: s escaped, then its markers dropped in place
// (escaping never writes a '*').
func appendSpokenInner(dst []byte, s string) []byte {
	n := len(dst)
	dst = appendInner(dst, s)
	// appendSpokenText writes no further right than it reads, and copies
	// with memmove: dst[n:] may be its own source.
	return appendSpokenText(dst[:n], dst[n:])
}

// appendSpokenOrNull appends spokenText(s) as a JSON string, or null
// when s is "".
func appendSpokenOrNull(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	dst = append(dst, '"')
	dst = appendSpokenInner(dst, s)
	return append(dst, '"')
}

// AppendQuiz appends the quiz document: {lessonId, title, items,
// inlineChecks}, then tail; answer keys included (spec: Quiz document).
func (d *Doc) AppendQuiz(dst, tail []byte) []byte {
	dst = d.appendIDTitle(dst)
	dst = append(dst, `,"items":`...)
	dst = appendQuizItems(dst, d.lesson.Quiz)
	dst = append(dst, `,"inlineChecks":`...)
	dst = appendInlineChecks(dst, d.lesson.InlineChecks)
	return append(dst, tail...)
}

// CountAssets counts the lesson's media assets of type typ (video, audio,
// image), or all of them when typ is "".
func (d *Doc) CountAssets(typ string) int {
	if typ == "" {
		return len(d.lesson.Media)
	}
	n := 0
	for _, m := range d.lesson.Media {
		if m.Type == typ {
			n++
		}
	}
	return n
}

// AppendAssets appends, comma-separated, the lesson's media assets of type
// typ (all when typ is "") numbered from to to-1 among those, in l.Media
// order, as the media route lists them: url is always null. They are
// rendered from the corpus on each call (a few short members each), not
// held: the full corpus has 113,844 of them.
func (d *Doc) AppendAssets(dst []byte, typ string, from, to int) []byte {
	k := 0
	for _, m := range d.lesson.Media {
		if typ != "" && m.Type != typ {
			continue
		}
		if k >= from && k < to {
			if k > from {
				dst = append(dst, ',')
			}
			dst = appendLessonAsset(dst, m)
		}
		k++
	}
	return dst
}

// appendCardHead appends card c's members before its body:
// `{"id":…,"label":…,"hasVideo":…,"hasNarration":…,"hasImage":…,"body":`.
func appendCardHead(dst []byte, cd *cardDoc, c *corpus.Card) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, c.ID)
	dst = append(dst, `,"label":`...)
	dst = appendString(dst, c.Label)
	dst = append(dst, `,"hasVideo":`...)
	dst = strconv.AppendBool(dst, cd.video)
	dst = append(dst, `,"hasNarration":`...)
	dst = strconv.AppendBool(dst, c.Narrated)
	dst = append(dst, `,"hasImage":`...)
	dst = strconv.AppendBool(dst, cd.image)
	return append(dst, `,"body":`...)
}
