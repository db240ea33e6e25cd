package forensic

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
)

func TestTail(t *testing.T) {
	for _, tt := range []struct {
		n, k int
		want float64
	}{
		{10, 0, 1},
		{10, 10, 1.0 / 1024},
		{10, 9, 11.0 / 1024},
		{64, 64, math.Pow(2, -64)},
		{2, 1, 0.75},
	} {
		if got := tail(tt.n, tt.k); math.Abs(got-tt.want) > tt.want*1e-9 {
			t.Errorf("tail(%d, %d) = %g, want %g", tt.n, tt.k, got, tt.want)
		}
	}
}

// TestDetectLesson: a lesson document's marked texts name the
// organisation among candidates; its tag, when present, names the scope.
func TestDetectLesson(t *testing.T) {
	tagKey := []byte("0123456789abcdef0123456789abcdef")
	text := sampleText(30)
	d := &Detector{Keys: Keys{Tag: tagKey, Canary: canaryKey}, Orgs: []string{"acme", "globex", "initech"}}
	for _, org := range d.Orgs {
		c := NewCanary(canaryKey, org, "high/algebra/3")
		doc, _ := json.Marshal(map[string]any{"lessonId": "high/algebra/3",
			"cards": []map[string]string{{"body": c.Mark(text)}}})
		f, err := d.Detect(doc)
		if err != nil {
			t.Fatal(err)
		}
		if f.OrgID != org || len(f.Matched) != 1 || f.Matched[0].Bits != 32 || f.Matched[0].Agreeing != 32 { // 30 distinct sentences and two repeated
			t.Errorf("%s: named %q, evidence %+v", org, f.OrgID, f.Matched)
		}
	}
	doc, _ := json.Marshal(map[string]any{"lessonId": "high/algebra/3", "cards": []map[string]string{{"body": text}},
		"_license": Envelope{Lic: "lic_globex_ecla1", Tag: Tag(tagKey, "globex", 5)}})
	f, err := d.Detect(doc)
	if err != nil || f.OrgID != "globex" || f.Scopes != "service-api/content.read service-api/media.download" {
		t.Errorf("tagged: named %q, scopes %q, err %v", f.OrgID, f.Scopes, err)
	}
}

// FuzzDetect: no input panics or hangs; an error is ErrUnrecognised or
// an archive too large.
func FuzzDetect(f *testing.F) {
	for _, s := range []string{"", "{}", `{"lessonId":"a","cards":[{"body":"A. B"}]}`, "## L\n\nA. B\n", "PK\x03\x04", "H4sIAAAA", `{"data":"H4sI"}`} {
		f.Add([]byte(s))
	}
	d := &Detector{Keys: Keys{Tag: canaryKey, Canary: canaryKey}, Orgs: []string{"acme"}}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := d.Detect(b); err != nil && !errors.Is(err, ErrUnrecognised) && err.Error() != "forensic: the archive is too large to read" {
			t.Errorf("Detect: %v", err)
		}
	})
}
