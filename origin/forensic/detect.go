package forensic

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math"
	"path"
	"strings"
)

// Detection (issue 16, point 6): given leaked bytes as found, name the
// organisation they were served to, from the envelope's tag when it is
// still there and from the canaries otherwise, saying what matched.
//
// A leak may be a lesson document or a bundle's class file (JSON, in any
// re-serialisation), a bundle's transcript markdown, its manifest, a
// bundle whole (a zip, the inline data in base64, a tar.gz or a tar), or
// an inline export result holding the data.

// Keys are the deployment's forensic keys: subkey.Tag's and
// subkey.Canary's.
type Keys struct {
	Tag, Canary []byte
}

// Detector names the organisation of a leak among candidates.
type Detector struct {
	Keys Keys
	// Orgs are the candidate organisations' ids.
	Orgs []string
	// TranscriptLesson names the lesson of a transcript's markdown found
	// without a manifest to name it (the markdown does not); nil, or not
	// ok, and its canaries are not read.
	TranscriptLesson func(markdown []byte) (lessonID string, ok bool)
}

// Finding is what Detect found.
type Finding struct {
	// OrgID is the organisation named, "" when nothing matched: the tag's
	// when one decodes, else the canaries' when they pass the threshold.
	OrgID string `json:"orgId"`
	// Scopes is the token's scope set the tag encodes (full names,
	// space-separated), "" when no tag decoded.
	Scopes string `json:"scopes"`
	// Matched is the evidence, a row per tag read and per organisation
	// whose canaries passed.
	Matched []Match `json:"matched"`
}

// Match is one piece of evidence.
type Match struct {
	By    string `json:"by"` // "tag" or "canary"
	OrgID string `json:"orgId"`
	// File is the file of a bundle the evidence is from ("" for a file
	// found alone); Tag the tag read.
	File string `json:"file,omitempty"`
	Tag  string `json:"tag,omitempty"`
	// For canaries: the lessons read, the independent bits found and how
	// many agree with OrgID's marks, and the chance that a text not
	// marked for OrgID agrees as well, over every candidate (Bonferroni).
	LessonIDs []string `json:"lessonIds,omitempty"`
	Bits      int      `json:"bits,omitempty"`
	Agreeing  int      `json:"agreeing,omitempty"`
	Chance    float64  `json:"chance,omitempty"`
}

// ErrUnrecognised is returned for bytes that are none of the forms a leak
// takes.
var ErrUnrecognised = errors.New("forensic: not a lesson document, bundle file or bundle")

// maxChance is the largest chance of a false match (over all candidates)
// at which canaries name an organisation.
const maxChance = 1e-6

// maxEntry bounds what is read of one archive entry, and maxTotal of an
// archive, against decompression bombs.
const (
	maxEntry = 64 << 20
	maxTotal = 512 << 20
)

// Detect names the organisation of leak. An unrecognised form is
// ErrUnrecognised; a recognised one in which nothing matched is a Finding
// with no OrgID.
func (d *Detector) Detect(leak []byte) (Finding, error) {
	var f finder
	if err := f.read(d, "", leak, 0); err != nil {
		return Finding{}, err
	}
	return f.conclude(d), nil
}

// finder gathers the texts and tags of a leak, file by file.
type finder struct {
	tags []Match
	// texts are the canaried texts by lesson, in order of appearance;
	// files are their files.
	lessons []string
	texts   map[string][]string
	files   map[string]string
	// manifestLessons maps a bundle's transcript file names to lessons.
	manifestLessons map[string]string
	// pendingMD are transcripts met before the manifest named them.
	pendingMD []namedBytes
	total     int64
}

type namedBytes struct {
	name string
	data []byte
}

func (f *finder) addText(file, lesson string, texts []string) {
	if f.texts == nil {
		f.texts, f.files = map[string][]string{}, map[string]string{}
	}
	if _, ok := f.texts[lesson]; !ok {
		f.lessons = append(f.lessons, lesson)
		f.files[lesson] = file
	}
	f.texts[lesson] = append(f.texts[lesson], texts...)
}

