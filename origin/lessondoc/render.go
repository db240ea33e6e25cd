package lessondoc

import (
	"strconv"
	"strings"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/shared/jsonenc"
)

// Rendering: each render appends one document to dst from the lesson's
// fragments, then tail.

// AppendLesson appends the lesson at a detail level with the include
// sections, then tail.
func (d *Doc) AppendLesson(dst []byte, level Level, include Include, tail []byte) []byte {
	dst = append(dst, d.bytes(d.head)...)
	switch level {
	case Brief:
		// No prose: every member present, empty (spec: detail changes how
		// much, never which fields exist).
		dst = append(dst, `[],"cards":[`...)
		for i := range d.cards {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = d.appendCardHead(dst, &d.cards[i])
			dst = append(dst, `"","keyPoints":[],"illustrationAlt":""}`...)
		}
		dst = append(dst, `],"truncated":false`...)
	case Standard:
		dst = append(dst, d.bytes(d.stdKeyTerms)...)
		dst = append(dst, `,"cards":[`...)
		for i := range d.cards {
			c := &d.cards[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = d.appendCardHead(dst, c)
			if c.stdCut > 0 {
				dst = append(dst, d.data[c.body.from:c.body.from+c.stdCut]...)
				dst = append(dst, `…"`...)
			} else {
				dst = append(dst, d.bytes(c.body)...)
			}
			dst = append(dst, d.bytes(c.stdRest)...)
		}
		dst = append(dst, `],"truncated":`...)
		dst = strconv.AppendBool(dst, d.stdTruncated)
	default:
		dst = append(dst, d.bytes(d.keyTerms)...)
		dst = append(dst, `,"cards":[`...)
		for i := range d.cards {
			c := &d.cards[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = d.appendCardHead(dst, c)
			dst = append(dst, d.bytes(c.body)...)
			dst = append(dst, d.bytes(c.rest)...)
		}
		dst = append(dst, `],"truncated":false`...)
		include = incAll // full adds every include section
	}
	if include&incQuiz != 0 {
		dst = append(dst, `,"quiz":`...)
		dst = append(dst, d.bytes(d.quiz)...)
	}
	if include&incInlineChecks != 0 {
		dst = append(dst, `,"inlineChecks":`...)
		dst = append(dst, d.bytes(d.inlineChecks)...)
	}
	if include&incInteractives != 0 {
		dst = append(dst, `,"interactives":`...)
		dst = append(dst, d.bytes(d.interactives)...)
	}
	if include&incNarrationText != 0 {
		dst = append(dst, `,"narrationText":`...)
		dst = d.appendSpoken(dst, false, nil)
	}
	if include&incVideoTranscript != 0 {
		dst = append(dst, `,"videoTranscript":`...)
		dst = d.appendSpoken(dst, true, nil)
	}
	if include&incMedia != 0 {
		dst = append(dst, `,"media":[`...)
		dst = d.AppendAssets(dst, "", 0, len(d.lesson.Media))
		dst = append(dst, ']')
	}
	if include&incWorkedExample != 0 {
		dst = append(dst, `,"workedExample":`...)
		dst = append(dst, d.bytes(d.workedExample)...)
	}
	return append(dst, tail...)
}

// AppendFullAs appends the lesson at full detail, every include, as
// AppendLesson does, but with the texts of m, a copy of d's lesson whose
// cards differ from it at most in their bodies, narration scripts and
// voiceovers (an export's class, marked for its organisation): those are
// escaped from m, every other fragment is d's, rendered once. Then tail.
// It is what rendering m and appending it at full detail gives, without
// rendering the rest of the lesson again.
func (d *Doc) AppendFullAs(dst []byte, m *corpus.Lesson, tail []byte) []byte {
	dst = append(dst, d.bytes(d.head)...)
	dst = append(dst, d.bytes(d.keyTerms)...)
	dst = append(dst, `,"cards":[`...)
	for i := range d.cards {
		c := &d.cards[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = d.appendCardHead(dst, c)
		dst = jsonenc.String(dst, m.Cards[i].Body)
		dst = append(dst, d.bytes(c.rest)...)
	}
	dst = append(dst, `],"truncated":false,"quiz":`...)
	dst = append(dst, d.bytes(d.quiz)...)
	dst = append(dst, `,"inlineChecks":`...)
	dst = append(dst, d.bytes(d.inlineChecks)...)
	dst = append(dst, `,"interactives":`...)
	dst = append(dst, d.bytes(d.interactives)...)
	dst = append(dst, `,"narrationText":`...)
	dst = d.appendSpoken(dst, false, m)
	dst = append(dst, `,"videoTranscript":`...)
	dst = d.appendSpoken(dst, true, m)
	dst = append(dst, `,"media":[`...)
	dst = d.AppendAssets(dst, "", 0, len(d.lesson.Media))
	dst = append(dst, `],"workedExample":`...)
	dst = append(dst, d.bytes(d.workedExample)...)
	return append(dst, tail...)
}

// appendSpoken appends the narrationText (or, with video, the
// videoTranscript) section: [{cardId, text}] for the cards that have
// that text, in card order; complete, never capped. The texts are d's,
// rendered once, or with m (AppendFullAs) m's, escaped here.
func (d *Doc) appendSpoken(dst []byte, video bool, m *corpus.Lesson) []byte {
	dst = append(dst, '[')
	first := true
	for i := range d.cards {
		c := &d.cards[i]
		var t string // m's text
		var has bool
		switch {
		case m != nil && video:
			t = m.Cards[i].VideoVoiceover
			has = t != ""
		case m != nil:
			t = m.Cards[i].Narration()
			has = t != ""
		case video:
			has = c.voiceover.len() > 0
		default:
			has = c.hasNarration()
		}
		if !has {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, `{"cardId":`...)
		dst = append(dst, d.bytes(c.id)...)
		dst = append(dst, `,"text":`...)
		switch {
		case m != nil:
			dst = jsonenc.String(dst, spokenText(t))
		case video:
			dst = append(dst, d.bytes(c.voiceover)...)
		default:
			dst = d.appendNarration(dst, c)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// AppendTranscript appends the transcript: {lessonId, title, items[,
// markdown]}, then tail. items holds one row per card that is narrated or
// has a video voiceover, in card order; a card with neither is omitted
// (spec: Transcript). Text is complete and the rows are not paginated.
func (d *Doc) AppendTranscript(dst []byte, markdown bool, tail []byte) []byte {
	dst = append(dst, d.bytes(d.idTitle)...) // lessonId, title
	dst = append(dst, `,"items":[`...)
	first := true
	for i := range d.cards {
		c := &d.cards[i]
		if !c.hasNarration() && c.voiceover.len() == 0 {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, `{"cardId":`...)
		dst = append(dst, d.bytes(c.id)...)
		dst = append(dst, `,"label":`...)
		dst = append(dst, d.bytes(c.label)...)
		dst = append(dst, `,"narration":`...)
		if c.hasNarration() {
			dst = d.appendNarration(dst, c)
		} else {
			dst = append(dst, "null"...)
		}
		dst = append(dst, `,"videoVoiceover":`...)
		dst = d.appendNullable(dst, c.voiceover)
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	if markdown {
		// "## <label>", the narration, the voiceover as a block quote;
		// blocks end with a blank line.
		dst = append(dst, `,"markdown":"`...)
		for i := range d.cards {
			c := &d.cards[i]
			if !c.hasNarration() && c.voiceover.len() == 0 {
				continue
			}
			dst = append(dst, "## "...)
			dst = append(dst, d.inner(c.label)...)
			dst = append(dst, `\n\n`...)
			if c.hasNarration() {
				n := len(dst)
				dst = d.appendNarration(dst, c)
				dst = append(dst[:n], dst[n+1:len(dst)-1]...) // without the string's quotes
				dst = append(dst, `\n\n`...)
			}
			if c.voiceover.len() > 0 {
				dst = append(dst, "> "...)
				dst = append(dst, d.data[c.mdVoiceover.from:c.mdVoiceover.to]...)
				dst = append(dst, `\n\n`...)
			}
		}
		dst = append(dst, '"')
	}
	return append(dst, tail...)
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

func (d *Doc) appendNullable(dst []byte, s span) []byte {
	if s.len() == 0 {
		return append(dst, "null"...)
	}
	return append(dst, d.bytes(s)...)
}

// AppendQuiz appends the quiz document: {lessonId, title, items,
// inlineChecks}, then tail; answer keys included (spec: Quiz document).
func (d *Doc) AppendQuiz(dst, tail []byte) []byte {
	dst = append(dst, d.bytes(d.idTitle)...)
	dst = append(dst, `,"items":`...)
	dst = append(dst, d.bytes(d.quiz)...)
	dst = append(dst, `,"inlineChecks":`...)
	dst = append(dst, d.bytes(d.inlineChecks)...)
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

// appendCardHead appends a card's members before its body:
// `{"id":…,"label":…,"hasVideo":…,"hasNarration":…,"hasImage":…,"body":`.
func (d *Doc) appendCardHead(dst []byte, c *cardDoc) []byte {
	dst = append(dst, `{"id":`...)
	dst = append(dst, d.bytes(c.id)...)
	dst = append(dst, `,"label":`...)
	dst = append(dst, d.bytes(c.label)...)
	dst = append(dst, `,"hasVideo":`...)
	dst = strconv.AppendBool(dst, c.video)
	dst = append(dst, `,"hasNarration":`...)
	dst = strconv.AppendBool(dst, c.narrated)
	dst = append(dst, `,"hasImage":`...)
	dst = strconv.AppendBool(dst, c.image)
	return append(dst, `,"body":`...)
}

// appendNarration appends the narration of c, which has one, as a JSON
// string.
func (d *Doc) appendNarration(dst []byte, c *cardDoc) []byte {
	if !c.narrationIsBody {
		return append(dst, d.bytes(c.narration)...)
	}
	return appendSpokenText(dst, d.bytes(c.body))
}
