package server

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/lectern-api/lectern/origin/billing"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/lessondoc"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/param"
	"github.com/lectern-api/lectern/shared/route"
	"github.com/lectern-api/lectern/shared/scope"
	"github.com/lectern-api/lectern/shared/token"
)

// findLessonWhere returns the first lesson of the corpus that satisfies f.
func findLessonWhere(t *testing.T, c *corpus.Corpus, what string, f func(*corpus.Lesson) bool) *corpus.Lesson {
	t.Helper()
	for _, l := range c.Lessons {
		if f(l) {
			return l
		}
	}
	t.Fatalf("the small corpus has no lesson with %s", what)
	return nil
}

func anyCard(l *corpus.Lesson, f func(*corpus.Card) bool) bool {
	return slices.ContainsFunc(l.Cards, f)
}

func lessonPathOf(l *corpus.Lesson) string { return "/v1/lessons/" + l.ID }

func keysOf(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

func objects(t *testing.T, v any) []map[string]any {
	t.Helper()
	arr, ok := v.([]any)
	if !ok {
		t.Fatalf("got %T, want an array", v)
	}
	out := make([]map[string]any, len(arr))
	for i, x := range arr {
		if out[i], ok = x.(map[string]any); !ok {
			t.Fatalf("element %d: got %T, want an object", i, x)
		}
	}
	return out
}

func strs(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, len(arr))
	for i, x := range arr {
		out[i], _ = x.(string)
	}
	return out
}

var includeSections = []string{"quiz", "inlineChecks", "interactives", "narrationText", "videoTranscript", "media", "workedExample"}