// read recognises one file (or a whole bundle) and gathers from it.
func (f *finder) read(d *Detector, name string, data []byte, depth int) error {
	if depth > 4 { // a result holding base64 of a gzip of a tar of files
		return ErrUnrecognised
	}
	trimmed := bytes.TrimSpace(data)
	switch {
	case bytes.HasPrefix(data, []byte("PK\x03\x04")):
		return f.readZip(d, data, depth)
	case bytes.HasPrefix(data, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return ErrUnrecognised
		}
		return f.readTar(d, zr, depth)
	case len(data) >= 512 && string(data[257:262]) == "ustar":
		return f.readTar(d, bytes.NewReader(data), depth)
	case bytes.HasPrefix(trimmed, []byte("{")):
		return f.readJSON(d, name, trimmed, depth)
	case bytes.HasPrefix(trimmed, []byte("H4sI")): // base64 of a gzip member
		raw, err := base64.StdEncoding.DecodeString(string(trimmed))
		if err != nil {
			return ErrUnrecognised
		}
		return f.read(d, name, raw, depth+1)
	case bytes.HasPrefix(trimmed, []byte("## ")):
		f.readMarkdown(d, name, data)
		return nil
	}
	return ErrUnrecognised
}

// doc is what detection reads of a JSON leak: a lesson document or class
// file (lessonId, the canaried texts, _license), a manifest (_license,
// classes) or an export result (data, _license).
type doc struct {
	LessonID string `json:"lessonId"`
	Cards    []struct {
		Body string `json:"body"`
	} `json:"cards"`
	NarrationText   []spoken `json:"narrationText"`
	VideoTranscript []spoken `json:"videoTranscript"`
	License         *struct {
		Tag string `json:"tag"`
	} `json:"_license"`
	Classes []struct {
		LessonID string   `json:"lessonId"`
		Files    []string `json:"files"`
	} `json:"classes"`
	Data *string `json:"data"`
}

type spoken struct {
	Text string `json:"text"`
}

// LessonTexts are the canaried texts of a class file or lesson document:
// its card bodies, narration and video transcript texts.
func LessonTexts(lessonJSON []byte) ([]string, error) {
	var v doc
	if err := json.Unmarshal(lessonJSON, &v); err != nil {
		return nil, err
	}
	return v.texts(), nil
}

func (v *doc) texts() []string {
	var out []string
	for _, c := range v.Cards {
		out = append(out, c.Body)
	}
	for _, s := range v.NarrationText {
		out = append(out, s.Text)
	}
	for _, s := range v.VideoTranscript {
		out = append(out, s.Text)
	}
	return out
}

func (f *finder) readJSON(d *Detector, name string, data []byte, depth int) error {
	var v doc
	if err := json.Unmarshal(data, &v); err != nil {
		return ErrUnrecognised
	}
	if v.License != nil && v.License.Tag != "" {
		f.tags = append(f.tags, Match{By: "tag", File: name, Tag: v.License.Tag})
	}
	if v.LessonID != "" && len(v.Cards) > 0 {
		f.addText(name, v.LessonID, v.texts())
	}
	for _, c := range v.Classes {
		for _, file := range c.Files {
			if strings.HasSuffix(file, ".transcript.md") {
				if f.manifestLessons == nil {
					f.manifestLessons = map[string]string{}
				}
				f.manifestLessons[file] = c.LessonID
			}
		}
	}
	if v.Data != nil {
		return f.read(d, name, []byte(*v.Data), depth+1)
	}
	if v.License == nil && v.LessonID == "" && v.Classes == nil {
		return ErrUnrecognised
	}
	return nil
}

func (f *finder) readMarkdown(d *Detector, name string, md []byte) {
	if lesson, ok := f.manifestLessons[path.Base(name)]; ok {
		f.addText(name, lesson, []string{markdownText(md)})
		return
	}
	if name != "" { // in a bundle: the manifest may come later
		f.pendingMD = append(f.pendingMD, namedBytes{name, md})
		return
	}
	if d.TranscriptLesson != nil {
		if lesson, ok := d.TranscriptLesson(md); ok {
			f.addText(name, lesson, []string{markdownText(md)})
		}
	}
}

// markdownText is a transcript's markdown without its heading lines (the
// labels carry no marks).
func markdownText(md []byte) string {
	lines := strings.Split(string(md), "\n")
	kept := lines[:0]
	for _, l := range lines {
		if !strings.HasPrefix(l, "## ") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "\n")
}

