// Package corpus loads and validates a Lectern corpus directory (format:
// docs/corpus-format.md) and holds it in memory with the indexes the origin
// serves from: tiers in canonical order, subjects by (tier, slug) and by
// slug, lessons by lessonId, media by mediaId, and test-prep tests,
// sections and items in stable order. It also derives what the format does
// not store: media ids, each lesson's key terms and estimated study time,
// and per-subject coverage.
//
// The format's JSON shapes are the types of format.go: Load decodes them,
// and the generator, origin/corpus/gen, encodes them.
//
// Load never panics on bad input: every fault is an *Error naming the file
// and the field path, such as
//
//	lessons/high/algebra.json: classes[3].cards[2].id: "C 2" is not a valid card id
package corpus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/lectern-api/lectern/shared/id"
)

// Format is the only corpus format this package reads.
const Format = "lectern-corpus/1"

// TestSections are the spec's tests and their sections, in order
// (spec: Test prep).
var TestSections = []struct {
	Test     string
	Sections []string
}{
	{"digital-sat", []string{"rw", "math"}},
	{"act", []string{"english", "math", "reading", "science"}},
	{"psat-nmsqt", []string{"rw", "math"}},
	{"caaspp", []string{"ela", "math", "science"}},
}

// Difficulties are the legal subject difficulties, and ItemDifficulties
// the legal test-prep item difficulties.
var (
	Difficulties     = []string{"beginner", "intermediate", "advanced"}
	ItemDifficulties = []string{"easy", "medium", "hard"}
)

// Error is a corpus fault: the file (relative to the corpus directory, with
// forward slashes), the field path inside it (empty for whole-file faults)
// and what is wrong.
type Error struct {
	File  string
	Field string
	Msg   string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.File + ": " + e.Msg
	}
	return e.File + ": " + e.Field + ": " + e.Msg
}

func errf(file, field, format string, a ...any) *Error {
	return &Error{File: file, Field: field, Msg: fmt.Sprintf(format, a...)}
}

var versionRE = regexp.MustCompile(`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])\+[0-9A-Za-z]{1,64}$`)

// Load reads the corpus in dir, validates all of it and builds the indexes.
// Any fault is returned as an *Error; Load never panics on bad input.
func Load(dir string) (c *Corpus, err error) {
	defer func() {
		// Belt and braces for a server that reloads operator data: a bug
		// here must not take the origin down. Tests fuzz without this.
		if p := recover(); p != nil {
			c, err = nil, fmt.Errorf("corpus %s: internal error: %v", dir, p)
		}
	}()
	return load(dir)
}

