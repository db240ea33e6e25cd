package corpus

import "strings"

// Corpus is a loaded, validated corpus. It is read-only once Load returns and
// safe for concurrent use. Slices are in the stable orders documented on
// each field; the lookup methods use indexes that are never iterated.
type Corpus struct {
	Dir            string
	Format         string
	ContentVersion string // <date>+<hash>, from corpus.json
	// ContentDigest is "sha256:" and the hex SHA-256 of every file but
	// corpus.json (filedigest.go): what the corpus holds, whatever
	// version it declares. A reload compares it with the served corpus's
	// to refuse new content under the served version (origin/corpus/follow).
	ContentDigest string

	// Tiers present in tiers.json, in canonical order (topics, college,
	// high, middle, primary), each with its subjects ordered by name.
	Tiers []*Tier
	// Subjects in listing order: tier (canonical) then name, then slug.
	Subjects []*Subject
	// Lessons of every subject, in Subjects order then class number;
	// Lessons[i].Ordinal == i.
	Lessons []*Lesson
	// Tests present, in the spec's order (digital-sat, act, psat-nmsqt,
	// caaspp), each with its sections in the spec's order.
	Tests []*Test

	Counts Counts

	tiers    map[string]*Tier
	subjects map[string]*Subject // "<tier>/<slug>"
	slugs    map[string][]string // slug -> tiers, canonical order
	lessons  map[string]*Lesson  // lessonId; a media id names its lesson (Media)
	tests    map[string]*Test
}

// Counts are the corpus totals; Load checks them against corpus.json.
type Counts struct {
	Tiers         int `json:"tiers"`
	Subjects      int `json:"subjects"`
	Classes       int `json:"classes"`
	Media         int `json:"media"`
	TestprepItems int `json:"testprepItems"`
}

// Tier is one tier row of tiers.json.
type Tier struct {
	Name     string // tier value: topics, college, high, middle, primary
	Label    string
	Subjects []*Subject // ordered by name, then slug
}

// Subject is one subject of subjects.json with its classes.
type Subject struct {
	Tier          string
	Slug          string
	Name          string
	Description   string
	Difficulty    string // beginner, intermediate, advanced
	Tags          []string
	Prerequisites []SubjectRef
	Related       []SubjectRef
	Lessons       []*Lesson // by class number: Lessons[n-1] is class n
	Coverage      Coverage
	// ContentDigest is "sha256:" and the hex SHA-256 of everything an
	// export bundle of the subject is made from (its fields, and each
	// class at full detail with its media), not of the contentVersion:
	// equal across corpus versions exactly while that content is
	// (digest.go).
	ContentDigest string
	// OwnDigest tells the subject's own fields (name, description, tags,
	// references...) from another version's, apart from its lessons.
	OwnDigest [PartDigestSize]byte
}

// Ref is the subject's "<tier>/<slug>" reference.
func (s *Subject) Ref() string { return s.Tier + "/" + s.Slug }

// ClassCount is the number of classes (lessons) in the subject.
func (s *Subject) ClassCount() int { return len(s.Lessons) }

// SubjectRef names a subject by tier and slug; Load guarantees it resolves.
type SubjectRef struct {
	Tier string
	Slug string
}

func (r SubjectRef) String() string { return r.Tier + "/" + r.Slug }

// Coverage counts a subject's classes that have each kind of media, and its
// media assets.
type Coverage struct {
	Video      int // classes with video
	Narration  int // classes with narration
	Transcript int // classes with a transcript
	Media      int // media assets in all its classes
}

// Lesson is one class.
type Lesson struct {
	ID      string // lessonId: <tier>/<slug>/<number>
	Subject *Subject
	// Digest tells this lesson's content from another version's: what a
	// class export is made from (digest.go); set by the loader.
	Digest        [PartDigestSize]byte
	Number        int
	Title         string
	Subtitle      string
	HasVideo      bool
	HasNarration  bool
	HasTranscript bool
	Cards         []*Card
	Quiz          []QuizItem
	InlineChecks  []InlineCheck
	Interactives  []Interactive
	WorkedExample *WorkedExample // nil when the class has none
	// Media of all cards: card order, then video, audio, image.
	Media []*Media
	// KeyTerms are derived from the **bold** terms of the card bodies.
	KeyTerms []KeyTerm
	// StudyMinutes is the derived estimated study time.
	StudyMinutes int
	// Ordinal is the lesson's position in Corpus.Lessons: subjects in
	// listing order, then class number.
	Ordinal int
}

// Card is one card of a lesson.
type Card struct {
	ID              string
	Label           string
	Body            string // markdown-lite; **term** marks a key term
	KeyPoints       []string
	IllustrationAlt string
	Narrated        bool
	NarrationScript string // "" when the body is the narration
	VideoVoiceover  string
	Media           []*Media // video, audio, image; each at most once
}

