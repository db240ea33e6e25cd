package lessondoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/klauspost/compress/flate"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/shared/jsonenc"
)

// builder renders lessons into a scratch buffer it reuses; each lesson's
// fragments are then copied into one exact allocation.
type builder struct {
	buf     []byte
	version []byte // `,"contentVersion":…`
	zbuf    bytes.Buffer
	zw      *flate.Writer
}

// mark returns the span of what was appended to b.buf since from.
func (b *builder) mark(from int) span { return span{int32(from), int32(len(b.buf))} }

// str appends s as a JSON string and returns its span.
func (b *builder) str(s string) span {
	at := len(b.buf)
	b.buf = jsonenc.String(b.buf, s)
	return b.mark(at)
}

// capped appends s as a JSON string, cut at the standard cap n, and
// reports whether it cut.
func (b *builder) capped(s string, n int) bool {
	out, cut := capText(s, n)
	b.buf = jsonenc.String(b.buf, out)
	return cut
}

func (b *builder) build(l *corpus.Lesson) (*Doc, error) {
	d := &Doc{lesson: l, cards: make([]cardDoc, len(l.Cards)), assets: make([]assetDoc, len(l.Media))}
	b.buf = b.buf[:0]

	at := len(b.buf)
	b.buf = appendLessonHead(b.buf, l)
	d.head = b.mark(at)

	at = len(b.buf)
	b.buf, _ = appendKeyTerms(b.buf, l.KeyTerms, false)
	d.keyTerms = b.mark(at)
	d.stdKeyTerms = d.keyTerms
	if std, cut := appendKeyTerms(nil, l.KeyTerms, true); cut {
		at = len(b.buf)
		b.buf = append(b.buf, std...)
		d.stdKeyTerms = b.mark(at)
		d.stdTruncated = true
	}

	for i, c := range l.Cards {
		if b.card(&d.cards[i], c) {
			d.stdTruncated = true
		}
	}

	at = len(b.buf)
	b.buf = appendQuizItems(b.buf, l.Quiz)
	d.quiz = b.mark(at)
	at = len(b.buf)
	b.buf = appendInlineChecks(b.buf, l.InlineChecks)
	d.inlineChecks = b.mark(at)
	at = len(b.buf)
	var err error
	if b.buf, err = appendInteractives(b.buf, l.Interactives); err != nil {
		return nil, fmt.Errorf("lesson %s: %w", l.ID, err)
	}
	d.interactives = b.mark(at)
	at = len(b.buf)
	b.buf = appendWorkedExample(b.buf, l.WorkedExample)
	d.workedExample = b.mark(at)

	for i, m := range l.Media {
		at = len(b.buf)
		b.buf = appendLessonAsset(b.buf, m)
		d.assets[i] = assetDoc{b.mark(at), m.Type}
	}

	at = len(b.buf)
	b.buf = append(b.buf, `{"lessonId":`...)
	b.buf = jsonenc.String(b.buf, l.ID)
	b.buf = append(b.buf, `,"title":`...)
	b.buf = jsonenc.String(b.buf, l.Title)
	d.idTitle = b.mark(at)

	d.data = b.buf
	return d, nil
}

// Renderer renders lessons one at a time, for documents made once and
// not kept: the fragments Build makes, without the precompressed
// standard lesson, in one buffer reused from lesson to lesson. (An
// export's classes, whose texts differ from the corpus's, take
// AppendFullAs instead, which renders only those texts.) It is not safe
// for concurrent use.
type Renderer struct{ b builder }

// Render renders l. The Doc is valid until the next Render; its
// AppendGzipStandard is empty.
func (r *Renderer) Render(l *corpus.Lesson) (*Doc, error) { return r.b.build(l) }