func load(dir string) (*Corpus, error) {
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errf(name, "", "file not found")
		}
		if err != nil {
			return nil, errf(name, "", "%v", err)
		}
		return b, nil
	}

	var man ManifestJSON
	b, err := read("corpus.json")
	if err != nil {
		return nil, err
	}
	if err := decode("corpus.json", b, &man); err != nil {
		return nil, err
	}
	if man.Format != Format {
		return nil, errf("corpus.json", "format", "%q is not a supported format (want %q)", man.Format, Format)
	}
	if !versionRE.MatchString(man.ContentVersion) {
		return nil, errf("corpus.json", "contentVersion", "%q is not <YYYY-MM-DD>+<hash>", man.ContentVersion)
	}
	if man.Counts == nil {
		return nil, errf("corpus.json", "counts", "missing")
	}
	c := &Corpus{
		Dir: dir, Format: man.Format, ContentVersion: man.ContentVersion,
		tiers: map[string]*Tier{}, subjects: map[string]*Subject{}, slugs: map[string][]string{},
		lessons: map[string]*Lesson{}, media: map[string]*Media{}, tests: map[string]*Test{},
	}

	// The file list: every file of the corpus, each once.
	listed := map[string]int{}
	var testFiles []string
	for i, f := range man.Files {
		field := fmt.Sprintf("files[%d]", i)
		if f == "" || strings.HasPrefix(f, "/") || strings.Contains(f, "\\") || path.Clean(f) != f || strings.HasPrefix(f, "../") || f == ".." {
			return nil, errf("corpus.json", field, "%q is not a clean relative path", f)
		}
		if j, dup := listed[f]; dup {
			return nil, errf("corpus.json", field, "%q is listed twice (also files[%d])", f, j)
		}
		listed[f] = i
		switch {
		case f == "tiers.json" || f == "subjects.json":
		case strings.HasPrefix(f, "lessons/"):
		case strings.HasPrefix(f, "testprep/") && strings.HasSuffix(f, ".json") && strings.Count(f, "/") == 1:
			testFiles = append(testFiles, f)
		case f == "corpus.json":
			return nil, errf("corpus.json", field, "the manifest does not list itself")
		default:
			return nil, errf("corpus.json", field, "%q is not a corpus file (tiers.json, subjects.json, lessons/<tier>/<slug>.json, testprep/<test>.json)", f)
		}
	}
	for _, need := range []string{"tiers.json", "subjects.json"} {
		if _, ok := listed[need]; !ok {
			return nil, errf("corpus.json", "files", "%s is not listed", need)
		}
	}

	if err := c.loadTiers(read); err != nil {
		return nil, err
	}
	if err := c.loadSubjects(read, listed, man.Files); err != nil {
		return nil, err
	}
	if err := c.loadLessons(read); err != nil {
		return nil, err
	}
	if err := c.loadTests(read, testFiles); err != nil {
		return nil, err
	}

	c.Counts.Tiers = len(c.Tiers)
	c.Counts.Subjects = len(c.Subjects)
	checks := []struct {
		name string
		want *int
		got  int
	}{
		{"tiers", man.Counts.Tiers, c.Counts.Tiers},
		{"subjects", man.Counts.Subjects, c.Counts.Subjects},
		{"classes", man.Counts.Classes, c.Counts.Classes},
		{"media", man.Counts.Media, c.Counts.Media},
		{"testprepItems", man.Counts.TestprepItems, c.Counts.TestprepItems},
	}
	for _, k := range checks {
		if k.want == nil {
			return nil, errf("corpus.json", "counts."+k.name, "missing")
		}
		if *k.want != k.got {
			return nil, errf("corpus.json", "counts."+k.name, "says %d but the corpus has %d", *k.want, k.got)
		}
	}
	return c, nil
}

// decode unmarshals one whole JSON document strictly: unknown fields,
// trailing data and wrong types are faults naming the file.
func decode(file string, data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(file, data, err)
	}
	if _, err := dec.Token(); err == nil {
		off := dec.InputOffset()
		line, col := lineCol(data, off)
		return errf(file, "", "invalid JSON at line %d, column %d (byte offset %d): data after the top-level value", line, col, off)
	}
	return nil
}

func jsonError(file string, data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		// Offset counts the bytes read, the bad one included.
		off := max(syn.Offset-1, 0)
		line, col := lineCol(data, off)
		return errf(file, "", "invalid JSON at line %d, column %d (byte offset %d): %s", line, col, off, syn.Error())
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "(top level)"
		}
		line, col := lineCol(data, typ.Offset)
		return errf(file, field, "wrong type: JSON %s where %s is expected (line %d, column %d, offset %d)", typ.Value, jsonKind(typ.Type), line, col, typ.Offset)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return errf(file, "", "invalid JSON: unexpected end of input (offset %d)", len(data))
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return errf(file, "", "invalid JSON: %s", msg)
}

// jsonKind names a Go type as the JSON kind it decodes from. It goes by
// the type's kind, not its name: a struct whose name or fields happen to
// spell "int" or "string" is still an object.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	}
	return "an object"
}

func lineCol(data []byte, off int64) (int, int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	pre := data[:off]
	line := bytes.Count(pre, []byte{'\n'}) + 1
	col := int(off) - bytes.LastIndexByte(pre, '\n') // 1-based; -1 when no newline
	return line, col
}

