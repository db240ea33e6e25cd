// Package searchtest is the reference search the engine (origin/search)
// and the route (origin/server) are both held to: a naive scan of every
// lesson's searched fields in the spec's order, and the comparison of a
// hit with the reference's.
package searchtest

import (
	"strings"
	"sync"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/search"
)

// Hit is a search hit as the tests read it: the JSON of a row, decoded
// apart from the engine's own type.
type Hit struct {
	LessonID     string  `json:"lessonId"`
	Tier         string  `json:"tier"`
	Subject      string  `json:"subject"`
	ClassNum     int     `json:"classNum"`
	Title        string  `json:"title"`
	MatchedField string  `json:"matchedField"`
	CardID       *string `json:"cardId"`
	Snippet      string  `json:"snippet"`
}

// Field is one searched field of a lesson, in hit priority order.
type Field struct {
	Kind, Text string
	Card       *string
}

// Fields lists a lesson's searched fields in the order the spec's
// Route rule 1 names them: never the card bodies.
func Fields(l *corpus.Lesson) []Field {
	fs := []Field{{"title", l.Title, nil}, {"subtitle", l.Subtitle, nil}}
	for _, c := range l.Cards {
		fs = append(fs, Field{"cardLabel", c.Label, &c.ID})
	}
	for _, c := range l.Cards {
		for _, kp := range c.KeyPoints {
			fs = append(fs, Field{"keyPoint", kp, &c.ID})
		}
	}
	for _, q := range l.Quiz {
		fs = append(fs, Field{"quizQuestion", q.Question, nil})
	}
	return fs
}

// Reference is the reference search: every lesson of an allowed subject,
// in corpus order, with its first field holding q ignoring case.
func Reference(c *corpus.Corpus, q string, allowed func(*corpus.Subject) bool) []Hit {
	lq := strings.ToLower(q)
	var out []Hit
	for _, l := range c.Lessons {
		if !allowed(l.Subject) {
			continue
		}
		for _, f := range refLower(l) {
			if strings.Contains(f.Text, lq) {
				out = append(out, Hit{LessonID: l.ID, Tier: l.Subject.Tier, Subject: l.Subject.Slug, ClassNum: l.Number,
					Title: l.Title, MatchedField: f.Kind, CardID: f.Card, Snippet: f.orig})
				break
			}
		}
	}
	return out
}

type refLowerField struct {
	Field
	orig string
}

var refLowerCache sync.Map // *corpus.Lesson -> []refLowerField

// refLower is Fields with each text lower-cased, remembered.
func refLower(l *corpus.Lesson) []refLowerField {
	if v, ok := refLowerCache.Load(l); ok {
		return v.([]refLowerField)
	}
	fs := Fields(l)
	out := make([]refLowerField, len(fs))
	for i, f := range fs {
		out[i] = refLowerField{Field{f.Kind, strings.ToLower(f.Text), f.Card}, f.Text}
	}
	refLowerCache.Store(l, out)
	return out
}

// GrantedBy is the subject filter of grants, as licence.Entitled reads them.
func GrantedBy(grants ...string) func(*corpus.Subject) bool {
	return func(s *corpus.Subject) bool { return licence.Entitled(grants, s.Tier, s.Slug) == nil }
}

// SameHit compares a hit with the reference's; the snippet is the whole
// field when the field is short, else a part holding the query.
func SameHit(got, want Hit, q string) bool {
	snip := got.Snippet == want.Snippet ||
		len(want.Snippet) > search.SnippetMax && strings.Contains(strings.ToLower(got.Snippet), strings.ToLower(q))
	g, w := got, want
	g.Snippet, w.Snippet = "", ""
	g.CardID, w.CardID = nil, nil
	cardOK := (got.CardID == nil) == (want.CardID == nil) && (got.CardID == nil || *got.CardID == *want.CardID)
	return snip && cardOK && g == w
}
