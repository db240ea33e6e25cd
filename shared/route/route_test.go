package route

import (
	"strings"
	"testing"

	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/scope"
)

// The spec's route table, row by row: number, method, path, scope suffix.
var specTable = []struct {
	id      ID
	method  string
	pattern string
	scope   string
}{
	{1, "GET", "/v1/openapi.json", ""},
	{2, "GET", "/v1/tiers", "content.read"},
	{3, "GET", "/v1/subjects", "content.read"},
	{4, "GET", "/v1/subjects/{subjectSlug}", "content.read"},
	{5, "GET", "/v1/subjects/{subjectSlug}/classes", "content.read"},
	{6, "GET", "/v1/lessons/{tier}/{subjectSlug}/{classNum}", "content.read"},
	{7, "GET", "/v1/lessons/{tier}/{subjectSlug}/{classNum}/transcript", "content.read"},
	{8, "GET", "/v1/lessons/{tier}/{subjectSlug}/{classNum}/quiz", "content.read"},
	{9, "GET", "/v1/lessons/{tier}/{subjectSlug}/{classNum}/media", "content.read"},
	{10, "POST", "/v1/media/urls", "media.download"},
	{11, "GET", "/v1/search", "content.read"},
	{12, "GET", "/v1/exports/subjects/{subjectSlug}", "content.export"},
	{13, "GET", "/v1/exports/classes/{tier}/{subjectSlug}/{classNum}", "content.export"},
	{14, "GET", "/v1/testprep", "content.read"},
	{15, "GET", "/v1/testprep/{test}/items", "testprep.read"},
	{16, "GET", "/v1/license", "content.read"},
	{17, "GET", "/v1/progress", "progress.read"},
	{18, "PUT", "/v1/progress/{tier}/{subjectSlug}/{classNum}", "progress.write"},
	{19, "GET", "/v1/changes", "content.read"}, // an extension (issue #37)
}

func TestTableIsTheSpecs(t *testing.T) {
	if got, want := len(All()), len(specTable); got != want {
		t.Fatalf("route table has %d routes, want %d", got, want)
	}
	ops := map[string]bool{}
	for i, want := range specTable {
		r := All()[i]
		if r.ID != want.id || r.Method != want.method || r.Pattern != want.pattern || r.Scope != want.scope {
			t.Errorf("route %d: got %d %s %s %q, want %d %s %s %q", i+1, r.ID, r.Method, r.Pattern, r.Scope, want.id, want.method, want.pattern, want.scope)
		}
		if ByID(want.id) != &All()[i] {
			t.Errorf("ByID(%d) is not the table row", want.id)
		}
		if r.Scope != "" {
			if _, ok := scope.Suffix(r.Scope); !ok {
				t.Errorf("route %d: scope %q is not a spec scope", r.ID, r.Scope)
			}
		}
		if r.OperationID == "" || ops[r.OperationID] {
			t.Errorf("route %d: operation id %q empty or repeated", r.ID, r.OperationID)
		}
		ops[r.OperationID] = true
		if r.Cost.TypicalBytes <= 0 || r.Cost.Note == "" {
			t.Errorf("route %d: cost metadata incomplete: %+v", r.ID, r.Cost)
		}
		if len(r.Params) > 8 {
			t.Errorf("route %d: %d params, param.Values holds 8", r.ID, len(r.Params))
		}
		// Every path variable is declared as a path parameter and vice versa.
		var declared []string
		for _, p := range r.Params {
			if p.In == Path {
				declared = append(declared, p.Name)
			}
		}
		if got, want := strings.Join(declared, ","), strings.Join(r.PathParams(), ","); got != want {
			t.Errorf("route %d: path params declared %q, pattern has %q", r.ID, got, want)
		}
	}
	for _, r := range All() {
		if r.Extension != (r.ID > PutProgress) {
			t.Errorf("route %d: Extension %v; the spec's routes are 1 to 18", r.ID, r.Extension)
		}
	}
	if ByID(0) != nil || ByID(20) != nil {
		t.Error("ByID out of range returned a route")
	}
}