// spec: Resources, Lesson (the detail table); Common parameters, detail:
// "changes how much, never which fields exist"; Route rules §3.
func TestLessonDetailLevels(t *testing.T) {
	h := newHarness(t)
	tok := h.org("detail", "topics", "college", "high", "middle", "primary")
	long := findLessonWhere(t, h.corpus(), "a card body over the cap", func(l *corpus.Lesson) bool {
		return anyCard(l, func(c *corpus.Card) bool { return utf8.RuneCountInString(c.Body) > lessondoc.CapBody+200 })
	})
	path := lessonPathOf(long)
	levels := map[string]map[string]any{}
	for _, d := range []string{"brief", "standard", "full"} {
		levels[d] = h.ok(path+"?detail="+d, tok)
	}
	if def := h.ok(path, tok); !slices.Equal(keysOf(def), keysOf(levels["standard"])) || def["truncated"] != true {
		t.Errorf("no detail: got %v, want the standard level", keysOf(def))
	}

	// The same members at every level, for the lesson and for each card
	// (full adds the include sections, which are not fields of the level).
	base := keysOf(levels["standard"])
	for _, d := range []string{"brief", "full"} {
		got := slices.DeleteFunc(keysOf(levels[d]), func(k string) bool { return slices.Contains(includeSections, k) })
		if !slices.Equal(got, base) {
			t.Errorf("%s members: got %v, want %v", d, got, base)
		}
	}
	wantCardKeys := []string{"body", "hasImage", "hasNarration", "hasVideo", "id", "illustrationAlt", "keyPoints", "label"}
	for d, m := range levels {
		cards := objects(t, m["cards"])
		if len(cards) != len(long.Cards) {
			t.Fatalf("%s: got %d cards, want %d", d, len(cards), len(long.Cards))
		}
		for i, c := range cards {
			if !slices.Equal(keysOf(c), wantCardKeys) {
				t.Errorf("%s card %d members: got %v, want %v", d, i, keysOf(c), wantCardKeys)
			}
			if c["id"] != long.Cards[i].ID || c["label"] != long.Cards[i].Label {
				t.Errorf("%s card %d: got %v %v, want %s %s", d, i, c["id"], c["label"], long.Cards[i].ID, long.Cards[i].Label)
			}
			if c["hasNarration"] != long.Cards[i].Narrated {
				t.Errorf("%s card %d: hasNarration %v, want %v", d, i, c["hasNarration"], long.Cards[i].Narrated)
			}
		}
		for _, k := range []string{"lessonId", "tier", "subjectSlug", "classNum", "title", "subtitle", "hasVideo", "hasNarration", "hasTranscript", "estimatedMinutes", "contentVersion", "_license"} {
			if _, ok := m[k]; !ok {
				t.Errorf("%s: no %s", d, k)
			}
		}
		if m["lessonId"] != long.ID || m["estimatedMinutes"] != json.Number(strconv.Itoa(long.StudyMinutes)) ||
			m["contentVersion"] != h.corpus().ContentVersion || m["hasTranscript"] != long.HasTranscript {
			t.Errorf("%s: got %v %v %v %v", d, m["lessonId"], m["estimatedMinutes"], m["contentVersion"], m["hasTranscript"])
		}
		lic, _ := m["_license"].(map[string]any)
		if lic["lic"] != "lic_detail_ecla1" || !strings.HasPrefix(lic["tag"].(string), "t1") {
			t.Errorf("%s: _license %v", d, lic)
		}
	}

	// brief: ids, labels and flags; no prose.
	b := levels["brief"]
	if b["truncated"] != false || len(objects(t, b["keyTerms"])) != 0 {
		t.Errorf("brief: truncated %v, keyTerms %v", b["truncated"], b["keyTerms"])
	}
	for i, c := range objects(t, b["cards"]) {
		if c["body"] != "" || len(strs(c["keyPoints"])) != 0 || c["illustrationAlt"] != "" {
			t.Errorf("brief card %d has prose: %v", i, c)
		}
	}
	for _, k := range includeSections {
		if _, ok := b[k]; ok {
			t.Errorf("brief has the section %s", k)
		}
	}

	// standard: bodies, bullets, alt text and key terms; long text capped.
	std := levels["standard"]
	if std["truncated"] != true {
		t.Errorf("standard: truncated %v, want true (a body is over the cap)", std["truncated"])
	}
	if got := len(objects(t, std["keyTerms"])); got != len(long.KeyTerms) || got == 0 {
		t.Errorf("standard: %d key terms, want %d", got, len(long.KeyTerms))
	}
	for i, c := range objects(t, std["cards"]) {
		want := long.Cards[i]
		body := c["body"].(string)
		if utf8.RuneCountInString(want.Body) <= lessondoc.CapBody {
			if body != want.Body {
				t.Errorf("standard card %d: a short body was changed", i)
			}
		} else {
			kept, cut := strings.CutSuffix(body, "…")
			if !cut || utf8.RuneCountInString(body) > lessondoc.CapBody || !strings.HasPrefix(want.Body, kept) {
				t.Errorf("standard card %d: body of %d characters not capped at %d with …: %q", i, utf8.RuneCountInString(body), lessondoc.CapBody, body)
			}
			if next, _ := utf8.DecodeRuneInString(want.Body[len(kept):]); !unicode.IsSpace(next) {
				t.Errorf("standard card %d: cut inside a word: %q|%q", i, kept[max(0, len(kept)-20):], want.Body[len(kept):len(kept)+10])
			}
			if strings.Count(kept, "**")%2 != 0 {
				t.Errorf("standard card %d: the cut left a **term** marker open", i)
			}
		}
		if !slices.Equal(strs(c["keyPoints"]), want.KeyPoints) || c["illustrationAlt"] != want.IllustrationAlt {
			t.Errorf("standard card %d: key points or alt text differ", i)
		}
	}

	// full: complete text, every include section, nothing truncated.
	full := levels["full"]
	if full["truncated"] != false {
		t.Errorf("full: truncated %v", full["truncated"])
	}
	for i, c := range objects(t, full["cards"]) {
		if c["body"] != long.Cards[i].Body {
			t.Errorf("full card %d: body is not complete", i)
		}
	}
	for _, k := range includeSections {
		if _, ok := full[k]; !ok {
			t.Errorf("full lacks the section %s", k)
		}
	}

	// spec: detail "Unrecognised value: 400 naming the parameter and the
	// three legal values".
	e := h.fails(path+"?detail=summary", tok, 400, "BAD_REQUEST")
	if e.Parameter != "detail" || !slices.Equal(e.Allowed, []string{"brief", "standard", "full"}) {
		t.Errorf("detail=summary: parameter %q allowed %v", e.Parameter, e.Allowed)
	}
}

