package forensic

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"strings"
)

// Canaries (spec: What the service does §4, "export bundles also carry
// per-organization canaries"): whitespace-only marks in the texts of an
// export bundle, keyed by the deployment's canary key, the organisation
// and the lesson, from which the operator recovers the organisation even
// when the envelope's tag was stripped.
//
// A site is a sentence or clause end inside a line: '.', '?', '!', ',',
// ';' or ':' followed by a run of spaces and then a character that is
// neither a space nor a line break (sentence ends alone left some classes
// of the generated corpus under 64 sites). A mark sets the run to one
// space (bit 0) or two (bit 1): the typewriter's double space after a
// sentence, which HTML and markdown render as one. Words never change, and a string's contents survive a
// JSON parse and re-encoding, so the marks do too.
//
// A site's bit is the low bit of HMAC-SHA256(lesson key, context), where
// the context is the sentence or clause that ends at the site: the text from the
// previous site's run (or the line's start, without a leading "> " quote
// marker) to the terminator, with the body's "**" key-term markers
// removed. The bit therefore depends on the words alone, not on where the
// sentence sits: a card body, the same text as narration (which drops the
// markers) and the transcript's markdown (which quotes voiceover lines)
// carry the same bits for the same sentences, and finding them needs no
// other file.

// Canary marks and checks the texts of one lesson for one organisation.
// It is not safe for concurrent use.
type Canary struct {
	mac hash.Hash
	sum []byte
}

// NewCanary is the canary of lessonID for org under key (subkey.Canary).
func NewCanary(key []byte, org, lessonID string) *Canary {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("c1"))
	m.Write([]byte{byte(len(org) >> 8), byte(len(org))})
	m.Write([]byte(org))
	m.Write([]byte(lessonID))
	return &Canary{mac: hmac.New(sha256.New, m.Sum(nil))}
}

// bit is the mark of the sentence ctx.
func (c *Canary) bit(ctx string) bool {
	c.mac.Reset()
	if strings.Contains(ctx, "**") {
		ctx = strings.ReplaceAll(ctx, "**", "")
	}
	c.mac.Write([]byte(ctx))
	c.sum = c.mac.Sum(c.sum[:0])
	return c.sum[0]&1 == 1
}

// site is a sentence end of a text: s[ctx:end] is the sentence, its
// terminator last, and s[end:run] the run of spaces after it.
type site struct{ ctx, end, run int }

// eachSite calls f for each site of s, in order.
func eachSite(s string, f func(site)) {
	start := 0 // the current sentence's start
	lineStart := true
	for i := 0; i < len(s); i++ {
		if lineStart {
			if strings.HasPrefix(s[i:], "> ") {
				i++
				start = i + 1
				lineStart = false
				continue
			}
			lineStart = false
		}
		switch s[i] {
		case '\n':
			start, lineStart = i+1, true
		case '.', '?', '!', ',', ';', ':':
			j := i + 1
			for j < len(s) && s[j] == ' ' {
				j++
			}
			if j == i+1 || j == len(s) || s[j] == '\n' || s[j] == '\r' {
				continue
			}
			f(site{start, i + 1, j})
			start = j
			i = j - 1
		}
	}
}

// Mark returns text with its sites marked: every sentence end's run of
// spaces one or two long, as the bits say; nothing else changes.
func (c *Canary) Mark(text string) string {
	var b strings.Builder
	last := 0
	eachSite(text, func(st site) {
		if b.Len() == 0 {
			b.Grow(len(text) + len(text)/32)
		}
		b.WriteString(text[last:st.end])
		b.WriteByte(' ')
		if c.bit(text[st.ctx:st.end]) {
			b.WriteByte(' ')
		}
		last = st.run
	})
	if last == 0 {
		return text
	}
	b.WriteString(text[last:])
	return b.String()
}

// Match counts the sites of text and those whose run agrees with this
// canary's bit: a text marked by it matches at every site, another
// organisation's or lesson's marks at about half of them.
func (c *Canary) Match(text string) (sites, matched int) {
	eachSite(text, func(st site) {
		sites++
		if (st.run-st.end >= 2) == c.bit(text[st.ctx:st.end]) {
			matched++
		}
	})
	return sites, matched
}

// Sites counts the sites of text: the bits a canary can carry in it.
func Sites(text string) int {
	n := 0
	eachSite(text, func(site) { n++ })
	return n
}

// MatchTexts is Match over texts counting each sentence once: a sentence
// repeated (a body that is also the narration, a voiceover in both the
// lesson and the transcript) carries one bit, not several that agree by
// construction, so the count is of independent bits.
func (c *Canary) MatchTexts(texts []string) (sites, matched int) {
	seen := map[string]bool{}
	for _, text := range texts {
		eachSite(text, func(st site) {
			ctx := strings.ReplaceAll(text[st.ctx:st.end], "**", "")
			if seen[ctx] {
				return
			}
			seen[ctx] = true
			sites++
			if (st.run-st.end >= 2) == c.bit(ctx) {
				matched++
			}
		})
	}
	return sites, matched
}
