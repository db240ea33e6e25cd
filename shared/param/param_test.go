package param

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/route"
	"github.com/lectern-api/lectern/shared/vectorstest"
)

func body(e *apierr.Error) string { return string(e.AppendJSON(nil, "req-1")) }

// TestQueryVectors runs testdata/query.txt. Each line is
//
//	<route id> <raw query> ---- ok <canonical>
//	<route id> <raw query> ---- <error body without requestId>
//
// An empty query is written as "-". The same file drives the edge tests.
func TestQueryVectors(t *testing.T) {
	vs := vectorstest.Read(t, "testdata/query.txt", 2)
	for _, v := range vs {
		in, want := v.Fields[0], v.Fields[1]
		idText, query, _ := strings.Cut(in, " ")
		if query == "-" {
			query = ""
		}
		var id int
		for _, c := range idText {
			id = id*10 + int(c-'0')
		}
		r := route.ByID(route.ID(id))
		if r == nil {
			t.Fatalf("query.txt:%d: no route %q", v.Line, idText)
		}
		pv, e := Parse(r, query)
		var got string
		if e != nil {
			got = strings.Replace(body(e), `,"requestId":"req-1"`, "", 1)
			if e.Status() != 400 {
				t.Errorf("query.txt:%d: status %d, want 400", v.Line, e.Status())
			}
		} else {
			// Fields are trimmed, so an empty canonical form reads "ok".
			got = strings.TrimSuffix("ok "+pv.Canonical(), " ")
			if a := string(pv.AppendCanonical([]byte("x&"))); a != "x&"+pv.Canonical() {
				t.Errorf("query.txt:%d: AppendCanonical(x&) = %q, want x& then %q", v.Line, a, pv.Canonical())
			}
		}
		if got != want {
			t.Errorf("query.txt:%d: route %d %q\n got: %s\nwant: %s", v.Line, id, query, got, want)
		}
	}
	if len(vs) < 40 {
		t.Errorf("only %d vectors", len(vs))
	}
}

func mustParse(t *testing.T, id route.ID, q string) Values {
	t.Helper()
	v, err := Parse(route.ByID(id), q)
	if err != nil {
		t.Fatalf("Parse(%d, %q): %v", id, q, err)
	}
	return v
}

// spec: include is order-insensitive: the canonical form, and so the ETag,
// does not depend on the order or repetition of the sections.
func TestIncludeOrderInsensitive(t *testing.T) {
	a := mustParse(t, route.Lesson, "include=quiz,media,inlineChecks")
	b := mustParse(t, route.Lesson, "include=inlineChecks,quiz,media,quiz")
	if a.Canonical() != b.Canonical() {
		t.Errorf("canonical differs: %q vs %q", a.Canonical(), b.Canonical())
	}
	if !a.Includes("media") || a.Includes("narrationText") {
		t.Errorf("Includes wrong: %v", a.Include())
	}
}

// spec: defaults are explicit in the canonical form, so a request that
// names the default is the same resource as one that omits it.
func TestDefaultsExplicit(t *testing.T) {
	for _, tc := range []struct {
		id   route.ID
		a, b string
	}{
		{route.Lesson, "", "detail=standard"},
		{route.Subjects, "", "limit=25&detail=standard"},
		{route.ExportSubject, "", "format=zip_url"},
		{route.Search, "q=cell", "limit=25&q=cell"},
	} {
		a, b := mustParse(t, tc.id, tc.a), mustParse(t, tc.id, tc.b)
		if a.Canonical() != b.Canonical() {
			t.Errorf("route %d: %q → %q, %q → %q", tc.id, tc.a, a.Canonical(), tc.b, b.Canonical())
		}
	}
	if v := mustParse(t, route.Subjects, ""); v.Limit() != 25 || v.Get("detail") != "standard" {
		t.Errorf("defaults: limit %d detail %q", v.Limit(), v.Get("detail"))
	}
}

