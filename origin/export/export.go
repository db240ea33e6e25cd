// Package export builds the export bundles (spec: Export result; Route
// rules §5): the files a subject or class export ships, streamed one at a
// time into a zip (WriteZip, the download of a zip_url link) or into the
// inline form's base64 of a gzip of a tar (WriteInline).
//
// A bundle holds, in this order: for each class of the target,
// class-<N>.json (the lesson as route 6 answers detail=full, every include
// and complete text, closed by contentVersion and the caller's _license)
// and, exactly when the class has a transcript, class-<N>.transcript.md
// (the transcript route's markdown); then media-manifest.json (every
// asset's mediaId, lessonId, type, mimeType, bytes and raw location),
// LICENSE.txt (the terms, the organisation, lic and tag) and last
// manifest.json (format, contentVersion, the organisation's stamp, lic and
// tag, the classes with their files, and the size and SHA-256 of every
// other file as shipped). The manifest comes last because it hashes the
// files before it: every file is hashed as it is made and written before
// more than a few others are made (WriteZip may make a few classes ahead
// on an idle core), so a bundle is never whole in memory.
//
// The card bodies and spoken texts of the class files and transcripts
// carry the organisation's canaries (forensic.Canary): whitespace only.
// Only those texts are rendered per bundle; the rest of a class file is
// the lesson's rendering for the lesson routes (lessondoc), copied.
// Nothing in a bundle reads a clock (entries carry a fixed time), so its
// bytes depend only on the corpus (its contentVersion), the organisation,
// the envelope (which encodes the scope set) and the target: any origin
// rebuilds the same bytes from a link, with no shared store.
package export

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/forensic"
	"github.com/lectern-api/lectern/origin/lessondoc"
)

// Format names the bundle's layout, in its manifest.
const Format = "lectern-export/1"

// modTime is every archive entry's time: fixed, so that a bundle's bytes
// never depend on when it was built (the zip format's epoch).
var modTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// Stamp is the organisation a bundle is made for, as its manifest and
// licence name it.
type Stamp struct {
	OrgID   string `json:"orgId"`
	OrgName string `json:"orgName"`
}

// Target is what a bundle exports: one class of a subject, or all of its
// classes when Class is 0.
type Target struct {
	Subject *corpus.Subject
	Class   int // the class number, 1..Subject.ClassCount(); 0 for all
}

// Lessons are the target's classes in class order; nil when Class is out
// of range.
func (t Target) Lessons() []*corpus.Lesson {
	if t.Subject == nil || t.Class < 0 || t.Class > len(t.Subject.Lessons) {
		return nil
	}
	if t.Class == 0 {
		return t.Subject.Lessons
	}
	return t.Subject.Lessons[t.Class-1 : t.Class]
}

// Classes is the number of classes the bundle ships: the export result's
// classes, and the downloads an export bills (spec: Meters, one per class
// in a subject export, one for a class export).
func (t Target) Classes() int { return len(t.Lessons()) }

// Request is one bundle: for whom, under which envelope, of what.
type Request struct {
	Stamp Stamp
	// License is the caller's _license, as the export result carries it:
	// its tag encodes the organisation and the token's scope set.
	License forensic.Envelope
	Target  Target
}

// Config is a Builder's deployment settings.
type Config struct {
	// CanaryKey keys the canaries: subkey.Derive(secret, subkey.Canary).
	CanaryKey []byte
	// LicenseURL is the licence terms' address, named in LICENSE.txt
	// when set.
	LicenseURL string
}

// ErrNoClass is returned for a target with no class: the caller checks
// existence (404) before building.
var ErrNoClass = errors.New("export: the target has no class")

// Builder builds the bundles of one corpus. It is safe for concurrent
// use.
type Builder struct {
	corpus *corpus.Corpus
	docs   *lessondoc.Set
	cfg    Config
	work   sync.Pool // *work
	// helpers holds a token per helper goroutine making a zip's classes
	// ahead of its writer: one fewer than the CPUs, so that a download
	// uses an idle core and concurrent downloads do not pile goroutines
	// (and compressors) on busy ones.
	helpers chan struct{}

	transcripts transcripts
}