// spec: Common parameters, include: each value adds its section on top of
// any level; any other value is 400 listing all seven; markdown is 400 on
// the lesson route. The list is order-insensitive.
func TestLessonIncludeSections(t *testing.T) {
	h := newHarness(t)
	tok := h.org("include", "topics", "college", "high", "middle", "primary")
	c := h.corpus()
	l := findLessonWhere(t, c, "every kind of section", func(l *corpus.Lesson) bool {
		return l.WorkedExample != nil && len(l.Interactives) > 0 && len(l.Quiz) > 0 && len(l.InlineChecks) > 0 &&
			anyCard(l, func(c *corpus.Card) bool { return c.VideoVoiceover != "" }) &&
			anyCard(l, func(c *corpus.Card) bool { return c.Narrated })
	})
	path := lessonPathOf(l)
	std := keysOf(h.ok(path, tok))
	for _, v := range includeSections {
		for _, d := range []string{"brief", "standard"} {
			m := h.ok(path+"?detail="+d+"&include="+v, tok)
			if want := slices.Sorted(slices.Values(append(slices.Clone(std), v))); !slices.Equal(keysOf(m), want) {
				t.Errorf("include=%s at %s: got %v, want %v", v, d, keysOf(m), want)
			}
		}
	}
	m := h.ok(path+"?include="+strings.Join(includeSections, ","), tok)

	quiz := objects(t, m["quiz"])
	if len(quiz) != len(l.Quiz) {
		t.Fatalf("quiz: %d items, want %d", len(quiz), len(l.Quiz))
	}
	for i, q := range quiz {
		if q["question"] != l.Quiz[i].Question || !slices.Equal(strs(q["options"]), l.Quiz[i].Options) ||
			q["answerIndex"] != json.Number(strconv.Itoa(l.Quiz[i].AnswerIndex)) {
			t.Errorf("quiz %d: got %v", i, q)
		}
	}
	checks := objects(t, m["inlineChecks"])
	if len(checks) != len(l.InlineChecks) {
		t.Fatalf("inlineChecks: %d, want %d", len(checks), len(l.InlineChecks))
	}
	for i, ic := range checks {
		w := l.InlineChecks[i]
		if ic["afterCard"] != w.AfterCard || !slices.Equal(strs(ic["hints"]), w.Hints) || ic["rationale"] != w.Rationale ||
			ic["answerIndex"] != json.Number(strconv.Itoa(w.AnswerIndex)) {
			t.Errorf("inlineChecks %d: got %v", i, ic)
		}
	}
	inter := objects(t, m["interactives"])
	if len(inter) != len(l.Interactives) {
		t.Fatalf("interactives: %d, want %d", len(inter), len(l.Interactives))
	}
	for i, it := range inter {
		if it["id"] != l.Interactives[i].ID || it["kind"] != l.Interactives[i].Kind || it["cardId"] != l.Interactives[i].Card {
			t.Errorf("interactive %d: got %v", i, it)
		}
		if _, ok := it["config"].(map[string]any); !ok {
			t.Errorf("interactive %d: config %T, want an object", i, it["config"])
		}
	}
	var wantNarr, wantVideo []string
	for _, cd := range l.Cards {
		if cd.Narrated { // spoken text: the narration without its **term** markers
			wantNarr = append(wantNarr, cd.ID+"|"+strings.ReplaceAll(cd.Narration(), "**", ""))
		}
		if cd.VideoVoiceover != "" {
			wantVideo = append(wantVideo, cd.ID+"|"+cd.VideoVoiceover)
		}
	}
	pairs := func(v any) []string {
		var out []string
		for _, o := range objects(t, v) {
			out = append(out, o["cardId"].(string)+"|"+o["text"].(string))
		}
		return out
	}
	if got := pairs(m["narrationText"]); !slices.Equal(got, wantNarr) {
		t.Errorf("narrationText: got %q, want %q", got, wantNarr)
	}
	if got := pairs(m["videoTranscript"]); !slices.Equal(got, wantVideo) {
		t.Errorf("videoTranscript: got %q, want %q", got, wantVideo)
	}
	media := objects(t, m["media"])
	if len(media) != len(l.Media) {
		t.Fatalf("media: %d, want %d", len(media), len(l.Media))
	}
	for i, a := range media {
		if a["mediaId"] != l.Media[i].ID || a["url"] != nil {
			t.Errorf("media %d: got %v", i, a)
		}
		if v, ok := a["url"]; !ok || v != nil {
			t.Errorf("media %d: url must be present and null", i)
		}
	}
	we, _ := m["workedExample"].(map[string]any)
	if we["problem"] != l.WorkedExample.Problem || we["answer"] != l.WorkedExample.Answer || !slices.Equal(strs(we["steps"]), l.WorkedExample.Steps) {
		t.Errorf("workedExample: got %v", m["workedExample"])
	}
	// The include sections are complete at standard detail.
	if m["truncated"] != h.ok(path, tok)["truncated"] {
		t.Errorf("include changed truncated")
	}

	none := findLessonWhere(t, c, "no worked example", func(l *corpus.Lesson) bool { return l.WorkedExample == nil })
	if m := h.ok(lessonPathOf(none)+"?include=workedExample", tok); m["workedExample"] != nil {
		t.Errorf("%s: workedExample %v, want null", none.ID, m["workedExample"])
	} else if _, ok := m["workedExample"]; !ok {
		t.Errorf("%s: workedExample absent, want null", none.ID)
	}

	// Order and repetition do not matter: same body, same ETag.
	a := h.get(path+"?include=quiz,media,quiz", tok)
	b := h.get(path+"?include=media,quiz", tok)
	if a.status != 200 || !bytes.Equal(a.body, b.body) || a.header.Get("ETag") == "" || a.header.Get("ETag") != b.header.Get("ETag") {
		t.Errorf("include order: bodies equal %v, ETags %q %q", bytes.Equal(a.body, b.body), a.header.Get("ETag"), b.header.Get("ETag"))
	}

	for _, bad := range []string{"markdown", "quiz,markdown", "cards", "quiz,"} {
		e := h.fails(path+"?include="+bad, tok, 400, "BAD_REQUEST")
		if e.Parameter != "include" || !slices.Equal(e.Allowed, includeSections) {
			t.Errorf("include=%s: parameter %q allowed %v, want include and the seven", bad, e.Parameter, e.Allowed)
		}
	}
}