func (c *Corpus) loadTiers(read func(string) ([]byte, error)) error {
	const file = "tiers.json"
	b, err := read(file)
	if err != nil {
		return err
	}
	var tj TiersJSON
	if err := decode(file, b, &tj); err != nil {
		return err
	}
	if len(tj.Tiers) == 0 {
		return errf(file, "tiers", "no tiers")
	}
	for i, t := range tj.Tiers {
		f := fmt.Sprintf("tiers[%d]", i)
		if !id.ValidTier(t.Tier) {
			return errf(file, f+".tier", "%q is not a tier (want one of %s)", t.Tier, strings.Join(id.Tiers, ", "))
		}
		if c.tiers[t.Tier] != nil {
			return errf(file, f+".tier", "duplicate tier %q", t.Tier)
		}
		if strings.TrimSpace(t.Label) == "" {
			return errf(file, f+".label", "missing")
		}
		c.tiers[t.Tier] = &Tier{Name: t.Tier, Label: t.Label}
	}
	for _, name := range id.Tiers {
		if t := c.tiers[name]; t != nil {
			c.Tiers = append(c.Tiers, t)
		}
	}
	return nil
}

func (c *Corpus) loadSubjects(read func(string) ([]byte, error), listed map[string]int, files []string) error {
	const file = "subjects.json"
	b, err := read(file)
	if err != nil {
		return err
	}
	var sj SubjectsJSON
	if err := decode(file, b, &sj); err != nil {
		return err
	}
	index := map[string]int{}
	var subs []*Subject
	for i, s := range sj.Subjects {
		f := fmt.Sprintf("subjects[%d]", i)
		if !id.ValidSlug(s.Slug) {
			return errf(file, f+".slug", "%q is not a valid slug (^[a-z0-9]+(-[a-z0-9]+)*$, at most %d bytes)", s.Slug, id.MaxSlugLen)
		}
		if !id.ValidTier(s.Tier) {
			return errf(file, f+".tier", "%q is not a tier (want one of %s)", s.Tier, strings.Join(id.Tiers, ", "))
		}
		if c.tiers[s.Tier] == nil {
			return errf(file, f+".tier", "tier %q is not in tiers.json", s.Tier)
		}
		ref := s.Tier + "/" + s.Slug
		if j, dup := index[ref]; dup {
			return errf(file, f+".slug", "duplicate slug %q in tier %q (also subjects[%d])", s.Slug, s.Tier, j)
		}
		index[ref] = i
		if strings.TrimSpace(s.Name) == "" {
			return errf(file, f+".name", "missing")
		}
		if !oneOf(s.Difficulty, Difficulties) {
			return errf(file, f+".difficulty", "%q is not one of %s", s.Difficulty, strings.Join(Difficulties, ", "))
		}
		for k, t := range s.Tags {
			if strings.TrimSpace(t) == "" {
				return errf(file, fmt.Sprintf("%s.tags[%d]", f, k), "empty tag")
			}
		}
		lf := "lessons/" + ref + ".json"
		if _, ok := listed[lf]; !ok {
			return errf("corpus.json", "files", "%s (classes of subjects[%d] %s) is not listed", lf, i, ref)
		}
		subs = append(subs, &Subject{
			Tier: s.Tier, Slug: s.Slug, Name: s.Name, Description: s.Description,
			Difficulty: s.Difficulty, Tags: nonNil(s.Tags),
		})
	}
	// References resolve only once every subject is known.
	for i, s := range sj.Subjects {
		var err error
		if subs[i].Prerequisites, err = refs(file, fmt.Sprintf("subjects[%d].prerequisites", i), s.Prerequisites, index, subs[i].Ref()); err != nil {
			return err
		}
		if subs[i].Related, err = refs(file, fmt.Sprintf("subjects[%d].related", i), s.Related, index, subs[i].Ref()); err != nil {
			return err
		}
	}
	// Every lessons/ file must belong to a subject.
	for i, f := range files {
		if !strings.HasPrefix(f, "lessons/") {
			continue
		}
		ref := strings.TrimSuffix(strings.TrimPrefix(f, "lessons/"), ".json")
		if _, ok := index[ref]; !ok || !strings.HasSuffix(f, ".json") {
			return errf("corpus.json", fmt.Sprintf("files[%d]", i), "%q is not the lesson file of any subject in subjects.json", f)
		}
	}

	sort.SliceStable(subs, func(i, j int) bool {
		a, b := subs[i], subs[j]
		if ra, rb := id.TierRank(a.Tier), id.TierRank(b.Tier); ra != rb {
			return ra < rb
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Slug < b.Slug
	})
	c.Subjects = subs
	for _, s := range subs {
		c.subjects[s.Ref()] = s
		t := c.tiers[s.Tier]
		t.Subjects = append(t.Subjects, s)
		c.slugs[s.Slug] = append(c.slugs[s.Slug], s.Tier) // canonical order: subs is tier-sorted
	}
	return nil
}

func refs(file, field string, in []string, index map[string]int, self string) ([]SubjectRef, error) {
	out := make([]SubjectRef, 0, len(in))
	seen := map[string]bool{}
	for k, r := range in {
		f := fmt.Sprintf("%s[%d]", field, k)
		if _, ok := index[r]; !ok {
			return nil, errf(file, f, "%q does not name a subject (want <tier>/<slug> of a subject in this file)", r)
		}
		if r == self {
			return nil, errf(file, f, "a subject cannot refer to itself")
		}
		if seen[r] {
			return nil, errf(file, f, "%q is listed twice", r)
		}
		seen[r] = true
		tier, slug, _ := strings.Cut(r, "/")
		out = append(out, SubjectRef{Tier: tier, Slug: slug})
	}
	return out, nil
}

// loadLessons decodes the lesson files in parallel; results and the first
// fault (in subject order) do not depend on scheduling.
func (c *Corpus) loadLessons(read func(string) ([]byte, error)) error {
	errs := make([]error, len(c.Subjects))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(runtime.GOMAXPROCS(0), 8); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = func() (err error) {
					defer func() {
						if p := recover(); p != nil {
							err = fmt.Errorf("lessons/%s.json: internal error: %v", c.Subjects[i].Ref(), p)
						}
					}()
					s := c.Subjects[i]
					name := "lessons/" + s.Ref() + ".json"
					b, err := read(name)
					if err != nil {
						return err
					}
					s.Lessons, err = parseLessons(name, b, s)
					return err
				}()
			}
		}()
	}
	for i := range c.Subjects {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	for _, s := range c.Subjects {
		for _, l := range s.Lessons {
			l.Ordinal = c.Counts.Classes
			c.Lessons = append(c.Lessons, l)
			c.lessons[l.ID] = l
			for _, m := range l.Media {
				c.media[m.ID] = m
			}
			c.Counts.Classes++
			c.Counts.Media += len(l.Media)
		}
	}
	return nil
}

