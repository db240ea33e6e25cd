package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/klauspost/compress/flate"
	"github.com/lectern-api/lectern/origin/billing"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/encoding"
	"github.com/lectern-api/lectern/shared/id"
	"github.com/lectern-api/lectern/shared/jsonenc"
)

// The lesson routes (spec: Route table 6–9): the lesson, its transcript,
// its quiz document and the page of its media. Everything that does not
// depend on the caller is rendered to JSON once, when the Content is built
// (build.go); a request only checks, bills and concatenates fragments,
// then closes the document with contentVersion and its licence envelope.
// Field names, caps and shapes are in docs/decisions.md, "Lessons (routes
// 6–9)".
//
// Each text is escaped once and shared: a card's body serves the standard
// level (a prefix of it, cut at the cap) and the full one; its spoken text
// serves the transcript rows, the joined markdown (a JSON string is the
// concatenation of its escaped parts) and the narrationText section.

// Caps of long lesson text at standard detail, in characters (Unicode code
// points), the "…" included (spec: Limits, per-level caps: not shown).
// Brief carries no prose at all; full lifts the caps.
const (
	capBody       = 600 // card body, cut at a word boundary
	capKeyPoint   = 200 // each key-point bullet
	capAlt        = 200 // illustration alt text
	capDefinition = 200 // key term definition
)

// Detail levels.
const (
	lessonBrief = iota
	lessonStandard
	lessonFull
)

// Include sections of the lesson route: bit i is route.IncludeValues()[i],
// which is also the order of the sections in the lesson JSON.
const (
	incQuiz = 1 << iota
	incInlineChecks
	incInteractives
	incNarrationText
	incVideoTranscript
	incMedia
	incWorkedExample
	incAll = 1<<iota - 1
)

// docSpan is a fragment of a lessonDoc's data; the zero span is empty.
type docSpan struct{ from, to int32 }

func (s docSpan) len() int { return int(s.to - s.from) }

// lessonDoc is one lesson rendered for serving. Every fragment lives in
// data, one allocation per lesson.
type lessonDoc struct {
	lesson *corpus.Lesson
	data   []byte
	// head is `{"lessonId":…,"estimatedMinutes":n,"keyTerms":`.
	head docSpan
	// keyTerms is the key terms array, complete; stdKeyTerms the same at
	// standard detail (equal unless a definition was capped).
	keyTerms, stdKeyTerms docSpan
	cards                 []cardDoc
	// stdTruncated is truncated at standard detail: some text was cut.
	stdTruncated bool
	// The include sections that are rendered whole: arrays, and the worked
	// example (an object or null).
	quiz, inlineChecks, interactives, workedExample docSpan
	// idTitle is `{"lessonId":…,"title":…`, the opening of the transcript
	// and quiz documents.
	idTitle docSpan
	// assets are the media assets in l.Media order, one JSON object each.
	assets []assetDoc
	// gzipStd is the lesson at standard detail without includes, up to
	// and including contentVersion, as a gzip member's header and deflate
	// blocks ending byte-aligned (a sync flush); gzipCRC and gzipLen are
	// the CRC-32 and length of those uncompressed bytes. A request appends
	// its licence envelope as a stored final block and the trailer, so the
	// commonest read is compressed without a compressor (spec: Transport).
	gzipStd []byte
	gzipCRC uint32
	gzipLen uint32
}

// cardDoc is one card's fragments.
type cardDoc struct {
	// id and label are JSON strings.
	id, label docSpan
	// prefix is `{"id":…,"label":…,"hasVideo":…,"hasNarration":…,"hasImage":…,"body":`,
	// the same at every level.
	prefix docSpan
	// body is the complete body as a JSON string. At standard detail it is
	// body[:stdCut] + `…"` when stdCut > 0, else body whole.
	body   docSpan
	stdCut int32
	// rest is `,"keyPoints":[…],"illustrationAlt":…}` complete, stdRest
	// the same at standard detail.
	rest, stdRest docSpan
	// narration and voiceover are the spoken texts as JSON strings, empty
	// spans when the card has none; mdVoiceover is the voiceover's escaped
	// text quoted for markdown ("> " after every line break), without the
	// string's quotes.
	narration, voiceover, mdVoiceover docSpan
}

type assetDoc struct {
	docSpan
	typ string // video, audio, image
}