// card renders one card and reports whether anything of it is cut at
// standard detail.
func (b *builder) card(cd *cardDoc, c *corpus.Card) bool {
	cd.id = b.str(c.ID)
	cd.label = b.str(c.Label)

	var video, image bool
	for _, m := range c.Media {
		video = video || m.Type == "video"
		image = image || m.Type == "image"
	}
	at := len(b.buf)
	b.buf = append(b.buf, `{"id":`...)
	b.buf = append(b.buf, b.buf[cd.id.from:cd.id.to]...)
	b.buf = append(b.buf, `,"label":`...)
	b.buf = append(b.buf, b.buf[cd.label.from:cd.label.to]...)
	b.buf = append(b.buf, `,"hasVideo":`...)
	b.buf = strconv.AppendBool(b.buf, video)
	b.buf = append(b.buf, `,"hasNarration":`...)
	b.buf = strconv.AppendBool(b.buf, c.Narrated)
	b.buf = append(b.buf, `,"hasImage":`...)
	b.buf = strconv.AppendBool(b.buf, image)
	b.buf = append(b.buf, `,"body":`...)
	cd.prefix = b.mark(at)

	cd.body = b.str(c.Body)
	truncated := false
	if out, cut := capText(c.Body, CapBody); cut {
		// out is a prefix of the body plus "…": its escaped form is a
		// prefix of the escaped body.
		cd.stdCut = int32(len(jsonenc.String(nil, strings.TrimSuffix(out, "…"))) - 1)
		truncated = true
	}

	at = len(b.buf)
	b.buf = append(b.buf, `,"keyPoints":`...)
	b.buf = jsonenc.Strings(b.buf, c.KeyPoints)
	b.buf = append(b.buf, `,"illustrationAlt":`...)
	b.buf = jsonenc.String(b.buf, c.IllustrationAlt)
	b.buf = append(b.buf, '}')
	cd.rest = b.mark(at)
	cd.stdRest = cd.rest
	restCut := anyLonger(c.KeyPoints, CapKeyPoint) || utf8.RuneCountInString(c.IllustrationAlt) > CapAlt
	if restCut {
		at = len(b.buf)
		b.buf = append(b.buf, `,"keyPoints":[`...)
		for i, k := range c.KeyPoints {
			if i > 0 {
				b.buf = append(b.buf, ',')
			}
			b.capped(k, CapKeyPoint)
		}
		b.buf = append(b.buf, `],"illustrationAlt":`...)
		b.capped(c.IllustrationAlt, CapAlt)
		b.buf = append(b.buf, '}')
		cd.stdRest = b.mark(at)
		truncated = true
	}

	if n := c.Narration(); n != "" {
		cd.narration = b.str(spokenText(n))
	}
	if v := c.VideoVoiceover; v != "" {
		cd.voiceover = b.str(spokenText(v))
		inner := span{cd.voiceover.from + 1, cd.voiceover.to - 1}
		cd.mdVoiceover = inner
		if strings.Contains(v, "\n") {
			s := b.str(strings.ReplaceAll(spokenText(v), "\n", "\n> "))
			cd.mdVoiceover = span{s.from + 1, s.to - 1}
		}
	}
	return truncated
}

// anyLonger reports whether some text of ss is longer than n characters.
func anyLonger(ss []string, n int) bool {
	for _, s := range ss {
		if utf8.RuneCountInString(s) > n {
			return true
		}
	}
	return false
}

func appendLessonHead(dst []byte, l *corpus.Lesson) []byte {
	dst = append(dst, `{"lessonId":`...)
	dst = jsonenc.String(dst, l.ID)
	dst = append(dst, `,"tier":`...)
	dst = jsonenc.String(dst, l.Subject.Tier)
	dst = append(dst, `,"subjectSlug":`...)
	dst = jsonenc.String(dst, l.Subject.Slug)
	dst = append(dst, `,"classNum":`...)
	dst = strconv.AppendInt(dst, int64(l.Number), 10)
	dst = append(dst, `,"title":`...)
	dst = jsonenc.String(dst, l.Title)
	dst = append(dst, `,"subtitle":`...)
	dst = jsonenc.String(dst, l.Subtitle)
	dst = append(dst, `,"hasVideo":`...)
	dst = strconv.AppendBool(dst, l.HasVideo)
	dst = append(dst, `,"hasNarration":`...)
	dst = strconv.AppendBool(dst, l.HasNarration)
	dst = append(dst, `,"hasTranscript":`...)
	dst = strconv.AppendBool(dst, l.HasTranscript)
	dst = append(dst, `,"estimatedMinutes":`...)
	dst = strconv.AppendInt(dst, int64(l.StudyMinutes), 10)
	return append(dst, `,"keyTerms":`...)
}

// appendKeyTerms appends the key terms array, with definitions cut at the
// standard cap when capped, and reports whether one was cut.
func appendKeyTerms(dst []byte, ks []corpus.KeyTerm, capped bool) ([]byte, bool) {
	truncated := false
	dst = append(dst, '[')
	for i, k := range ks {
		if i > 0 {
			dst = append(dst, ',')
		}
		def := k.Definition
		if capped {
			var cut bool
			def, cut = capText(def, CapDefinition)
			truncated = truncated || cut
		}
		dst = append(dst, `{"term":`...)
		dst = jsonenc.String(dst, k.Term)
		dst = append(dst, `,"definition":`...)
		dst = jsonenc.String(dst, def)
		dst = append(dst, `,"cardId":`...)
		dst = jsonenc.String(dst, k.CardID)
		dst = append(dst, '}')
	}
	return append(dst, ']'), truncated
}

