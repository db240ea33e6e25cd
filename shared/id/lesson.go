package id

import (
	"strconv"
	"strings"

	"github.com/lectern-api/lectern/shared/apierr"
)

// MaxClass is the largest class number the syntax admits (six digits).
// Whether a class exists is the origin's 404 LESSON_NOT_FOUND.
const MaxClass = 999999

// lessonHint is the spec's advice on where lesson ids come from
// (spec: Conventions).
const lessonHint = "take lessonId from the class list, search hits or the export media manifest; never build it by hand"

// Lesson is a lessonId: <tier>/<subjectSlug>/<classNum> (spec: Conventions).
// The zero value is not a lesson.
type Lesson struct {
	Tier  string
	Slug  string
	Class int
}

// IsZero reports whether l is the zero Lesson, which names no lesson.
func (l Lesson) IsZero() bool { return l == Lesson{} }

// String returns the lessonId, or "" for the zero Lesson.
func (l Lesson) String() string {
	if l.IsZero() {
		return ""
	}
	return string(l.AppendTo(make([]byte, 0, len(l.Tier)+len(l.Slug)+8)))
}

// AppendTo appends the lessonId to dst.
func (l Lesson) AppendTo(dst []byte) []byte {
	dst = append(dst, l.Tier...)
	dst = append(dst, '/')
	dst = append(dst, l.Slug...)
	dst = append(dst, '/')
	return strconv.AppendInt(dst, int64(l.Class), 10)
}

// ParseLesson parses the joined form <tier>/<subjectSlug>/<classNum>.
// Failures are 400 BAD_LESSON_ID naming the failing part, as LessonFromPath;
// a missing part is reported as that part with nothing received, and extra
// slashes belong to classNum (so "high/algebra/1/2" fails on classNum "1/2").
func ParseLesson(s string) (Lesson, *apierr.Error) {
	tier, rest, ok := strings.Cut(s, "/")
	if !ok {
		if err := checkTier(tier); err != nil {
			return Lesson{}, err
		}
		return Lesson{}, lessonError("subjectSlug", "", "lessonId has no subjectSlug; want <tier>/<subjectSlug>/<classNum>")
	}
	slug, class, ok := strings.Cut(rest, "/")
	if !ok {
		if err := checkTier(tier); err != nil {
			return Lesson{}, err
		}
		if err := checkSlug(slug); err != nil {
			return Lesson{}, err
		}
		return Lesson{}, lessonError("classNum", "", "lessonId has no classNum; want <tier>/<subjectSlug>/<classNum>")
	}
	return LessonFromPath(tier, slug, class)
}

// LessonFromPath builds a Lesson from the three path segments of the lesson
// routes. tier must be one of Tiers, subjectSlug a valid slug, and classNum
// a canonical positive decimal integer: no sign, no leading zeros, 1 to 6
// digits. "0", "01", "+1", "1.0" and "one" are not class numbers and answer
// 400 BAD_LESSON_ID (the spec leaves a non-integer classNum open); a
// well-formed number beyond the subject's range is the origin's 404
// LESSON_NOT_FOUND. The error names the first failing part in parameter
// ("tier", "subjectSlug" or "classNum") with the raw text in received, and
// lists the tiers in allowed when the tier is wrong.
func LessonFromPath(tier, subjectSlug, classNum string) (Lesson, *apierr.Error) {
	if err := checkTier(tier); err != nil {
		return Lesson{}, err
	}
	if err := checkSlug(subjectSlug); err != nil {
		return Lesson{}, err
	}
	n, ok := parseClass(classNum)
	if !ok {
		msg := "classNum must be a class number: a positive integer without sign or leading zeros, at most 6 digits"
		if classNum == "" {
			msg = "classNum is empty; " + msg
		}
		return Lesson{}, lessonError("classNum", classNum, msg)
	}
	return Lesson{Tier: tier, Slug: subjectSlug, Class: n}, nil
}

func checkTier(tier string) *apierr.Error {
	if ValidTier(tier) {
		return nil
	}
	e := lessonError("tier", tier, "tier must be one of "+strings.Join(Tiers, ", "))
	e.Allowed = append([]string(nil), Tiers...)
	return e
}

func checkSlug(slug string) *apierr.Error {
	if ValidSlug(slug) {
		return nil
	}
	msg := "subjectSlug must be 1 to 64 characters of a-z and 0-9 in hyphen-separated words"
	if slug == "" {
		msg = "subjectSlug is empty; " + msg
	}
	return lessonError("subjectSlug", slug, msg)
}

func lessonError(part, received, msg string) *apierr.Error {
	return &apierr.Error{
		Code:      apierr.BadLessonID,
		Message:   msg,
		Parameter: part,
		Received:  clip(received),
		Hint:      lessonHint,
	}
}

// parseClass parses a canonical class number, 1 to MaxClass.
func parseClass(s string) (int, bool) {
	if len(s) == 0 || len(s) > 6 || s[0] == '0' {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