func (d *lessonDoc) bytes(s docSpan) []byte { return d.data[s.from:s.to:s.to] }

// inner is a JSON string fragment without its quotes.
func (d *lessonDoc) inner(s docSpan) []byte { return d.data[s.from+1 : s.to-1 : s.to-1] }

// lessonSet is the lesson renderings of a Content, by corpus.Lesson.Ordinal.
type lessonSet struct {
	docs []*lessonDoc
	// version is `,"contentVersion":"…"`.
	version []byte
}

// buildLessons renders every lesson of the corpus into ct.lessons, spread
// over the CPUs; each lesson is independent.
func (ct *Content) buildLessons() error {
	c := ct.Corpus
	ls := lessonSet{docs: make([]*lessonDoc, len(c.Lessons))}
	ls.version = jsonenc.String([]byte(`,"contentVersion":`), c.ContentVersion)
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := lessonBuilder{version: ls.version}
			for {
				i := int(next.Add(1) - 1)
				if i >= len(c.Lessons) {
					return
				}
				d, err := b.build(c.Lessons[i])
				if err != nil {
					once.Do(func() { first = err })
					return
				}
				ls.docs[i] = d
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	ct.lessons = ls
	return nil
}

// lessonBuilder renders lessons into a scratch buffer it reuses; each
// lesson's fragments are then copied into one exact allocation.
type lessonBuilder struct {
	buf     []byte
	version []byte // `,"contentVersion":…`
	zbuf    bytes.Buffer
	zw      *flate.Writer
}

// mark returns the span of what was appended to b.buf since from.
func (b *lessonBuilder) mark(from int) docSpan { return docSpan{int32(from), int32(len(b.buf))} }

// str appends s as a JSON string and returns its span.
func (b *lessonBuilder) str(s string) docSpan {
	at := len(b.buf)
	b.buf = jsonenc.String(b.buf, s)
	return b.mark(at)
}

// capped appends s as a JSON string, cut at the standard cap n, and
// reports whether it cut.
func (b *lessonBuilder) capped(s string, n int) bool {
	out, cut := capLessonText(s, n)
	b.buf = jsonenc.String(b.buf, out)
	return cut
}

func (b *lessonBuilder) build(l *corpus.Lesson) (*lessonDoc, error) {
	d := &lessonDoc{lesson: l, cards: make([]cardDoc, len(l.Cards)), assets: make([]assetDoc, len(l.Media))}
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

	d.data = bytes.Clone(b.buf)
	if err := b.precompress(d); err != nil {
		return nil, fmt.Errorf("lesson %s: %w", l.ID, err)
	}
	return d, nil
}

// gzipStdLevel compresses the precomputed standard lessons: a fast level
// (measured on the full corpus: about 120 µs a lesson against 450 µs at
// the default level, for 4% more bytes), so that rendering 3,680 lessons
// at reload stays within a couple of seconds on two cores.
const gzipStdLevel = 2

// gzipHeader is a gzip member header (RFC 1952 §2.3): deflate, no flags,
// no time, unknown OS.
var gzipHeader = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}

// precompress renders d.gzipStd.
func (b *lessonBuilder) precompress(d *lessonDoc) error {
	plain := appendLessonDoc(b.buf[:0], d, lessonStandard, 0, b.version)
	b.buf = plain
	b.zbuf.Reset()
	b.zbuf.Write(gzipHeader)
	if b.zw == nil {
		zw, err := flate.NewWriter(&b.zbuf, gzipStdLevel)
		if err != nil {
			return err
		}
		b.zw = zw
	} else {
		b.zw.Reset(&b.zbuf)
	}
	if _, err := b.zw.Write(plain); err != nil {
		return err
	}
	if err := b.zw.Flush(); err != nil { // a sync flush: byte-aligned, not final
		return err
	}
	d.gzipStd = bytes.Clone(b.zbuf.Bytes())
	d.gzipCRC = crc32.ChecksumIEEE(plain)
	d.gzipLen = uint32(len(plain))
	return nil
}

