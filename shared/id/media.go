package id

import (
	"strconv"
	"strings"

	"github.com/lectern-api/lectern/shared/apierr"
)

// MediaTypes are the spec's media types, in the spec's order.
var MediaTypes = []string{"video", "audio", "image"}

// ValidMediaType reports whether s is one of MediaTypes.
func ValidMediaType(s string) bool {
	for _, t := range MediaTypes {
		if t == s {
			return true
		}
	}
	return false
}

// MaxMediaLen bounds a mediaId, in bytes. The longest valid one is
// 7+1+64+1+6 (lessonId) + 1+32 (card) + 1+5 (type) = 118 bytes.
const MaxMediaLen = 200

const mediaHint = "take mediaIds from the media route or the export media manifest and pass them verbatim; a mediaId has the form <tier>/<subjectSlug>/<classNum>#<cardId>#<type>"

// Media is a mediaId: <lessonId>#<cardId>#<type>, type one of MediaTypes
// (spec: Conventions). The zero value is not a media id.
type Media struct {
	Lesson Lesson
	Card   string
	Type   string
}

// IsZero reports whether m is the zero Media, which names no asset.
func (m Media) IsZero() bool { return m.Lesson.IsZero() && m.Card == "" && m.Type == "" }

// String returns the mediaId, or "" for the zero Media.
func (m Media) String() string {
	if m.IsZero() {
		return ""
	}
	b := make([]byte, 0, len(m.Lesson.Tier)+len(m.Lesson.Slug)+len(m.Card)+len(m.Type)+10)
	b = m.Lesson.AppendTo(b)
	b = append(b, '#')
	b = append(b, m.Card...)
	b = append(b, '#')
	b = append(b, m.Type...)
	return string(b)
}

// ParseMedia parses a mediaId. A malformed one answers 400 BAD_LESSON_ID
// (spec: Errors, "a malformed mediaId also lands here, failing on the part
// before the first #"; BAD_MEDIA_ID is reserved): parameter "mediaIds",
// received the text before the first '#' (all of it when there is none), and
// a message quoting the id and saying which part is wrong. Input longer than
// MaxMediaLen is malformed before it is looked at.
func ParseMedia(s string) (Media, *apierr.Error) {
	lessonPart, rest, hasCard := strings.Cut(s, "#")
	if len(s) > MaxMediaLen {
		return Media{}, mediaError(lessonPart, "mediaId is longer than "+strconv.Itoa(MaxMediaLen)+" bytes")
	}
	l, err := ParseLesson(lessonPart)
	if err != nil {
		return Media{}, mediaError(lessonPart, quoted(s)+" does not start with a lessonId: "+err.Message)
	}
	if !hasCard {
		return Media{}, mediaError(lessonPart, quoted(s)+" has no cardId after its lessonId")
	}
	card, typ, hasType := strings.Cut(rest, "#")
	if !ValidCardID(card) {
		return Media{}, mediaError(lessonPart, quoted(s)+" has a malformed cardId "+strconv.Quote(card)+
			": want 1 to 32 characters of a-z, 0-9 and hyphens, not starting with a hyphen")
	}
	if !hasType {
		return Media{}, mediaError(lessonPart, quoted(s)+" has no type after its cardId; want one of "+strings.Join(MediaTypes, ", "))
	}
	if strings.IndexByte(typ, '#') >= 0 {
		return Media{}, mediaError(lessonPart, quoted(s)+" has more than three #-separated parts")
	}
	if !ValidMediaType(typ) {
		return Media{}, mediaError(lessonPart, quoted(s)+" has type "+strconv.Quote(typ)+"; want one of "+strings.Join(MediaTypes, ", "))
	}
	return Media{Lesson: l, Card: card, Type: typ}, nil
}

// quoted names the id in a message; the id is at most MaxMediaLen bytes.
func quoted(s string) string { return "mediaId " + strconv.Quote(s) }

func mediaError(lessonPart, msg string) *apierr.Error {
	return &apierr.Error{
		Code:      apierr.BadLessonID,
		Message:   msg,
		Parameter: "mediaIds",
		Received:  clip(lessonPart),
		Hint:      mediaHint,
	}
}
