package export

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/forensic"
	"github.com/lectern-api/lectern/shared/jsonenc"
)

// manifest is manifest.json.
type manifest struct {
	Format         string            `json:"format"`
	ContentVersion string            `json:"contentVersion"`
	Stamp          Stamp             `json:"stamp"`
	License        forensic.Envelope `json:"_license"`
	// Subject is "<tier>/<slug>"; ClassNum is set for a class export.
	Subject  string          `json:"subject"`
	ClassNum *int            `json:"classNum"`
	Classes  []manifestClass `json:"classes"`
	// Files are every other file of the bundle, in archive order, as
	// shipped.
	Files []file `json:"files"`
}

// manifestClass is a class of the bundle and the names of its files.
type manifestClass struct {
	LessonID string   `json:"lessonId"`
	ClassNum int      `json:"classNum"`
	Title    string   `json:"title"`
	Files    []string `json:"files"`
}

// newManifest is the manifest of req's bundle of lessons, before its
// classes and files are added.
func (b *Builder) newManifest(req Request, lessons []*corpus.Lesson) *manifest {
	m := &manifest{Format: Format, ContentVersion: b.corpus.ContentVersion, Stamp: req.Stamp, License: req.License,
		Subject: req.Target.Subject.Ref(), Classes: make([]manifestClass, 0, len(lessons)),
		Files: make([]file, 0, 2*len(lessons)+2)}
	if req.Target.Class > 0 {
		m.ClassNum = &req.Target.Class
	}
	return m
}

// addClass lists l among the classes, with its files: the class file and,
// when l has one, the transcript.
func (m *manifest) addClass(l *corpus.Lesson) {
	mc := manifestClass{LessonID: l.ID, ClassNum: l.Number, Title: l.Title, Files: []string{classFileName(l, false)}}
	if l.HasTranscript {
		mc.Files = append(mc.Files, classFileName(l, true))
	}
	m.Classes = append(m.Classes, mc)
}

// classFileName is the name of l's class file, or of its transcript.
func classFileName(l *corpus.Lesson, transcript bool) string {
	if transcript {
		return "class-" + strconv.Itoa(l.Number) + ".transcript.md"
	}
	return "class-" + strconv.Itoa(l.Number) + ".json"
}

// add lists a file as shipped: its name, size and SHA-256.
func (m *manifest) add(name string, size int, sum [sha256.Size]byte) {
	m.Files = append(m.Files, file{Name: name, Bytes: size, SHA256: hex.EncodeToString(sum[:])})
}

// mediaManifest appends media-manifest.json: {contentVersion, items}, an
// item a line, every asset of the lessons in their order (spec: Bundle
// contents, "every asset's id and raw location").
func (b *Builder) mediaManifest(dst []byte, lessons []*corpus.Lesson) []byte {
	dst = append(dst, `{"contentVersion":`...)
	dst = jsonenc.String(dst, b.corpus.ContentVersion)
	dst = append(dst, `,"items":[`...)
	first := true
	for _, l := range lessons {
		for _, m := range l.Media {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(dst, "\n"+`{"mediaId":`...)
			dst = jsonenc.String(dst, m.ID)
			dst = append(dst, `,"lessonId":`...)
			dst = jsonenc.String(dst, l.ID)
			dst = append(dst, `,"type":`...)
			dst = jsonenc.String(dst, m.Type)
			dst = append(dst, `,"mimeType":`...)
			dst = jsonenc.String(dst, m.MIME)
			dst = append(dst, `,"bytes":`...)
			dst = strconv.AppendInt(dst, m.Bytes, 10)
			if m.SHA256 != "" {
				dst = append(dst, `,"sha256":"`...)
				dst = append(append(dst, m.SHA256...), '"')
			}
			dst = append(dst, `,"location":`...)
			dst = jsonenc.String(dst, m.Location)
			dst = append(dst, '}')
		}
	}
	return append(dst, "\n]}\n"...)
}

// licenceText appends LICENSE.txt: the terms, the organisation, lic and
// tag.
func (b *Builder) licenceText(dst []byte, req Request) []byte {
	line := func(dst []byte, k, v string) []byte { return append(append(append(dst, k...), v...), '\n') }
	dst = append(dst, "Lectern curriculum content export\n\n"...)
	dst = line(dst, "Licensed to:     ", req.Stamp.OrgName+" ("+req.Stamp.OrgID+")")
	dst = line(dst, "Licence:         ", req.License.Lic)
	dst = line(dst, "Forensic tag:    ", req.License.Tag)
	dst = line(dst, "Content version: ", b.corpus.ContentVersion)
	if b.cfg.LicenseURL != "" {
		dst = line(dst, "Terms:           ", b.cfg.LicenseURL)
	}
	return append(dst, `
This bundle is licensed to the organization named above, for its own use,
under the curriculum content licence agreement its licence identifier
names. Redistribution outside the licensed organization is not permitted.
The bundle carries the organization's forensic tag and, in its texts,
per-organization canaries: a copy found elsewhere identifies the
organization it was exported for.
`...)
}
