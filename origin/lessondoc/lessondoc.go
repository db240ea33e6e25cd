// Package lessondoc renders the documents of the lesson routes (spec:
// Route table 6–9): the lesson, its transcript, its quiz document and the
// media page. A request renders its document from the corpus, then closes
// it with the tail its caller gives (contentVersion and the licence
// envelope); what Build computes once per corpus (at start and on reload)
// is only what would cost a request more than copying: where the standard
// caps cut each text, the cards' media flags, the interactives with their
// configs compacted, and the commonest read, the standard lesson
// gzip-compressed, which is precompressed and spliced with its tail
// without a compressor (gzip.go). Field names, caps and shapes are in
// docs/decisions/lessons.md; the handlers that check, bill and answer are
// origin/server's.
//
// The texts are not held rendered: they were most of the origin's memory
// (their escaped JSON a second copy of the corpus's strings, 0.8 GB of the
// heap on a corpus ten times the deployed one; docs/bench.md, Scale).
// Escaping them again per request costs a scan of the text; a JSON string
// is the concatenation of its escaped parts, so a capped text is its
// escaped prefix and "…", a spoken text the escaped text without its "**"
// markers (escaping never makes or splits one).
package lessondoc

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/forensic"
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

// Doc is one lesson prepared for serving: its lesson, and what Build
// computed from it once.
type Doc struct {
	lesson *corpus.Lesson
	cards  []cardDoc
	// stdTruncated is truncated at standard detail: some text was cut.
	stdTruncated bool
	// stdTermCut is whether a key term's definition is cut at standard
	// detail.
	stdTermCut bool
	// interactives is the interactives array, each config compacted:
	// compacting costs more than a copy and can fail, which Build reports.
	interactives []byte
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

// cardDoc is what Build computed for one card.
type cardDoc struct {
	// stdCut > 0 cuts the body at standard detail: Body[:stdCut] + "…".
	stdCut int32
	// video and image are the card's hasVideo and hasImage.
	video, image bool
	// restCut is whether a key point or the illustration alt is cut at
	// standard detail.
	restCut bool
}

// Set is the prepared lessons of a corpus, by corpus.Lesson.Ordinal.
type Set struct {
	docs []*Doc
	// version is `,"contentVersion":"…"`.
	version []byte
}

// Build prepares every lesson of c, spread over the CPUs; each lesson is
// independent.
func Build(c *corpus.Corpus) (*Set, error) {
	ls := &Set{docs: make([]*Doc, len(c.Lessons))}
	ls.version = appendString([]byte(`,"contentVersion":`), c.ContentVersion)
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

// Doc returns the prepared l, a lesson of the set's corpus.
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
