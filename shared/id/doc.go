// Package id holds the value types of the spec's identifiers (spec:
// Resources and their fields, Conventions):
//
//   - lessonId, Lesson: <tier>/<subjectSlug>/<classNum>
//   - mediaId, Media: <lessonId>#<cardId>#<type>, type one of video, audio, image
//
// plus the tier list and the slug and card-id syntax. Parsers are exact (no
// case folding, no trimming) and answer the spec's 400 BAD_LESSON_ID for
// anything that is not an id; whether an id names something that exists is
// the origin's question (404 LESSON_NOT_FOUND, UNKNOWN_MEDIA), not theirs.
// The zero value of each type is invalid. For every valid id s,
// Parse(s).String() == s.
package id
