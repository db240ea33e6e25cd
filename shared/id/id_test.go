package id

import (
	"slices"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/vectorstest"
)

// checkExpect compares err with an expectation "ok" or
// "<code> <parameter> [<received>]".
func checkExpect(t *testing.T, where, input string, err *apierr.Error, want string) {
	t.Helper()
	if want == "ok" {
		if err != nil {
			t.Errorf("%s: %q: got %v, want ok", where, input, err)
		}
		return
	}
	code, rest, _ := strings.Cut(want, " ")
	param, received, _ := strings.Cut(rest, " ")
	if err == nil {
		t.Errorf("%s: %q: got ok, want %s", where, input, want)
		return
	}
	if string(err.Code) != code || err.Parameter != param || err.Received != received {
		t.Errorf("%s: %q: got %s %s %q (%s), want %s %s %q",
			where, input, err.Code, err.Parameter, err.Received, err.Message, code, param, received)
	}
	if err.Message == "" || err.Hint == "" {
		t.Errorf("%s: %q: got message %q hint %q, want both set", where, input, err.Message, err.Hint)
	}
	if err.Status() != 400 {
		t.Errorf("%s: %q: got status %d, want 400", where, input, err.Status())
	}
}

func TestValidSlug(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"one letter", "a", true},
		{"digits only", "101", true},
		{"hyphenated", "organic-chemistry", true},
		{"64 bytes", strings.Repeat("a", 64), true},
		{"65 bytes", strings.Repeat("a", 65), false},
		{"empty", "", false},
		{"upper case", "Algebra", false},
		{"leading hyphen", "-a", false},
		{"trailing hyphen", "a-", false},
		{"double hyphen", "a--b", false},
		{"lone hyphen", "-", false},
		{"underscore", "a_b", false},
		{"space", "a b", false},
		{"slash", "a/b", false},
		{"non-ASCII", "algèbre", false},
	}
	for _, tt := range tests {
		if got := ValidSlug(tt.in); got != tt.want {
			t.Errorf("%s: ValidSlug(%q) = %v, want %v", tt.name, tt.in, got, tt.want)
		}
	}
}

func TestValidCardID(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"corpus form", "c1", true},
		{"digit first", "1", true},
		{"inner hyphen", "intro-card", true},
		{"trailing and double hyphens", "a--b-", true},
		{"32 bytes", strings.Repeat("c", 32), true},
		{"33 bytes", strings.Repeat("c", 33), false},
		{"empty", "", false},
		{"leading hyphen", "-c1", false},
		{"upper case", "C1", false},
		{"hash", "c#1", false},
		{"slash", "c/1", false},
	}
	for _, tt := range tests {
		if got := ValidCardID(tt.in); got != tt.want {
			t.Errorf("%s: ValidCardID(%q) = %v, want %v", tt.name, tt.in, got, tt.want)
		}
	}
}

