package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/openapi"
	"github.com/lectern-api/lectern/origin/openapi/openapitest"
	"github.com/lectern-api/lectern/origin/progress"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/etag"
	shid "github.com/lectern-api/lectern/shared/id"
	"github.com/lectern-api/lectern/shared/link"
	"github.com/lectern-api/lectern/shared/route"
	"github.com/lectern-api/lectern/shared/scope"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestOpenAPI runs the description's scenarios on one harness.
func TestOpenAPI(t *testing.T) {
	// The progress store can lose a race on demand (openapiResponses'
	// 409).
	h := newHarnessOpts(t, smallContent(t, ""), harnessOptions{progress: func(s progress.Store) progress.Store {
		return &racingProgress{Store: s}
	}})
	for _, c := range []struct {
		name string
		fn   func(*testing.T, *harness)
	}{
		{"serve", openapiServe},
		{"document", openapiDocument},
		{"responses", openapiResponses},
		{"downloads", openapiDownloads},
		{"corpus reload", openapiReload}, // last: it swaps the corpus
	} {
		t.Run(c.name, func(t *testing.T) {
			hh := *h
			hh.t = t
			c.fn(t, &hh)
		})
	}
}

// fetchDoc gets the description and decodes it.
func (h *harness) fetchDoc() (resp, map[string]any) {
	h.t.Helper()
	r := h.get("/v1/openapi.json", "")
	wantStatus(h.t, r, 200)
	var doc map[string]any
	if err := json.Unmarshal(r.body, &doc); err != nil {
		h.t.Fatal(err)
	}
	return r, doc
}

