package corpus

import "strings"

// keyTerms derives a lesson's key terms (docs/corpus-format.md, "Derived
// values"): every **term** in the card bodies, in order of first
// appearance, distinct ignoring case; the definition is the sentence of the
// first mention with the ** markers removed.
func keyTerms(cards []*Card) []KeyTerm {
	out := []KeyTerm{}
	seen := map[string]bool{}
	for _, c := range cards {
		body := c.Body
		for off := 0; ; {
			i := strings.Index(body[off:], "**")
			if i < 0 {
				break
			}
			start := off + i + 2
			j := strings.Index(body[start:], "**")
			if j < 0 {
				break
			}
			end := start + j
			off = end + 2
			term := strings.TrimSpace(body[start:end])
			if term == "" || strings.ContainsAny(term, "\n*") {
				continue
			}
			key := strings.ToLower(term)
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, KeyTerm{Term: term, Definition: sentenceAt(body, start-2, end+2), CardID: c.ID})
		}
	}
	return out
}

// sentenceAt returns the sentence of body around [from, to), without **.
// A sentence ends at ". ", "! ", "? " or a line break.
func sentenceAt(body string, from, to int) string {
	start := 0
	for k := from - 1; k > 0; k-- {
		if body[k] == '\n' {
			start = k + 1
			break
		}
		if body[k] == ' ' && strings.IndexByte(".!?", body[k-1]) >= 0 {
			start = k + 1
			break
		}
	}
	end := len(body)
	for k := to; k < len(body); k++ {
		if body[k] == '\n' {
			end = k
			break
		}
		if strings.IndexByte(".!?", body[k]) >= 0 && (k+1 == len(body) || body[k+1] == ' ' || body[k+1] == '\n') {
			end = k + 1
			break
		}
	}
	return strings.TrimSpace(strings.ReplaceAll(body[start:end], "**", ""))
}

// Study time (docs/corpus-format.md): reading the card bodies at 200 words
// a minute, plus every video's duration, plus 30 seconds per quiz question
// and per inline check, rounded up to whole minutes, at least 1.
const (
	wordsPerMinute   = 200
	secondsPerAnswer = 30
)

func studyMinutes(l *Lesson) int {
	words := 0
	video := 0
	for _, c := range l.Cards {
		words += countWords(c.Body)
		for _, m := range c.Media {
			if m.Type == "video" {
				video += m.DurationSec
			}
		}
	}
	sec := (words*60+wordsPerMinute-1)/wordsPerMinute + video + secondsPerAnswer*(len(l.Quiz)+len(l.InlineChecks))
	return max(1, (sec+59)/60)
}

// countWords counts runs of non-space bytes; ASCII whitespace separates
// words (bytes of multi-byte runes are never ASCII spaces).
func countWords(s string) int {
	n := 0
	in := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\n', '\t', '\r', '\v', '\f':
			in = false
		default:
			if !in {
				in = true
				n++
			}
		}
	}
	return n
}