// spec: route 4: brief, standard and full are byte-identical and share one
// ETag, so detail is validated but left out of the canonical form.
func TestSubjectDetailSharesETag(t *testing.T) {
	v0 := mustParse(t, route.Subject, "")
	want := v0.Canonical()
	for _, q := range []string{"detail=brief", "detail=standard", "detail=full"} {
		v := mustParse(t, route.Subject, q)
		if got := v.Canonical(); got != want {
			t.Errorf("%s: canonical %q, want %q", q, got, want)
		}
	}
	if _, err := Parse(route.ByID(route.Subject), "detail=verbose"); err == nil {
		t.Error("detail=verbose accepted on route 4; it must still be validated")
	}
}

// A cursor binds to the query without cursor and limit: a walk keeps its
// set but may change its page size.
func TestBinding(t *testing.T) {
	a := mustParse(t, route.Search, "q=cell&limit=10&cursor=abc")
	b := mustParse(t, route.Search, "q=cell&limit=50")
	if a.Binding() != b.Binding() {
		t.Errorf("binding differs: %q vs %q", a.Binding(), b.Binding())
	}
	c := mustParse(t, route.Search, "q=cells")
	if a.Binding() == c.Binding() {
		t.Error("different q, same binding")
	}
	if a.Canonical() == b.Canonical() {
		t.Error("different page, same canonical form")
	}
}

func TestLimitErrorKeys(t *testing.T) {
	// spec: out of range is rejected (never clamped) with 400 BAD_REQUEST
	// carrying parameter, received, min, max.
	for _, q := range []string{"limit=0", "limit=101", "limit=-1", "limit=1000000"} {
		_, err := Parse(route.ByID(route.Subjects), q)
		if err == nil {
			t.Fatalf("%s accepted", q)
		}
		if err.Code != apierr.BadRequest || err.Parameter != "limit" || err.Min == nil || *err.Min != 1 || err.Max == nil || *err.Max != 100 || !err.ReceivedNumber {
			t.Errorf("%s: %s", q, body(err))
		}
	}
	for q, want := range map[string]int{"limit=1": 1, "limit=100": 100, "": 25} {
		if v := mustParse(t, route.Subjects, q); v.Limit() != want {
			t.Errorf("%q: limit %d, want %d", q, v.Limit(), want)
		}
	}
}

