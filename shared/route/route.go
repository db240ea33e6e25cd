// Package route is the API's route table: the single source from which
// routing, scope checks, parameter validation and the OpenAPI description
// are derived, in both the origin and the edge (spec: Endpoints, Route
// table).
package route

import (
	"strings"

	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/id"
)

// ID is a route's number: 1 to 18 in the spec's route table, and from 19
// the extensions' (Route.Extension).
type ID int

// The routes, numbered as in the spec.
const (
	OpenAPI       ID = 1
	Tiers         ID = 2
	Subjects      ID = 3
	Subject       ID = 4
	Classes       ID = 5
	Lesson        ID = 6
	Transcript    ID = 7
	Quiz          ID = 8
	Media         ID = 9
	MediaURLs     ID = 10
	Search        ID = 11
	ExportSubject ID = 12
	ExportClass   ID = 13
	Testprep      ID = 14
	TestprepItems ID = 15
	License       ID = 16
	Progress      ID = 17
	PutProgress   ID = 18
	Changes       ID = 19 // an extension: the change feed (issue #37)
)

// In says where a parameter travels.
type In uint8

// Parameter locations.
const (
	Path In = iota
	Query
	Body
)

func (in In) String() string {
	switch in {
	case Path:
		return "path"
	case Query:
		return "query"
	}
	return "body"
}

// Kind is the rule a parameter's value must satisfy.
type Kind uint8

// Parameter kinds.
const (
	Segment Kind = iota // a path segment, checked when the target is resolved
	Enum                // one of Param.Enum
	Int                 // a decimal integer in [Min, Max]
	Text                // a non-empty string of at most MaxLen characters
	Slug                // a subject slug
	Cursor              // an opaque cursor from nextCursor
	List                // comma-separated values from Param.Enum
	Integer             // body: a JSON integer, at least Min
	Number              // body: a JSON number in [Min, Max]
	Strings             // body: an array of Min to Max strings
	String              // body: a string
)

// Param is one parameter of a route and its rule.
type Param struct {
	Name     string
	In       In
	Kind     Kind
	Required bool
	Enum     []string
	Default  string // as it would be written in the query; "" when none
	Min, Max int64
	MaxLen   int // characters, for Text
	// NoETag marks a parameter that is validated but does not change the
	// answer, so it is left out of the ETag (spec: route 4, detail).
	NoETag bool
	Doc    string
}

// Cost is the x-service-cost extension of an operation.
type Cost struct {
	TypicalBytes int
	Meters       []string // meter names of the spec's meters table
	Note         string
}

// Validator says how a route's ETag is obtained (spec: Conditional
// requests).
type Validator uint8

// Validator kinds.
const (
	NoETag  Validator = iota // never an ETag
	Derived                  // from version, route, parameters, organisation and grants; decided before any work
	Bytes                    // hashed from the response bytes (route 1 only)
	Record                   // computed after the learner record is read (progress)
	Inline                   // derived, but only for format=inline (exports)
)

// Route is one row of the spec's route table.
type Route struct {
	ID          ID
	Method      string
	Pattern     string
	Scope       string // suffix; "" for none
	OperationID string
	Summary     string
	Params      []Param
	Cost        Cost
	Validator   Validator
	// Learner marks routes that need an interactive learner token.
	Learner bool
	// Metered is false for the routes that bill nothing (1, 16 and the
	// change feed).
	Metered bool
	// Extension marks a route beyond the spec's table: the OpenAPI
	// description says so (x-lectern-extension), and the spec's routes
	// and their bytes do not change with it.
	Extension bool

	segs []string // pattern split on '/'; "{x}" marks a variable
}

// DerivedETag reports whether a request of r has a derived validator, its
// 304 decided before any work (spec: Conditional requests): always on a
// Derived route, and on an Inline one (the exports) only when format, the
// request's format parameter, is "inline": a zip_url result has no ETag
// and is never a 304. format is ignored on other routes. The origin tags
// an export by it, and the edge decides by it which revalidations its
// gate call can answer.
func (r *Route) DerivedETag(format string) bool {
	switch r.Validator {
	case Derived:
		return true
	case Inline:
		return format == "inline"
	}
	return false
}