// spec: Resources, Transcript; Route table 7; Route rules §2.
func TestLessonTranscript(t *testing.T) {
	h := newHarness(t)
	tok := h.org("transcript", "topics", "college", "high", "middle", "primary")
	c := h.corpus()
	checked := map[string]bool{}
	for _, l := range c.Lessons {
		// Lessons that between them show every kind of card.
		kinds := []string{}
		for _, cd := range l.Cards {
			switch {
			case cd.Narrated && cd.NarrationScript != "":
				kinds = append(kinds, "script")
			case cd.Narrated:
				kinds = append(kinds, "body")
			}
			if cd.VideoVoiceover != "" {
				kinds = append(kinds, "voiceover")
			}
			if !cd.InTranscript() {
				kinds = append(kinds, "omitted")
			}
		}
		fresh := slices.ContainsFunc(kinds, func(k string) bool { return !checked[k] })
		if !fresh {
			continue
		}
		for _, k := range kinds {
			checked[k] = true
		}
		m := h.ok(lessonPathOf(l)+"/transcript", tok)
		if _, ok := m["markdown"]; ok {
			t.Errorf("%s: markdown without include=markdown", l.ID)
		}
		rows := objects(t, m["items"])
		var want []*corpus.Card
		for _, cd := range l.Cards {
			if cd.Narrated || cd.VideoVoiceover != "" {
				want = append(want, cd)
			}
		}
		if len(rows) != len(want) {
			t.Fatalf("%s: %d rows, want %d (cards with neither narration nor voiceover are omitted)", l.ID, len(rows), len(want))
		}
		var md strings.Builder
		for i, row := range rows {
			cd := want[i]
			narr := cd.NarrationScript
			if narr == "" && cd.Narrated {
				narr = strings.ReplaceAll(cd.Body, "**", "") // no script: the body is the narration
			}
			if row["cardId"] != cd.ID || row["label"] != cd.Label {
				t.Errorf("%s row %d: got %v %v, want %s", l.ID, i, row["cardId"], row["label"], cd.ID)
			}
			if got, _ := row["narration"].(string); got != narr || (narr == "") != (row["narration"] == nil) {
				t.Errorf("%s row %d (%s): narration %.60q, want %.60q", l.ID, i, cd.ID, row["narration"], narr)
			}
			if got, _ := row["videoVoiceover"].(string); got != cd.VideoVoiceover || (cd.VideoVoiceover == "") != (row["videoVoiceover"] == nil) {
				t.Errorf("%s row %d: videoVoiceover %.60q, want %.60q", l.ID, i, row["videoVoiceover"], cd.VideoVoiceover)
			}
			md.WriteString("## " + cd.Label + "\n\n")
			if narr != "" {
				md.WriteString(narr + "\n\n")
			}
			if cd.VideoVoiceover != "" {
				md.WriteString("> " + strings.ReplaceAll(cd.VideoVoiceover, "\n", "\n> ") + "\n\n")
			}
		}
		withMD := h.ok(lessonPathOf(l)+"/transcript?include=markdown", tok)
		if withMD["markdown"] != md.String() {
			t.Errorf("%s markdown: got %.200q, want %.200q", l.ID, withMD["markdown"], md.String())
		}
		if !slices.EqualFunc(objects(t, withMD["items"]), rows, func(a, b map[string]any) bool { return a["cardId"] == b["cardId"] }) {
			t.Errorf("%s: include=markdown changed the rows", l.ID)
		}
	}
	for _, k := range []string{"script", "body", "voiceover", "omitted"} {
		if !checked[k] {
			t.Errorf("no lesson had a %s card", k)
		}
	}

	// A class without a transcript answers an empty one, and it still
	// costs one lesson read.
	empty := findLessonWhere(t, c, "no transcript", func(l *corpus.Lesson) bool { return !l.HasTranscript })
	before := h.usage("transcript")
	r := h.get(lessonPathOf(empty)+"/transcript?include=markdown", tok, "Accept-Encoding", "gzip")
	m := jsonObject(t, r.body)
	if r.status != 200 || len(objects(t, m["items"])) != 0 || m["markdown"] != "" || m["lessonId"] != empty.ID {
		t.Errorf("%s: got %d %s, want 200 with items [] and markdown \"\"", empty.ID, r.status, r.body)
	}
	if ce := r.header.Get("Content-Encoding"); ce != "" || len(r.body) >= 384 {
		t.Errorf("a body of %d bytes was sent with Content-Encoding %q (spec: under 384 bytes is not compressed)", len(r.body), ce)
	}
	h.billed("transcript", before, 1, 1)

	e := h.fails(lessonPathOf(empty)+"/transcript?include=quiz", tok, 400, "BAD_REQUEST")
	if e.Parameter != "include" || !slices.Equal(e.Allowed, []string{"markdown"}) {
		t.Errorf("transcript include=quiz: %+v", e)
	}
}

