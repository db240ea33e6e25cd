package gen

import "encoding/json"

// The structs below are the files' JSON shapes (docs/corpus-format.md).
// Field order is the struct order, so output is stable.

type manifestFile struct {
	Format         string     `json:"format"`
	ContentVersion string     `json:"contentVersion"`
	Counts         countsJSON `json:"counts"`
	Files          []string   `json:"files"`
}

// countsJSON are the manifest's totals.
type countsJSON struct {
	Tiers         int `json:"tiers"`
	Subjects      int `json:"subjects"`
	Classes       int `json:"classes"`
	Media         int `json:"media"`
	TestprepItems int `json:"testprepItems"`
}

type tiersFile struct {
	Tiers []tierRow `json:"tiers"`
}

type tierRow struct {
	Tier  string `json:"tier"`
	Label string `json:"label"`
}

type subjectsFile struct {
	Subjects []subjectRow `json:"subjects"`
}

type subjectRow struct {
	Slug          string   `json:"slug"`
	Tier          string   `json:"tier"`
	Name          string   `json:"name"`
	Description   string   `json:"description"`
	Difficulty    string   `json:"difficulty"`
	Tags          []string `json:"tags"`
	Prerequisites []string `json:"prerequisites"`
	Related       []string `json:"related"`
}

type lessonFile struct {
	Tier    string      `json:"tier"`
	Slug    string      `json:"slug"`
	Classes []classJSON `json:"classes"`
}

type classJSON struct {
	Number        int               `json:"number"`
	Title         string            `json:"title"`
	Subtitle      string            `json:"subtitle"`
	HasVideo      bool              `json:"hasVideo"`
	HasNarration  bool              `json:"hasNarration"`
	HasTranscript bool              `json:"hasTranscript"`
	Cards         []cardJSON        `json:"cards"`
	Quiz          []quizJSON        `json:"quiz"`
	InlineChecks  []checkJSON       `json:"inlineChecks"`
	Interactives  []interactiveJSON `json:"interactives"`
	WorkedExample *workedJSON       `json:"workedExample,omitempty"`
}

type cardJSON struct {
	ID              string      `json:"id"`
	Label           string      `json:"label"`
	Body            string      `json:"body"`
	KeyPoints       []string    `json:"keyPoints"`
	IllustrationAlt string      `json:"illustrationAlt"`
	Narrated        bool        `json:"narrated"`
	NarrationScript string      `json:"narrationScript,omitempty"`
	VideoVoiceover  string      `json:"videoVoiceover,omitempty"`
	Media           []mediaJSON `json:"media"`
}

type mediaJSON struct {
	Type        string `json:"type"`
	Location    string `json:"location"`
	Bytes       int64  `json:"bytes"`
	DurationSec int    `json:"durationSec,omitempty"`
	MIME        string `json:"mime"`
}

type quizJSON struct {
	Question    string   `json:"question"`
	Options     []string `json:"options"`
	AnswerIndex int      `json:"answerIndex"`
}

type checkJSON struct {
	AfterCard   string   `json:"afterCard"`
	Question    string   `json:"question"`
	Options     []string `json:"options"`
	AnswerIndex int      `json:"answerIndex"`
	Hints       []string `json:"hints"`
	Rationale   string   `json:"rationale"`
}

type interactiveJSON struct {
	ID     string          `json:"id"`
	Card   string          `json:"card"`
	Kind   string          `json:"kind"`
	Prompt string          `json:"prompt"`
	Config json.RawMessage `json:"config"`
}

type workedJSON struct {
	Problem string   `json:"problem"`
	Steps   []string `json:"steps"`
	Answer  string   `json:"answer"`
}

type testFile struct {
	ID       string        `json:"id"`
	Name     string        `json:"name"`
	Sections []sectionJSON `json:"sections"`
}

type sectionJSON struct {
	ID    string     `json:"id"`
	Label string     `json:"label"`
	Items []itemJSON `json:"items"`
}

type itemJSON struct {
	ID               string   `json:"id"`
	Domain           string   `json:"domain"`
	Difficulty       string   `json:"difficulty"`
	Passage          string   `json:"passage,omitempty"`
	Prompt           string   `json:"prompt"`
	Options          []string `json:"options"`
	AnswerIndex      int      `json:"answerIndex"`
	Rationale        string   `json:"rationale"`
	OptionRationales []string `json:"optionRationales,omitempty"`
}
