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
)

// builder prepares lessons; its buffers are reused from lesson to
// lesson.
type builder struct {
	buf     []byte
	version []byte // `,"contentVersion":…`
	zbuf    bytes.Buffer
	zw      *flate.Writer
}

func (b *builder) build(l *corpus.Lesson) (*Doc, error) {
	d := &Doc{lesson: l, cards: make([]cardDoc, len(l.Cards))}
	for _, k := range l.KeyTerms {
		if utf8.RuneCountInString(k.Definition) > CapDefinition {
			d.stdTermCut, d.stdTruncated = true, true
		}
	}
	for i, c := range l.Cards {
		if b.card(&d.cards[i], c) {
			d.stdTruncated = true
		}
	}
	d.interactives = noInteractives
	if len(l.Interactives) > 0 {
		var err error
		if b.buf, err = appendInteractives(b.buf[:0], l.Interactives); err != nil {
			return nil, fmt.Errorf("lesson %s: %w", l.ID, err)
		}
		d.interactives = bytes.Clone(b.buf)
	}
	return d, nil
}

// noInteractives is the interactives array of every lesson without any.
var noInteractives = []byte("[]")

// Renderer prepares lessons one at a time, for documents made once and
// not kept: what Build prepares, without the precompressed standard
// lesson. (An export's classes, whose texts differ from the corpus's,
// take AppendFullAs instead.)
type Renderer struct{ b builder }

// Render prepares l. Its AppendGzipStandard is empty.
func (r *Renderer) Render(l *corpus.Lesson) (*Doc, error) { return r.b.build(l) }

// card prepares one card and reports whether anything of it is cut at
// standard detail.
func (b *builder) card(cd *cardDoc, c *corpus.Card) bool {
	for _, m := range c.Media {
		cd.video = cd.video || m.Type == "video"
		cd.image = cd.image || m.Type == "image"
	}
	truncated := false
	if out, cut := capText(c.Body, CapBody); cut {
		// out is a prefix of the body plus "…".
		cd.stdCut = int32(len(out) - len("…"))
		truncated = true
	}
	if anyLonger(c.KeyPoints, CapKeyPoint) || utf8.RuneCountInString(c.IllustrationAlt) > CapAlt {
		cd.restCut, truncated = true, true
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
	dst = appendString(dst, l.ID)
	dst = append(dst, `,"tier":`...)
	dst = appendString(dst, l.Subject.Tier)
	dst = append(dst, `,"subjectSlug":`...)
	dst = appendString(dst, l.Subject.Slug)
	dst = append(dst, `,"classNum":`...)
	dst = strconv.AppendInt(dst, int64(l.Number), 10)
	dst = append(dst, `,"title":`...)
	dst = appendString(dst, l.Title)
	dst = append(dst, `,"subtitle":`...)
	dst = appendString(dst, l.Subtitle)
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
		dst = appendString(dst, k.Term)
		dst = append(dst, `,"definition":`...)
		dst = appendString(dst, def)
		dst = append(dst, `,"cardId":`...)
		dst = appendString(dst, k.CardID)
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
		dst = appendString(dst, q.Question)
		dst = append(dst, `,"options":`...)
		dst = appendStrings(dst, q.Options)
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
		dst = appendString(dst, c.AfterCard)
		dst = append(dst, `,"question":`...)
		dst = appendString(dst, c.Question)
		dst = append(dst, `,"options":`...)
		dst = appendStrings(dst, c.Options)
		dst = append(dst, `,"answerIndex":`...)
		dst = strconv.AppendInt(dst, int64(c.AnswerIndex), 10)
		dst = append(dst, `,"hints":`...)
		dst = appendStrings(dst, c.Hints)
		dst = append(dst, `,"rationale":`...)
		dst = appendString(dst, c.Rationale)
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
		dst = appendString(dst, it.ID)
		dst = append(dst, `,"cardId":`...)
		dst = appendString(dst, it.Card)
		dst = append(dst, `,"kind":`...)
		dst = appendString(dst, it.Kind)
		dst = append(dst, `,"prompt":`...)
		dst = appendString(dst, it.Prompt)
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
	dst = appendString(dst, m.ID)
	dst = append(dst, `,"type":`...)
	dst = appendString(dst, m.Type)
	dst = append(dst, `,"cardId":`...)
	dst = appendString(dst, m.CardID)
	dst = append(dst, `,"mimeType":`...)
	dst = appendString(dst, m.MIME)
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
	dst = appendString(dst, w.Problem)
	dst = append(dst, `,"steps":`...)
	dst = appendStrings(dst, w.Steps)
	dst = append(dst, `,"answer":`...)
	dst = appendString(dst, w.Answer)
	return append(dst, '}')
}
