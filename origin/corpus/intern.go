package corpus

// An interner gives one copy of each string value it has seen: the
// loader's workers pass every lesson they parse through one of their own
// (loadLessons), so that the values classes repeat (card ids and labels,
// key points, alt texts, media types and MIME types, quiz and check
// questions, options and hints, worked-example steps) share their bytes,
// and the copies the JSON decoder made are garbage once the load is
// done. The tables go with the load. Measured (docs/bench.md, Scale): a
// tenth of the deployed corpus's strings' bytes are repeats; interned,
// the heap after Load is 141 → 130 MiB, and on a corpus ten times larger
// (gen.Options.Scale) 1,342 → 1,190 MiB, 2,468 → 2,310 MiB once
// server.Build has run. unique.Make was measured too and saved nothing
// on the deployed corpus: its global table's entries cost what the
// repeats did.
type interner map[string]string

// of is the interned copy of s.
func (in interner) of(s string) string {
	if v, ok := in[s]; ok {
		return v
	}
	in[s] = s
	return s
}

// all interns every string of ss in place.
func (in interner) all(ss []string) {
	for i, s := range ss {
		ss[i] = in.of(s)
	}
}

// lessons interns the repeated fields of ls, in place. Bodies, narration
// scripts, voiceovers, titles, media ids and locations, which classes do
// not repeat, are left as they are.
func (in interner) lessons(ls []*Lesson) {
	for _, l := range ls {
		for _, c := range l.Cards {
			c.ID, c.Label, c.IllustrationAlt = in.of(c.ID), in.of(c.Label), in.of(c.IllustrationAlt)
			in.all(c.KeyPoints)
		}
		for _, m := range l.Media {
			m.CardID, m.Type, m.MIME = in.of(m.CardID), in.of(m.Type), in.of(m.MIME)
		}
		for i := range l.Quiz {
			q := &l.Quiz[i]
			q.Question = in.of(q.Question)
			in.all(q.Options)
		}
		for i := range l.InlineChecks {
			q := &l.InlineChecks[i]
			q.AfterCard, q.Question, q.Rationale = in.of(q.AfterCard), in.of(q.Question), in.of(q.Rationale)
			in.all(q.Options)
			in.all(q.Hints)
		}
		for i := range l.Interactives {
			x := &l.Interactives[i]
			x.ID, x.Card, x.Kind = in.of(x.ID), in.of(x.Card), in.of(x.Kind)
		}
		if w := l.WorkedExample; w != nil {
			w.Answer = in.of(w.Answer)
			in.all(w.Steps)
		}
		for i := range l.KeyTerms {
			k := &l.KeyTerms[i]
			k.Term, k.CardID = in.of(k.Term), in.of(k.CardID)
		}
	}
}