// spec: Limits, meters: openapi.json and /v1/license are not billed; every
// other route passes the gate and bills a call.
func TestMeteredRoutes(t *testing.T) {
	for _, r := range All() {
		want := r.ID != OpenAPI && r.ID != License && r.ID != Changes // the feed: unmetered, as the licence status
		if r.Metered != want {
			t.Errorf("route %d: Metered = %v, want %v", r.ID, r.Metered, want)
		}
		if r.Metered && (len(r.Cost.Meters) == 0 || r.Cost.Meters[0] != "calls") {
			t.Errorf("route %d: cost meters %v do not start with calls", r.ID, r.Cost.Meters)
		}
	}
}

// spec: Conditional requests §4: no ETag on the mint, the licence status and
// zip_url exports; route 1 is hashed from its bytes.
func TestValidators(t *testing.T) {
	want := map[ID]Validator{OpenAPI: Bytes, MediaURLs: NoETag, License: NoETag, PutProgress: NoETag,
		ExportSubject: Inline, ExportClass: Inline, Progress: Record, Changes: NoETag}
	for _, r := range All() {
		w, ok := want[r.ID]
		if !ok {
			w = Derived
		}
		if r.Validator != w {
			t.Errorf("route %d: validator %d, want %d", r.ID, r.Validator, w)
		}
	}
}

