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
// neither a space nor a line break; or a sentence end ('.', '?', '!') at
// the end of a line or text, with any trailing spaces (sentence ends
// alone left some classes of the generated corpus under 64 sites, and
// clause ends some of the full one). A mark sets a run within a line to
// one space (bit 0) or two (bit 1), the typewriter's double space after a
// sentence, which HTML and markdown render as one; at a line's end, to no
// space (0) or one (1), which markdown ignores (a hard break takes two). Words never change, and a string's contents survive a
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
	ctx []byte // bit's scratch: the sentence without its markers
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
	c.ctx = c.ctx[:0]
	for { // strings.ReplaceAll(ctx, "**", ""), into the scratch
		i := strings.Index(ctx, "**")
		if i < 0 {
			break
		}
		c.ctx = append(c.ctx, ctx[:i]...)
		ctx = ctx[i+2:]
	}
	c.ctx = append(c.ctx, ctx...)
	c.mac.Write(c.ctx)
	c.sum = c.mac.Sum(c.sum[:0])
	return c.sum[0]&1 == 1
}

// site is a sentence end of a text: s[ctx:end] is the sentence, its
// terminator last, and s[end:run] the run of spaces after it. At a line's
// end (lineEnd) the run is the line's trailing spaces.
type site struct {
	ctx, end, run int
	lineEnd       bool
}

// set reports whether the site's run carries a 1: two spaces within a
// line, one at its end.
func (st site) set() bool {
	if st.lineEnd {
		return st.run > st.end
	}
	return st.run-st.end >= 2
}

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
		switch c := s[i]; c {
		case '\n':
			start, lineStart = i+1, true
		case '.', '?', '!', ',', ';', ':':
			j := i + 1
			for j < len(s) && s[j] == ' ' {
				j++
			}
			if j == len(s) || s[j] == '\n' {
				if c == '.' || c == '?' || c == '!' {
					f(site{start, i + 1, j, true})
				}
				i = j - 1 // the line break is read next
				continue
			}
			if j == i+1 || s[j] == '\r' {
				continue
			}
			f(site{start, i + 1, j, false})
			start = j
			i = j - 1
		}
	}
}

// Mark returns text with its sites marked, as the bits say: every
// sentence end's run of spaces one or two long within a line, none or one
// at a line's end; nothing else changes.
func (c *Canary) Mark(text string) string {
	var b strings.Builder
	last := 0
	eachSite(text, func(st site) {
		if b.Len() == 0 {
			b.Grow(len(text) + len(text)/32)
		}
		b.WriteString(text[last:st.end])
		if !st.lineEnd {
			b.WriteByte(' ')
		}
		if c.bit(text[st.ctx:st.end]) {
			b.WriteByte(' ')
		}
		last = st.run
	})
	if b.Len() == 0 {
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
		if st.set() == c.bit(text[st.ctx:st.end]) {
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
			if st.set() == c.bit(ctx) {
				matched++
			}
		})
	}
	return sites, matched
}