// parseLessons decodes and validates one subject's lesson file.
func parseLessons(file string, data []byte, s *Subject) ([]*Lesson, error) {
	var lf LessonFileJSON
	if err := decode(file, data, &lf); err != nil {
		return nil, err
	}
	if lf.Tier != s.Tier {
		return nil, errf(file, "tier", "%q does not match the subject's tier %q", lf.Tier, s.Tier)
	}
	if lf.Slug != s.Slug {
		return nil, errf(file, "slug", "%q does not match the subject's slug %q", lf.Slug, s.Slug)
	}
	if len(lf.Classes) == 0 {
		return nil, errf(file, "classes", "a subject needs at least one class")
	}
	if len(lf.Classes) > id.MaxClass {
		return nil, errf(file, "classes", "more than %d classes", id.MaxClass)
	}
	lessons := make([]*Lesson, 0, len(lf.Classes))
	seen := map[int]int{}
	s.Coverage = Coverage{}
	for i := range lf.Classes {
		cj := &lf.Classes[i]
		f := fmt.Sprintf("classes[%d]", i)
		if cj.Number == nil {
			return nil, errf(file, f+".number", "missing")
		}
		n := *cj.Number
		if j, dup := seen[n]; dup {
			return nil, errf(file, f+".number", "duplicate class number %d (also classes[%d])", n, j)
		}
		seen[n] = i
		if n != i+1 {
			return nil, errf(file, f+".number", "got %d, want %d: class numbers run 1..N in file order, without gaps", n, i+1)
		}
		l, err := parseClass(file, f, cj, s)
		if err != nil {
			return nil, err
		}
		lessons = append(lessons, l)
		if l.HasVideo {
			s.Coverage.Video++
		}
		if l.HasNarration {
			s.Coverage.Narration++
		}
		if l.HasTranscript {
			s.Coverage.Transcript++
		}
		s.Coverage.Media += len(l.Media)
	}
	return lessons, nil
}