// spec: Resources, Quiz document; Route table 8.
func TestLessonQuiz(t *testing.T) {
	h := newHarness(t)
	tok := h.org("quiz", "topics", "college", "high", "middle", "primary")
	l := findLessonWhere(t, h.corpus(), "a quiz and inline checks", func(l *corpus.Lesson) bool {
		return len(l.Quiz) > 0 && len(l.InlineChecks) > 0
	})
	before := h.usage("quiz")
	m := h.ok(lessonPathOf(l)+"/quiz", tok)
	h.billed("quiz", before, 1, 1)
	if want := []string{"_license", "contentVersion", "inlineChecks", "items", "lessonId", "title"}; !slices.Equal(keysOf(m), want) {
		t.Errorf("members: got %v, want %v (no cards, no bodies)", keysOf(m), want)
	}
	items := objects(t, m["items"])
	if len(items) != len(l.Quiz) {
		t.Fatalf("items: %d, want %d", len(items), len(l.Quiz))
	}
	for i, q := range items {
		w := l.Quiz[i]
		if q["question"] != w.Question || !slices.Equal(strs(q["options"]), w.Options) || q["answerIndex"] != json.Number(strconv.Itoa(w.AnswerIndex)) {
			t.Errorf("item %d: got %v", i, q)
		}
	}
	checks := objects(t, m["inlineChecks"])
	for i, ic := range checks {
		w := l.InlineChecks[i]
		hints := strs(ic["hints"])
		if len(hints) < 2 || !slices.Equal(hints, w.Hints) || ic["rationale"] != w.Rationale || ic["rationale"] == "" ||
			ic["answerIndex"] != json.Number(strconv.Itoa(w.AnswerIndex)) || ic["afterCard"] != w.AfterCard {
			t.Errorf("inline check %d: got %v", i, ic)
		}
	}
	// The same sections as the lesson with include=quiz,inlineChecks.
	lm := h.ok(lessonPathOf(l)+"?include=quiz,inlineChecks", tok)
	a, _ := json.Marshal([]any{m["items"], m["inlineChecks"]})
	b, _ := json.Marshal([]any{lm["quiz"], lm["inlineChecks"]})
	if !bytes.Equal(a, b) {
		t.Errorf("the quiz document differs from the lesson's quiz and inlineChecks")
	}
	h.fails(lessonPathOf(l)+"/quiz?detail=full", tok, 400, "BAD_REQUEST")
}

