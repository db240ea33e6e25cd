package forensic

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

var canaryKey = []byte("a canary key of thirty-two bytes")

// sampleText has many sentence ends of the kinds the corpus writes.
func sampleText(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "Sentence %d explains **term %d** in context. Why does it matter? It does! ", i, i%7)
	}
	return strings.TrimSpace(b.String())
}

func TestCanaryMarks(t *testing.T) {
	text := sampleText(30) // 90 sites, the text's end one of them
	c := NewCanary(canaryKey, "acme", "high/algebra/3")
	marked := c.Mark(text)
	if sites, matched := c.Match(marked); sites != 90 || matched != 90 {
		t.Errorf("Match(marked) = %d of %d sites, want 90 of 90", matched, sites)
	}
	if !slices.Equal(strings.Fields(marked), strings.Fields(text)) {
		t.Error("marking changed the words")
	}
	if strings.ReplaceAll(marked, " ", "") != strings.ReplaceAll(text, " ", "") {
		t.Error("marking changed more than spaces")
	}
	if ml := c.Mark("One. Two.\nThree!\nFour?"); strings.Contains(ml, "  \n") || strings.HasSuffix(ml, "  ") {
		t.Errorf("Mark = %q: two spaces at a line's end (a markdown hard break)", ml)
	}
	if marked == text || !strings.Contains(marked, ".  ") {
		t.Error("no double space: the marks carry no bits")
	}
	if again := NewCanary(canaryKey, "acme", "high/algebra/3").Mark(marked); again != marked {
		t.Error("marking a marked text again changes it: the marks are not a function of the words")
	}
	for name, other := range map[string]*Canary{
		"another organisation": NewCanary(canaryKey, "globex", "high/algebra/3"),
		"another lesson":       NewCanary(canaryKey, "acme", "high/algebra/4"),
		"another key":          NewCanary([]byte("another canary key of 32 bytes!!"), "acme", "high/algebra/3"),
	} {
		sites, matched := other.Match(marked)
		if sites != 90 || matched > 70 || matched < 20 {
			t.Errorf("%s: %d of %d sites match, want about half", name, matched, sites)
		}
		if other.Mark(text) == marked {
			t.Errorf("%s marks the same", name)
		}
	}
}

// TestCanarySurvivesJSON: a string's contents survive a parse and
// re-encoding (indented, HTML-escaped), so the marks do.
func TestCanarySurvivesJSON(t *testing.T) {
	c := NewCanary(canaryKey, "acme", "high/algebra/3")
	marked := c.Mark(sampleText(25))
	doc, _ := json.Marshal(map[string]any{"cards": []map[string]string{{"body": marked}}})
	var v struct {
		Cards []struct{ Body string } `json:"cards"`
	}
	re, _ := json.MarshalIndent(json.RawMessage(doc), "", "    ")
	if err := json.Unmarshal(re, &v); err != nil {
		t.Fatal(err)
	}
	if sites, matched := c.Match(v.Cards[0].Body); sites != 75 || matched != sites {
		t.Errorf("after re-encoding: %d of %d sites match", matched, sites)
	}
}

// TestCanaryAcrossForms: the narration (markers dropped) and the
// markdown's quoted voiceover lines carry the body's bits.
func TestCanaryAcrossForms(t *testing.T) {
	c := NewCanary(canaryKey, "acme", "high/algebra/3")
	marked := c.Mark("First line ends here. Then **more** text.\nSecond line starts. And ends? Yes.")
	spoken := strings.ReplaceAll(marked, "**", "")
	quoted := "## Label\n\n> " + strings.ReplaceAll(spoken, "\n", "\n> ") + "\n\n"
	for name, s := range map[string]string{"body": marked, "spoken": spoken, "markdown": quoted} {
		if sites, matched := c.Match(s); sites != 5 || matched != 5 {
			t.Errorf("%s: %d of %d sites match, want 5 of 5", name, matched, sites)
		}
	}
}

func TestSites(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
	}{
		{"", 0},
		{"No end", 0},
		{"One. Two", 1},
		{"Trailing. ", 1},
		{"Line end.\nNext", 1},
		{"Line end\nNext.", 1},
		{"Comma,\nand colon:  ", 0},
		{"Three.\n\n> Quoted line.   \n", 2},
		{"Pi is 3.14 here", 0},
		{"Wait... then! Go? Now", 3},
		{"Many.    Spaces", 1},
		{"> Quoted. Text", 1},
		{"Clauses, then; more: done", 3},
		{"At 3:15, 1,000", 1},
	} {
		if got := Sites(tt.in); got != tt.want {
			t.Errorf("Sites(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