func parseClass(file, f string, cj *ClassJSON, s *Subject) (*Lesson, error) {
	l := &Lesson{
		ID:      s.Ref() + "/" + strconv.Itoa(*cj.Number),
		Subject: s, Number: *cj.Number, Title: cj.Title, Subtitle: cj.Subtitle,
	}
	if strings.TrimSpace(cj.Title) == "" {
		return nil, errf(file, f+".title", "missing")
	}
	if len(cj.Cards) == 0 {
		return nil, errf(file, f+".cards", "a class needs at least one card")
	}
	cardIdx := map[string]int{}
	var video, narration, transcript bool
	for k := range cj.Cards {
		cd := &cj.Cards[k]
		cf := fmt.Sprintf("%s.cards[%d]", f, k)
		if !id.ValidCardID(cd.ID) {
			return nil, errf(file, cf+".id", "%q is not a valid card id (^[a-z0-9][a-z0-9-]{0,31}$)", cd.ID)
		}
		if j, dup := cardIdx[cd.ID]; dup {
			return nil, errf(file, cf+".id", "duplicate card id %q (also cards[%d])", cd.ID, j)
		}
		cardIdx[cd.ID] = k
		if strings.TrimSpace(cd.Label) == "" {
			return nil, errf(file, cf+".label", "missing")
		}
		if strings.TrimSpace(cd.Body) == "" {
			return nil, errf(file, cf+".body", "missing")
		}
		for p, kp := range cd.KeyPoints {
			if strings.TrimSpace(kp) == "" {
				return nil, errf(file, fmt.Sprintf("%s.keyPoints[%d]", cf, p), "empty key point")
			}
		}
		if cd.NarrationScript != "" && !cd.Narrated {
			return nil, errf(file, cf+".narrationScript", "set on a card that is not narrated")
		}
		card := &Card{
			ID: cd.ID, Label: cd.Label, Body: cd.Body, KeyPoints: nonNil(cd.KeyPoints),
			IllustrationAlt: cd.IllustrationAlt, Narrated: cd.Narrated,
			NarrationScript: cd.NarrationScript, VideoVoiceover: cd.VideoVoiceover,
		}
		var byType [3]*Media // video, audio, image
		for m := range cd.Media {
			mj := &cd.Media[m]
			mf := fmt.Sprintf("%s.media[%d]", cf, m)
			t := mediaRank(mj.Type)
			if t < 0 {
				return nil, errf(file, mf+".type", "%q is not a media type (video, audio, image)", mj.Type)
			}
			if byType[t] != nil {
				return nil, errf(file, mf+".type", "a second %s asset on card %q (at most one per type)", mj.Type, cd.ID)
			}
			loc := mj.Location
			if loc == "" || strings.HasPrefix(loc, "/") || strings.Contains(loc, "\\") || path.Clean(loc) != loc || strings.HasPrefix(loc, "../") {
				return nil, errf(file, mf+".location", "%q is not a clean relative path", loc)
			}
			if mj.Bytes == nil {
				return nil, errf(file, mf+".bytes", "missing")
			}
			if *mj.Bytes < 0 {
				return nil, errf(file, mf+".bytes", "negative size %d", *mj.Bytes)
			}
			if mj.Type != "image" && mj.DurationSec <= 0 {
				return nil, errf(file, mf+".durationSec", "a %s asset needs a positive duration", mj.Type)
			}
			if mj.DurationSec < 0 {
				return nil, errf(file, mf+".durationSec", "negative duration")
			}
			if !strings.HasPrefix(mj.MIME, mj.Type+"/") || len(mj.MIME) == len(mj.Type)+1 {
				return nil, errf(file, mf+".mime", "%q is not a %s/* type", mj.MIME, mj.Type)
			}
			byType[t] = &Media{
				ID: l.ID + "#" + cd.ID + "#" + mj.Type, Lesson: l, CardID: cd.ID, Type: mj.Type,
				Location: loc, Bytes: *mj.Bytes, DurationSec: mj.DurationSec, MIME: mj.MIME,
			}
		}
		if cd.Narrated != (byType[1] != nil) {
			if cd.Narrated {
				return nil, errf(file, cf+".media", "card is narrated but has no audio asset")
			}
			return nil, errf(file, cf+".narrated", "false, but the card has an audio asset")
		}
		if cd.VideoVoiceover != "" && byType[0] == nil {
			return nil, errf(file, cf+".videoVoiceover", "set on a card without a video asset")
		}
		for _, m := range byType {
			if m != nil {
				card.Media = append(card.Media, m)
				l.Media = append(l.Media, m)
			}
		}
		video = video || byType[0] != nil
		narration = narration || cd.Narrated
		transcript = transcript || card.InTranscript()
		l.Cards = append(l.Cards, card)
	}
	flags := []struct {
		name string
		got  *bool
		want bool
	}{{"hasVideo", cj.HasVideo, video}, {"hasNarration", cj.HasNarration, narration}, {"hasTranscript", cj.HasTranscript, transcript}}
	for _, fl := range flags {
		if fl.got == nil {
			return nil, errf(file, f+"."+fl.name, "missing")
		}
		if *fl.got != fl.want {
			return nil, errf(file, f+"."+fl.name, "is %t but the cards say %t", *fl.got, fl.want)
		}
	}
	l.HasVideo, l.HasNarration, l.HasTranscript = video, narration, transcript

	for q := range cj.Quiz {
		qj := &cj.Quiz[q]
		qf := fmt.Sprintf("%s.quiz[%d]", f, q)
		if err := question(file, qf, qj.Question, qj.Options, qj.AnswerIndex); err != nil {
			return nil, err
		}
		l.Quiz = append(l.Quiz, QuizItem{Question: qj.Question, Options: qj.Options, AnswerIndex: *qj.AnswerIndex})
	}
	for q := range cj.InlineChecks {
		ch := &cj.InlineChecks[q]
		qf := fmt.Sprintf("%s.inlineChecks[%d]", f, q)
		if _, ok := cardIdx[ch.AfterCard]; !ok {
			return nil, errf(file, qf+".afterCard", "%q is not a card of this class", ch.AfterCard)
		}
		if err := question(file, qf, ch.Question, ch.Options, ch.AnswerIndex); err != nil {
			return nil, err
		}
		if len(ch.Hints) < 2 || len(ch.Hints) > 5 {
			return nil, errf(file, qf+".hints", "want 2 to 5 graduated hints, got %d", len(ch.Hints))
		}
		for h, hint := range ch.Hints {
			if strings.TrimSpace(hint) == "" {
				return nil, errf(file, fmt.Sprintf("%s.hints[%d]", qf, h), "empty hint")
			}
		}
		if strings.TrimSpace(ch.Rationale) == "" {
			return nil, errf(file, qf+".rationale", "missing")
		}
		l.InlineChecks = append(l.InlineChecks, InlineCheck{
			AfterCard: ch.AfterCard, Question: ch.Question, Options: ch.Options,
			AnswerIndex: *ch.AnswerIndex, Hints: ch.Hints, Rationale: ch.Rationale,
		})
	}
	ids := map[string]bool{}
	for k := range cj.Interactives {
		ij := &cj.Interactives[k]
		kf := fmt.Sprintf("%s.interactives[%d]", f, k)
		if !id.ValidCardID(ij.ID) {
			return nil, errf(file, kf+".id", "%q is not a valid id (^[a-z0-9][a-z0-9-]{0,31}$)", ij.ID)
		}
		if ids[ij.ID] {
			return nil, errf(file, kf+".id", "duplicate interactive id %q", ij.ID)
		}
		ids[ij.ID] = true
		if _, ok := cardIdx[ij.Card]; !ok {
			return nil, errf(file, kf+".card", "%q is not a card of this class", ij.Card)
		}
		if !id.ValidSlug(ij.Kind) {
			return nil, errf(file, kf+".kind", "%q is not a valid kind (lowercase words joined by hyphens)", ij.Kind)
		}
		if strings.TrimSpace(ij.Prompt) == "" {
			return nil, errf(file, kf+".prompt", "missing")
		}
		if t := bytes.TrimSpace(ij.Config); len(t) == 0 || t[0] != '{' {
			return nil, errf(file, kf+".config", "want a JSON object")
		}
		l.Interactives = append(l.Interactives, Interactive{ID: ij.ID, Card: ij.Card, Kind: ij.Kind, Prompt: ij.Prompt, Config: []byte(ij.Config)})
	}
	if w := cj.WorkedExample; w != nil {
		wf := f + ".workedExample"
		if strings.TrimSpace(w.Problem) == "" {
			return nil, errf(file, wf+".problem", "missing")
		}
		if len(w.Steps) == 0 {
			return nil, errf(file, wf+".steps", "a worked example needs at least one step")
		}
		for k, st := range w.Steps {
			if strings.TrimSpace(st) == "" {
				return nil, errf(file, fmt.Sprintf("%s.steps[%d]", wf, k), "empty step")
			}
		}
		if strings.TrimSpace(w.Answer) == "" {
			return nil, errf(file, wf+".answer", "missing")
		}
		l.WorkedExample = &WorkedExample{Problem: w.Problem, Steps: w.Steps, Answer: w.Answer}
	}
	l.Quiz, l.InlineChecks, l.Interactives = nonNil(l.Quiz), nonNil(l.InlineChecks), nonNil(l.Interactives)
	l.KeyTerms = keyTerms(l.Cards)
	l.StudyMinutes = studyMinutes(l)
	return l, nil
}