// mediaPage is a page of GET …/media.
type mediaPage struct {
	Items []struct {
		MediaID         string  `json:"mediaId"`
		Type            string  `json:"type"`
		CardID          string  `json:"cardId"`
		MimeType        string  `json:"mimeType"`
		Bytes           int64   `json:"bytes"`
		DurationSeconds *int    `json:"durationSeconds"`
		URL             *string `json:"url"`
	} `json:"items"`
	Total          int     `json:"total"`
	PageNum        int     `json:"pageNum"`
	TotalPages     int     `json:"totalPages"`
	HasMore        bool    `json:"hasMore"`
	NextCursor     *string `json:"nextCursor"`
	ContentVersion string  `json:"contentVersion"`
	License        struct {
		Lic, Tag string
	} `json:"_license"`
}

// spec: Route table 9; Media asset; List envelope; Common parameters,
// type and cursor; States and transitions, pagination cursor.
func TestLessonMediaList(t *testing.T) {
	h := newHarness(t)
	tok := h.org("media", "topics", "college", "high", "middle", "primary")
	l := findLessonWhere(t, h.corpus(), "video, audio and images", func(l *corpus.Lesson) bool {
		return l.HasVideo && l.HasNarration && len(l.Media) > 20
	})
	base := lessonPathOf(l) + "/media"
	for _, typ := range []string{"", "video", "audio", "image"} {
		var want []string
		for _, a := range l.Media {
			if typ == "" || a.Type == typ {
				want = append(want, a.ID)
			}
		}
		var got []string
		before := h.usage("media")
		q := url.Values{"limit": {"7"}}
		if typ != "" {
			q.Set("type", typ)
		}
		pages := 0
		for {
			var p mediaPage
			r := h.get(base+"?"+q.Encode(), tok)
			if r.status != 200 {
				t.Fatalf("type=%s page %d: %d %s", typ, pages+1, r.status, r.body)
			}
			if err := json.Unmarshal(r.body, &p); err != nil {
				t.Fatal(err)
			}
			pages++
			if p.Total != len(want) || p.PageNum != pages || p.TotalPages != max(1, (len(want)+6)/7) {
				t.Errorf("type=%s page %d: total %d pageNum %d totalPages %d, want %d %d %d", typ, pages, p.Total, p.PageNum, p.TotalPages, len(want), pages, (len(want)+6)/7)
			}
			if len(p.Items) > 7 || p.ContentVersion == "" || p.License.Tag == "" {
				t.Errorf("type=%s page %d: %d items, version %q", typ, pages, len(p.Items), p.ContentVersion)
			}
			for _, it := range p.Items {
				got = append(got, it.MediaID)
				if typ != "" && it.Type != typ {
					t.Errorf("type=%s: got an asset of type %s", typ, it.Type)
				}
				if it.URL != nil || it.MimeType == "" || it.CardID == "" || !strings.HasPrefix(it.MediaID, l.ID+"#"+it.CardID+"#"+it.Type) {
					t.Errorf("asset %s: %+v", it.MediaID, it)
				}
				if (it.Type == "image") != (it.DurationSeconds == nil) {
					t.Errorf("asset %s: durationSeconds %v", it.MediaID, it.DurationSeconds)
				}
			}
			if !p.HasMore {
				if p.NextCursor != nil {
					t.Errorf("type=%s: last page has nextCursor %q", typ, *p.NextCursor)
				}
				break
			}
			if p.NextCursor == nil || pages > 20 {
				t.Fatalf("type=%s: hasMore without a cursor after %d pages", typ, pages)
			}
			q.Set("cursor", *p.NextCursor)
		}
		if !slices.Equal(got, want) {
			t.Errorf("type=%s: walked %d assets %v, want each of %d once, in order", typ, len(got), got, len(want))
		}
		h.billed("media", before, int64(pages), int64(pages)) // each page is one lesson read
	}
	// raw JSON: url is present and null.
	if r := h.get(base+"?limit=1", tok); !bytes.Contains(r.body, []byte(`"url":null`)) {
		t.Errorf("url is not null in %s", r.body)
	}

	// A cursor is bound to its filter.
	first := h.ok(base+"?type=audio&limit=2", tok)
	cur := first["nextCursor"].(string)
	before := h.usage("media")
	h.fails(base+"?type=image&cursor="+url.QueryEscape(cur), tok, 400, "BAD_REQUEST")
	h.fails(base+"?type=audio&cursor="+url.QueryEscape(cur[:len(cur)-2]+"xx"), tok, 400, "BAD_REQUEST")
	h.billed("media", before, 2, 0) // a bad cursor bills the call only
	var audio []string
	for _, a := range l.Media {
		if a.Type == "audio" {
			audio = append(audio, a.ID)
		}
	}
	// A walk may change its page size: the cursor holds the offset.
	if m := h.ok(base+"?type=audio&limit=5&cursor="+url.QueryEscape(cur), tok); objects(t, m["items"])[0]["mediaId"] != audio[2] {
		t.Errorf("a cursor with another limit: first item %v, want %s", objects(t, m["items"])[0]["mediaId"], audio[2])
	}

	// The corpus moves: the cursor expires (CURSOR_EXPIRED, the call only).
	h.content.Store(smallContent(t, "2026-12-01"))
	before = h.usage("media")
	h.fails(base+"?type=audio&cursor="+url.QueryEscape(cur), tok, 400, "CURSOR_EXPIRED")
	h.billed("media", before, 1, 0)
	h.fails(base+"?type=sound", tok, 400, "BAD_REQUEST")
	h.fails(base+"?limit=101", tok, 400, "BAD_REQUEST")
}