// capText cuts s to at most n characters, "…" included, at a word
// boundary, and reports whether it cut; the result is always a prefix of
// s followed by "…". A cut never leaves a **term** marker open. Text of n
// characters or fewer is returned whole.
func capText(s string, n int) (string, bool) {
	if utf8.RuneCountInString(s) <= n {
		return s, false
	}
	end, k := 0, 0
	for i := range s {
		if k == n-1 {
			end = i
			break
		}
		k++
	}
	cut := s[:end]
	if r, _ := utf8.DecodeRuneInString(s[end:]); !unicode.IsSpace(r) {
		if j := strings.LastIndexFunc(cut, unicode.IsSpace); j > 0 {
			cut = cut[:j]
		}
	}
	cut = strings.TrimRightFunc(cut, unicode.IsSpace)
	if strings.Count(cut, "**")%2 == 1 {
		cut = strings.TrimRightFunc(cut[:strings.LastIndex(cut, "**")], unicode.IsSpace)
	}
	if cut == "" { // one word longer than the cap: cut inside it
		cut = s[:end]
	}
	return cut + "…", true
}

// spokenText is spoken text as the transcript gives it: the words, without
// the written body's **term** markers.
func spokenText(s string) string {
	if !strings.Contains(s, "**") {
		return s
	}
	return strings.ReplaceAll(s, "**", "")
}

func appendQuizItems(dst []byte, qs []corpus.QuizItem) []byte {
	dst = append(dst, '[')
	for i, q := range qs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"question":`...)
		dst = jsonenc.String(dst, q.Question)
		dst = append(dst, `,"options":`...)
		dst = jsonenc.Strings(dst, q.Options)
		dst = append(dst, `,"answerIndex":`...)
		dst = strconv.AppendInt(dst, int64(q.AnswerIndex), 10)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func appendInlineChecks(dst []byte, cs []corpus.InlineCheck) []byte {
	dst = append(dst, '[')
	for i, c := range cs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"afterCard":`...)
		dst = jsonenc.String(dst, c.AfterCard)
		dst = append(dst, `,"question":`...)
		dst = jsonenc.String(dst, c.Question)
		dst = append(dst, `,"options":`...)
		dst = jsonenc.Strings(dst, c.Options)
		dst = append(dst, `,"answerIndex":`...)
		dst = strconv.AppendInt(dst, int64(c.AnswerIndex), 10)
		dst = append(dst, `,"hints":`...)
		dst = jsonenc.Strings(dst, c.Hints)
		dst = append(dst, `,"rationale":`...)
		dst = jsonenc.String(dst, c.Rationale)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func appendInteractives(dst []byte, is []corpus.Interactive) ([]byte, error) {
	dst = append(dst, '[')
	for i, it := range is {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"id":`...)
		dst = jsonenc.String(dst, it.ID)
		dst = append(dst, `,"cardId":`...)
		dst = jsonenc.String(dst, it.Card)
		dst = append(dst, `,"kind":`...)
		dst = jsonenc.String(dst, it.Kind)
		dst = append(dst, `,"prompt":`...)
		dst = jsonenc.String(dst, it.Prompt)
		dst = append(dst, `,"config":`...)
		buf := bytes.NewBuffer(dst)
		if err := json.Compact(buf, it.Config); err != nil {
			return nil, fmt.Errorf("interactive %s config: %w", it.ID, err)
		}
		dst = append(buf.Bytes(), '}')
	}
	return append(dst, ']'), nil
}

// appendLessonAsset appends one media asset as the media route lists it;
// url is always null in a listing (spec: Media asset).
func appendLessonAsset(dst []byte, m *corpus.Media) []byte {
	dst = append(dst, `{"mediaId":`...)
	dst = jsonenc.String(dst, m.ID)
	dst = append(dst, `,"type":`...)
	dst = jsonenc.String(dst, m.Type)
	dst = append(dst, `,"cardId":`...)
	dst = jsonenc.String(dst, m.CardID)
	dst = append(dst, `,"mimeType":`...)
	dst = jsonenc.String(dst, m.MIME)
	dst = append(dst, `,"bytes":`...)
	dst = strconv.AppendInt(dst, m.Bytes, 10)
	dst = append(dst, `,"durationSeconds":`...)
	if m.DurationSec > 0 {
		dst = strconv.AppendInt(dst, int64(m.DurationSec), 10)
	} else {
		dst = append(dst, "null"...)
	}
	return append(dst, `,"url":null}`...)
}

func appendWorkedExample(dst []byte, w *corpus.WorkedExample) []byte {
	if w == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, `{"problem":`...)
	dst = jsonenc.String(dst, w.Problem)
	dst = append(dst, `,"steps":`...)
	dst = jsonenc.Strings(dst, w.Steps)
	dst = append(dst, `,"answer":`...)
	dst = jsonenc.String(dst, w.Answer)
	return append(dst, '}')
}