// appendGzipStd appends the gzip member of the standard lesson closed by
// tail: the precompressed blocks, tail as a stored final block (RFC 1951
// §3.2.4), then CRC-32 and size (RFC 1952 §2.3.1).
func appendGzipStd(dst []byte, d *lessonDoc, tail []byte) []byte {
	n := len(tail) // always far below a stored block's 65535
	dst = append(dst, d.gzipStd...)
	dst = append(dst, 1, byte(n), byte(n>>8), ^byte(n), ^byte(n>>8))
	dst = append(dst, tail...)
	crc := crc32.Update(d.gzipCRC, crc32.IEEETable, tail)
	size := d.gzipLen + uint32(n)
	return append(dst, byte(crc), byte(crc>>8), byte(crc>>16), byte(crc>>24),
		byte(size), byte(size>>8), byte(size>>16), byte(size>>24))
}

// card renders one card and reports whether anything of it is cut at
// standard detail.
func (b *lessonBuilder) card(cd *cardDoc, c *corpus.Card) bool {
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
	if out, cut := capLessonText(c.Body, capBody); cut {
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
	restCut := anyLonger(c.KeyPoints, capKeyPoint) || utf8.RuneCountInString(c.IllustrationAlt) > capAlt
	if restCut {
		at = len(b.buf)
		b.buf = append(b.buf, `,"keyPoints":[`...)
		for i, k := range c.KeyPoints {
			if i > 0 {
				b.buf = append(b.buf, ',')
			}
			b.capped(k, capKeyPoint)
		}
		b.buf = append(b.buf, `],"illustrationAlt":`...)
		b.capped(c.IllustrationAlt, capAlt)
		b.buf = append(b.buf, '}')
		cd.stdRest = b.mark(at)
		truncated = true
	}

	if n := c.Narration(); n != "" {
		cd.narration = b.str(spokenText(n))
	}
	if v := c.VideoVoiceover; v != "" {
		cd.voiceover = b.str(spokenText(v))
		inner := docSpan{cd.voiceover.from + 1, cd.voiceover.to - 1}
		cd.mdVoiceover = inner
		if strings.Contains(v, "\n") {
			s := b.str(strings.ReplaceAll(spokenText(v), "\n", "\n> "))
			cd.mdVoiceover = docSpan{s.from + 1, s.to - 1}
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
			def, cut = capLessonText(def, capDefinition)
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

// capLessonText cuts s to at most n characters, "…" included, at a word
// boundary, and reports whether it cut; the result is always a prefix of
// s followed by "…". A cut never leaves a **term** marker open. Text of n
// characters or fewer is returned whole.
func capLessonText(s string, n int) (string, bool) {
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

// Rendering: each render appends one document to dst from the lesson's
// fragments.

// appendLessonDoc appends the lesson at a detail level with the sections
// of the include bits.
func appendLessonDoc(dst []byte, d *lessonDoc, level, include int, tail []byte) []byte {
	dst = append(dst, d.bytes(d.head)...)
	switch level {
	case lessonBrief:
		// No prose: every member present, empty (spec: detail changes how
		// much, never which fields exist).
		dst = append(dst, `[],"cards":[`...)
		for i := range d.cards {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, d.bytes(d.cards[i].prefix)...)
			dst = append(dst, `"","keyPoints":[],"illustrationAlt":""}`...)
		}
		dst = append(dst, `],"truncated":false`...)
	case lessonStandard:
		dst = append(dst, d.bytes(d.stdKeyTerms)...)
		dst = append(dst, `,"cards":[`...)
		for i := range d.cards {
			c := &d.cards[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, d.bytes(c.prefix)...)
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
			dst = append(dst, d.bytes(c.prefix)...)
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
		dst = d.appendSpoken(dst, false)
	}
	if include&incVideoTranscript != 0 {
		dst = append(dst, `,"videoTranscript":`...)
		dst = d.appendSpoken(dst, true)
	}
	if include&incMedia != 0 {
		dst = append(dst, `,"media":[`...)
		for i, a := range d.assets {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, d.bytes(a.docSpan)...)
		}
		dst = append(dst, ']')
	}
	if include&incWorkedExample != 0 {
		dst = append(dst, `,"workedExample":`...)
		dst = append(dst, d.bytes(d.workedExample)...)
	}
	return append(dst, tail...)
}

// appendSpoken appends the narrationText (or, with video, the
// videoTranscript) section: [{cardId, text}] for the cards that have
// that text, in card order; complete, never capped.
func (d *lessonDoc) appendSpoken(dst []byte, video bool) []byte {
	dst = append(dst, '[')
	first := true
	for i := range d.cards {
		c := &d.cards[i]
		t := c.narration
		if video {
			t = c.voiceover
		}
		if t.len() == 0 {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, `{"cardId":`...)
		dst = append(dst, d.bytes(c.id)...)
		dst = append(dst, `,"text":`...)
		dst = append(dst, d.bytes(t)...)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// appendTranscriptDoc appends the transcript: {lessonId, title, items[,
// markdown]}, then tail. items holds one row per card that is narrated or
// has a video voiceover, in card order; a card with neither is omitted
// (spec: Transcript). Text is complete and the rows are not paginated.
func appendTranscriptDoc(dst []byte, d *lessonDoc, markdown bool, tail []byte) []byte {
	dst = append(dst, d.bytes(d.idTitle)...) // lessonId, title
	dst = append(dst, `,"items":[`...)
	first := true
	for i := range d.cards {
		c := &d.cards[i]
		if c.narration.len() == 0 && c.voiceover.len() == 0 {
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
		dst = d.appendNullable(dst, c.narration)
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
			if c.narration.len() == 0 && c.voiceover.len() == 0 {
				continue
			}
			dst = append(dst, "## "...)
			dst = append(dst, d.inner(c.label)...)
			dst = append(dst, `\n\n`...)
			if c.narration.len() > 0 {
				dst = append(dst, d.inner(c.narration)...)
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

func (d *lessonDoc) appendNullable(dst []byte, s docSpan) []byte {
	if s.len() == 0 {
		return append(dst, "null"...)
	}
	return append(dst, d.bytes(s)...)
}

// appendQuizDoc appends the quiz document: {lessonId, title, items,
// inlineChecks}, then tail; answer keys included (spec: Quiz document).
func appendQuizDoc(dst []byte, d *lessonDoc, tail []byte) []byte {
	dst = append(dst, d.bytes(d.idTitle)...)
	dst = append(dst, `,"items":`...)
	dst = append(dst, d.bytes(d.quiz)...)
	dst = append(dst, `,"inlineChecks":`...)
	dst = append(dst, d.bytes(d.inlineChecks)...)
	return append(dst, tail...)
}

// lessonTail is the closing members of every lesson-route document:
// `,"contentVersion":…,"_license":{…}}`.
func (s *Server) lessonTail(dst []byte, req *request) []byte {
	return s.lessonLicense(append(dst, req.corpus.lessons.version...), req)
}

// lessonLicense appends `,"_license":{…}}`, the caller's part.
func (s *Server) lessonLicense(dst []byte, req *request) []byte {
	env := s.envelope(req)
	dst = append(dst, `,"_license":{"lic":`...)
	dst = jsonenc.String(dst, env.Lic)
	dst = append(dst, `,"tag":`...)
	dst = jsonenc.String(dst, env.Tag)
	return append(dst, "}}"...)
}

// The handlers. Each runs the pipeline after the gate in DESIGN.md's
// order: resolve the target (400 BAD_LESSON_ID, bills the call) →
// entitlement (403, free) → the media page's cursor (400, bills the call)
// → existence (404 LESSON_NOT_FOUND, bills a call and a lesson read) →
// ETag (s.revalidate: a 304 bills one call and no lesson read, so the
// enumeration alarm does not see it) → bill the read (429; the
// enumeration alarm) → render.

// lessonTarget resolves the route's lesson id and checks the caller's
// entitlement to it.
func (s *Server) lessonTarget(r *http.Request, req *request) (id.Lesson, error) {
	lid, err := id.LessonFromPath(req.vars.Get("tier"), req.vars.Get("subjectSlug"), req.vars.Get("classNum"))
	if err != nil {
		return lid, s.billCallAnd(r, req, err)
	}
	if err := licence.Entitled(req.org.Grants, lid.Tier, lid.Slug); err != nil {
		return lid, err
	}
	return lid, nil
}

// findLesson returns the lesson's renderings, or bills the 404's call and
// lesson read and answers LESSON_NOT_FOUND with the real range.
func (s *Server) findLesson(r *http.Request, req *request, lid id.Lesson) (*lessonDoc, error) {
	sub := req.corpus.Subject(lid.Tier, lid.Slug)
	if sub != nil && lid.Class <= len(sub.Lessons) {
		return req.corpus.lessons.docs[sub.Lessons[lid.Class-1].Ordinal], nil
	}
	if _, err := s.billLessonRead(r, req, nil); err != nil {
		return nil, err
	}
	if sub == nil {
		return nil, &apierr.Error{Code: apierr.LessonNotFound, Parameter: "subjectSlug", Received: lid.Slug,
			Message: "No lesson " + lid.String() + ": the " + lid.Tier + " tier has no subject " + lid.Slug + " (slugs match exactly and are tier-specific)."}
	}
	n := len(sub.Lessons)
	return nil, &apierr.Error{Code: apierr.LessonNotFound, Parameter: "classNum",
		Received: strconv.Itoa(lid.Class), ReceivedNumber: true, Min: apierr.Int(1), Max: apierr.Int(int64(n)),
		Message: "No lesson " + lid.String() + ": " + sub.Ref() + " has classes 1 to " + strconv.Itoa(n) + "."}
}

// lessonBufs recycles response bodies: a body is dead once writeContent
// has returned.
var lessonBufs = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}

// putLessonBuf returns body's buffer, taken from lessonBufs as bp, to the
// pool unless it grew too large to keep.
func putLessonBuf(bp *[]byte, body []byte) {
	if cap(body) <= 1<<20 {
		*bp = body[:0]
		lessonBufs.Put(bp)
	}
}

// lessonRead is a lesson found, its validator and the bill of its read.
type lessonRead struct {
	doc  *lessonDoc
	tag  string
	bill billing.Bill
}

// readLesson runs the steps every lesson route shares once its target is
// resolved: existence (404), the ETag (a 304 bills one call and no lesson
// read) and billing the read (429). ok is false when the request is
// answered, with a 304 or with err.
func (s *Server) readLesson(w http.ResponseWriter, r *http.Request, req *request, lid id.Lesson) (rd lessonRead, ok bool, err error) {
	d, err := s.findLesson(r, req, lid)
	if err != nil {
		return rd, false, err
	}
	// The target is the path's values, as the edge derives its candidate
	// (docs/edge.md); they name the lesson canonically.
	tag := derivedETag(req)
	if done, err := s.revalidate(w, r, req, tag); done || err != nil {
		return rd, false, err
	}
	bill, err := s.billLessonRead(r, req, d.lesson)
	if err != nil {
		return rd, false, err
	}
	return lessonRead{doc: d, tag: tag, bill: bill}, true, nil
}

// serveLessonDoc runs the lesson, transcript and quiz routes, which
// differ only in how they render.
// With gz, the answer is the precompressed standard lesson (appendGzipStd).
func (s *Server) serveLessonDoc(w http.ResponseWriter, r *http.Request, req *request, gz bool, render func(dst []byte, d *lessonDoc) []byte) error {
	lid, err := s.lessonTarget(r, req)
	if err != nil {
		return err
	}
	rd, ok, err := s.readLesson(w, r, req, lid)
	if !ok {
		return err
	}
	bp := lessonBufs.Get().(*[]byte)
	var body []byte
	if gz {
		var tail [256]byte
		body = appendGzipStd((*bp)[:0], rd.doc, s.lessonLicense(tail[:0], req))
		writeGzipped(w, req, rd.tag, rd.bill, body)
	} else {
		body = render((*bp)[:0], rd.doc)
		writeContent(w, r, req, rd.tag, rd.bill, body)
	}
	putLessonBuf(bp, body)
	return nil
}

// lesson serves GET /v1/lessons/{tier}/{subjectSlug}/{classNum}.
func (s *Server) lesson(w http.ResponseWriter, r *http.Request, req *request) error {
	level, include := lessonDetail(req), lessonIncludes(req)
	gz := level == lessonStandard && include == 0 && encoding.Negotiate(r.Header.Get("Accept-Encoding")) == encoding.Gzip
	return s.serveLessonDoc(w, r, req, gz, func(dst []byte, d *lessonDoc) []byte {
		return s.lessonTail(appendLessonDoc(dst, d, level, include, nil), req)
	})
}

// lessonTranscript serves GET …/transcript.
func (s *Server) lessonTranscript(w http.ResponseWriter, r *http.Request, req *request) error {
	md := req.params.Includes("markdown")
	return s.serveLessonDoc(w, r, req, false, func(dst []byte, d *lessonDoc) []byte {
		return s.lessonTail(appendTranscriptDoc(dst, d, md, nil), req)
	})
}

// lessonQuiz serves GET …/quiz.
func (s *Server) lessonQuiz(w http.ResponseWriter, r *http.Request, req *request) error {
	return s.serveLessonDoc(w, r, req, false, func(dst []byte, d *lessonDoc) []byte {
		return s.lessonTail(appendQuizDoc(dst, d, nil), req)
	})
}

// writeGzipped answers 200 with a body already gzip-compressed: what
// writeContent and writeBody do for a gzip answer (respond.go), without
// the compression. Every precompressed body is far over 384 bytes.
func writeGzipped(w http.ResponseWriter, req *request, tag string, bill billing.Bill, gz []byte) {
	h := w.Header()
	h.Set("ETag", tag)
	h.Set("X-Service-Content-Version", req.corpus.ContentVersion)
	setAll(h, bill)
	edgeHeaders(w, req)
	h.Set("Content-Type", "application/json")
	h.Set("Content-Encoding", encoding.Gzip.String())
	h.Set("Content-Length", strconv.Itoa(len(gz)))
	w.WriteHeader(http.StatusOK)
	w.Write(gz)
}

// lessonDetail is the request's detail level; the parameter was validated.
func lessonDetail(req *request) int {
	switch req.params.Get("detail") {
	case "brief":
		return lessonBrief
	case "full":
		return lessonFull
	}
	return lessonStandard
}

// lessonIncludes is the request's include list as section bits; the
// values were validated.
func lessonIncludes(req *request) int {
	bits := 0
	for _, v := range req.params.Include() {
		switch v {
		case "quiz":
			bits |= incQuiz
		case "inlineChecks":
			bits |= incInlineChecks
		case "interactives":
			bits |= incInteractives
		case "narrationText":
			bits |= incNarrationText
		case "videoTranscript":
			bits |= incVideoTranscript
		case "media":
			bits |= incMedia
		case "workedExample":
			bits |= incWorkedExample
		}
	}
	return bits
}

// lessonMedia serves GET …/media: a page of the lesson's assets in
// l.Media order, filtered by type before pagination; url is always null
// and nothing is minted.
func (s *Server) lessonMedia(w http.ResponseWriter, r *http.Request, req *request) error {
	lid, err := s.lessonTarget(r, req)
	if err != nil {
		return err
	}
	p, perr := s.openPage(req)
	if perr != nil {
		return s.billCallAnd(r, req, perr)
	}
	rd, ok, err := s.readLesson(w, r, req, lid)
	if !ok {
		return err
	}
	d := rd.doc
	typ := req.params.Get("type")
	total := 0
	for _, a := range d.assets {
		if typ == "" || a.typ == typ {
			total++
		}
	}
	from, to := p.bounds(total)
	l := p.list(s, nil, to-from, total)
	bp := lessonBufs.Get().(*[]byte)
	body := append((*bp)[:0], `{"items":[`...)
	k := 0
	for _, a := range d.assets {
		if typ != "" && a.typ != typ {
			continue
		}
		if k >= from && k < to {
			if k > from {
				body = append(body, ',')
			}
			body = append(body, d.bytes(a.docSpan)...)
		}
		k++
	}
	body = append(body, `],"total":`...)
	body = strconv.AppendInt(body, int64(l.Total), 10)
	body = append(body, `,"pageNum":`...)
	body = strconv.AppendInt(body, int64(l.PageNum), 10)
	body = append(body, `,"totalPages":`...)
	body = strconv.AppendInt(body, int64(l.TotalPages), 10)
	body = append(body, `,"hasMore":`...)
	body = strconv.AppendBool(body, l.HasMore)
	body = append(body, `,"nextCursor":`...)
	if l.NextCursor != nil {
		body = jsonenc.String(body, *l.NextCursor)
	} else {
		body = append(body, "null"...)
	}
	body = append(body, req.corpus.lessons.version...)
	body = append(body, `,"_license":{"lic":`...)
	body = jsonenc.String(body, l.License.Lic)
	body = append(body, `,"tag":`...)
	body = jsonenc.String(body, l.License.Tag)
	body = append(body, "}}"...)
	writeContent(w, r, req, rd.tag, rd.bill, body)
	putLessonBuf(bp, body)
	return nil
}