func TestLessonFromPath(t *testing.T) {
	tests := []struct {
		name                string
		tier, slug, class   string
		want                Lesson
		wantParam, wantRecv string
		wantAllowedTiers    bool
	}{
		{name: "valid", tier: "high", slug: "algebra", class: "3", want: Lesson{"high", "algebra", 3}},
		{name: "largest class number", tier: "topics", slug: "a", class: "999999", want: Lesson{"topics", "a", 999999}},
		{name: "unknown tier lists the tiers", tier: "grad", slug: "algebra", class: "3", wantParam: "tier", wantRecv: "grad", wantAllowedTiers: true},
		{name: "tier is exact", tier: "HIGH", slug: "algebra", class: "3", wantParam: "tier", wantRecv: "HIGH", wantAllowedTiers: true},
		{name: "bad slug", tier: "high", slug: "Algebra", class: "3", wantParam: "subjectSlug", wantRecv: "Algebra"},
		{name: "class zero is not a class number", tier: "high", slug: "algebra", class: "0", wantParam: "classNum", wantRecv: "0"},
		{name: "leading zero", tier: "high", slug: "algebra", class: "03", wantParam: "classNum", wantRecv: "03"},
		{name: "sign", tier: "high", slug: "algebra", class: "+3", wantParam: "classNum", wantRecv: "+3"},
		{name: "seven digits", tier: "high", slug: "algebra", class: "1000000", wantParam: "classNum", wantRecv: "1000000"},
		{name: "not a number", tier: "high", slug: "algebra", class: "three", wantParam: "classNum", wantRecv: "three"},
		{name: "empty class", tier: "high", slug: "algebra", class: "", wantParam: "classNum"},
		{name: "tier fails first", tier: "x", slug: "Y", class: "z", wantParam: "tier", wantRecv: "x", wantAllowedTiers: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LessonFromPath(tt.tier, tt.slug, tt.class)
			if tt.wantParam == "" {
				if err != nil {
					t.Fatalf("got error %v, want %v", err, tt.want)
				}
				if got != tt.want {
					t.Fatalf("got %+v, want %+v", got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %+v, want BAD_LESSON_ID on %s", got, tt.wantParam)
			}
			if !got.IsZero() {
				t.Errorf("got lesson %+v with an error, want the zero Lesson", got)
			}
			if err.Code != apierr.BadLessonID || err.Parameter != tt.wantParam || err.Received != tt.wantRecv {
				t.Errorf("got %s %s %q, want BAD_LESSON_ID %s %q", err.Code, err.Parameter, err.Received, tt.wantParam, tt.wantRecv)
			}
			if tt.wantAllowedTiers != (err.Allowed != nil) || tt.wantAllowedTiers && !slices.Equal(err.Allowed, Tiers) {
				t.Errorf("got allowed %q, want tiers listed: %v", err.Allowed, tt.wantAllowedTiers)
			}
		})
	}
}

func TestAllowedIsACopy(t *testing.T) {
	_, err := LessonFromPath("nope", "a", "1")
	err.Allowed[0] = "mutated"
	if Tiers[0] != "topics" {
		t.Fatalf("got Tiers[0] = %q after mutating an error's allowed, want topics", Tiers[0])
	}
}

func TestParseLessonVectors(t *testing.T) {
	for _, v := range vectorstest.Read(t, "testdata/lessonid.txt", 2) {
		in, want := v.Fields[0], v.Fields[1]
		l, err := ParseLesson(in)
		checkExpect(t, "lessonid.txt:"+itoa(v.Line), in, err, want)
		if err == nil {
			if got := l.String(); got != in {
				t.Errorf("lessonid.txt:%d: ParseLesson(%q).String() = %q, want the input", v.Line, in, got)
			}
			if l2, err := LessonFromPath(l.Tier, l.Slug, itoa(l.Class)); err != nil || l2 != l {
				t.Errorf("lessonid.txt:%d: LessonFromPath on %q's segments = %+v, %v; want %+v", v.Line, in, l2, err, l)
			}
		}
	}
}

func TestParseMediaVectors(t *testing.T) {
	for _, v := range vectorstest.Read(t, "testdata/mediaid.txt", 2) {
		in, want := v.Fields[0], v.Fields[1]
		m, err := ParseMedia(in)
		checkExpect(t, "mediaid.txt:"+itoa(v.Line), in, err, want)
		if err == nil {
			if got := m.String(); got != in {
				t.Errorf("mediaid.txt:%d: ParseMedia(%q).String() = %q, want the input", v.Line, in, got)
			}
		}
	}
}

// TestParseMediaMessages: every malformed mediaId is BAD_LESSON_ID, so the
// message is what tells the client which part is wrong.
func TestParseMediaMessages(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"bad tier names the tiers", "grad/a/1#c1#video", "tier must be one of topics, college, high, middle, primary"},
		{"bad class number", "high/a/0#c1#video", "classNum must be a class number"},
		{"no card", "high/a/1", "has no cardId"},
		{"empty card", "high/a/1##video", `malformed cardId ""`},
		{"bad card", "high/a/1#C1#video", `malformed cardId "C1"`},
		{"no type", "high/a/1#c1", "has no type after its cardId; want one of video, audio, image"},
		{"bad type lists the types", "high/a/1#c1#pdf", `has type "pdf"; want one of video, audio, image`},
		{"too many parts", "high/a/1#c1#video#2", "more than three #-separated parts"},
		{"too long", "high/a/1#c1#" + strings.Repeat("v", 200), "longer than 200 bytes"},
	}
	for _, tt := range tests {
		_, err := ParseMedia(tt.in)
		if err == nil {
			t.Errorf("%s: ParseMedia(%q) succeeded, want an error saying %q", tt.name, tt.in, tt.want)
			continue
		}
		if !strings.Contains(err.Message, tt.want) {
			t.Errorf("%s: got message %q, want it to contain %q", tt.name, err.Message, tt.want)
		}
		if err.Allowed != nil {
			t.Errorf("%s: got allowed %q, want none (mediaIds is not an enum)", tt.name, err.Allowed)
		}
	}
}