// question checks what quiz items, inline checks and test items share.
func question(file, f, q string, options []string, answer *int) error {
	if strings.TrimSpace(q) == "" {
		return errf(file, f+".question", "missing")
	}
	return choices(file, f, options, answer)
}

func choices(file, f string, options []string, answer *int) error {
	if len(options) < 2 || len(options) > 8 {
		return errf(file, f+".options", "want 2 to 8 options, got %d", len(options))
	}
	seen := map[string]int{}
	for k, o := range options {
		if strings.TrimSpace(o) == "" {
			return errf(file, fmt.Sprintf("%s.options[%d]", f, k), "empty option")
		}
		if j, dup := seen[o]; dup {
			return errf(file, fmt.Sprintf("%s.options[%d]", f, k), "same text as options[%d]", j)
		}
		seen[o] = k
	}
	if answer == nil {
		return errf(file, f+".answerIndex", "missing")
	}
	if *answer < 0 || *answer >= len(options) {
		return errf(file, f+".answerIndex", "%d is out of range for %d options (zero-based)", *answer, len(options))
	}
	return nil
}

func mediaRank(t string) int {
	switch t {
	case "video":
		return 0
	case "audio":
		return 1
	case "image":
		return 2
	}
	return -1
}

func (c *Corpus) loadTests(read func(string) ([]byte, error), files []string) error {
	known := map[string]int{}
	for i, ts := range TestSections {
		known[ts.Test] = i
	}
	byRank := make([]*Test, len(TestSections))
	itemIDs := map[string]string{}
	for _, file := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(file, "testprep/"), ".json")
		rank, ok := known[name]
		if !ok {
			return errf(file, "", "unknown test %q (want one of digital-sat, act, psat-nmsqt, caaspp)", name)
		}
		b, err := read(file)
		if err != nil {
			return err
		}
		t, err := parseTest(file, b, rank, itemIDs)
		if err != nil {
			return err
		}
		byRank[rank] = t
	}
	for _, t := range byRank {
		if t != nil {
			c.Tests = append(c.Tests, t)
			c.tests[t.ID] = t
			for _, s := range t.Sections {
				c.Counts.TestprepItems += len(s.Items)
			}
		}
	}
	return nil
}

