// Package changes is the change feed's model (issue #37; GET /v1/changes,
// docs/integrating.md): what each corpus version holds, part by part (each
// subject's contentDigest and own digest, each class's digest: Version),
// recorded in the database when the deployment first serves the version
// (store.Store.PinCorpusVersion), so that every origin and every restart
// answers alike; and what changed between two versions as an
// organisation's grants see it (Diff).
package changes

import (
	"encoding/binary"
	"errors"
	"slices"
	"strconv"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/licence"
)

// Version is what a corpus version holds, part by part.
type Version struct {
	Subjects []Subject // in bytewise order of Ref
}

// Subject is one subject of a version.
type Subject struct {
	Ref     string                      // <tier>/<slug>
	Digest  string                      // its contentDigest
	Own     [corpus.PartDigestSize]byte // its own fields' digest (corpus.Subject.OwnDigest)
	Classes [][corpus.PartDigestSize]byte
}

// Of is c's parts.
func Of(c *corpus.Corpus) *Version {
	v := &Version{Subjects: make([]Subject, 0, len(c.Subjects))}
	for _, s := range c.Subjects {
		sub := Subject{Ref: s.Ref(), Digest: s.ContentDigest, Own: s.OwnDigest,
			Classes: make([][corpus.PartDigestSize]byte, len(s.Lessons))}
		for i, l := range s.Lessons {
			sub.Classes[i] = l.Digest
		}
		v.Subjects = append(v.Subjects, sub)
	}
	slices.SortFunc(v.Subjects, func(a, b Subject) int {
		switch {
		case a.Ref < b.Ref:
			return -1
		case a.Ref > b.Ref:
			return 1
		}
		return 0
	})
	return v
}

// encoding opens an encoded Version: a new layout is a new magic.
const encoding = "lectern-corpus-parts/1\x00"

// maxClasses bounds a subject's classes in a decoded Version.
const maxClasses = 1 << 16

// Encode is v as the database keeps it: the magic, then per subject its
// ref and digest (each a uvarint length and bytes), its own digest, its
// class count (uvarint) and class digests; 16 bytes a class.
func (v *Version) Encode() []byte {
	n := len(encoding)
	for _, s := range v.Subjects {
		n += 2*binary.MaxVarintLen64 + len(s.Ref) + len(s.Digest) + corpus.PartDigestSize*(1+len(s.Classes)) + binary.MaxVarintLen64
	}
	b := make([]byte, 0, n+binary.MaxVarintLen64)
	b = append(b, encoding...)
	b = binary.AppendUvarint(b, uint64(len(v.Subjects)))
	for _, s := range v.Subjects {
		b = binary.AppendUvarint(b, uint64(len(s.Ref)))
		b = append(b, s.Ref...)
		b = binary.AppendUvarint(b, uint64(len(s.Digest)))
		b = append(b, s.Digest...)
		b = append(b, s.Own[:]...)
		b = binary.AppendUvarint(b, uint64(len(s.Classes)))
		for _, c := range s.Classes {
			b = append(b, c[:]...)
		}
	}
	return b
}

// errCorrupt is a Decode of bytes Encode did not write.
var errCorrupt = errors.New("changes: not an encoded corpus version")

// Decode reads what Encode wrote.
func Decode(b []byte) (*Version, error) {
	if len(b) < len(encoding) || string(b[:len(encoding)]) != encoding {
		return nil, errCorrupt
	}
	b = b[len(encoding):]
	uv := func() (uint64, bool) {
		x, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return x, true
	}
	str := func() (string, bool) {
		n, ok := uv()
		if !ok || n > uint64(len(b)) {
			return "", false
		}
		s := string(b[:n])
		b = b[n:]
		return s, true
	}
	digest := func(d *[corpus.PartDigestSize]byte) bool {
		if len(b) < len(d) {
			return false
		}
		copy(d[:], b)
		b = b[len(d):]
		return true
	}
	n, ok := uv()
	if !ok || n > uint64(len(b)) {
		return nil, errCorrupt
	}
	v := &Version{Subjects: make([]Subject, n)}
	for i := range v.Subjects {
		s := &v.Subjects[i]
		var ok1, ok2 bool
		s.Ref, ok1 = str()
		s.Digest, ok2 = str()
		if !ok1 || !ok2 || !digest(&s.Own) {
			return nil, errCorrupt
		}
		k, ok := uv()
		if !ok || k > maxClasses || k*corpus.PartDigestSize > uint64(len(b)) {
			return nil, errCorrupt
		}
		s.Classes = make([][corpus.PartDigestSize]byte, k)
		for j := range s.Classes {
			digest(&s.Classes[j])
		}
		if i > 0 && v.Subjects[i-1].Ref >= s.Ref {
			return nil, errCorrupt
		}
	}
	if len(b) != 0 {
		return nil, errCorrupt
	}
	return v, nil
}

