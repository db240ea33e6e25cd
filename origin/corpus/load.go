// Package corpus loads and validates a Lectern corpus directory (format:
// docs/corpus-format.md) and holds it in memory with the indexes the origin
// serves from: tiers in canonical order, subjects by (tier, slug) and by
// slug, lessons by lessonId, media by mediaId, and test-prep tests,
// sections and items in stable order. It also derives what the format does
// not store: media ids, each lesson's key terms and estimated study time,
// and per-subject coverage and content digest (digest.go).
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
	"strings"
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
	var sums fileSums
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errf(name, "", "file not found")
		}
		if err != nil {
			return nil, errf(name, "", "%v", err)
		}
		if name != "corpus.json" {
			sums.add(name, b)
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
		lessons: map[string]*Lesson{}, tests: map[string]*Test{},
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
	c.ContentDigest = sums.digest(man.Files)
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
