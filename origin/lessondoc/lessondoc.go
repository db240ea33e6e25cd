// Package lessondoc pre-renders the documents of the lesson routes (spec:
// Route table 6–9): the lesson, its transcript, its quiz document and the
// media page. Everything that does not depend on the caller
// is rendered to JSON once per corpus (Build, at start and on reload); a
// request only concatenates fragments, then closes the document with the
// tail its caller gives (contentVersion and the licence envelope). The
// commonest read, the standard lesson gzip-compressed, is precompressed
// and spliced with its tail without a compressor (gzip.go). Field names,
// caps and shapes are in docs/decisions/lessons.md; the
// handlers that check, bill and answer are origin/server's.
//
// Each text is escaped once and shared: a card's body serves the standard
// level (a prefix of it, cut at the cap) and the full one; its spoken text
// serves the transcript rows, the joined markdown (a JSON string is the
// concatenation of its escaped parts) and the narrationText section, and
// is the body's own escaped text, its markers dropped as it is appended,
// for a card narrated by its body. What is cheap to make is not held (the
// renderings of the full corpus are most of the origin's memory): the
// members before a card's body and the media assets are appended per
// request from a few flags and the corpus.
package lessondoc

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/forensic"
	"github.com/lectern-api/lectern/shared/jsonenc"
)

// Caps of long lesson text at standard detail, in characters (Unicode code
// points), the "…" included (spec: Limits, per-level caps: not shown).
// Brief carries no prose at all; full lifts the caps.
const (
	CapBody       = 600 // card body, cut at a word boundary
	CapKeyPoint   = 200 // each key-point bullet
	CapAlt        = 200 // illustration alt text
	CapDefinition = 200 // key term definition
)

// Level is a detail level of the lesson route (spec: Common parameters,
// detail).
type Level int

// Detail levels.
const (
	Brief Level = iota
	Standard
	Full
)

// Include is a set of the lesson route's include sections (spec: Common
// parameters, include): bit i is route.IncludeValues()[i], which is also
// the order of the sections in the lesson JSON.
type Include int

// Include sections.
const (
	incQuiz Include = 1 << iota
	incInlineChecks
	incInteractives
	incNarrationText
	incVideoTranscript
	incMedia
	incWorkedExample
	incAll = 1<<iota - 1
)

// span is a fragment of a Doc's data; the zero span is empty.
type span struct{ from, to int32 }

func (s span) len() int { return int(s.to - s.from) }

// Doc is one lesson rendered for serving. Every fragment lives in
// data, one allocation per lesson.
type Doc struct {
	lesson *corpus.Lesson
	data   []byte
	// head is `{"lessonId":…,"estimatedMinutes":n,"keyTerms":`.
	head span
	// keyTerms is the key terms array, complete; stdKeyTerms the same at
	// standard detail (equal unless a definition was capped).
	keyTerms, stdKeyTerms span
	cards                 []cardDoc
	// stdTruncated is truncated at standard detail: some text was cut.
	stdTruncated bool
	// The include sections that are rendered whole: arrays, and the worked
	// example (an object or null).
	quiz, inlineChecks, interactives, workedExample span
	// idTitle is `{"lessonId":…,"title":…`, the opening of the transcript
	// and quiz documents.
	idTitle span
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
	id, label span
	// video, narrated and image are the card's flags (hasVideo,
	// hasNarration, hasImage): with id and label, the members before its
	// body, the same at every level (appendCardHead).
	video, narrated, image bool
	// body is the complete body as a JSON string. At standard detail it is
	// body[:stdCut] + `…"` when stdCut > 0, else body whole.
	body   span
	stdCut int32
	// rest is `,"keyPoints":[…],"illustrationAlt":…}` complete, stdRest
	// the same at standard detail.
	rest, stdRest span
	// narration and voiceover are the spoken texts as JSON strings, empty
	// spans when the card has none; mdVoiceover is the voiceover's escaped
	// text quoted for markdown ("> " after every line break), without the
	// string's quotes. A card narrated by its body (no script: most of
	// them) has narrationIsBody instead of a narration of its own: the
	// spoken text is the escaped body without its "**" markers
	// (appendNarration), so the text is held once.
	narration, voiceover, mdVoiceover span
	narrationIsBody                   bool
}

// hasNarration reports whether the card has a narration.
func (c *cardDoc) hasNarration() bool { return c.narrationIsBody || c.narration.len() > 0 }

func (d *Doc) bytes(s span) []byte { return d.data[s.from:s.to:s.to] }

// inner is a JSON string fragment without its quotes.
func (d *Doc) inner(s span) []byte { return d.data[s.from+1 : s.to-1 : s.to-1] }

// Set is the lesson renderings of a corpus, by corpus.Lesson.Ordinal.
type Set struct {
	docs []*Doc
	// version is `,"contentVersion":"…"`.
	version []byte
}

// Build renders every lesson of c, spread over the CPUs; each lesson is
// independent.
func Build(c *corpus.Corpus) (*Set, error) {
	ls := &Set{docs: make([]*Doc, len(c.Lessons))}
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
			b := builder{version: ls.version}
			for {
				i := int(next.Add(1) - 1)
				if i >= len(c.Lessons) {
					return
				}
				d, err := b.build(c.Lessons[i])
				if err == nil {
					d.data = bytes.Clone(d.data) // b.buf is reused
					if err = b.precompress(d); err != nil {
						err = fmt.Errorf("lesson %s: %w", c.Lessons[i].ID, err)
					}
				}
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
		return nil, first
	}
	return ls, nil
}

// Doc returns the rendering of l, a lesson of the set's corpus.
func (ls *Set) Doc(l *corpus.Lesson) *Doc { return ls.docs[l.Ordinal] }

// AppendVersion appends `,"contentVersion":"…"`, the member that follows
// every document of the set.
func (ls *Set) AppendVersion(dst []byte) []byte { return append(dst, ls.version...) }

// AppendTail appends the closing members of every lesson-route document,
// `,"contentVersion":…,"_license":{…}}`: the version, then env, the
// caller's licence envelope. An export's class files close the same way.
func (ls *Set) AppendTail(dst []byte, env forensic.Envelope) []byte {
	return env.AppendMember(ls.AppendVersion(dst))
}

// Lesson is the lesson d renders.
func (d *Doc) Lesson() *corpus.Lesson { return d.lesson }

// bufs recycles response bodies.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}

// GetBuf takes a buffer for a response body from the pool; give it back
// with PutBuf once the body has been written.
func GetBuf() *[]byte { return bufs.Get().(*[]byte) }

// PutBuf returns body's buffer, taken with GetBuf as bp, to the pool
// unless it grew too large to keep. body is dead afterwards.
func PutBuf(bp *[]byte, body []byte) {
	if cap(body) <= 1<<20 {
		*bp = body[:0]
		bufs.Put(bp)
	}
}

// ParseLevel is the detail level of a validated detail parameter; the
// default ("") is Standard.
func ParseLevel(detail string) Level {
	switch detail {
	case "brief":
		return Brief
	case "full":
		return Full
	}
	return Standard
}

// ParseIncludes is the set of validated include values.
func ParseIncludes(values []string) Include {
	var bits Include
	for _, v := range values {
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