// subject is the subject ref of v, or nil.
func (v *Version) subject(ref string) *Subject {
	i, ok := slices.BinarySearchFunc(v.Subjects, ref, func(s Subject, ref string) int {
		switch {
		case s.Ref < ref:
			return -1
		case s.Ref > ref:
			return 1
		}
		return 0
	})
	if !ok {
		return nil
	}
	return &v.Subjects[i]
}

// Change is what happened to a subject or a lesson between two versions.
type Change string

// The changes.
const (
	Added   Change = "added"
	Changed Change = "changed"
	Removed Change = "removed"
)

// SubjectChange is a subject that changed for the organisation.
type SubjectChange struct {
	Subject string // <tier>/<slug>
	Change  Change
	// ContentDigest and Classes are the subject's at the later version;
	// "" and 0 when it was removed.
	ContentDigest string
	Classes       int
	// OwnChanged: the subject's own fields changed (its name,
	// description, tags, difficulty or references), which its classes'
	// exports do not carry: a mirror re-exports the subject. Only on
	// Changed.
	OwnChanged bool
}

// LessonChange is a lesson (a class) that changed for the organisation.
type LessonChange struct {
	LessonID string // <tier>/<slug>/<classNum>
	Subject  string
	Change   Change
	// ContentDigest is the subject's at the later version; "" when the
	// subject was removed.
	ContentDigest string
}

// Diff is what changed from version from to version to for an
// organisation whose grants were was at from and are now at to: a
// subject it may read at one version and not the other (it left or
// entered the corpus or the grants) is added or removed with all its
// lessons; one it may read at both changed when its contentDigest did,
// with each lesson whose digest moved, and the lessons past the shorter
// class list added or removed. Subjects are in bytewise order of their
// ref, lessons in their subject's then class order.
func Diff(from, to *Version, was, now []string) ([]SubjectChange, []LessonChange) {
	var subjects []SubjectChange
	var lessons []LessonChange
	lesson := func(ref string, n int, c Change, digest string) {
		lessons = append(lessons, LessonChange{LessonID: ref + "/" + strconv.Itoa(n), Subject: ref, Change: c, ContentDigest: digest})
	}
	visible := func(v *Version, grants []string, ref string) *Subject {
		s := v.subject(ref)
		if s == nil {
			return nil
		}
		tier, slug := splitRef(ref)
		if licence.Entitled(grants, tier, slug) != nil {
			return nil
		}
		return s
	}
	for _, ref := range refs(from, to) {
		a, b := visible(from, was, ref), visible(to, now, ref)
		switch {
		case a == nil && b == nil:
		case a == nil:
			subjects = append(subjects, SubjectChange{Subject: ref, Change: Added, ContentDigest: b.Digest, Classes: len(b.Classes)})
			for i := range b.Classes {
				lesson(ref, i+1, Added, b.Digest)
			}
		case b == nil:
			subjects = append(subjects, SubjectChange{Subject: ref, Change: Removed})
			for i := range a.Classes {
				lesson(ref, i+1, Removed, "")
			}
		case a.Digest != b.Digest:
			subjects = append(subjects, SubjectChange{Subject: ref, Change: Changed, ContentDigest: b.Digest,
				Classes: len(b.Classes), OwnChanged: a.Own != b.Own})
			for i := range max(len(a.Classes), len(b.Classes)) {
				switch {
				case i >= len(a.Classes):
					lesson(ref, i+1, Added, b.Digest)
				case i >= len(b.Classes):
					lesson(ref, i+1, Removed, b.Digest)
				case a.Classes[i] != b.Classes[i]:
					lesson(ref, i+1, Changed, b.Digest)
				}
			}
		}
	}
	return subjects, lessons
}

// refs is every subject ref of a and b, in order, once.
func refs(a, b *Version) []string {
	out := make([]string, 0, len(b.Subjects))
	i, j := 0, 0
	for i < len(a.Subjects) || j < len(b.Subjects) {
		switch {
		case j == len(b.Subjects) || i < len(a.Subjects) && a.Subjects[i].Ref < b.Subjects[j].Ref:
			out = append(out, a.Subjects[i].Ref)
			i++
		case i == len(a.Subjects) || b.Subjects[j].Ref < a.Subjects[i].Ref:
			out = append(out, b.Subjects[j].Ref)
			j++
		default:
			out = append(out, a.Subjects[i].Ref)
			i++
			j++
		}
	}
	return out
}

func splitRef(ref string) (tier, slug string) {
	for i := 0; i < len(ref); i++ {
		if ref[i] == '/' {
			return ref[:i], ref[i+1:]
		}
	}
	return ref, ""
}