func parseTest(file string, data []byte, rank int, itemIDs map[string]string) (*Test, error) {
	spec := TestSections[rank]
	var tj TestJSON
	if err := decode(file, data, &tj); err != nil {
		return nil, err
	}
	if tj.ID != spec.Test {
		return nil, errf(file, "id", "%q does not match the file name (want %q)", tj.ID, spec.Test)
	}
	if strings.TrimSpace(tj.Name) == "" {
		return nil, errf(file, "name", "missing")
	}
	if len(tj.Sections) == 0 {
		return nil, errf(file, "sections", "a test needs at least one section")
	}
	t := &Test{ID: tj.ID, Name: tj.Name}
	bySection := make([]*Section, len(spec.Sections))
	for i := range tj.Sections {
		sj := &tj.Sections[i]
		f := fmt.Sprintf("sections[%d]", i)
		r := -1
		for k, s := range spec.Sections {
			if s == sj.ID {
				r = k
			}
		}
		if r < 0 {
			return nil, errf(file, f+".id", "unknown section %q for test %s (want one of %s)", sj.ID, tj.ID, strings.Join(spec.Sections, ", "))
		}
		if bySection[r] != nil {
			return nil, errf(file, f+".id", "duplicate section %q", sj.ID)
		}
		if strings.TrimSpace(sj.Label) == "" {
			return nil, errf(file, f+".label", "missing")
		}
		sec := &Section{ID: sj.ID, Label: sj.Label, Test: t}
		for k := range sj.Items {
			it := &sj.Items[k]
			itf := fmt.Sprintf("%s.items[%d]", f, k)
			if !id.ValidSlug(it.ID) {
				return nil, errf(file, itf+".id", "%q is not a valid item id (lowercase letters and digits joined by hyphens)", it.ID)
			}
			if prev, dup := itemIDs[it.ID]; dup {
				return nil, errf(file, itf+".id", "duplicate item id %q (also in %s)", it.ID, prev)
			}
			itemIDs[it.ID] = file
			if strings.TrimSpace(it.Domain) == "" {
				return nil, errf(file, itf+".domain", "missing")
			}
			if !oneOf(it.Difficulty, ItemDifficulties) {
				return nil, errf(file, itf+".difficulty", "%q is not one of %s", it.Difficulty, strings.Join(ItemDifficulties, ", "))
			}
			if strings.TrimSpace(it.Prompt) == "" {
				return nil, errf(file, itf+".prompt", "missing")
			}
			if err := choices(file, itf, it.Options, it.AnswerIndex); err != nil {
				return nil, err
			}
			if strings.TrimSpace(it.Rationale) == "" {
				return nil, errf(file, itf+".rationale", "missing")
			}
			if it.OptionRationales != nil && len(it.OptionRationales) != len(it.Options) {
				return nil, errf(file, itf+".optionRationales", "%d rationales for %d options", len(it.OptionRationales), len(it.Options))
			}
			sec.Items = append(sec.Items, &Item{
				ID: it.ID, Test: tj.ID, Section: sj.ID, Domain: it.Domain, Difficulty: it.Difficulty,
				Passage: it.Passage, Prompt: it.Prompt, Options: it.Options, AnswerIndex: *it.AnswerIndex,
				Rationale: it.Rationale, OptionRationales: it.OptionRationales,
			})
		}
		bySection[r] = sec
	}
	for _, s := range bySection {
		if s != nil {
			t.Sections = append(t.Sections, s)
		}
	}
	return t, nil
}

func oneOf(s string, list []string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