// spec: Transport: gzip and br bodies decode to the identity body; br only
// when named; under 384 bytes nothing is compressed.
func TestLessonCompression(t *testing.T) {
	h := newHarness(t)
	tok := h.org("gzip", "topics", "college", "high", "middle", "primary")
	l := h.corpus().Lessons[0]
	for _, suffix := range []string{"", "?detail=full", "/transcript?include=markdown", "/quiz", "/media"} {
		path := lessonPathOf(l) + suffix
		id := h.get(path, tok)
		if id.status != 200 || id.header.Get("Content-Encoding") != "" || len(id.body) < 384 {
			t.Fatalf("%s identity: %d, Content-Encoding %q, %d bytes", suffix, id.status, id.header.Get("Content-Encoding"), len(id.body))
		}
		for _, tc := range []struct{ ae, want string }{
			{"gzip", "gzip"}, {"br", "br"}, {"gzip, br", "br"}, {"*", "gzip"}, {"gzip;q=0.5, br;q=0.1", "gzip"},
			{"identity", ""}, {"gzip;q=0", ""}, {"deflate", ""},
		} {
			r := h.get(path, tok, "Accept-Encoding", tc.ae)
			if got := r.header.Get("Content-Encoding"); got != tc.want {
				t.Errorf("%s Accept-Encoding %q: Content-Encoding %q, want %q", suffix, tc.ae, got, tc.want)
				continue
			}
			var body []byte
			var err error
			switch tc.want {
			case "gzip":
				var zr *gzip.Reader
				if zr, err = gzip.NewReader(bytes.NewReader(r.body)); err == nil {
					body, err = io.ReadAll(zr)
				}
			case "br":
				body, err = io.ReadAll(brotli.NewReader(bytes.NewReader(r.body)))
			default:
				body = r.body
			}
			if err != nil || !bytes.Equal(body, id.body) {
				t.Errorf("%s %s: the decoded body differs from the identity body (%v)", suffix, tc.ae, err)
			}
			if r.header.Get("Vary") != "Authorization, Accept-Encoding" || r.header.Get("Cache-Control") != "private" {
				t.Errorf("%s %s: Vary %q Cache-Control %q", suffix, tc.ae, r.header.Get("Vary"), r.header.Get("Cache-Control"))
			}
			if r.header.Get("ETag") != id.header.Get("ETag") {
				t.Errorf("%s %s: the ETag depends on the encoding", suffix, tc.ae)
			}
		}
	}
	// Errors are small and never compressed.
	r := h.get("/v1/lessons/high/algebra/0", tok, "Accept-Encoding", "gzip, br")
	if r.status != 400 || r.header.Get("Content-Encoding") != "" {
		t.Errorf("error: %d Content-Encoding %q", r.status, r.header.Get("Content-Encoding"))
	}
}

