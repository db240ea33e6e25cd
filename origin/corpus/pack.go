package corpus

import "strings"

// A packer copies the texts that belong to one lesson alone (its id,
// title and subtitle, its cards' bodies, narration scripts and
// voiceovers, its media ids, locations and sums, its worked example's
// problem, its interactives' prompts, its key terms' definitions) into
// one string and points them into it: the loader's workers pack every
// lesson once it is interned (intern.go), so that the decoder's copies
// are garbage once the load is done. A lesson's texts are then one
// allocation, not dozens each rounded up to its size class, and they lie
// in card order, as a request that renders the lesson reads them
// (origin/lessondoc escapes them per request). The values classes share
// are interned instead and left where they are.
type packer struct {
	fields []*string // the current lesson's, reused
}

// lesson packs l's own texts.
func (p *packer) lesson(l *Lesson) {
	f := append(p.fields[:0], &l.ID, &l.Title, &l.Subtitle)
	for _, c := range l.Cards {
		f = append(f, &c.Body, &c.NarrationScript, &c.VideoVoiceover)
		for _, m := range c.Media {
			f = append(f, &m.ID, &m.Location, &m.SHA256)
		}
	}
	for i := range l.KeyTerms {
		f = append(f, &l.KeyTerms[i].Definition)
	}
	for i := range l.Interactives {
		f = append(f, &l.Interactives[i].Prompt)
	}
	if w := l.WorkedExample; w != nil {
		f = append(f, &w.Problem)
	}
	p.fields = f

	n := 0
	for _, s := range f {
		n += len(*s)
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range f {
		b.WriteString(*s)
	}
	all := b.String() // the builder's bytes, not a copy
	for _, s := range f {
		n := len(*s)
		*s, all = all[:n], all[n:]
	}
}