func openapiServe(t *testing.T, h *harness) {
	tok := h.scopedOrg("oa-serve", nil, scope.All...)
	r, doc := h.fetchDoc()
	version := h.content.Load().ContentVersion
	tag := r.header.Get("ETag")
	for name, want := range map[string]string{
		"Content-Type":              "application/json",
		"Cache-Control":             "public, max-age=300",
		"Vary":                      "Accept-Encoding",
		"X-Service-Content-Version": version,
		"ETag":                      etag.FromBytes(r.body),
	} {
		if got := r.header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if r.header.Get("X-Request-Id") == "" {
		t.Errorf("no X-Request-Id")
	}
	info := doc["info"].(map[string]any)
	if doc["openapi"] != "3.1.0" || info["version"] != "1.0.0" || info["x-content-version"] != version {
		t.Errorf("openapi %v, info.version %v, x-content-version %v", doc["openapi"], info["version"], info["x-content-version"])
	}

	// Identical for every caller: a token changes nothing, and nothing is
	// billed.
	r2 := h.get("/v1/openapi.json", tok)
	wantStatus(t, r2, 200)
	if !bytes.Equal(r2.body, r.body) || r2.header.Get("ETag") != tag {
		t.Errorf("the description differs with a token")
	}

	nm := h.get("/v1/openapi.json", "", "If-None-Match", tag)
	wantStatus(t, nm, 304)
	if len(nm.body) != 0 || nm.header.Get("ETag") != tag || nm.header.Get("X-Service-Content-Version") != version ||
		nm.header.Get("Cache-Control") != "public, max-age=300" {
		t.Errorf("304: body %d bytes, headers %v", len(nm.body), nm.header)
	}
	wantStatus(t, h.get("/v1/openapi.json", "", "If-None-Match", "*"), 304)
	wantStatus(t, h.get("/v1/openapi.json", "", "If-None-Match", `W/"0000000000000000"`), 200)

	// Compressed per Accept-Encoding; the one validator covers both.
	gz := h.get("/v1/openapi.json", "", "Accept-Encoding", "gzip")
	wantStatus(t, gz, 200)
	if gz.header.Get("Content-Encoding") != "gzip" || gz.header.Get("ETag") != tag {
		t.Fatalf("gzip: Content-Encoding %q, ETag %q", gz.header.Get("Content-Encoding"), gz.header.Get("ETag"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz.body))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(plain, r.body) {
		t.Errorf("gzip body does not decompress to the document (%v)", err)
	}
	if br := h.get("/v1/openapi.json", "", "Accept-Encoding", "br"); br.header.Get("Content-Encoding") != "br" {
		t.Errorf("br: Content-Encoding %q", br.header.Get("Content-Encoding"))
	}

	u := h.usage("oa-serve")
	for _, m := range meter.Meters {
		if u.Get(m) != 0 {
			t.Errorf("the description billed %s: %d", m, u.Get(m))
		}
	}
	// The route takes no parameters; HEAD is 405.
	wantStatus(t, h.get("/v1/openapi.json?x=1", ""), 400)
	wantStatus(t, h.do("HEAD", "/v1/openapi.json", "", nil), 405)
}

// openapiReload: the description, its ETag and its content-version header
// move with the corpus.
func openapiReload(t *testing.T, h *harness) {
	r1, _ := h.fetchDoc()
	old := h.content.Load()
	other := buildContent(t, filepath.Join(t.TempDir(), "corpus2"), gen.Options{Seed: 2, Small: true})
	if other.ContentVersion == old.ContentVersion {
		t.Fatalf("seed 2 has the same contentVersion %s", old.ContentVersion)
	}
	h.content.Store(other)
	defer h.content.Store(old)
	r2, doc := h.fetchDoc()
	if r2.header.Get("ETag") == r1.header.Get("ETag") || r2.header.Get("X-Service-Content-Version") != other.ContentVersion ||
		doc["info"].(map[string]any)["x-content-version"] != other.ContentVersion {
		t.Errorf("after a corpus change: ETag %s (was %s), version %s", r2.header.Get("ETag"), r1.header.Get("ETag"), r2.header.Get("X-Service-Content-Version"))
	}
	if r2.header.Get("ETag") != etag.FromBytes(r2.body) {
		t.Errorf("ETag is not hashed from the bytes")
	}
	wantStatus(t, h.get("/v1/openapi.json", "", "If-None-Match", r1.header.Get("ETag")), 200)
	wantStatus(t, h.get("/v1/openapi.json", "", "If-None-Match", r2.header.Get("ETag")), 304)
}

func openapiDocument(t *testing.T, h *harness) {
	_, doc := h.fetchDoc()
	c := h.content.Load().Corpus
	var tiers, tests, sections []string
	sectionMap := map[string]any{}
	for _, tr := range c.Tiers {
		tiers = append(tiers, tr.Name)
	}
	for _, ts := range c.Tests {
		tests = append(tests, ts.ID)
		var ids []any
		for _, s := range ts.Sections {
			ids = append(ids, s.ID)
			if !slices.Contains(sections, s.ID) {
				sections = append(sections, s.ID)
			}
		}
		sectionMap[ts.ID] = ids
	}

	// One operation per route under /v1; beside them only the download
	// links' GET and HEAD (origin/openapi TestOpenAPIDownloads).
	ops := 0
	for path, p := range openapitest.At(doc, "paths").(map[string]any) {
		if !strings.HasPrefix(path, "/v1/") {
			if !strings.HasPrefix(path, link.Prefix) || p.(map[string]any)["get"] == nil || p.(map[string]any)["head"] == nil {
				t.Errorf("path %s: not a route, nor a download link with GET and HEAD", path)
			}
			continue
		}
		ops += len(p.(map[string]any))
	}
	if ops != len(route.All()) {
		t.Errorf("%d operations under /v1/, want one per route (%d)", ops, len(route.All()))
	}
	for _, rt := range route.All() {
		op, _ := openapitest.At(doc, "paths", rt.Pattern, strings.ToLower(rt.Method)).(map[string]any)
		if op == nil {
			t.Errorf("route %d: %s %s is not described", rt.ID, rt.Method, rt.Pattern)
			continue
		}
		if op["operationId"] != rt.OperationID || op["summary"] != rt.Summary {
			t.Errorf("route %d: operationId %v summary %v", rt.ID, op["operationId"], op["summary"])
		}
		cost, _ := op["x-service-cost"].(map[string]any)
		if cost == nil || cost["typicalBytes"] != float64(rt.Cost.TypicalBytes) || cost["note"] != rt.Cost.Note ||
			!slices.Equal(openapitest.Strs(cost["meters"]), append([]string{}, rt.Cost.Meters...)) {
			t.Errorf("route %d: x-service-cost %v", rt.ID, cost)
		}
		xs, hasSections := op["x-service-sections"]
		if isPrep := rt.ID == route.Testprep || rt.ID == route.TestprepItems; isPrep != hasSections {
			t.Errorf("route %d: x-service-sections present %v", rt.ID, hasSections)
		} else if isPrep {
			if b1, _ := json.Marshal(xs); string(b1) != string(openapitest.Must(json.Marshal(sectionMap))) {
				t.Errorf("route %d: x-service-sections %s", rt.ID, b1)
			}
		}
		sec, _ := op["security"].([]any)
		switch {
		case rt.Scope == "":
			if sec == nil || len(sec) != 0 {
				t.Errorf("route %d: security %v, want []", rt.ID, op["security"])
			}
		default:
			b, _ := json.Marshal(sec)
			scheme := "oauth2"
			if rt.Learner {
				scheme = "learner"
			}
			if want := `[{"` + scheme + `":["` + scope.Full(rt.Scope) + `"]}]`; string(b) != want {
				t.Errorf("route %d: security %s, want %s", rt.ID, b, want)
			}
		}
		// Parameters and body members: exactly the route's, in order.
		var names, body []string
		for _, p := range openapitest.Params(op) {
			pm := p.(map[string]any)
			names = append(names, pm["in"].(string)+":"+pm["name"].(string))
		}
		members, _ := openapitest.At(op, "requestBody", "content", "application/json", "schema", "properties").(map[string]any)
		for name := range members {
			body = append(body, "body:"+name)
		}
		slices.Sort(body)
		var wantNames, wantBody []string
		for _, p := range rt.Params {
			if p.In == route.Body {
				wantBody = append(wantBody, "body:"+p.Name)
			} else {
				wantNames = append(wantNames, p.In.String()+":"+p.Name)
			}
		}
		if rt.Method == "GET" && rt.Validator != route.NoETag { // issue #18, point 5
			wantNames = append(wantNames, "header:If-None-Match")
		}
		slices.Sort(wantBody)
		if !slices.Equal(names, wantNames) || !slices.Equal(body, wantBody) {
			t.Errorf("route %d: parameters %v %v, want %v %v", rt.ID, names, body, wantNames, wantBody)
		}
		// Responses: 200, 304 where an ETag applies, every error status.
		rs := op["responses"].(map[string]any)
		if _, ok := rs["200"]; !ok {
			t.Errorf("route %d: no 200", rt.ID)
		}
		if _, ok := rs["304"]; ok != (rt.Validator != route.NoETag) {
			t.Errorf("route %d: 304 documented %v", rt.ID, ok)
		}
		for st, codes := range openapi.ErrorCodes(&rt) {
			got := openapitest.Strs(openapitest.At(rs, strconv.Itoa(st), "content", "application/json", "schema", "properties", "error", "properties", "code", "enum"))
			var want []string
			for _, c := range codes {
				want = append(want, string(c))
			}
			if !slices.Equal(got, want) {
				t.Errorf("route %d: %d codes %v, want %v", rt.ID, st, got, want)
			}
		}
		_, has401 := rs["401"]
		_, has500 := rs["500"]
		_, has429 := rs["429"]
		if has401 != (rt.Scope != "") || !has500 || has429 != rt.Metered {
			t.Errorf("route %d: 401 %v, 429 %v, 500 %v", rt.ID, has401, has429, has500)
		}
		for _, p := range openapitest.Params(op) {
			pm := p.(map[string]any)
			enum := openapitest.Strs(openapitest.At(pm, "schema", "enum"))
			switch pm["name"] {
			case "tier":
				if !slices.Equal(enum, tiers) {
					t.Errorf("route %d: tier enum %v, corpus %v", rt.ID, enum, tiers)
				}
			case "test":
				if !slices.Equal(enum, tests) {
					t.Errorf("route %d: test enum %v, corpus %v", rt.ID, enum, tests)
				}
			case "section":
				if !slices.Equal(enum, sections) {
					t.Errorf("route %d: section enum %v, corpus %v", rt.ID, enum, sections)
				}
			}
		}
	}
	for _, m := range []string{"/v1/media/urls:post", "/v1/progress/{tier}/{subjectSlug}/{classNum}:put"} {
		path, method, _ := strings.Cut(m, ":")
		if openapitest.At(doc, "paths", path, method, "requestBody") == nil {
			t.Errorf("%s has no requestBody", m)
		}
	}
	if b := openapitest.At(doc, "paths", "/v1/media/urls", "post", "requestBody", "required"); b != true {
		t.Errorf("mint body required: %v", b)
	}

	// The error schema: every code, every per-code key.
	var codes []string
	for _, c := range append(apierr.Codes(), apierr.Extensions()...) {
		codes = append(codes, string(c))
	}
	errSchema := openapitest.At(doc, "components", "schemas", "Error", "properties", "error")
	if got := openapitest.Strs(openapitest.At(errSchema, "properties", "code", "enum")); !slices.Equal(got, codes) {
		t.Errorf("error code enum %v, want apierr.Codes() and Extensions() %v", got, codes)
	}
	for _, k := range []string{"code", "message", "requestId", "parameter", "allowed", "received", "min", "max", "grant",
		"tiers", "allow", "scope", "retryAfterSeconds", "quotaResetsAt", "hint", "exportsUsed", "exportsLimit"} {
		if openapitest.At(errSchema, "properties", k) == nil {
			t.Errorf("error schema lacks %s", k)
		}
	}
	if got := openapitest.Strs(openapitest.At(doc, "components", "schemas", "TierRow", "properties", "tier", "enum")); !slices.Equal(got, tiers) {
		t.Errorf("TierRow tier enum %v, corpus %v", got, tiers)
	}
	flow := openapitest.At(doc, "components", "securitySchemes", "oauth2", "flows", "clientCredentials")
	if openapitest.At(flow, "tokenUrl") != h.issuer+"/oauth2/token" || len(openapitest.At(flow, "scopes").(map[string]any)) != len(scope.All) {
		t.Errorf("clientCredentials flow %v", flow)
	}
}

// oaValidator validates response bodies against the description's
// response schemas (OpenAPI 3.1 schemas are JSON Schema 2020-12).
type oaValidator struct {
	doc     map[string]any
	c       *jsonschema.Compiler
	schemas map[string]*jsonschema.Schema
}

const oaDocURL = "https://lectern.test/openapi.json"

func newOAValidator(t *testing.T, body []byte) *oaValidator {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(oaDocURL, inst); err != nil {
		t.Fatal(err)
	}
	v := &oaValidator{c: c, schemas: map[string]*jsonschema.Schema{}}
	json.Unmarshal(body, &v.doc)
	return v
}

func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// check validates one real response of rt (checkOp).
func (v *oaValidator) check(t *testing.T, rt *route.Route, what string, r resp) {
	t.Helper()
	v.checkOp(t, rt.Pattern, rt.Method, what, r)
}

// checkOp validates one real response of the operation method pattern
// (a route's, or a download link's, which no route describes): it
// reports every problem.
func (v *oaValidator) checkOp(t *testing.T, pattern, method, what string, r resp) {
	t.Helper()
	for _, p := range v.problems(t, pattern, method, r) {
		t.Errorf("%s %s (%s): %s", method, pattern, what, p)
	}
}

// oaCheckedHeaders are the headers a response may carry only where the
// description declares them.
var oaCheckedHeaders = []string{"ETag", "X-Service-Content-Version", "RateLimit", "RateLimit-Policy", "Retry-After", "WWW-Authenticate", "X-Request-Id",
	"Accept-Ranges", "Content-Range", "Content-Disposition"}

// problems is what does not fit in one real response of the operation:
// its status must be documented; the checked headers it carries must be
// documented, those documented as required must be there, and each
// documented one it carries must fit its schema; its Content-Type must be
// a documented media type and a JSON body must fit that type's schema. A
// 304 and a HEAD's answer have no body.
func (v *oaValidator) problems(t *testing.T, pattern, method string, r resp) []string {
	t.Helper()
	var out []string
	bad := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	at := "#/paths/" + pointerEscape(pattern) + "/" + strings.ToLower(method) + "/responses/" + strconv.Itoa(r.status)
	doc, _ := openapitest.At(v.doc, "paths", pattern, strings.ToLower(method), "responses", strconv.Itoa(r.status)).(map[string]any)
	if doc == nil {
		bad("status %d is not documented: %.300s", r.status, r.body)
		return out
	}
	hs, _ := doc["headers"].(map[string]any)
	for _, name := range oaCheckedHeaders {
		if r.header.Get(name) != "" && hs[name] == nil {
			bad("%d carries %s, which is not documented", r.status, name)
		}
	}
	for name, h := range hs {
		loc := at + "/headers/" + pointerEscape(name)
		if ref, ok := openapitest.At(h, "$ref").(string); ok {
			loc = ref
			h = openapitest.At(v.doc, "components", "headers", strings.TrimPrefix(ref, "#/components/headers/"))
		}
		val := r.header.Get(name)
		if val == "" {
			if openapitest.At(h, "required") == true {
				bad("%d lacks %s, documented as required", r.status, name)
			}
			continue
		}
		inst := any(val)
		if openapitest.At(h, "schema", "type") == "integer" {
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				bad("%d: %s %q is not an integer", r.status, name, val)
				continue
			}
			inst = json.Number(strconv.FormatInt(n, 10))
		}
		if err := v.schema(t, oaDocURL+loc+"/schema").Validate(inst); err != nil {
			bad("%d: %s %q does not fit its schema: %v", r.status, name, val, err)
		}
	}
	if r.status == 304 || method == "HEAD" {
		if len(r.body) != 0 {
			bad("%d with a body", r.status)
		}
		return out
	}
	content, _ := doc["content"].(map[string]any)
	if len(r.body) == 0 && content == nil {
		return out
	}
	mt, _, _ := strings.Cut(r.header.Get("Content-Type"), ";")
	mt = strings.TrimSpace(mt)
	if content[mt] == nil {
		bad("%d: Content-Type %q is not documented", r.status, r.header.Get("Content-Type"))
		return out
	}
	if mt == "application/json" {
		if err := v.validateAt(t, at+"/content/"+pointerEscape(mt)+"/schema", r.body); err != nil {
			bad("%d body does not fit the description:\n%v\nbody: %.500s", r.status, err, r.body)
		}
	}
	return out
}

// validate checks body against the JSON schema of rt's response status.
func (v *oaValidator) validate(t *testing.T, rt *route.Route, status int, body []byte) error {
	t.Helper()
	return v.validateAt(t, "#/paths/"+pointerEscape(rt.Pattern)+"/"+strings.ToLower(rt.Method)+"/responses/"+strconv.Itoa(status)+"/content/application~1json/schema", body)
}

// validateAt checks a JSON body against the schema at the document's
// pointer ptr.
func (v *oaValidator) validateAt(t *testing.T, ptr string, body []byte) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return err
	}
	return v.schema(t, oaDocURL+ptr).Validate(inst)
}