func TestMint(t *testing.T) {
	ids := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"mediaIds":[`)
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"high/algebra/1#c1#image"`)
		}
		b.WriteString(`]}`)
		return b.String()
	}
	tests := []struct {
		name, body string
		code       apierr.Code
		param      string
		expires    int64
		n          int
	}{
		{"one", `{"mediaIds":["high/algebra/1#c1#image"]}`, "", "", 900, 1},
		{"hundred", ids(100), "", "", 900, 100},
		{"duplicates kept", `{"mediaIds":["a","a","a"]}`, "", "", 900, 3},
		{"expiresIn 60", `{"mediaIds":["a"],"expiresIn":60}`, "", "", 60, 1},
		{"expiresIn above cap kept for clamping", `{"mediaIds":["a"],"expiresIn":86400}`, "", "", 86400, 1},
		{"expiresIn huge saturates", `{"mediaIds":["a"],"expiresIn":123456789012345678901234567890}`, "", "", 1<<63 - 1, 1},
		{"101 is BATCH_TOO_LARGE", ids(101), apierr.BatchTooLarge, "mediaIds", 0, 0},
		{"empty list", `{"mediaIds":[]}`, apierr.BadRequest, "mediaIds", 0, 0},
		{"missing", `{}`, apierr.BadRequest, "mediaIds", 0, 0},
		{"not array", `{"mediaIds":"a"}`, apierr.BadRequest, "mediaIds", 0, 0},
		{"not strings", `{"mediaIds":[1]}`, apierr.BadRequest, "mediaIds", 0, 0},
		{"expiresIn 59", `{"mediaIds":["a"],"expiresIn":59}`, apierr.BadRequest, "expiresIn", 0, 0},
		{"expiresIn fraction", `{"mediaIds":["a"],"expiresIn":60.5}`, apierr.BadRequest, "expiresIn", 0, 0},
		{"expiresIn exponent", `{"mediaIds":["a"],"expiresIn":6e2}`, apierr.BadRequest, "expiresIn", 0, 0},
		{"expiresIn string", `{"mediaIds":["a"],"expiresIn":"600"}`, apierr.BadRequest, "expiresIn", 0, 0},
		{"expiresIn negative", `{"mediaIds":["a"],"expiresIn":-900}`, apierr.BadRequest, "expiresIn", 0, 0},
		{"expiresIn NaN", `{"mediaIds":["a"],"expiresIn":NaN}`, apierr.BadRequest, "expiresIn", 0, 0},
		{"expiresIn +900", `{"mediaIds":["a"],"expiresIn":+900}`, apierr.BadRequest, "expiresIn", 0, 0},
		{"expiresIn leading zero", `{"mediaIds":["a"],"expiresIn":0900}`, apierr.BadRequest, "expiresIn", 0, 0},
		{"unknown member", `{"mediaIds":["a"],"ttl":60}`, apierr.BadRequest, "ttl", 0, 0},
		{"duplicate member", `{"mediaIds":["a"],"mediaIds":["b"]}`, apierr.BadRequest, "mediaIds", 0, 0},
		{"not json", `mediaIds=a`, apierr.BadRequest, "body", 0, 0},
		{"array body", `["a"]`, apierr.BadRequest, "body", 0, 0},
		{"empty body", ``, apierr.BadRequest, "body", 0, 0},
		{"too big", `{"mediaIds":["` + strings.Repeat("a", MaxBody) + `"]}`, apierr.BadRequest, "body", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseMint([]byte(tt.body))
			if tt.code != "" {
				if err == nil || err.Code != tt.code || err.Parameter != tt.param {
					t.Fatalf("got %v, want %s naming %s", err, tt.code, tt.param)
				}
				if b := body(err); !json.Valid([]byte(b)) {
					t.Fatalf("the error body is not JSON: %s", b)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.ExpiresIn != tt.expires || len(m.MediaIDs) != tt.n {
				t.Errorf("got expiresIn %d and %d ids, want %d and %d", m.ExpiresIn, len(m.MediaIDs), tt.expires, tt.n)
			}
		})
	}
	_, err := ParseMint([]byte(ids(150)))
	if got := body(err); !strings.Contains(got, `"received":150`) || !strings.Contains(got, `"max":100`) {
		t.Errorf("BATCH_TOO_LARGE body: %s", got)
	}
}

func TestProgressBody(t *testing.T) {
	tests := []struct {
		body  string
		param string // "" when valid
	}{
		{``, ""},
		{`{}`, ""},
		{`{"score":0}`, ""},
		{`{"score":100}`, ""},
		{`{"score":87.5,"learnerId":"ana"}`, ""},
		{`{"score":-0.1}`, "score"},
		{`{"score":100.01}`, "score"},
		{`{"score":"90"}`, "score"},
		{`{"score":1e2}`, ""},
		{`{"score":-0}`, ""},
		{`{"score":0.5E+1}`, ""},
		{`{"score":NaN}`, "score"},
		{`{"score":nan}`, "score"},
		{`{"score":NAN}`, "score"},
		{`{"score":-nan}`, "score"},
		{`{"score":inf}`, "score"},
		{`{"score":-inf}`, "score"},
		{`{"score":Infinity}`, "body"},
		{`{"score":-Infinity}`, "body"},
		{`{"score":+50}`, "score"},
		{`{"score":050}`, "score"},
		{`{"score":.5}`, "score"},
		{`{"score":5.}`, "score"},
		{`{"score":1e}`, "score"},
		{`{"score":-}`, "body"},
		{`{"learnerId":""}`, "learnerId"},
		{`{"learnerId":7}`, "learnerId"},
		{`{"done":true}`, "done"},
		{`[1]`, "body"},
	}
	for _, tt := range tests {
		_, err := ParseProgress([]byte(tt.body))
		switch {
		case tt.param == "" && err != nil:
			t.Errorf("%s: %v", tt.body, err)
		case tt.param != "" && (err == nil || err.Parameter != tt.param):
			t.Errorf("%s: got %v, want error naming %s", tt.body, err, tt.param)
		}
	}
}