// lessonBenchRequest is a request as the pipeline hands it to a lesson
// handler, for benchmarks.
func lessonBenchRequest(b *testing.B, ct *Content, path, query string) *request {
	b.Helper()
	rt, vars, err := route.Match("GET", path)
	if err != nil {
		b.Fatal(err)
	}
	params, perr := param.Parse(rt, query)
	if perr != nil {
		b.Fatal(perr)
	}
	return &request{route: rt, vars: vars, params: params, corpus: ct,
		org:    &store.Org{ID: "org_bench", EclaVersion: 1, Grants: []string{"topics"}},
		claims: token.Claims{Scope: scope.Of("content.read")}}
}

// lessonBenchContent is the corpus of LECTERN_BENCH_CORPUS (e.g. the full
// one from go run ./tools/corpusgen -out /tmp/corpus-full), else the
// small one.
func lessonBenchContent(b *testing.B) *Content {
	b.Helper()
	if dir := os.Getenv("LECTERN_BENCH_CORPUS"); dir != "" {
		return loadContent(b, dir)
	}
	return buildContent(b, filepath.Join(b.TempDir(), "corpus"), gen.Options{Seed: 1, Small: true})
}

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}

// BenchmarkLessonRender measures a request's rendering after the meters:
// the concatenation of precomputed fragments and the licence envelope
// ("render"), and with the body written gzip-compressed ("gzip").
func BenchmarkLessonRender(b *testing.B) {
	ct := lessonBenchContent(b)
	l := ct.Lessons[0]
	s := New(Config{TagKey: []byte("bench-tag-key-0123456789abcdef0123")})
	d := ct.lessons.Doc(l)
	cases := []struct {
		name, suffix, query string
		render              func(dst []byte, req *request) []byte
	}{
		{"standard", "", "", func(dst []byte, req *request) []byte {
			return s.lessonTail(d.AppendLesson(dst, lessondoc.ParseLevel(req.params.Get("detail")), lessondoc.ParseIncludes(req.params.Include()), nil), req)
		}},
		{"full-all", "", "detail=full&include=" + strings.Join(includeSections, ","), func(dst []byte, req *request) []byte {
			return s.lessonTail(d.AppendLesson(dst, lessondoc.ParseLevel(req.params.Get("detail")), lessondoc.ParseIncludes(req.params.Include()), nil), req)
		}},
		{"transcript", "/transcript", "include=markdown", func(dst []byte, req *request) []byte {
			return s.lessonTail(d.AppendTranscript(dst, req.params.Includes("markdown"), nil), req)
		}},
		{"quiz", "/quiz", "", func(dst []byte, req *request) []byte {
			return s.lessonTail(d.AppendQuiz(dst, nil), req)
		}},
	}
	b.Run("standard/precompressed-gzip", func(b *testing.B) {
		req := lessonBenchRequest(b, ct, "/v1/lessons/"+l.ID, "")
		w := &discardWriter{h: http.Header{}}
		var buf []byte
		b.ReportAllocs()
		for b.Loop() {
			var tail [256]byte
			buf = d.AppendGzipStandard(buf[:0], s.lessonLicense(tail[:0], req))
			writeGzipped(w, req, "W/\"x\"", billing.Bill{}, buf)
		}
		b.SetBytes(int64(len(d.AppendLesson(nil, lessondoc.Standard, 0, ct.lessons.AppendVersion(nil)))))
	})
	for _, tc := range cases {
		req := lessonBenchRequest(b, ct, "/v1/lessons/"+l.ID+tc.suffix, tc.query)
		var buf []byte
		b.Run(tc.name+"/render", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf = tc.render(buf[:0], req)
			}
			b.SetBytes(int64(len(buf)))
		})
		b.Run(tc.name+"/gzip", func(b *testing.B) {
			hr, _ := http.NewRequest("GET", "/", nil)
			hr.Header.Set("Accept-Encoding", "gzip")
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				buf = tc.render(buf[:0], req)
				writeBody(w, hr, http.StatusOK, buf)
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}
