package corpus

import "encoding/json"

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

// The file format (docs/corpus-format.md): one Go type per JSON shape,
// read by Load and written by the generator (origin/corpus/gen), so the
// two cannot drift apart.
//
// Pointers mark the required numbers and booleans: decoding leaves a
// missing one nil, which Load reports as missing rather than reading it as
// zero (a missing answerIndex is a fault, not 0). A writer sets every one.
// The omitempty fields are the optional ones a writer leaves out when
// empty; decoding ignores the tag. Encoding writes fields in struct order,
// so these declarations fix the order of keys in every generated file.

// ManifestJSON is corpus.json, the manifest.
type ManifestJSON struct {
	Format         string      `json:"format"`         // exactly Format
	ContentVersion string      `json:"contentVersion"` // <YYYY-MM-DD>+<hash>
	Counts         *CountsJSON `json:"counts"`
	Files          []string    `json:"files"` // every other file of the corpus, each once
}

// CountsJSON are the manifest's totals; Load checks each against the files.
type CountsJSON struct {
	Tiers         *int `json:"tiers"`
	Subjects      *int `json:"subjects"`
	Classes       *int `json:"classes"`
	Media         *int `json:"media"`
	TestprepItems *int `json:"testprepItems"`
}

// TiersJSON is tiers.json.
type TiersJSON struct {
	Tiers []TierJSON `json:"tiers"`
}

// TierJSON is one row of tiers.json.
type TierJSON struct {
	Tier  string `json:"tier"`
	Label string `json:"label"`
}

// SubjectsJSON is subjects.json.
type SubjectsJSON struct {
	Subjects []SubjectJSON `json:"subjects"`
}

// SubjectJSON is one subject of subjects.json; prerequisites and related
// are subject refs, <tier>/<slug>.
type SubjectJSON struct {
	Slug          string   `json:"slug"`
	Tier          string   `json:"tier"`
	Name          string   `json:"name"`
	Description   string   `json:"description"`
	Difficulty    string   `json:"difficulty"`
	Tags          []string `json:"tags"`
	Prerequisites []string `json:"prerequisites"`
	Related       []string `json:"related"`
}

// LessonFileJSON is lessons/<tier>/<slug>.json, one subject's classes.
type LessonFileJSON struct {
	Tier    string      `json:"tier"`
	Slug    string      `json:"slug"`
	Classes []ClassJSON `json:"classes"` // classes[i].number is i+1
}

// ClassJSON is one class (a lesson). The three flags must equal what its
// cards say.
type ClassJSON struct {
	Number        *int              `json:"number"`
	Title         string            `json:"title"`
	Subtitle      string            `json:"subtitle"`
	HasVideo      *bool             `json:"hasVideo"`
	HasNarration  *bool             `json:"hasNarration"`
	HasTranscript *bool             `json:"hasTranscript"`
	Cards         []CardJSON        `json:"cards"`
	Quiz          []QuizJSON        `json:"quiz"`
	InlineChecks  []CheckJSON       `json:"inlineChecks"`
	Interactives  []InteractiveJSON `json:"interactives"`
	WorkedExample *WorkedJSON       `json:"workedExample,omitempty"` // optional
}

// CardJSON is one card of a class.
type CardJSON struct {
	ID              string      `json:"id"`
	Label           string      `json:"label"`
	Body            string      `json:"body"` // markdown-lite; **term** marks a key term
	KeyPoints       []string    `json:"keyPoints"`
	IllustrationAlt string      `json:"illustrationAlt"`
	Narrated        bool        `json:"narrated"`                  // optional on read: absent is false
	NarrationScript string      `json:"narrationScript,omitempty"` // optional: absent, the body is the narration
	VideoVoiceover  string      `json:"videoVoiceover,omitempty"`  // optional
	Media           []MediaJSON `json:"media"`
}

// MediaJSON is one media asset of a card: at most one per type.
type MediaJSON struct {
	Type        string `json:"type"`     // video, audio or image
	Location    string `json:"location"` // clean relative path under the media root
	Bytes       *int64 `json:"bytes"`
	DurationSec int    `json:"durationSec,omitempty"` // > 0 for audio and video; optional for images
	MIME        string `json:"mime"`
	SHA256      string `json:"sha256,omitempty"` // optional: lowercase hex SHA-256 of the file
}

// QuizJSON is one end-of-class quiz question.
type QuizJSON struct {
	Question    string   `json:"question"`
	Options     []string `json:"options"`
	AnswerIndex *int     `json:"answerIndex"` // zero-based into Options
}

// CheckJSON is one inline check, shown after the card AfterCard.
type CheckJSON struct {
	AfterCard   string   `json:"afterCard"`
	Question    string   `json:"question"`
	Options     []string `json:"options"`
	AnswerIndex *int     `json:"answerIndex"` // zero-based into Options
	Hints       []string `json:"hints"`       // 2-5, graduated
	Rationale   string   `json:"rationale"`
}

// InteractiveJSON is one interactive element of a card; Config is a JSON
// object passed through verbatim.
type InteractiveJSON struct {
	ID     string          `json:"id"`
	Card   string          `json:"card"`
	Kind   string          `json:"kind"`
	Prompt string          `json:"prompt"`
	Config json.RawMessage `json:"config"`
}

// WorkedJSON is a class's worked example.
type WorkedJSON struct {
	Problem string   `json:"problem"`
	Steps   []string `json:"steps"`
	Answer  string   `json:"answer"`
}

// TestJSON is testprep/<test>.json, one of TestSections' tests.
type TestJSON struct {
	ID       string        `json:"id"`
	Name     string        `json:"name"`
	Sections []SectionJSON `json:"sections"`
}

// SectionJSON is one section of a test, its items in serving order.
type SectionJSON struct {
	ID    string     `json:"id"`
	Label string     `json:"label"`
	Items []ItemJSON `json:"items"`
}

// ItemJSON is one test-prep item.
type ItemJSON struct {
	ID               string   `json:"id"`
	Domain           string   `json:"domain"`
	Difficulty       string   `json:"difficulty"`        // one of ItemDifficulties
	Passage          string   `json:"passage,omitempty"` // optional
	Prompt           string   `json:"prompt"`
	Options          []string `json:"options"`
	AnswerIndex      *int     `json:"answerIndex"` // zero-based into Options
	Rationale        string   `json:"rationale"`
	OptionRationales []string `json:"optionRationales,omitempty"` // optional: one per option
}