// Narration is the card's spoken narration: its script when it has one,
// otherwise its body (spec: Transcript); "" when the card is not narrated.
func (c *Card) Narration() string {
	if !c.Narrated {
		return ""
	}
	if c.NarrationScript != "" {
		return c.NarrationScript
	}
	return c.Body
}

// InTranscript reports whether the card has a transcript row: it is
// narrated or has a video voiceover (spec: Transcript).
func (c *Card) InTranscript() bool { return c.Narrated || c.VideoVoiceover != "" }

// Media is one media asset.
type Media struct {
	ID          string // mediaId: <lessonId>#<cardId>#<type>
	Lesson      *Lesson
	CardID      string
	Type        string // video, audio, image
	Location    string // raw location, relative to the media root
	Bytes       int64
	DurationSec int // audio and video; 0 for images
	MIME        string
	SHA256      string // lowercase hex SHA-256 of the file; "" when the corpus does not declare it
}

// QuizItem is one end-of-class quiz question.
type QuizItem struct {
	Question    string
	Options     []string
	AnswerIndex int // zero-based
}

// InlineCheck is a mid-lesson check.
type InlineCheck struct {
	AfterCard   string // card id the check follows
	Question    string
	Options     []string
	AnswerIndex int
	Hints       []string // graduated: vague first, nearly giving it away last
	Rationale   string
}

// Interactive is an interactive element; Config is a JSON object whose
// shape depends on Kind.
type Interactive struct {
	ID     string
	Card   string
	Kind   string
	Prompt string
	Config []byte
}

// WorkedExample is a class's worked example.
type WorkedExample struct {
	Problem string
	Steps   []string
	Answer  string
}

// KeyTerm is a derived key term.
type KeyTerm struct {
	Term       string // as first written, without the ** markers
	Definition string // the sentence of first mention, markers removed
	CardID     string // card of first mention
}

// Test is one test-prep test.
type Test struct {
	ID       string
	Name     string
	Sections []*Section
}

// Section returns the test's section id, or nil.
func (t *Test) Section(id string) *Section {
	for _, s := range t.Sections {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// SectionIDs lists the test's section ids in order.
func (t *Test) SectionIDs() []string {
	out := make([]string, len(t.Sections))
	for i, s := range t.Sections {
		out[i] = s.ID
	}
	return out
}

// Section is one section of a test with its items in file order.
type Section struct {
	ID    string
	Label string
	Test  *Test
	Items []*Item
}

// Item is one original practice item.
type Item struct {
	ID               string
	Test             string
	Section          string
	Domain           string
	Difficulty       string // easy, medium, hard
	Passage          string // reading items; "" otherwise
	Prompt           string
	Options          []string
	AnswerIndex      int
	Rationale        string
	OptionRationales []string // nil, or one per option
}

// Tier returns the tier named name, or nil when the corpus has none.
func (c *Corpus) Tier(name string) *Tier { return c.tiers[name] }

// Subject returns the subject (tier, slug), or nil.
func (c *Corpus) Subject(tier, slug string) *Subject { return c.subjects[tier+"/"+slug] }

// SlugTiers lists the tiers holding slug, in canonical order; more than one
// means the slug is ambiguous without a tier (spec: AMBIGUOUS_SUBJECT).
func (c *Corpus) SlugTiers(slug string) []string { return c.slugs[slug] }

// Lesson returns the lesson with lessonId id ("<tier>/<slug>/<num>"), or nil.
func (c *Corpus) Lesson(id string) *Lesson { return c.lessons[id] }

// LessonAt returns class num of subject (tier, slug), or nil.
func (c *Corpus) LessonAt(tier, slug string, num int) *Lesson {
	s := c.Subject(tier, slug)
	if s == nil || num < 1 || num > len(s.Lessons) {
		return nil
	}
	return s.Lessons[num-1]
}

// Media returns the asset with mediaId id, or nil: the asset of that type
// on that card of that lesson (neither a lesson id nor a card id holds a
// '#').
func (c *Corpus) Media(id string) *Media {
	lid, rest, _ := strings.Cut(id, "#")
	cid, typ, _ := strings.Cut(rest, "#")
	l := c.lessons[lid]
	if l == nil {
		return nil
	}
	for _, card := range l.Cards {
		if card.ID != cid {
			continue
		}
		for _, m := range card.Media {
			if m.Type == typ {
				return m
			}
		}
		return nil
	}
	return nil
}

// Test returns the test id, or nil.
func (c *Corpus) Test(id string) *Test { return c.tests[id] }