// New is the builder of c's bundles; docs are c's lesson renderings.
func New(c *corpus.Corpus, docs *lessondoc.Set, cfg Config) *Builder {
	return &Builder{corpus: c, docs: docs, cfg: cfg, helpers: make(chan struct{}, runtime.GOMAXPROCS(0)-1)}
}

// work is one builder goroutine's scratch: the file buffers, reused
// from file to file and bundle to bundle.
type work struct {
	buf []byte // a class file
	md  []byte // a transcript
}

func (b *Builder) getWork() *work {
	if w, ok := b.work.Get().(*work); ok {
		return w
	}
	return &work{}
}

func (b *Builder) putWork(w *work) {
	if cap(w.buf) > 4<<20 || cap(w.md) > 4<<20 {
		return // an outsized subject: let it go
	}
	b.work.Put(w)
}

// file is a file of the bundle as the manifest lists it.
type file struct {
	Name   string `json:"name"`
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// emitter receives the bundle's files in order; data is valid only
// during the call.
type emitter func(name string, data []byte) error

// walk makes the bundle's files one at a time and gives each to emit.
func (b *Builder) walk(req Request, emit emitter) error {
	lessons := req.Target.Lessons()
	if len(lessons) == 0 {
		return ErrNoClass
	}
	w := b.getWork()
	defer b.putWork(w)
	m := b.newManifest(req, lessons)
	put := func(name string, data []byte) error {
		sum := sha256.Sum256(data)
		m.add(name, len(data), sum)
		return emit(name, data)
	}
	for _, l := range lessons {
		class, transcript := b.classFiles(w, req, l)
		m.addClass(l)
		if err := put(classFileName(l, false), class); err != nil {
			return err
		}
		if transcript != nil {
			if err := put(classFileName(l, true), transcript); err != nil {
				return err
			}
		}
	}
	return b.finish(w, req, lessons, m, put, emit)
}

// classFiles makes l's files into w's buffers: its class file and, when
// it has one, its transcript (nil when not). Both are valid until w's
// next use. The texts are marked for the organisation; the rest of the
// class file is the set's rendering of l, copied.
func (b *Builder) classFiles(w *work, req Request, l *corpus.Lesson) (class, transcript []byte) {
	m := b.marked(req.Stamp.OrgID, l)
	w.buf = b.docs.AppendTail(b.docs.Doc(l).AppendFullAs(w.buf[:0], m, nil), req.License)
	if !l.HasTranscript {
		return w.buf, nil
	}
	w.md = lessondoc.AppendMarkdown(w.md[:0], m)
	return w.buf, w.md
}

// finish makes the files after the classes' with w's buffers: the media
// manifest and the licence through put, then the manifest, listing every
// file put, through emit.
func (b *Builder) finish(w *work, req Request, lessons []*corpus.Lesson, m *manifest, put, emit emitter) error {
	w.buf = b.mediaManifest(w.buf[:0], lessons)
	if err := put("media-manifest.json", w.buf); err != nil {
		return err
	}
	w.buf = b.licenceText(w.buf[:0], req)
	if err := put("LICENSE.txt", w.buf); err != nil {
		return err
	}
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return emit("manifest.json", append(body, '\n'))
}

// marked is a copy of l whose card bodies and spoken texts carry org's
// canaries; everything else is l's.
func (b *Builder) marked(org string, l *corpus.Lesson) *corpus.Lesson {
	c := forensic.NewCanary(b.cfg.CanaryKey, org, l.ID)
	m := *l
	m.Cards = make([]*corpus.Card, len(l.Cards))
	cards := make([]corpus.Card, len(l.Cards))
	for i, card := range l.Cards {
		cards[i] = *card
		mc := &cards[i]
		mc.Body = c.Mark(card.Body)
		if card.NarrationScript != "" {
			mc.NarrationScript = c.Mark(card.NarrationScript)
		}
		if card.VideoVoiceover != "" {
			mc.VideoVoiceover = c.Mark(card.VideoVoiceover)
		}
		m.Cards[i] = mc
	}
	return &m
}
