package corpus_test

import (
	"testing"
	"unsafe"

	"github.com/lectern-api/lectern/origin/corpus/corpustest"
)

// TestRepeatsShareTheirBytes: the loader interns the values classes
// repeat (intern.go), so that within a subject (one loader worker) two
// equal MIME types, card ids or quiz options are one string.
func TestRepeatsShareTheirBytes(t *testing.T) {
	c := corpustest.Small(t)
	shared := func(what string, vals []string) {
		t.Helper()
		first := map[string]*byte{}
		n := 0
		for _, v := range vals {
			if v == "" {
				continue
			}
			if p, ok := first[v]; !ok {
				first[v] = unsafe.StringData(v)
			} else if p != unsafe.StringData(v) {
				t.Errorf("%s %q: two copies in one subject", what, v)
				return
			} else {
				n++
			}
		}
		if n == 0 {
			t.Errorf("%s: no repeated value to share in the subject", what)
		}
	}
	s := c.Subjects[0]
	var mimes, cards []string
	for _, l := range s.Lessons {
		for _, m := range l.Media {
			mimes = append(mimes, m.MIME)
		}
		for _, cd := range l.Cards {
			cards = append(cards, cd.ID)
		}
	}
	shared("MIME type", mimes)
	shared("card id", cards)
}