// Param returns the parameter called name, or nil.
func (r *Route) Param(name string) *Param {
	for i := range r.Params {
		if r.Params[i].Name == name {
			return &r.Params[i]
		}
	}
	return nil
}

// PathParams returns the names of the path variables in pattern order.
func (r *Route) PathParams() []string {
	var out []string
	for _, s := range r.segs {
		if isVar(s) {
			out = append(out, s[1:len(s)-1])
		}
	}
	return out
}

// Vars are the values of a matched route's path variables, in pattern
// order. They are the raw path segments: every legal value is made of
// [a-z0-9-], so nothing needs unescaping.
type Vars struct {
	n    int
	name [3]string
	val  [3]string
}

// Get returns the value of the variable called name, or "".
func (v *Vars) Get(name string) string {
	for i := 0; i < v.n; i++ {
		if v.name[i] == name {
			return v.val[i]
		}
	}
	return ""
}

// Len is the number of variables.
func (v *Vars) Len() int { return v.n }

// At returns the i-th variable's name and value.
func (v *Vars) At(i int) (name, value string) { return v.name[i], v.val[i] }

// Shared parameter definitions (spec: Common parameters).
var (
	tierValues    = id.Tiers
	detailValues  = []string{"brief", "standard", "full"}
	includeValues = []string{"quiz", "inlineChecks", "interactives", "narrationText", "videoTranscript", "media", "workedExample"}
	sectionValues = []string{"rw", "math", "english", "reading", "science", "ela"}

	pTier        = Param{Name: "tier", In: Path, Kind: Segment, Required: true, Enum: tierValues, Doc: "Tier of the lesson."}
	pSlug        = Param{Name: "subjectSlug", In: Path, Kind: Segment, Required: true, Doc: "Subject slug, matched exactly; tier-specific."}
	pClassNum    = Param{Name: "classNum", In: Path, Kind: Segment, Required: true, Doc: "Class number within the subject, from 1."}
	qTierFilter  = Param{Name: "tier", In: Query, Kind: Enum, Enum: tierValues, Doc: "Filters before pagination."}
	qTierDisamb  = Param{Name: "tier", In: Query, Kind: Enum, Enum: tierValues, Doc: "Disambiguates a slug that exists in several tiers."}
	qDetail      = Param{Name: "detail", In: Query, Kind: Enum, Enum: detailValues, Default: "standard", Doc: "How much, never which fields."}
	qCursor      = Param{Name: "cursor", In: Query, Kind: Cursor, Doc: "Opaque cursor from nextCursor, passed back verbatim."}
	qLimit       = Param{Name: "limit", In: Query, Kind: Int, Min: 1, Max: 100, Default: "25", Doc: "Page size; out of range is rejected, never clamped."}
	lessonPath   = []Param{pTier, pSlug, pClassNum}
	listParams   = []Param{qCursor, qLimit}
	exportFormat = Param{Name: "format", In: Query, Kind: Enum, Enum: []string{"zip_url", "inline"}, Default: "zip_url", Doc: "zip_url returns a signed link; inline returns the bundle."}
)

// IncludeValues are the lesson route's include sections.
func IncludeValues() []string { return includeValues }

// SectionValues is the union of the test-prep sections.
func SectionValues() []string { return sectionValues }