// An export's 304 is decided before any work for format=inline only; a
// derived route's whatever its query; the others' never.
func TestDerivedETag(t *testing.T) {
	for _, c := range []struct {
		id     ID
		format string
		want   bool
	}{
		{Lesson, "", true}, {Tiers, "inline", true},
		{ExportClass, "inline", true}, {ExportSubject, "inline", true},
		{ExportClass, "zip_url", false}, {ExportSubject, "", false},
		{OpenAPI, "", false}, {MediaURLs, "inline", false}, {Progress, "", false}, {License, "", false},
	} {
		if got := ByID(c.id).DerivedETag(c.format); got != c.want {
			t.Errorf("route %d, format %q: DerivedETag = %v, want %v", c.id, c.format, got, c.want)
		}
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		name, method, path string
		id                 ID
		vars               string // name=value,...
		code               apierr.Code
		allow              string
	}{
		{"openapi", "GET", "/v1/openapi.json", OpenAPI, "", "", ""},
		{"tiers", "GET", "/v1/tiers", Tiers, "", "", ""},
		{"subjects", "GET", "/v1/subjects", Subjects, "", "", ""},
		{"subject", "GET", "/v1/subjects/algebra", Subject, "subjectSlug=algebra", "", ""},
		{"classes", "GET", "/v1/subjects/algebra/classes", Classes, "subjectSlug=algebra", "", ""},
		{"lesson", "GET", "/v1/lessons/high/algebra/3", Lesson, "tier=high,subjectSlug=algebra,classNum=3", "", ""},
		{"transcript", "GET", "/v1/lessons/high/algebra/3/transcript", Transcript, "tier=high,subjectSlug=algebra,classNum=3", "", ""},
		{"quiz", "GET", "/v1/lessons/high/algebra/3/quiz", Quiz, "tier=high,subjectSlug=algebra,classNum=3", "", ""},
		{"media", "GET", "/v1/lessons/high/algebra/3/media", Media, "tier=high,subjectSlug=algebra,classNum=3", "", ""},
		{"mint", "POST", "/v1/media/urls", MediaURLs, "", "", ""},
		{"search", "GET", "/v1/search", Search, "", "", ""},
		{"export subject", "GET", "/v1/exports/subjects/algebra", ExportSubject, "subjectSlug=algebra", "", ""},
		{"export class", "GET", "/v1/exports/classes/high/algebra/3", ExportClass, "tier=high,subjectSlug=algebra,classNum=3", "", ""},
		{"testprep", "GET", "/v1/testprep", Testprep, "", "", ""},
		{"testprep items", "GET", "/v1/testprep/act/items", TestprepItems, "test=act", "", ""},
		{"license", "GET", "/v1/license", License, "", "", ""},
		{"progress", "GET", "/v1/progress", Progress, "", "", ""},
		{"put progress", "PUT", "/v1/progress/high/algebra/3", PutProgress, "tier=high,subjectSlug=algebra,classNum=3", "", ""},
		// Syntax of the variables is not the router's business: a bad
		// class number is the lesson route's BAD_LESSON_ID, not a 404.
		{"lesson bad classNum routes", "GET", "/v1/lessons/high/algebra/x", Lesson, "tier=high,subjectSlug=algebra,classNum=x", "", ""},

		{"root", "GET", "/", 0, "", apierr.NotFound, ""},
		{"no version", "GET", "/tiers", 0, "", apierr.NotFound, ""},
		{"v2", "GET", "/v2/tiers", 0, "", apierr.NotFound, ""},
		{"v1 alone", "GET", "/v1", 0, "", apierr.NotFound, ""},
		{"v1 slash", "GET", "/v1/", 0, "", apierr.NotFound, ""},
		{"trailing slash", "GET", "/v1/tiers/", 0, "", apierr.NotFound, ""},
		{"empty variable", "GET", "/v1/subjects//classes", 0, "", apierr.NotFound, ""},
		{"too deep", "GET", "/v1/lessons/high/algebra/3/quiz/1", 0, "", apierr.NotFound, ""},
		{"too shallow", "GET", "/v1/lessons/high/algebra", 0, "", apierr.NotFound, ""},
		{"unknown", "GET", "/v1/teachers", 0, "", apierr.NotFound, ""},
		{"case matters", "GET", "/v1/Tiers", 0, "", apierr.NotFound, ""},
		{"unknown path HEAD", "HEAD", "/v1/teachers", 0, "", apierr.NotFound, ""},

		{"POST on GET route", "POST", "/v1/tiers", 0, "", apierr.MethodNotAllowed, "GET"},
		{"DELETE lesson", "DELETE", "/v1/lessons/high/algebra/3", 0, "", apierr.MethodNotAllowed, "GET"},
		{"GET on mint", "GET", "/v1/media/urls", 0, "", apierr.MethodNotAllowed, "POST"},
		{"GET on progress write", "GET", "/v1/progress/high/algebra/3", 0, "", apierr.MethodNotAllowed, "PUT"},
		{"PUT on progress read", "PUT", "/v1/progress", 0, "", apierr.MethodNotAllowed, "GET"},
		{"OPTIONS", "OPTIONS", "/v1/search", 0, "", apierr.MethodNotAllowed, "GET"},
		// spec: HEAD is unsupported everywhere and answers 405 with Allow: GET.
		{"HEAD tiers", "HEAD", "/v1/tiers", 0, "", apierr.MethodNotAllowed, "GET"},
		{"HEAD openapi", "HEAD", "/v1/openapi.json", 0, "", apierr.MethodNotAllowed, "GET"},
		{"HEAD lesson", "HEAD", "/v1/lessons/high/algebra/3", 0, "", apierr.MethodNotAllowed, "GET"},
		{"HEAD mint", "HEAD", "/v1/media/urls", 0, "", apierr.MethodNotAllowed, "GET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, vars, err := Match(tt.method, tt.path)
			if tt.code != "" {
				if err == nil {
					t.Fatalf("got route %v, want %s", r.ID, tt.code)
				}
				if err.Code != tt.code {
					t.Fatalf("got %s, want %s", err.Code, tt.code)
				}
				if got := strings.Join(err.Allow, ", "); got != tt.allow {
					t.Errorf("allow: got %q, want %q", got, tt.allow)
				}
				if err.Status() != map[apierr.Code]int{apierr.NotFound: 404, apierr.MethodNotAllowed: 405}[tt.code] {
					t.Errorf("status %d", err.Status())
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want route %d", err, tt.id)
			}
			if r.ID != tt.id {
				t.Fatalf("got route %d, want %d", r.ID, tt.id)
			}
			var got []string
			for i := 0; i < vars.Len(); i++ {
				n, v := vars.At(i)
				got = append(got, n+"="+v)
				if vars.Get(n) != v {
					t.Errorf("Get(%q) = %q, want %q", n, vars.Get(n), v)
				}
			}
			if g := strings.Join(got, ","); g != tt.vars {
				t.Errorf("vars: got %q, want %q", g, tt.vars)
			}
			if s, a := vars.String(), string(vars.Append([]byte("x"))); s != strings.ReplaceAll(tt.vars, ",", "&") || a != "x"+s {
				t.Errorf("String() = %q, Append(x) = %q; want %q", s, a, strings.ReplaceAll(tt.vars, ",", "&"))
			}
		})
	}
}

func BenchmarkMatch(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, _, err := Match("GET", "/v1/lessons/high/algebra/3/transcript"); err != nil {
			b.Fatal(err)
		}
	}
}