// entry reads one archive entry, bounded.
func (f *finder) entry(d *Detector, name string, r io.Reader, depth int) error {
	data, err := io.ReadAll(io.LimitReader(r, maxEntry+1))
	if err != nil {
		return ErrUnrecognised
	}
	f.total += int64(len(data))
	if len(data) > maxEntry || f.total > maxTotal {
		return errors.New("forensic: the archive is too large to read")
	}
	base := path.Base(name)
	switch {
	case strings.HasSuffix(base, ".json"):
		// media-manifest.json and files of other shapes carry nothing.
		if err := f.readJSON(d, name, data, depth); err != nil && !errors.Is(err, ErrUnrecognised) {
			return err
		}
	case strings.HasSuffix(base, ".transcript.md"):
		f.readMarkdown(d, name, data)
	}
	return nil // LICENSE.txt and others carry nothing detection reads
}

func (f *finder) readZip(d *Detector, data []byte, depth int) error {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return ErrUnrecognised
	}
	for _, zf := range zr.File {
		rc, err := zf.Open()
		if err != nil {
			return ErrUnrecognised
		}
		err = f.entry(d, zf.Name, rc, depth+1)
		rc.Close()
		if err != nil {
			return err
		}
	}
	f.flushPending(d)
	return nil
}

func (f *finder) readTar(d *Detector, r io.Reader, depth int) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return ErrUnrecognised
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if err := f.entry(d, h.Name, tr, depth+1); err != nil {
			return err
		}
	}
	f.flushPending(d)
	return nil
}

// flushPending reads the transcripts a bundle's manifest named after
// them; the others are matched as if found alone.
func (f *finder) flushPending(d *Detector) {
	pending := f.pendingMD
	f.pendingMD = nil
	for _, p := range pending {
		if lesson, ok := f.manifestLessons[path.Base(p.name)]; ok {
			f.addText(p.name, lesson, []string{markdownText(p.data)})
		} else if d.TranscriptLesson != nil {
			if lesson, ok := d.TranscriptLesson(p.data); ok {
				f.addText(p.name, lesson, []string{markdownText(p.data)})
			}
		}
	}
}

// conclude decodes the tags and weighs the canaries of every candidate.
func (f *finder) conclude(d *Detector) Finding {
	var out Finding
	seen := map[string]bool{}
	for _, m := range f.tags {
		if seen[m.Tag] {
			continue // a bundle repeats its tag in every class file: one row
		}
		seen[m.Tag] = true
		org, s, ok := Decode(d.Keys.Tag, m.Tag, d.Orgs)
		if !ok {
			continue
		}
		m.OrgID = org
		out.Matched = append(out.Matched, m)
		if out.OrgID == "" {
			out.OrgID, out.Scopes = org, s.String()
		}
	}
	if len(f.lessons) == 0 {
		return out
	}
	orgs := d.Orgs
	if out.OrgID != "" {
		orgs = []string{out.OrgID} // the canaries confirm the tag
	}
	for _, org := range orgs {
		m := Match{By: "canary", OrgID: org}
		for _, lesson := range f.lessons {
			bits, agreeing := NewCanary(d.Keys.Canary, org, lesson).MatchTexts(f.texts[lesson])
			m.Bits += bits
			m.Agreeing += agreeing
			m.LessonIDs = append(m.LessonIDs, lesson)
			if m.Bits >= 32 && m.Agreeing < m.Bits*3/4 {
				break // about half agree: not this organisation's
			}
		}
		if len(f.lessons) == 1 {
			m.File = f.files[f.lessons[0]]
		}
		m.Chance = math.Min(1, float64(len(d.Orgs))*tail(m.Bits, m.Agreeing))
		if m.Bits > 0 && m.Chance <= maxChance {
			out.Matched = append(out.Matched, m)
			if out.OrgID == "" {
				out.OrgID = org
			}
		}
	}
	return out
}

// tail is the chance that k or more of n fair coins come up heads: how
// likely a text not marked for an organisation agrees with its marks at
// k of n sites.
func tail(n, k int) float64 {
	if k <= 0 {
		return 1
	}
	p := 0.0
	for i := k; i <= n; i++ {
		lg := lgamma(n+1) - lgamma(i+1) - lgamma(n-i+1) - float64(n)*math.Ln2
		p += math.Exp(lg)
	}
	return p
}

func lgamma(n int) float64 {
	v, _ := math.Lgamma(float64(n))
	return v
}