func cat(groups ...[]Param) []Param {
	var out []Param
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func build(rs []Route) []Route {
	for i := range rs {
		rs[i].segs = strings.Split(rs[i].Pattern[1:], "/")
	}
	return rs
}

// table is the spec's route table. Cost figures are typical sizes of the
// responses at standard detail over the deployed corpus.
var table = build([]Route{
	{ID: OpenAPI, Method: "GET", Pattern: "/v1/openapi.json", OperationID: "getOpenAPI",
		Summary:   "The OpenAPI 3.1 description of this API",
		Cost:      Cost{TypicalBytes: 94000, Note: "Unauthenticated and unmetered; the only response a shared cache may keep."},
		Validator: Bytes},
	{ID: Tiers, Method: "GET", Pattern: "/v1/tiers", Scope: "content.read", OperationID: "listTiers",
		Summary: "Licensed tiers with their granted subject counts", Metered: true,
		Cost:      Cost{TypicalBytes: 400, Meters: []string{"calls"}, Note: "One call."},
		Validator: Derived},
	{ID: Subjects, Method: "GET", Pattern: "/v1/subjects", Scope: "content.read", OperationID: "listSubjects",
		Summary: "Page of granted subjects, ordered by tier then name", Metered: true,
		Params:    cat([]Param{qTierFilter, qDetail}, listParams),
		Cost:      Cost{TypicalBytes: 9000, Meters: []string{"calls"}, Note: "One call per page."},
		Validator: Derived},
	{ID: Subject, Method: "GET", Pattern: "/v1/subjects/{subjectSlug}", Scope: "content.read", OperationID: "getSubject",
		Summary: "One subject; the class list is never inlined", Metered: true,
		Params: []Param{pSlug, qTierDisamb,
			{Name: "detail", In: Query, Kind: Enum, Enum: detailValues, Default: "standard", NoETag: true,
				Doc: "Validated strictly; every level answers the same bytes and ETag."}},
		Cost:      Cost{TypicalBytes: 700, Meters: []string{"calls"}, Note: "One call."},
		Validator: Derived},
	{ID: Classes, Method: "GET", Pattern: "/v1/subjects/{subjectSlug}/classes", Scope: "content.read", OperationID: "listClasses",
		Summary: "Page of the subject's class entries, in class order", Metered: true,
		Params:    cat([]Param{pSlug, qTierDisamb}, listParams),
		Cost:      Cost{TypicalBytes: 7000, Meters: []string{"calls"}, Note: "One call per page; not a lesson read."},
		Validator: Derived},
	{ID: Lesson, Method: "GET", Pattern: "/v1/lessons/{tier}/{subjectSlug}/{classNum}", Scope: "content.read", OperationID: "getLesson",
		Summary: "A class as structured JSON", Metered: true,
		Params: cat(lessonPath, []Param{qDetail,
			{Name: "include", In: Query, Kind: List, Enum: includeValues, Doc: "Comma-separated optional sections, on top of any detail level."}}),
		Cost:      Cost{TypicalBytes: 12000, Meters: []string{"calls", "lessonreads"}, Note: "One call and one lesson read; feeds the enumeration alarm. A 404 on a licensed lesson id bills the same."},
		Validator: Derived},
	{ID: Transcript, Method: "GET", Pattern: "/v1/lessons/{tier}/{subjectSlug}/{classNum}/transcript", Scope: "content.read", OperationID: "getTranscript",
		Summary: "The spoken text of a class, per card", Metered: true,
		Params: cat(lessonPath, []Param{
			{Name: "include", In: Query, Kind: List, Enum: []string{"markdown"}, Doc: "markdown adds the same words as one joined string."}}),
		Cost:      Cost{TypicalBytes: 9000, Meters: []string{"calls", "lessonreads"}, Note: "One call and one lesson read, even when the transcript is empty; feeds the enumeration alarm."},
		Validator: Derived},
	{ID: Quiz, Method: "GET", Pattern: "/v1/lessons/{tier}/{subjectSlug}/{classNum}/quiz", Scope: "content.read", OperationID: "getQuiz",
		Summary: "End-of-class quiz and inline checks, with answer keys", Metered: true,
		Params:    lessonPath,
		Cost:      Cost{TypicalBytes: 5000, Meters: []string{"calls", "lessonreads"}, Note: "One call and one lesson read; feeds the enumeration alarm."},
		Validator: Derived},
	{ID: Media, Method: "GET", Pattern: "/v1/lessons/{tier}/{subjectSlug}/{classNum}/media", Scope: "content.read", OperationID: "listLessonMedia",
		Summary: "Page of the class's media assets; url is always null", Metered: true,
		Params: cat(lessonPath, []Param{
			{Name: "type", In: Query, Kind: Enum, Enum: []string{"video", "audio", "image"}, Doc: "Only assets of this type."}}, listParams),
		Cost:      Cost{TypicalBytes: 6000, Meters: []string{"calls", "lessonreads"}, Note: "One call and one lesson read per page; nothing is minted; feeds the enumeration alarm."},
		Validator: Derived},
	{ID: MediaURLs, Method: "POST", Pattern: "/v1/media/urls", Scope: "media.download", OperationID: "mintMediaURLs",
		Summary: "Mint signed media URLs, all or nothing", Metered: true,
		Params: []Param{
			{Name: "mediaIds", In: Body, Kind: Strings, Required: true, Min: 1, Max: 100, Doc: "Media ids from the media route or an export manifest; duplicates are minted and metered each time."},
			{Name: "expiresIn", In: Body, Kind: Integer, Min: 60, Default: "900", Doc: "Seconds; clamped to 900, or 3600 with the long-URL override."},
		},
		Cost: Cost{TypicalBytes: 25000, Meters: []string{"calls", "mints", "downloads"},
			Note: "One call; one hourly mint and one monthly download per URL minted; a refused batch mints nothing."},
		Validator: NoETag},
	{ID: Search, Method: "GET", Pattern: "/v1/search", Scope: "content.read", OperationID: "search",
		Summary: "Substring search over lesson titles, subtitles, card labels, key points and quiz questions", Metered: true,
		Params: cat([]Param{
			{Name: "q", In: Query, Kind: Text, Required: true, MaxLen: 200, Doc: "Substring to find, at most 200 characters."},
			qTierFilter,
			{Name: "subject", In: Query, Kind: Slug, Doc: "Only hits in subjects with this slug."},
		}, listParams),
		Cost:      Cost{TypicalBytes: 6000, Meters: []string{"calls"}, Note: "One call per page."},
		Validator: Derived},
	{ID: ExportSubject, Method: "GET", Pattern: "/v1/exports/subjects/{subjectSlug}", Scope: "content.export", OperationID: "exportSubject",
		Summary: "Export bundle of a whole subject", Metered: true,
		Params:    []Param{pSlug, qTierDisamb, exportFormat},
		Cost:      Cost{TypicalBytes: 1200000, Meters: []string{"calls", "exports", "downloads"}, Note: "One call, one export and one download per class; an inline 304 bills one call only."},
		Validator: Inline},
	{ID: ExportClass, Method: "GET", Pattern: "/v1/exports/classes/{tier}/{subjectSlug}/{classNum}", Scope: "content.export", OperationID: "exportClass",
		Summary: "Export bundle of one class", Metered: true,
		Params:    cat(lessonPath, []Param{exportFormat}),
		Cost:      Cost{TypicalBytes: 40000, Meters: []string{"calls", "exports", "downloads"}, Note: "One call, one export and one download, whatever the format; an inline 304 bills one call only."},
		Validator: Inline},
	{ID: Testprep, Method: "GET", Pattern: "/v1/testprep", Scope: "content.read", OperationID: "getTestprepCatalog",
		Summary: "Test-prep catalog: tests, sections and item counts", Metered: true,
		Cost:      Cost{TypicalBytes: 900, Meters: []string{"calls"}, Note: "One call."},
		Validator: Derived},
	{ID: TestprepItems, Method: "GET", Pattern: "/v1/testprep/{test}/items", Scope: "testprep.read", OperationID: "listTestprepItems",
		Summary: "Page of original practice items", Metered: true,
		Params: cat([]Param{
			{Name: "test", In: Path, Kind: Segment, Required: true, Doc: "Test id."},
			{Name: "section", In: Query, Kind: Enum, Enum: sectionValues, Doc: "Must belong to the test."},
		}, listParams),
		Cost: Cost{TypicalBytes: 20000, Meters: []string{"calls", "testprepitems", "lessonreads"},
			Note: "One call, one lesson read and one test-prep item per item returned; the page is shortened to the remaining allowance."},
		Validator: Derived},
	{ID: License, Method: "GET", Pattern: "/v1/license", Scope: "content.read", OperationID: "getLicense",
		Summary: "Licence, quota and corpus-version status",
		Cost:    Cost{TypicalBytes: 700, Note: "Unmetered; answers even when suspended, expired, pre-agreement or out of quota."},
	},
	{ID: Progress, Method: "GET", Pattern: "/v1/progress", Scope: "progress.read", OperationID: "getProgress",
		Summary: "The signed-in learner's progress", Metered: true, Learner: true,
		Params:    listParams,
		Cost:      Cost{TypicalBytes: 2000, Meters: []string{"calls"}, Note: "One call; the validator is computed after the record is read."},
		Validator: Record},
	{ID: PutProgress, Method: "PUT", Pattern: "/v1/progress/{tier}/{subjectSlug}/{classNum}", Scope: "progress.write", OperationID: "putProgress",
		Summary: "Record the learner's completion of a class", Metered: true, Learner: true,
		Params: cat(lessonPath, []Param{
			{Name: "score", In: Body, Kind: Number, Min: 0, Max: 100, Doc: "Score from 0 to 100."},
			{Name: "learnerId", In: Body, Kind: String, Doc: "Must equal the token's learner when given."},
		}),
		Cost:      Cost{TypicalBytes: 200, Meters: []string{"calls"}, Note: "One call."},
		Validator: NoETag},
	{ID: Changes, Method: "GET", Pattern: "/v1/changes", Scope: "content.read", OperationID: "listChanges", Extension: true,
		Summary: "Page of the granted lessons added, changed or removed since a contentVersion",
		Params: []Param{
			{Name: "since", In: Query, Kind: Text, Required: true, MaxLen: 4096,
				Doc: "A contentVersion, or the `next` of an earlier answer (which also carries the grants held then)."},
			qCursor,
			{Name: "limit", In: Query, Kind: Int, Min: 1, Max: 1000, Default: "500", Doc: "Page size; out of range is rejected, never clamped."},
		},
		Cost: Cost{TypicalBytes: 4000, Note: "Unmetered, as GET /v1/license: polling it bills nothing. A since past the feed's history answers 410 CHANGES_EXPIRED, free."},
	},
})

// All returns the route table in the spec's order. Callers must not modify it.
func All() []Route { return table }

// ByID returns the route numbered id, or nil.
func ByID(id ID) *Route {
	if id < 1 || int(id) > len(table) {
		return nil
	}
	return &table[id-1]
}

func isVar(seg string) bool { return len(seg) > 2 && seg[0] == '{' && seg[len(seg)-1] == '}' }

// match reports whether path (without its leading '/') fits r's pattern,
// filling vars.
func (r *Route) match(path string, vars *Vars) bool {
	vars.n = 0
	for i, seg := range r.segs {
		j := strings.IndexByte(path, '/')
		last := i == len(r.segs)-1
		if (j < 0) != last {
			return false
		}
		part := path
		if j >= 0 {
			part, path = path[:j], path[j+1:]
		}
		if isVar(seg) {
			if part == "" {
				return false
			}
			vars.name[vars.n], vars.val[vars.n] = seg[1:len(seg)-1], part
			vars.n++
		} else if part != seg {
			return false
		}
	}
	return true
}

// Match finds the route for method and path (the request's escaped path,
// without the query). An unknown path is 404 NOT_FOUND; a known path with
// another method is 405 METHOD_NOT_ALLOWED whose Allow lists the served
// methods. HEAD is unsupported everywhere and answers 405 with Allow: GET
// (spec: What the service does §7).
func Match(method, path string) (*Route, Vars, *apierr.Error) {
	var vars Vars
	if !strings.HasPrefix(path, "/v1/") {
		return nil, vars, notFound()
	}
	var allow []string
	for i := range table {
		r := &table[i]
		if !r.match(path[1:], &vars) {
			continue
		}
		if r.Method == method {
			return r, vars, nil
		}
		allow = append(allow, r.Method)
	}
	vars = Vars{}
	if allow == nil {
		return nil, vars, notFound()
	}
	if method == "HEAD" {
		allow = []string{"GET"}
	}
	return nil, vars, &apierr.Error{
		Code:    apierr.MethodNotAllowed,
		Message: method + " is not served on this path; use " + strings.Join(allow, ", ") + ".",
		Allow:   allow,
	}
}

func notFound() *apierr.Error {
	return apierr.New(apierr.NotFound, "No route matches this path. Every route begins with /v1; see /v1/openapi.json.")
}

// String is the variables as "name=value" pairs joined by "&", in pattern
// order: a canonical form of the path's values.
func (v *Vars) String() string {
	n := 0
	for i := 0; i < v.n; i++ {
		n += len(v.name[i]) + len(v.val[i]) + 2
	}
	return string(v.Append(make([]byte, 0, n)))
}

// Append appends String's form of the variables to dst.
func (v *Vars) Append(dst []byte) []byte {
	for i := 0; i < v.n; i++ {
		if i > 0 {
			dst = append(dst, '&')
		}
		dst = append(dst, v.name[i]...)
		dst = append(dst, '=')
		dst = append(dst, v.val[i]...)
	}
	return dst
}
