package corpus

import (
	"bytes"
	"fmt"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/lectern-api/lectern/shared/id"
)

// loadLessons decodes the lesson files in parallel, and digests each
// subject once its classes are parsed (its references are resolved
// already); results and the first fault (in subject order) do not depend
// on scheduling.
func (c *Corpus) loadLessons(read func(string) ([]byte, error)) error {
	errs := make([]error, len(c.Subjects))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(runtime.GOMAXPROCS(0), 8); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var d digester
			in := interner{} // this worker's (intern.go)
			var pk packer    // (pack.go)
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
					if s.Lessons, err = parseLessons(name, b, s); err != nil {
						return err
					}
					in.lessons(s.Lessons)
					for _, l := range s.Lessons {
						pk.lesson(l)
					}
					s.ContentDigest = d.contentDigest(s)
					return nil
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

// parseClass validates one class and builds its lesson. Faults are checked
// in file order: the class, its cards (and their media), the flags the
// cards decide, then quiz, inline checks, interactives, worked example.
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
	// The lesson's assets in one allocation, in card order: l.Media and
	// the cards' point into it.
	n := 0
	for k := range cj.Cards {
		n += len(cj.Cards[k].Media)
	}
	media := make([]Media, 0, n)
	cardIdx := map[string]int{}
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
		card, err := parseCard(file, cf, cd, l, &media)
		if err != nil {
			return nil, err
		}
		l.Cards = append(l.Cards, card)
		l.Media = append(l.Media, card.Media...)
	}
	if err := classFlags(file, f, cj, l); err != nil {
		return nil, err
	}
	var err error
	if l.Quiz, err = parseQuiz(file, f, cj.Quiz); err != nil {
		return nil, err
	}
	if l.InlineChecks, err = parseChecks(file, f, cj.InlineChecks, cardIdx); err != nil {
		return nil, err
	}
	if l.Interactives, err = parseInteractives(file, f, cj.Interactives, cardIdx); err != nil {
		return nil, err
	}
	if l.WorkedExample, err = parseWorked(file, f+".workedExample", cj.WorkedExample); err != nil {
		return nil, err
	}
	l.Quiz, l.InlineChecks, l.Interactives = nonNil(l.Quiz), nonNil(l.InlineChecks), nonNil(l.Interactives)
	l.KeyTerms = keyTerms(l.Cards)
	l.StudyMinutes = studyMinutes(l)
	return l, nil
}

// parseCard validates one card of lesson l (its id is checked by the
// caller, against the class's other cards) and its media, which it lists
// video, audio, image and appends to media (whose capacity holds every
// asset of the lesson, so that the pointers to them stay valid).
func parseCard(file, cf string, cd *CardJSON, l *Lesson, media *[]Media) (*Card, error) {
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
	var byType [3]Media // video, audio, image
	var has [3]bool
	for m := range cd.Media {
		mj := &cd.Media[m]
		mf := fmt.Sprintf("%s.media[%d]", cf, m)
		t := mediaRank(mj.Type)
		if t < 0 {
			return nil, errf(file, mf+".type", "%q is not a media type (video, audio, image)", mj.Type)
		}
		if has[t] {
			return nil, errf(file, mf+".type", "a second %s asset on card %q (at most one per type)", mj.Type, cd.ID)
		}
		var err error
		if byType[t], err = parseMedia(file, mf, mj, l, cd.ID); err != nil {
			return nil, err
		}
		has[t] = true
	}
	if cd.Narrated != has[1] {
		if cd.Narrated {
			return nil, errf(file, cf+".media", "card is narrated but has no audio asset")
		}
		return nil, errf(file, cf+".narrated", "false, but the card has an audio asset")
	}
	if cd.VideoVoiceover != "" && !has[0] {
		return nil, errf(file, cf+".videoVoiceover", "set on a card without a video asset")
	}
	for t := range byType {
		if has[t] {
			*media = append(*media, byType[t])
			card.Media = append(card.Media, &(*media)[len(*media)-1])
		}
	}
	return card, nil
}