func TestReceivedIsBounded(t *testing.T) {
	long := "topics/" + strings.Repeat("é", 1000)
	_, err := ParseLesson(long + "/1")
	if err == nil || len(err.Received) > MaxReceived || !strings.HasPrefix(long, "topics/"+err.Received) {
		t.Fatalf("got %v, want received cut to at most %d bytes on a rune boundary", err, MaxReceived)
	}
	_, err = ParseMedia(long + "#c1#video")
	if err == nil || len(err.Received) > MaxReceived || !strings.HasPrefix(long, err.Received) {
		t.Fatalf("got %v, want received cut to at most %d bytes", err, MaxReceived)
	}
	if strings.Contains(err.Message, "ééé") {
		t.Errorf("got message %q, want a too-long id not echoed in the message", err.Message)
	}
}

func TestZeroValues(t *testing.T) {
	if !(Lesson{}).IsZero() || (Lesson{}).String() != "" {
		t.Errorf("zero Lesson: got IsZero %v String %q, want true and empty", (Lesson{}).IsZero(), (Lesson{}).String())
	}
	if !(Media{}).IsZero() || (Media{}).String() != "" {
		t.Errorf("zero Media: got IsZero %v String %q, want true and empty", (Media{}).IsZero(), (Media{}).String())
	}
	l, _ := ParseLesson("topics/a/1")
	if l.IsZero() {
		t.Errorf("parsed lesson reports IsZero")
	}
}

func TestMediaTypes(t *testing.T) {
	want := []string{"video", "audio", "image"} // spec: Conventions
	if !slices.Equal(MediaTypes, want) {
		t.Fatalf("got MediaTypes %q, want %q", MediaTypes, want)
	}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

func FuzzParseLesson(f *testing.F) {
	for _, v := range vectorstest.Read(f, "testdata/lessonid.txt", 2) {
		f.Add(v.Fields[0])
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLesson(s)
		if err != nil {
			if err.Code != apierr.BadLessonID || !l.IsZero() {
				t.Fatalf("ParseLesson(%q) = %+v, %v; want the zero Lesson and BAD_LESSON_ID", s, l, err)
			}
			if err.Parameter != "tier" && err.Parameter != "subjectSlug" && err.Parameter != "classNum" {
				t.Fatalf("ParseLesson(%q): got parameter %q, want a lessonId part", s, err.Parameter)
			}
			return
		}
		if got := l.String(); got != s {
			t.Fatalf("ParseLesson(%q).String() = %q, want the input", s, got)
		}
		if l.IsZero() || l.Class < 1 || l.Class > MaxClass {
			t.Fatalf("ParseLesson(%q) = %+v, want a valid lesson", s, l)
		}
	})
}

func FuzzParseMedia(f *testing.F) {
	for _, v := range vectorstest.Read(f, "testdata/mediaid.txt", 2) {
		f.Add(v.Fields[0])
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMedia(s)
		if err != nil {
			before, _, _ := strings.Cut(s, "#")
			if err.Code != apierr.BadLessonID || err.Parameter != "mediaIds" || err.Received != clip(before) || !m.IsZero() {
				t.Fatalf("ParseMedia(%q) = %+v, %v (received %q); want zero, BAD_LESSON_ID on mediaIds with the part before '#'", s, m, err, err.Received)
			}
			return
		}
		if got := m.String(); got != s {
			t.Fatalf("ParseMedia(%q).String() = %q, want the input", s, got)
		}
		if !ValidMediaType(m.Type) || !ValidCardID(m.Card) || len(s) > MaxMediaLen {
			t.Fatalf("ParseMedia(%q) = %+v, want a valid media id", s, m)
		}
	})
}

func BenchmarkParseMedia(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseMedia("college/organic-chemistry/12#c31#audio"); err != nil {
			b.Fatal(err)
		}
	}
}