// schema compiles the schema at loc once.
func (v *oaValidator) schema(t *testing.T, loc string) *jsonschema.Schema {
	t.Helper()
	sch := v.schemas[loc]
	if sch == nil {
		var err error
		if sch, err = v.c.Compile(loc); err != nil {
			t.Fatalf("compile %s: %v", loc, err)
		}
		v.schemas[loc] = sch
	}
	return sch
}

// example is a valid request of rt over corpus c: path values of the
// first lesson and test, required parameters, a body where one is taken.
func oaExample(c *corpus.Corpus, rt *route.Route) (path string, body []byte) {
	l := c.Lessons[0]
	sub := l.Subject
	path = rt.Pattern
	for name, val := range map[string]string{
		"{tier}": sub.Tier, "{subjectSlug}": sub.Slug, "{classNum}": strconv.Itoa(l.Number), "{test}": c.Tests[0].ID,
	} {
		path = strings.ReplaceAll(path, name, val)
	}
	var q []string
	if p := rt.Param("tier"); p != nil && p.In == route.Query && strings.Contains(rt.Pattern, "{subjectSlug}") {
		q = append(q, "tier="+sub.Tier)
	}
	if p := rt.Param("q"); p != nil {
		q = append(q, "q="+strings.ToLower(strings.Fields(l.Title)[0]))
	}
	if len(q) > 0 {
		path += "?" + strings.Join(q, "&")
	}
	switch rt.ID {
	case route.MediaURLs:
		body = openapitest.Must(json.Marshal(map[string]any{"mediaIds": []string{l.Media[0].ID}}))
	case route.PutProgress:
		body = []byte("{}")
	}
	return path, body
}