// FuzzParse feeds arbitrary queries to every route's validator: it never
// panics, a failure is always a 400 naming a parameter, and a success is
// stable under canonicalisation.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "limit=5", "include=quiz,media", "q=%E2%9C%93", "tier=high&detail=full", "limit=%", "a=1&&b=2", "cursor=" + strings.Repeat("x", 300)} {
		for id := 1; id <= 18; id++ {
			f.Add(uint8(id), s)
		}
	}
	f.Fuzz(func(t *testing.T, id uint8, q string) {
		r := route.ByID(route.ID(id%18 + 1))
		v, err := Parse(r, q)
		if err != nil {
			if err.Status() != 400 || err.Parameter == "" {
				t.Fatalf("Parse(%d, %q): %s", r.ID, q, body(err))
			}
			return
		}
		c := v.Canonical()
		v2, err := Parse(r, c)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", c, q, err)
		}
		if v2.Canonical() != c {
			t.Fatalf("canonical not stable: %q then %q", c, v2.Canonical())
		}
	})
}

// FuzzMint: the body validator never panics and only answers 400s.
func FuzzMint(f *testing.F) {
	for _, s := range []string{`{"mediaIds":["a"]}`, `{"mediaIds":[],"expiresIn":60}`, `{"expiresIn":1e99}`, `[`, `{"mediaIds":[1,2,{}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMint(b)
		if err != nil {
			if err.Status() != 400 {
				t.Fatalf("status %d", err.Status())
			}
			return
		}
		if len(m.MediaIDs) < 1 || len(m.MediaIDs) > MaxMediaIDs || m.ExpiresIn < MinExpiresIn {
			t.Fatalf("accepted %+v", m)
		}
	})
}

// FuzzProgress: the progress body validator never panics, only answers
// 400s, and a score it accepts is a number from 0 to 100 (never NaN).
func FuzzProgress(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"score":87.5,"learnerId":"ana"}`, `{"score":NaN}`, `{"score":-inf}`, `{"score":1e2}`, `{"score":050}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseProgress(b)
		if err != nil {
			if err.Status() != 400 {
				t.Fatalf("status %d", err.Status())
			}
			return
		}
		if p.HasScore && !(p.Score >= 0 && p.Score <= 100) {
			t.Fatalf("%q: accepted score %v", b, p.Score)
		}
	})
}

// FuzzJSONNumber: isJSONNumber agrees with encoding/json on what a JSON
// number is.
func FuzzJSONNumber(f *testing.F) {
	for _, s := range []string{"0", "-0", "12.5e-3", "1E+2", "NaN", "-inf", "+1", "01", ".5", "5.", "1e", "-", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := s != "" && (s[0] == '-' || s[0] >= '0' && s[0] <= '9') &&
			s[len(s)-1] >= '0' && s[len(s)-1] <= '9' && json.Valid([]byte(s))
		if got := isJSONNumber(s); got != want {
			t.Fatalf("isJSONNumber(%q) = %v, want %v", s, got, want)
		}
	})
}

func BenchmarkParseLesson(b *testing.B) {
	r := route.ByID(route.Lesson)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		v, err := Parse(r, "detail=full&include=quiz,media")
		if err != nil {
			b.Fatal(err)
		}
		_ = v.Canonical()
	}
}