// parseMedia validates one media asset of card cardID of lesson l, whose
// type the caller has checked.
func parseMedia(file, mf string, mj *MediaJSON, l *Lesson, cardID string) (Media, error) {
	loc := mj.Location
	if loc == "" || strings.HasPrefix(loc, "/") || strings.Contains(loc, "\\") || path.Clean(loc) != loc || strings.HasPrefix(loc, "../") {
		return Media{}, errf(file, mf+".location", "%q is not a clean relative path", loc)
	}
	if mj.Bytes == nil {
		return Media{}, errf(file, mf+".bytes", "missing")
	}
	if *mj.Bytes < 0 {
		return Media{}, errf(file, mf+".bytes", "negative size %d", *mj.Bytes)
	}
	if mj.Type != "image" && mj.DurationSec <= 0 {
		return Media{}, errf(file, mf+".durationSec", "a %s asset needs a positive duration", mj.Type)
	}
	if mj.DurationSec < 0 {
		return Media{}, errf(file, mf+".durationSec", "negative duration")
	}
	if !strings.HasPrefix(mj.MIME, mj.Type+"/") || len(mj.MIME) == len(mj.Type)+1 {
		return Media{}, errf(file, mf+".mime", "%q is not a %s/* type", mj.MIME, mj.Type)
	}
	if mj.SHA256 != "" && !isSHA256(mj.SHA256) {
		return Media{}, errf(file, mf+".sha256", "%q is not 64 lowercase hex digits", mj.SHA256)
	}
	return Media{
		ID: l.ID + "#" + cardID + "#" + mj.Type, Lesson: l, CardID: cardID, Type: mj.Type,
		Location: loc, Bytes: *mj.Bytes, DurationSec: mj.DurationSec, MIME: mj.MIME, SHA256: mj.SHA256,
	}, nil
}

// classFlags checks the class's hasVideo, hasNarration and hasTranscript
// against what its cards say, and sets them on l.
func classFlags(file, f string, cj *ClassJSON, l *Lesson) error {
	var video, narration, transcript bool
	for _, card := range l.Cards {
		for _, m := range card.Media {
			video = video || m.Type == "video"
		}
		narration = narration || card.Narrated
		transcript = transcript || card.InTranscript()
	}
	flags := []struct {
		name string
		got  *bool
		want bool
	}{{"hasVideo", cj.HasVideo, video}, {"hasNarration", cj.HasNarration, narration}, {"hasTranscript", cj.HasTranscript, transcript}}
	for _, fl := range flags {
		if fl.got == nil {
			return errf(file, f+"."+fl.name, "missing")
		}
		if *fl.got != fl.want {
			return errf(file, f+"."+fl.name, "is %t but the cards say %t", *fl.got, fl.want)
		}
	}
	l.HasVideo, l.HasNarration, l.HasTranscript = video, narration, transcript
	return nil
}

// parseQuiz validates the end-of-class quiz of class f.
func parseQuiz(file, f string, in []QuizJSON) ([]QuizItem, error) {
	var out []QuizItem
	for q := range in {
		qj := &in[q]
		qf := fmt.Sprintf("%s.quiz[%d]", f, q)
		if err := question(file, qf, qj.Question, qj.Options, qj.AnswerIndex); err != nil {
			return nil, err
		}
		out = append(out, QuizItem{Question: qj.Question, Options: qj.Options, AnswerIndex: *qj.AnswerIndex})
	}
	return out, nil
}

// parseChecks validates the inline checks of class f; cards indexes its
// card ids.
func parseChecks(file, f string, in []CheckJSON, cards map[string]int) ([]InlineCheck, error) {
	var out []InlineCheck
	for q := range in {
		ch := &in[q]
		qf := fmt.Sprintf("%s.inlineChecks[%d]", f, q)
		if _, ok := cards[ch.AfterCard]; !ok {
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
		out = append(out, InlineCheck{
			AfterCard: ch.AfterCard, Question: ch.Question, Options: ch.Options,
			AnswerIndex: *ch.AnswerIndex, Hints: ch.Hints, Rationale: ch.Rationale,
		})
	}
	return out, nil
}

// parseInteractives validates the interactives of class f; cards indexes
// its card ids.
func parseInteractives(file, f string, in []InteractiveJSON, cards map[string]int) ([]Interactive, error) {
	var out []Interactive
	ids := map[string]bool{}
	for k := range in {
		ij := &in[k]
		kf := fmt.Sprintf("%s.interactives[%d]", f, k)
		if !id.ValidCardID(ij.ID) {
			return nil, errf(file, kf+".id", "%q is not a valid id (^[a-z0-9][a-z0-9-]{0,31}$)", ij.ID)
		}
		if ids[ij.ID] {
			return nil, errf(file, kf+".id", "duplicate interactive id %q", ij.ID)
		}
		ids[ij.ID] = true
		if _, ok := cards[ij.Card]; !ok {
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
		out = append(out, Interactive{ID: ij.ID, Card: ij.Card, Kind: ij.Kind, Prompt: ij.Prompt, Config: []byte(ij.Config)})
	}
	return out, nil
}

// parseWorked validates a class's worked example at field wf; nil when the
// class has none.
func parseWorked(file, wf string, w *WorkedJSON) (*WorkedExample, error) {
	if w == nil {
		return nil, nil
	}
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
	return &WorkedExample{Problem: w.Problem, Steps: w.Steps, Answer: w.Answer}, nil
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

// isSHA256 reports whether s is a SHA-256 in lowercase hex.
func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
