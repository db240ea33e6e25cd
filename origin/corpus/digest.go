package corpus

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash"
)

// DigestPrefix begins every Subject.ContentDigest: the hash function, then
// 64 lowercase hex digits.
const DigestPrefix = "sha256:"

// digestDomain opens every digest's input: it names the encoding below, so
// that a change to what is hashed is a new domain, never a silent
// collision with the old one.
const digestDomain = "lectern-subject-content/1\x00"

// digester computes subjects' content digests (docs/decisions/lists-search-and-test-prep.md): a SHA-256 over what the corpus says of the
// subject that its export bundle is made from, in a canonical encoding,
// and nothing else — not the contentVersion, the organisation, its grants
// or the caller. Two corpora whose subject says the same things give it
// the same digest, whatever the files' layout, key order or date; a change
// to any class or media asset moves it.
//
// The encoding is prefix-free: a string is its uvarint length then its
// bytes, a list its uvarint length then its elements, an integer a varint,
// a boolean one byte, an optional value a presence byte then the value;
// fields go in the order of contentDigest. What the loader derives (ids,
// key terms, study time, coverage) is not hashed: it is a function of what
// is; the key terms' definitions, sentences of the bodies again, would
// hash much of the text twice, and SHA-256 over the content (73 MB of the
// full corpus) is most of the digest's cost.
//
// A digester is one loader goroutine's: it reuses its buffers from
// subject to subject.
type digester struct {
	h   hash.Hash
	buf []byte       // encoded, not yet hashed
	cfg bytes.Buffer // an interactive's config, compacted
	// part, when set, is fed what h is: the digest of one part of the
	// subject (its own fields, or one lesson) as it is encoded.
	part hash.Hash
}

// flushAt is the size at which the buffer is hashed and emptied.
const flushAt = 32 << 10

func (d *digester) flush() {
	d.write(d.buf)
	d.buf = d.buf[:0]
}

func (d *digester) write(b []byte) {
	d.h.Write(b)
	if d.part != nil {
		d.part.Write(b)
	}
}

// partDigest is the digest of the part encoded since begin, and ends it.
func (d *digester) partDigest(h hash.Hash) (sum [PartDigestSize]byte) {
	d.flush()
	d.part = nil
	var full [sha256.Size]byte
	copy(sum[:], h.Sum(full[:0]))
	return sum
}

// begin starts a part: what is encoded from now on feeds h (reset) too.
func (d *digester) begin(h hash.Hash) {
	d.flush()
	h.Reset()
	d.part = h
}

// text encodes s, a string or bytes: its length, then itself.
func text[T string | []byte](d *digester, s T) {
	d.buf = binary.AppendUvarint(d.buf, uint64(len(s)))
	if len(s) > flushAt {
		d.flush()
		d.write([]byte(s))
		return
	}
	d.buf = append(d.buf, s...)
	if len(d.buf) > flushAt {
		d.flush()
	}
}

func (d *digester) str(s string) { text(d, s) }

func (d *digester) strs(ss []string) {
	d.count(len(ss))
	for _, s := range ss {
		d.str(s)
	}
}

func (d *digester) count(n int) { d.buf = binary.AppendUvarint(d.buf, uint64(n)) }

func (d *digester) int(n int64) { d.buf = binary.AppendVarint(d.buf, n) }

func (d *digester) bool(b bool) {
	if b {
		d.buf = append(d.buf, 1)
	} else {
		d.buf = append(d.buf, 0)
	}
}

func (d *digester) refs(rs []SubjectRef) {
	d.count(len(rs))
	for _, r := range rs {
		d.str(r.Tier)
		d.str(r.Slug)
	}
}

// PartDigestSize is the size of a lesson's and a subject's own digest
// (Lesson.Digest, Subject.OwnDigest): the first half of a SHA-256, enough
// to tell one version of a part from another (nothing is at stake if two
// collide but a class not fetched again by a delta sync).
const PartDigestSize = 16

// contentDigest is s's ContentDigest; s's lessons are parsed and its
// references resolved. It sets s.OwnDigest and each lesson's Digest on
// the way: the SHA-256 of the encoding of the subject's own fields, and
// of each lesson, as they go into the subject's digest (the change feed
// compares them between versions).
func (d *digester) contentDigest(s *Subject) string {
	if d.h == nil {
		d.h = sha256.New()
	}
	d.h.Reset()
	d.buf = append(d.buf[:0], digestDomain...)
	part := sha256.New()

	// The subject's own fields (its coverage and class count are derived
	// from the classes).
	d.begin(part)
	d.str(s.Tier)
	d.str(s.Slug)
	d.str(s.Name)
	d.str(s.Description)
	d.str(s.Difficulty)
	d.strs(s.Tags)
	d.refs(s.Prerequisites)
	d.refs(s.Related)
	s.OwnDigest = d.partDigest(part)

	d.count(len(s.Lessons))
	for _, l := range s.Lessons {
		d.begin(part)
		d.lesson(l)
		l.Digest = d.partDigest(part)
	}
	d.flush()
	var sum [sha256.Size]byte
	return DigestPrefix + hex.EncodeToString(d.h.Sum(sum[:0]))
}

// lesson encodes what a bundle's class file, transcript, manifest entry
// and media-manifest rows are made from: the lesson at full detail with
// every include section, and each asset's type, MIME type, size, duration
// and raw location (its id is its lesson's, card's and type).
func (d *digester) lesson(l *Lesson) {
	d.int(int64(l.Number))
	d.str(l.Title)
	d.str(l.Subtitle)
	d.bool(l.HasVideo)
	d.bool(l.HasNarration)
	d.bool(l.HasTranscript)
	// The cards hold the lesson's media: l.Media is theirs in card order.
	d.count(len(l.Cards))
	for _, c := range l.Cards {
		d.str(c.ID)
		d.str(c.Label)
		d.str(c.Body)
		d.strs(c.KeyPoints)
		d.str(c.IllustrationAlt)
		d.bool(c.Narrated)
		d.str(c.NarrationScript)
		d.str(c.VideoVoiceover)
		d.count(len(c.Media))
		for _, m := range c.Media {
			d.str(m.Type)
			d.str(m.MIME)
			d.int(m.Bytes)
			d.int(int64(m.DurationSec))
			d.str(m.Location)
			if m.SHA256 != "" { // absent: the digests of corpora without it stay as they were
				d.str("sha256:" + m.SHA256)
			}
		}
	}
	d.count(len(l.Quiz))
	for _, q := range l.Quiz {
		d.str(q.Question)
		d.strs(q.Options)
		d.int(int64(q.AnswerIndex))
	}
	d.count(len(l.InlineChecks))
	for _, c := range l.InlineChecks {
		d.str(c.AfterCard)
		d.str(c.Question)
		d.strs(c.Options)
		d.int(int64(c.AnswerIndex))
		d.strs(c.Hints)
		d.str(c.Rationale)
	}
	d.count(len(l.Interactives))
	for _, it := range l.Interactives {
		d.str(it.ID)
		d.str(it.Card)
		d.str(it.Kind)
		d.str(it.Prompt)
		// Compacted, as the lesson renders it: a change of layout alone
		// changes no bundle. Load has checked that it is an object; were
		// it not valid JSON, its bytes as stored stand in.
		d.cfg.Reset()
		if err := json.Compact(&d.cfg, it.Config); err != nil {
			text(d, it.Config)
		} else {
			text(d, d.cfg.Bytes())
		}
	}
	d.bool(l.WorkedExample != nil)
	if w := l.WorkedExample; w != nil {
		d.str(w.Problem)
		d.strs(w.Steps)
		d.str(w.Answer)
	}
}