// oaVariants are further valid queries whose answers differ in shape.
var oaVariants = map[route.ID][]string{
	route.Subjects:      {"detail=full", "detail=brief&limit=1"},
	route.Lesson:        {"detail=brief", "detail=full&include=quiz,inlineChecks,interactives,narrationText,videoTranscript,media,workedExample"},
	route.Transcript:    {"include=markdown"},
	route.Media:         {"type=video", "limit=1"},
	route.Classes:       {"limit=1"},
	route.TestprepItems: {"section=rw&limit=3"},
	route.ExportSubject: {"format=inline", "format=zip_url"},
	route.ExportClass:   {"format=inline"},
}

// openapiResponses validates real responses of every route this server
// serves — successes, 304s and errors — against the description.
func openapiResponses(t *testing.T, h *harness) {
	tok := h.scopedOrg("oa-valid", nil, scope.All...)
	reader := h.scopedOrg("oa-reader", nil, scope.ContentRead)
	broke := h.scopedOrg("oa-broke", prepPtr(0), scope.All...)
	// The progress routes take learner tokens (spec: Authentication §9).
	learner := h.learnerToken("oa-valid", "oa-learner", scope.All...)
	learnerReader := h.learnerToken("oa-valid", "oa-learner", scope.ContentRead)
	r, _ := h.fetchDoc()
	v := newOAValidator(t, r.body)
	c := h.content.Load().Corpus

	// Controls: the validator does refuse what does not fit.
	for _, bad := range []struct {
		id     route.ID
		status int
		body   string
	}{
		{route.Tiers, 200, `{"items":[]}`},
		{route.TestprepItems, 404, `{"error":{"code":"UNKNOWN_SUBJECT","message":"m","requestId":"r"}}`},
		{route.TestprepItems, 404, `{"error":{"code":"UNKNOWN_TEST","message":"m","requestId":"r","extra":1}}`},
		{route.Testprep, 200, `{"items":[],"total":0,"pageNum":1,"totalPages":1,"hasMore":false,"nextCursor":null,"contentVersion":"x","_license":{"lic":"l","tag":"t"}}`},
		{route.MediaURLs, 200, `{"items":[{"mediaId":"m","url":"https://x/files/m/a","expiresAt":"2026-01-01T00:00:00Z","etag":"e"}],"expiresIn":900,"contentVersion":"x","_license":{"lic":"l","tag":"t"}}`},
		{route.PutProgress, 200, `{"lessonId":"high/a/1","score":null,"bestScore":null,"xp":10,"streak":{"current":1,"longest":1,"lastDay":"2026-01-01"},"version":3}`},
		{route.PutProgress, 200, `{"lessonId":"high/a/1","score":101,"bestScore":101,"xp":20,"streak":{"current":1,"longest":1,"lastDay":"2026-01-01"}}`},
		{route.Progress, 200, `{"items":[{"lessonId":"high/a/1","tier":"high","subjectSlug":"a","classNum":1,"score":5,"firstRecordedAt":"2026-01-01T00:00:00Z","lastRecordedAt":"2026-01-01T00:00:00Z"}],"total":1,"pageNum":1,"totalPages":1,"hasMore":false,"nextCursor":null,"contentVersion":"x","_license":{"lic":"l","tag":"t"},"learnerId":"a","xp":10,"streak":{"current":0,"longest":0,"lastDay":null}}`},
		{route.Progress, 200, `{"items":[],"total":0,"pageNum":1,"totalPages":1,"hasMore":false,"nextCursor":null,"contentVersion":"x","_license":{"lic":"l","tag":"t"},"learnerId":"a","xp":0}`},
	} {
		if v.validate(t, route.ByID(bad.id), bad.status, []byte(bad.body)) == nil {
			t.Errorf("route %d %d: %s validated", bad.id, bad.status, bad.body)
		}
	}
	served := 0
	for i := range route.All() {
		rt := &route.All()[i]
		if _, ok := h.srv.endpoints[rt.ID]; !ok {
			t.Logf("route %d (%s) is not served by this build: not validated", rt.ID, rt.OperationID)
			continue
		}
		served++
		path, body := oaExample(c, rt)
		tok, reader := tok, reader
		if rt.Learner {
			v.check(t, rt, "machine token", h.do(rt.Method, path, tok, body)) // LEARNER_REQUIRED
			tok, reader = learner, learnerReader
		}
		ok := h.do(rt.Method, path, tok, body)
		if ok.status >= 500 {
			t.Errorf("route %d: %d %s", rt.ID, ok.status, ok.body)
		}
		v.check(t, rt, "valid request", ok)
		if tag := ok.header.Get("ETag"); tag != "" && rt.Method == "GET" {
			v.check(t, rt, "revalidation", h.do(rt.Method, path, tok, body, "If-None-Match", tag))
		}
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		for _, q := range oaVariants[rt.ID] {
			r := h.do(rt.Method, path+sep+q, tok, body)
			if r.status != 200 {
				t.Errorf("route %d ?%s: %d %.300s", rt.ID, q, r.status, r.body)
			}
			v.check(t, rt, q, r)
		}
		v.check(t, rt, "unknown parameter", h.do(rt.Method, path+sep+"bogus=1", tok, body))
		if rt.Scope != "" {
			v.check(t, rt, "no token", h.do(rt.Method, path, "", body))
			v.check(t, rt, "bad token", h.do(rt.Method, path, "not-a-jwt", body))
			if rt.Scope != scope.ContentRead {
				v.check(t, rt, "insufficient scope", h.do(rt.Method, path, reader, body))
			}
		}
	}
	if served == 0 {
		t.Fatal("no route served")
	}

	if rt := route.ByID(route.Search); h.srv.endpoints[rt.ID].serve != nil {
		v.check(t, rt, "unknown subject", h.get("/v1/search?q=a&subject=no-such-subject", tok))
	}
	// The mint's own refusals.
	mint := route.ByID(route.MediaURLs)
	v.check(t, mint, "unknown media", h.do("POST", mint.Pattern, tok, []byte(`{"mediaIds":["`+c.Lessons[0].ID+`#no-such-card#video"]}`)))
	v.check(t, mint, "malformed media id", h.do("POST", mint.Pattern, tok, []byte(`{"mediaIds":["nope"]}`)))
	v.check(t, mint, "batch too large", h.do("POST", mint.Pattern, tok, []byte(`{"mediaIds":[`+strings.Repeat(`"a",`, 100)+`"a"]}`)))
	v.check(t, mint, "bad expiresIn", h.do("POST", mint.Pattern, tok, []byte(`{"mediaIds":["a"],"expiresIn":1}`)))
	// The progress routes' own answers: a recorded class, a refused body,
	// a bad lesson id, an unknown class, a lost race.
	put, get := route.ByID(route.PutProgress), route.ByID(route.Progress)
	l := c.Lessons[0]
	v.check(t, put, "score", h.do("PUT", "/v1/progress/"+l.ID, learner, []byte(`{"score":72.5,"learnerId":"oa-learner"}`)))
	v.check(t, put, "no score", h.do("PUT", "/v1/progress/"+c.Lessons[1].ID, learner, nil))
	v.check(t, get, "recorded classes", h.get("/v1/progress?limit=1", learner))
	v.check(t, put, "another learner", h.do("PUT", "/v1/progress/"+l.ID, learner, []byte(`{"learnerId":"bob"}`)))
	v.check(t, put, "score out of range", h.do("PUT", "/v1/progress/"+l.ID, learner, []byte(`{"score":101}`)))
	v.check(t, put, "bad lesson id", h.do("PUT", "/v1/progress/nope/"+l.Subject.Slug+"/1", learner, nil))
	v.check(t, put, "unknown class", h.do("PUT", fmt.Sprintf("/v1/progress/%s/%s/%d", l.Subject.Tier, l.Subject.Slug, len(l.Subject.Lessons)+1), learner, nil))
	if race, ok := h.srv.cfg.Progress.(*racingProgress); ok {
		race.lesson, _ = shid.ParseLesson(c.Lessons[2].ID)
		race.armed.Store(true)
		r := h.do("PUT", "/v1/progress/"+l.ID, learner, []byte(`{"score":1}`))
		wantStatus(t, r, 409)
		v.check(t, put, "lost race", r)
	}
	v.check(t, get, "bad cursor", h.get("/v1/progress?cursor=abc", learner))
	v.check(t, mint, "body not JSON", h.do("POST", mint.Pattern, tok, []byte(`{"mediaIds":`)))
	mintBody := openapitest.Must(json.Marshal(map[string]any{"mediaIds": []string{c.Lessons[0].Media[0].ID}}))
	for _, o := range []struct {
		id, code string
		mod      func(*store.Org)
	}{
		{"oa-mint-tier", "TIER_NOT_LICENSED", func(o *store.Org) { o.Grants = nil }},
		{"oa-mint-hour", "RATE_LIMITED", func(o *store.Org) { o.RateLimits.URLMintsPerHour = prepPtr(0) }},
		{"oa-mint-month", "QUOTA_EXCEEDED", func(o *store.Org) { o.Quota.Downloads = prepPtr(0) }},
	} {
		mtok := h.scopedOrg(o.id, nil, scope.MediaDownload)
		if _, err := h.store.UpdateOrg(context.Background(), o.id, func(org *store.Org) error { o.mod(org); return nil }); err != nil {
			t.Fatal(err)
		}
		r := h.do("POST", mint.Pattern, mtok, mintBody)
		if r.errorBody(t).Code != o.code {
			t.Errorf("mint of %s: %d %s, want %s", o.id, r.status, r.body, o.code)
		}
		v.check(t, mint, o.code, r)
	}
	// An inline export's revalidation (a zip_url result has no ETag).
	for _, id := range []route.ID{route.ExportSubject, route.ExportClass} {
		rt := route.ByID(id)
		path, _ := oaExample(c, rt)
		path += map[bool]string{true: "&", false: "?"}[strings.Contains(path, "?")] + "format=inline"
		tag := h.get(path, tok).header.Get("ETag")
		r := h.get(path, tok, "If-None-Match", tag)
		if tag == "" || r.status != 304 {
			t.Errorf("%s: revalidation of ETag %q: %d", path, tag, r.status)
		}
		v.check(t, rt, "inline revalidation", r)
	}
	// The test-prep routes' own refusals.
	items := route.ByID(route.TestprepItems)
	v.check(t, items, "unknown test", h.get("/v1/testprep/gre/items", tok))
	v.check(t, items, "unknown section", h.get("/v1/testprep/act/items?section=rw", tok))
	v.check(t, items, "section not in enum", h.get("/v1/testprep/act/items?section=latin", tok))
	v.check(t, items, "limit out of range", h.get("/v1/testprep/act/items?limit=101", tok))
	v.check(t, items, "bad cursor", h.get("/v1/testprep/act/items?cursor=abc", tok))
	q := h.get("/v1/testprep/act/items", broke)
	wantStatus(t, q, 429)
	v.check(t, items, "allowance spent", q)
	// A suspended organisation: the gate's 403.
	if _, err := h.store.UpdateOrg(context.Background(), "oa-reader", func(o *store.Org) error {
		o.Status = "suspended"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s := h.get("/v1/testprep", reader)
	wantStatus(t, s, 403)
	v.check(t, route.ByID(route.Testprep), "suspended", s)
	// An expired licence.
	if _, err := h.store.UpdateOrg(context.Background(), "oa-reader", func(o *store.Org) error {
		o.Status, o.RenewsAt = "active", time.Now().Add(-time.Hour)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	v.check(t, route.ByID(route.Testprep), "expired", h.get("/v1/testprep", reader))
}

// openapiDownloads validates real answers of the signed download links
// against their description: a minted media URL and the zip_url links of
// both export routes, fetched with GET and HEAD, ranges, revalidation and
// refusals; other methods' 405, which no operation describes, against
// the Error schema.
func openapiDownloads(t *testing.T, h *harness) {
	tok := h.scopedOrg("oa-files", nil, scope.All...)
	r, _ := h.fetchDoc()
	v := newOAValidator(t, r.body)
	c := h.content.Load().Corpus
	const media, export = link.Prefix + "m/{name}", link.Prefix + "e/{name}"
	rel := func(u string) string {
		t.Helper()
		p, ok := strings.CutPrefix(u, h.api)
		if !ok || !strings.HasPrefix(p, link.Prefix) {
			t.Fatalf("link %q is not under %s%s", u, h.api, link.Prefix)
		}
		return p
	}

	m := someMedia(t, c, 1000)
	minted := h.do("POST", "/v1/media/urls", tok, openapitest.Must(json.Marshal(map[string]any{"mediaIds": []string{m.ID}})))
	wantStatus(t, minted, 200)
	var mint struct{ Items []struct{ URL string } }
	if err := json.Unmarshal(minted.body, &mint); err != nil || len(mint.Items) != 1 {
		t.Fatalf("mint: %v %s", err, minted.body)
	}
	u := rel(mint.Items[0].URL)
	size := strconv.FormatInt(m.Bytes, 10)
	altered := strings.Replace(u, "&s=", "&s=A", 1)[:len(u)] // the signature shifted by one character (s is last)
	if altered == u {
		t.Fatal("the alteration changed nothing")
	}
	ok := h.get(u, "")
	wantStatus(t, ok, 200)
	tag := ok.header.Get("ETag")
	for _, c := range []struct {
		method, what, url string
		status            int
		hdr               []string
	}{
		{"GET", "whole", u, 200, nil},
		{"HEAD", "whole", u, 200, nil},
		{"GET", "range", u, 206, []string{"Range", "bytes=100-199"}},
		{"HEAD", "range", u, 206, []string{"Range", "bytes=100-199"}},
		{"GET", "suffix range", u, 206, []string{"Range", "bytes=-10"}},
		{"GET", "two ranges", u, 206, []string{"Range", "bytes=0-1,10-19"}},
		{"GET", "If-Range current", u, 206, []string{"Range", "bytes=0-9", "If-Range", tag}},
		{"GET", "If-Range stale", u, 200, []string{"Range", "bytes=0-9", "If-Range", `"0000000000000000"`}},
		{"GET", "revalidation", u, 304, []string{"If-None-Match", tag}},
		{"HEAD", "revalidation", u, 304, []string{"If-None-Match", "*"}},
		{"GET", "If-Match stale", u, 412, []string{"If-Match", `"0000000000000000"`}},
		{"GET", "range past the end", u, 416, []string{"Range", "bytes=" + size + "-"}},
		{"GET", "range that does not parse", u, 416, []string{"Range", "bytes=abc"}},
		{"HEAD", "range past the end", u, 416, []string{"Range", "bytes=" + size + "-"}},
		{"GET", "altered", altered, 404, nil},
		{"HEAD", "altered", altered, 404, nil},
		{"GET", "no query", strings.Split(u, "?")[0], 404, nil},
	} {
		r := h.do(c.method, c.url, "", nil, c.hdr...)
		if r.status != c.status {
			t.Errorf("%s media link (%s): %d, want %d", c.method, c.what, r.status, c.status)
		}
		v.checkOp(t, media, c.method, c.what, r)
		if c.status == 404 && c.method == "GET" {
			r.wantError(t, 404, string(apierr.NotFound))
		}
	}

	// Both export routes' links: a subject's (no c) and a class's.
	var exports []string
	for _, id := range []route.ID{route.ExportSubject, route.ExportClass} {
		path, _ := oaExample(c, route.ByID(id))
		b := decodeExport(t, h.get(path, tok), "format", "url", "expiresAt", "classes", "contentVersion", "_license")
		exports = append(exports, rel(b.URL))
	}
	if !strings.Contains(exports[1], "&c=") || strings.Contains(exports[0], "&c=") {
		t.Errorf("export links %v: want a subject's without c and a class's with it", exports)
	}
	for _, x := range exports {
		get := h.get(x, "")
		wantStatus(t, get, 200)
		zipFiles(t, get.body)
		v.checkOp(t, export, "GET", "zip", get)
		head := h.do("HEAD", x, "", nil)
		wantStatus(t, head, 200)
		if head.header.Get("Content-Length") != strconv.Itoa(len(get.body)) {
			t.Errorf("HEAD %s: Content-Length %q, the GET sent %d bytes", x, head.header.Get("Content-Length"), len(get.body))
		}
		v.checkOp(t, export, "HEAD", "zip", head)
		part := h.get(x, "", "Range", "bytes=0-9")
		wantStatus(t, part, 206)
		v.checkOp(t, export, "GET", "range", part)
		v.checkOp(t, export, "GET", "If-Range current", h.get(x, "", "Range", "bytes=10-", "If-Range", get.header.Get("ETag")))
		bad := strings.Replace(x, "&r=", "&r=9", 1)
		nf := h.get(bad, "")
		nf.wantError(t, 404, string(apierr.NotFound))
		v.checkOp(t, export, "GET", "altered", nf)
		v.checkOp(t, export, "HEAD", "altered", h.do("HEAD", bad, "", nil))
	}

	// Other methods: 405 with Allow, in the Error body; no operation
	// describes them, so the body is checked against the Error schema.
	for _, x := range []string{u, exports[0]} {
		for _, method := range []string{"POST", "PUT", "DELETE"} {
			r := h.do(method, x, "", []byte("{}"))
			r.wantError(t, 405, string(apierr.MethodNotAllowed))
			if r.header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: Allow %q", method, x, r.header.Get("Allow"))
			}
			if err := v.validateAt(t, "#/components/schemas/Error", r.body); err != nil {
				t.Errorf("%s %s: the 405 body does not fit Error: %v", method, x, err)
			}
		}
	}

	// Controls: the validator refuses answers that do not fit.
	with := func(r resp, status int, body string, hdr ...string) resp {
		out := resp{status: status, header: r.header.Clone(), body: []byte(body)}
		if body == "-" {
			out.body = r.body
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			if hdr[i+1] == "" {
				out.header.Del(hdr[i])
			} else {
				out.header.Set(hdr[i], hdr[i+1])
			}
		}
		return out
	}
	nf := h.get(altered, "")
	zip := h.get(exports[1], "")
	zipHead := h.do("HEAD", exports[1], "", nil)
	for _, bad := range []struct {
		what, pattern, method string
		r                     resp
	}{
		{"an undocumented status", media, "GET", with(ok, 402, "-")},
		{"a weak ETag", media, "GET", with(ok, 200, "-", "ETag", `W/"0123456789abcdef"`)},
		{"no Accept-Ranges", media, "GET", with(ok, 200, "-", "Accept-Ranges", "")},
		{"a MIME type the corpus has not", media, "GET", with(ok, 200, "-", "Content-Type", "application/x-unknown")},
		{"a 206 without Content-Length", media, "GET", with(ok, 206, "-", "Content-Length", "")},
		{"a 416 in JSON", media, "GET", with(nf, 416, "-")},
		{"a 304 with a body", media, "GET", with(ok, 304, "x")},
		{"a 404 of another code", media, "GET", with(nf, 404, `{"error":{"code":"UNKNOWN_MEDIA","message":"m","requestId":"r"}}`)},
		{"a 404 with an extra member", media, "GET", with(nf, 404, `{"error":{"code":"NOT_FOUND","message":"m","requestId":"r","url":"u"}}`)},
		{"a 404 as text", media, "GET", with(nf, 404, "not found", "Content-Type", "text/plain")},
		{"a 404 with X-Service-Content-Version", media, "GET", with(nf, 404, "-", "X-Service-Content-Version", "2026-01-01+x")},
		{"a zip as JSON", export, "GET", with(zip, 200, "-", "Content-Type", "application/json")},
		{"a zip with an asset's ETag", export, "GET", with(zip, 200, "-", "ETag", `"0123456789abcdef"`)},
		{"a zip with a weak ETag", export, "GET", with(zip, 200, "-", "ETag", "W/"+zip.header.Get("ETag"))},
		{"a zip without Content-Disposition", export, "GET", with(zip, 200, "-", "Content-Disposition", "")},
		{"a HEAD without Content-Length", export, "HEAD", with(zipHead, 200, "", "Content-Length", "")},
		{"a HEAD with a Content-Length not a number", export, "HEAD", with(zipHead, 200, "", "Content-Length", "many")},
		{"a range of a zip without Accept-Ranges", export, "GET", with(zip, 206, "-", "Accept-Ranges", "")},
	} {
		if ps := v.problems(t, bad.pattern, bad.method, bad.r); len(ps) == 0 {
			t.Errorf("control %q (%s %s) validated", bad.what, bad.method, bad.pattern)
		}
	}
	if v.validateAt(t, "#/components/schemas/Error", []byte(`{"error":{"code":"METHOD_NOT_ALLOWED","requestId":"r","allow":["GET"]}}`)) == nil {
		t.Error("control: a 405 body without message validated")
	}
}
