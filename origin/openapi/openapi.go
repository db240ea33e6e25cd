// Package openapi generates the OpenAPI 3.1 description (route 1) from
// shared/route's table, never written by hand: every route's path, method,
// operation id, summary, security, parameters, body, x-service-cost and
// responses come from its row. What the corpus decides — the tiers and
// test-prep values that are enumerated, and the x-service-sections map —
// comes from the loaded corpus (spec: route 1, "enumerated tiers and
// test-prep values are derived from the deployed corpus"), and its
// contentVersion is in info.x-content-version, so the bytes, and the ETag
// hashed from them, move with the corpus (spec: Versioning §4). Beside
// the table's routes it describes the signed download links under
// /files/ (oaDownloads), which no route row holds.
// origin/server serves the document.
package openapi

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/etag"
	"github.com/lectern-api/lectern/shared/id"
	"github.com/lectern-api/lectern/shared/link"
	"github.com/lectern-api/lectern/shared/param"
	"github.com/lectern-api/lectern/shared/route"
	"github.com/lectern-api/lectern/shared/scope"
)

// Version is the API version the description reports (spec:
// Versioning §1).
const Version = "1.0.0"

type oaObj = map[string]any

// Doc is a Content's description. Build makes the document from the
// corpus; the few members that come from the server's configuration (the
// token and authorization URLs of the identity provider, the licence
// terms) are filled in when the bytes are first rendered, once per
// Content, and those bytes are then served as is.
type Doc struct {
	version string
	doc     oaObj // without the configured members
	bytes   atomic.Pointer[Rendered]
}

// Rendered is the rendered document and its ETag, for one
// configuration.
type Rendered struct {
	conf Conf
	Body []byte
	Tag  string // hashed from Body (spec: Conditional requests §1)
}

// Conf are the members of the description that come from the
// server's configuration.
type Conf struct {
	Issuer     string // the first authorization server
	LicenseURL string
}

// Render returns the document's bytes for conf, rendering them on first
// use.
func (d *Doc) Render(conf Conf) (*Rendered, error) {
	if b := d.bytes.Load(); b != nil && b.conf == conf {
		return b, nil
	}
	doc := make(oaObj, len(d.doc)+1)
	for k, v := range d.doc {
		doc[k] = v
	}
	info := oaObj{}
	for k, v := range d.doc["info"].(oaObj) {
		info[k] = v
	}
	lic := oaObj{"name": "Licensed use only; redistribution outside the licensed organization is not permitted"}
	if conf.LicenseURL != "" {
		lic["url"] = conf.LicenseURL
	}
	info["license"] = lic
	doc["info"] = info
	comps := oaObj{}
	for k, v := range d.doc["components"].(oaObj) {
		comps[k] = v
	}
	comps["securitySchemes"] = oaSecuritySchemes(conf.Issuer)
	doc["components"] = comps
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	b := &Rendered{conf: conf, Body: body, Tag: etag.FromBytes(body)}
	d.bytes.Store(b)
	return b, nil
}

// Security scheme names.
const (
	oaSchemeClient  = "oauth2"  // client_credentials tokens (machine clients)
	oaSchemeLearner = "learner" // authorization_code tokens that carry a learner
)

func oaSecuritySchemes(issuer string) oaObj {
	scopes := oaObj{}
	desc := map[string]string{
		scope.ContentRead:   "Read tiers, subjects, lessons, search, the test-prep catalog and the licence status.",
		scope.ContentExport: "Export whole subjects and classes (spends the monthly export and download quota).",
		scope.MediaDownload: "Mint signed media URLs (spends the monthly download quota).",
		scope.TestprepRead:  "Read practice items (spends the monthly test-prep item allowance).",
		scope.ProgressRead:  "Read the signed-in learner's progress.",
		scope.ProgressWrite: "Record the signed-in learner's progress.",
	}
	for _, sc := range scope.All {
		scopes[scope.Full(sc)] = desc[sc]
	}
	learnerScopes := oaObj{
		scope.Full(scope.ProgressRead):  desc[scope.ProgressRead],
		scope.Full(scope.ProgressWrite): desc[scope.ProgressWrite],
	}
	return oaObj{
		oaSchemeClient: oaObj{
			"type": "oauth2",
			"description": "OAuth 2.0 client_credentials: POST the token endpoint with the client id and secret as HTTP Basic and " +
				"the form fields grant_type=client_credentials and scope, then send Authorization: Bearer <access_token>. " +
				"Tokens live 900 s; cache them and refresh on 401.",
			"flows": oaObj{"clientCredentials": oaObj{"tokenUrl": issuer + "/oauth2/token", "scopes": scopes}},
		},
		oaSchemeLearner: oaObj{
			"type":        "oauth2",
			"description": "An interactive learner token (authorization_code grant with PKCE S256) that carries the learner.",
			"flows": oaObj{"authorizationCode": oaObj{
				"authorizationUrl": issuer + "/oauth2/authorize",
				"tokenUrl":         issuer + "/oauth2/token",
				"scopes":           learnerScopes,
			}},
		},
	}
}

// oaEnums are the enumerated values the corpus decides.
type oaEnums struct {
	tiers    []string
	tests    []string
	sections []string            // union over tests, in order of first appearance
	byTest   map[string][]string // x-service-sections
	mimes    []string            // the assets' MIME types, sorted
}

func oaEnumsOf(c *corpus.Corpus) oaEnums {
	e := oaEnums{tiers: []string{}, tests: []string{}, sections: []string{}, byTest: map[string][]string{}}
	for _, t := range c.Tiers {
		e.tiers = append(e.tiers, t.Name)
	}
	mimes := map[string]bool{}
	for _, l := range c.Lessons {
		for _, m := range l.Media {
			if !mimes[m.MIME] {
				mimes[m.MIME] = true
				e.mimes = append(e.mimes, m.MIME)
			}
		}
	}
	slices.Sort(e.mimes)
	seen := map[string]bool{}
	for _, t := range c.Tests {
		e.tests = append(e.tests, t.ID)
		e.byTest[t.ID] = t.SectionIDs()
		for _, s := range t.Sections {
			if !seen[s.ID] {
				seen[s.ID] = true
				e.sections = append(e.sections, s.ID)
			}
		}
	}
	return e
}

// Build generates the description of every route in the table, and of
// the download links, for corpus c.
func Build(c *corpus.Corpus) *Doc {
	e := oaEnumsOf(c)
	paths := oaObj{}
	for _, rt := range route.All() {
		p, ok := paths[rt.Pattern].(oaObj)
		if !ok {
			p = oaObj{}
			paths[rt.Pattern] = p
		}
		p[strings.ToLower(rt.Method)] = oaOperation(&rt, e)
	}
	oaDownloads(paths, e)
	doc := oaObj{
		"openapi": "3.1.0",
		"info": oaObj{
			"title":   "Lectern Curriculum Content API",
			"version": Version,
			"summary": "Authenticated, metered REST/JSON access to a licensed curriculum corpus.",
			"description": "Licensed organizations read tiers, subjects, classes (lessons), transcripts, quizzes, media, " +
				"exports, original test-prep items and learner progress. Every content response carries contentVersion " +
				"and the licence envelope _license; every error has the Error body, and clients branch on error.code. " +
				"Usage is metered per organization: see x-service-cost on each operation. This document is generated " +
				"from the route table and the deployed corpus (contentVersion in info.x-content-version).",
			"x-content-version": c.ContentVersion,
		},
		"servers": []any{oaObj{"url": "/", "description": "The host that serves this document."}},
		"tags":    oaTags(),
		"paths":   paths,
		"components": oaObj{
			"schemas": oaSchemas(e),
			"headers": oaHeaders(),
		},
	}
	return &Doc{version: c.ContentVersion, doc: doc}
}

// oaTag groups the operations for documentation.
func oaTag(id route.ID) string {
	switch id {
	case route.OpenAPI:
		return "Description"
	case route.MediaURLs:
		return "Media"
	case route.ExportSubject, route.ExportClass:
		return "Exports"
	case route.Testprep, route.TestprepItems:
		return "Test prep"
	case route.License:
		return "Licence"
	case route.Progress, route.PutProgress:
		return "Progress"
	}
	return "Content"
}

func oaTags() []any {
	return []any{
		oaObj{"name": "Description", "description": "This machine-readable description."},
		oaObj{"name": "Content", "description": "Tiers, subjects, classes, lessons, transcripts, quizzes, media inventories and search."},
		oaObj{"name": "Media", "description": "Signed media URLs, minted in batches."},
		oaObj{"name": "Exports", "description": "Whole-subject and whole-class bundles: the supported bulk path."},
		oaObj{"name": "Test prep", "description": "Original practice items for four tests."},
		oaObj{"name": "Licence", "description": "Licence, quota and corpus-version status."},
		oaObj{"name": "Progress", "description": "The signed-in learner's progress."},
		oaObj{"name": "Downloads", "description": "The signed links a mint or a zip_url export answers with, under " + link.Prefix + ": no token, unmetered, valid until they expire."},
	}
}

// oaOperation describes one route.
func oaOperation(rt *route.Route, e oaEnums) oaObj {
	meters := rt.Cost.Meters
	if meters == nil {
		meters = []string{}
	}
	op := oaObj{
		"operationId": rt.OperationID,
		"summary":     rt.Summary,
		"tags":        []string{oaTag(rt.ID)},
		"x-service-cost": oaObj{
			"typicalBytes": rt.Cost.TypicalBytes,
			"meters":       meters,
			"note":         rt.Cost.Note,
		},
		"responses": oaResponses(rt, e),
	}
	switch {
	case rt.Scope == "":
		op["security"] = []any{} // none: unauthenticated
	case rt.Learner:
		op["security"] = []any{oaObj{oaSchemeLearner: []string{scope.Full(rt.Scope)}}}
	default:
		op["security"] = []any{oaObj{oaSchemeClient: []string{scope.Full(rt.Scope)}}}
	}
	if rt.ID == route.Testprep || rt.ID == route.TestprepItems {
		op["x-service-sections"] = e.byTest
	}
	var params []any
	body := oaObj{"type": "object", "additionalProperties": false, "properties": oaObj{}}
	var required []string
	hasBody := false
	for i := range rt.Params {
		p := &rt.Params[i]
		if p.In == route.Body {
			hasBody = true
			body["properties"].(oaObj)[p.Name] = oaBodySchema(p)
			if p.Required {
				required = append(required, p.Name)
			}
			continue
		}
		params = append(params, oaParameter(rt, p, e))
	}
	if rt.Method == "GET" && rt.Validator != route.NoETag {
		params = append(params, oaIfNoneMatch)
	}
	if params != nil {
		op["parameters"] = params
	}
	if hasBody {
		if required != nil {
			body["required"] = required
		}
		op["requestBody"] = oaObj{
			"required": required != nil,
			"content":  oaObj{"application/json": oaObj{"schema": body}},
		}
	}
	return op
}

// oaIfNoneMatch is the request header of every GET with an ETag, its
// last parameter: typed clients then accept the validator they kept.
var oaIfNoneMatch = oaObj{"name": "If-None-Match", "in": "header", "required": false,
	"description": "An ETag this route answered before, or several, comma-separated, or *: a match answers 304 with an empty body.",
	"schema":      oaObj{"type": "string"}}

// oaParameter describes a path or query parameter from its rule.
func oaParameter(rt *route.Route, p *route.Param, e oaEnums) oaObj {
	o := oaObj{"name": p.Name, "in": p.In.String(), "schema": oaParamSchema(rt, p, e)}
	if p.Doc != "" {
		o["description"] = p.Doc
	}
	if p.In == route.Path || p.Required {
		o["required"] = true
	}
	if p.Kind == route.List {
		o["style"] = "form"
		o["explode"] = false
	}
	return o
}

func oaParamSchema(rt *route.Route, p *route.Param, e oaEnums) oaObj {
	enum := p.Enum
	switch p.Name {
	case "tier":
		enum = e.tiers
	case "test":
		enum = e.tests
	case "section":
		enum = e.sections
	}
	var s oaObj
	switch p.Kind {
	case route.Segment:
		switch p.Name {
		case "classNum":
			s = oaObj{"type": "integer", "minimum": 1, "maximum": 999999}
		case "subjectSlug":
			s = oaSlug()
		default:
			s = oaObj{"type": "string"}
		}
	case route.Enum:
		s = oaObj{"type": "string"}
	case route.Int:
		s = oaObj{"type": "integer", "minimum": p.Min, "maximum": p.Max}
	case route.Text:
		s = oaObj{"type": "string", "minLength": 1, "maxLength": p.MaxLen}
	case route.Slug:
		s = oaSlug()
	case route.Cursor:
		s = oaObj{"type": "string", "minLength": 1, "maxLength": param.MaxCursor}
	case route.List:
		return oaObj{"type": "array", "minItems": 1, "items": oaObj{"type": "string", "enum": enum}}
	default:
		s = oaObj{"type": "string"}
	}
	if enum != nil && (p.Kind == route.Enum || p.Kind == route.Segment) {
		s["enum"] = enum
	}
	if p.Default != "" {
		if p.Kind == route.Int {
			n, _ := strconv.Atoi(p.Default)
			s["default"] = n
		} else {
			s["default"] = p.Default
		}
	}
	return s
}

func oaSlug() oaObj {
	return oaObj{"type": "string", "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$", "maxLength": id.MaxSlugLen}
}

// oaBodySchema describes a member of a JSON request body.
func oaBodySchema(p *route.Param) oaObj {
	var s oaObj
	switch p.Kind {
	case route.Strings:
		s = oaObj{"type": "array", "items": oaObj{"type": "string"}, "minItems": p.Min, "maxItems": p.Max}
	case route.Integer:
		s = oaObj{"type": "integer", "minimum": p.Min}
		if p.Default != "" {
			n, _ := strconv.Atoi(p.Default)
			s["default"] = n
		}
	case route.Number:
		s = oaObj{"type": "number", "minimum": p.Min, "maximum": p.Max}
	default:
		s = oaObj{"type": "string", "minLength": 1}
		if p.MaxLen > 0 {
			s["maxLength"] = p.MaxLen
		}
	}
	if p.Doc != "" {
		s["description"] = p.Doc
	}
	return s
}

// ErrorCodes are the codes each status of rt can answer with, by the
// pipeline's order (docs/edge.md) and the route's own refusals.
func ErrorCodes(rt *route.Route) map[int][]apierr.Code {
	has := func(name string, in route.In) bool {
		p := rt.Param(name)
		return p != nil && p.In == in
	}
	lessonPath := has("classNum", route.Path)
	subjectPath := has("subjectSlug", route.Path) && !lessonPath
	m := map[int][]apierr.Code{}
	add := func(c ...apierr.Code) {
		for _, code := range c {
			st := apierr.Status(code)
			m[st] = append(m[st], code)
		}
	}
	add(apierr.BadRequest) // every route refuses an unknown query oaParameter
	for _, p := range rt.Params {
		if p.In == route.Body {
			// A body cut off by the server's read limit: 408, the code
			// the spec's closest (origin/server bodyTimeout).
			m[408] = []apierr.Code{apierr.BadRequest}
			break
		}
	}
	if has("cursor", route.Query) {
		add(apierr.CursorExpired)
	}
	if lessonPath || rt.ID == route.MediaURLs {
		add(apierr.BadLessonID)
	}
	if rt.ID == route.MediaURLs {
		add(apierr.BatchTooLarge)
	}
	if subjectPath {
		add(apierr.AmbiguousSubject)
	}
	if rt.Scope != "" {
		add(apierr.InvalidToken, apierr.InsufficientScope)
		if rt.Learner {
			add(apierr.LearnerRequired)
		}
		add(apierr.NoOrganization)
		if rt.ID != route.License {
			add(apierr.LicenseRequired, apierr.LicenseExpired, apierr.OrgSuspended)
		}
		if lessonPath || subjectPath || rt.ID == route.MediaURLs {
			add(apierr.TierNotLicensed, apierr.ContentNotGranted)
		}
	}
	switch {
	case subjectPath, rt.ID == route.Search: // search: a subject filter naming no subject
		add(apierr.UnknownSubject)
	case lessonPath:
		add(apierr.LessonNotFound)
	case rt.ID == route.MediaURLs:
		add(apierr.UnknownMedia)
	case rt.ID == route.TestprepItems:
		add(apierr.UnknownTest, apierr.UnknownSection)
	}
	if rt.ID == route.PutProgress {
		add(apierr.WriteConflict)
	}
	if rt.ID == route.ExportSubject || rt.ID == route.ExportClass { // format=inline over the response ceiling
		add(apierr.PayloadTooLarge)
	}
	if rt.Metered {
		add(apierr.RateLimited, apierr.QuotaExceeded)
		if rt.Scope == scope.ContentExport {
			add(apierr.ExportLimit)
		}
	}
	add(apierr.Internal)
	return m
}

var oaStatusText = map[int]string{
	400: "Bad request", 401: "Unauthenticated", 403: "Forbidden", 404: "Not found",
	408: "Request timeout", 409: "Conflict", 413: "Payload too large", 429: "Too many requests", 500: "Internal error",
}

func oaRef(kind, name string) oaObj { return oaObj{"$ref": "#/components/" + kind + "/" + name} }

// oaResponses documents every answer of rt: 200 (and 304 where an ETag
// applies) and each error status with the codes it can carry.
func oaResponses(rt *route.Route, e oaEnums) oaObj {
	rs := oaObj{}
	ok := oaObj{
		"X-Request-Id":  oaRef("headers", "X-Request-Id"),
		"Cache-Control": oaRef("headers", "Cache-Control"),
	}
	okDesc := "OK."
	if rt.Validator != route.NoETag {
		ok["ETag"] = oaRef("headers", "ETag")
	}
	ok["X-Service-Content-Version"] = oaRef("headers", "X-Service-Content-Version")
	if rt.Metered {
		ok["RateLimit"] = oaRef("headers", "RateLimit")
		ok["RateLimit-Policy"] = oaRef("headers", "RateLimit-Policy")
	}
	switch rt.Validator {
	case route.Inline:
		okDesc = "OK. format=inline carries an ETag; format=zip_url has none and is no-store."
	case route.Bytes:
		okDesc = "OK. The ETag is hashed from these bytes and tracks the corpus; shared caches may keep it (Cache-Control: public)."
	}
	rs["200"] = oaObj{
		"description": okDesc,
		"headers":     ok,
		"content":     oaObj{"application/json": oaObj{"schema": oaRef("schemas", oaResponseSchema(rt.ID))}},
	}
	if rt.Validator != route.NoETag {
		nm := oaObj{
			"X-Request-Id":              oaRef("headers", "X-Request-Id"),
			"ETag":                      oaRef("headers", "ETag"),
			"X-Service-Content-Version": oaRef("headers", "X-Service-Content-Version"),
		}
		desc := "Not modified: If-None-Match matched the current ETag; empty body."
		if rt.Metered {
			nm["RateLimit"] = oaRef("headers", "RateLimit")
			nm["RateLimit-Policy"] = oaRef("headers", "RateLimit-Policy")
			desc += " Bills one call and nothing else."
		}
		rs["304"] = oaObj{"description": desc, "headers": nm}
	}
	for st, codes := range ErrorCodes(rt) {
		hs := oaObj{"X-Request-Id": oaRef("headers", "X-Request-Id")}
		switch st {
		case 401, 403:
			if rt.Scope != "" {
				hs["WWW-Authenticate"] = oaRef("headers", "WWW-Authenticate")
			}
		case 409, 429:
			hs["Retry-After"] = oaRef("headers", "Retry-After")
		}
		more := ""
		if st == 408 {
			more = "The body did not arrive within the server's read limit; nothing was done and the connection is closed. Send the request again."
		}
		rs[strconv.Itoa(st)] = oaError(st, codes, hs, more)
	}
	return rs
}

// oaError is an error answer of status st: the Error body with the codes
// it can carry, and headers hs; more, when given, ends its description.
func oaError(st int, codes []apierr.Code, hs oaObj, more string) oaObj {
	names := make([]string, len(codes))
	enum := make([]string, len(codes))
	for i, c := range codes {
		names[i] = "`" + string(c) + "`"
		enum[i] = string(c)
	}
	desc := oaStatusText[st] + ": " + strings.Join(names, ", ") + "."
	if more != "" {
		desc += " " + more
	}
	return oaObj{
		"description": desc,
		"headers":     hs,
		"content": oaObj{"application/json": oaObj{"schema": oaObj{
			"allOf": []any{oaRef("schemas", "Error")},
			"properties": oaObj{"error": oaObj{"properties": oaObj{
				"code": oaObj{"enum": enum},
			}}},
		}}},
	}
}

func oaHeaders() oaObj {
	str := oaObj{"type": "string"}
	return oaObj{
		"X-Request-Id": oaObj{"description": "The request's id; equals error.requestId on errors.", "schema": str},
		"ETag": oaObj{"description": "Weak validator; send it back as If-None-Match. A validator obtained uncompressed also revalidates compressed.",
			"schema": oaObj{"type": "string", "pattern": `^W/"[0-9a-f]{16}"$`}},
		"X-Service-Content-Version": oaObj{"description": "The corpus version being served (<date>+<hash>).", "schema": str},
		"Cache-Control":             oaObj{"description": "private on every response except the OpenAPI description (public); no-store on mints, zip_url exports and the licence status.", "schema": str},
		"RateLimit-Policy":          oaObj{"description": "The capped meters this request touched (draft-ietf-httpapi-ratelimit-headers).", "schema": str},
		"RateLimit":                 oaObj{"description": "What is left of each capped meter this request touched, and seconds to its reset.", "schema": str},
		"Retry-After":               oaObj{"description": "Seconds to wait before retrying.", "schema": oaObj{"type": "integer", "minimum": 0}},
		"WWW-Authenticate":          oaObj{"description": "Bearer challenge naming the reason or the missing scope, and the protected-resource metadata.", "schema": str},
	}
}

// oaResponseSchema names the 200 body schema of a route.
func oaResponseSchema(id route.ID) string {
	return [...]string{
		route.OpenAPI: "OpenAPIDocument", route.Tiers: "TierList", route.Subjects: "SubjectList",
		route.Subject: "Subject", route.Classes: "ClassList", route.Lesson: "Lesson",
		route.Transcript: "Transcript", route.Quiz: "Quiz", route.Media: "MediaList",
		route.MediaURLs: "MintResult", route.Search: "SearchResults", route.ExportSubject: "ExportResult",
		route.ExportClass: "ExportResult", route.Testprep: "TestprepCatalog", route.TestprepItems: "TestprepItemList",
		route.License: "LicenseStatus", route.Progress: "Progress", route.PutProgress: "ProgressAck",
	}[id]
}

// Schema helpers.
var (
	oaString  = oaObj{"type": "string"}
	oaInt     = oaObj{"type": "integer"}
	oaCount   = oaObj{"type": "integer", "minimum": 0}
	oaBool    = oaObj{"type": "boolean"}
	oaStrings = oaObj{"type": "array", "items": oaObj{"type": "string"}}

	oaNullStrings = oaObj{"type": []string{"array", "null"}, "items": oaObj{"type": "string"}}
	oaNullString  = oaObj{"type": []string{"string", "null"}}
	oaClassNum    = oaObj{"type": "integer", "minimum": 1}
)

func oaStrict(required []string, props oaObj) oaObj {
	return oaObj{"type": "object", "additionalProperties": false, "required": required, "properties": props}
}

// oaOpen is an object whose other members are not fixed yet (spec: "not
// shown"): it requires the members the spec names.
func oaOpen(desc string, required []string, props oaObj) oaObj {
	o := oaObj{"type": "object", "additionalProperties": true, "description": desc, "properties": props}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

var oaListKeys = []string{"items", "total", "pageNum", "totalPages", "hasMore", "nextCursor", "contentVersion", "_license"}

// oaShaped is an object of a route another file renders: every member it
// writes today is required and typed; members added later are allowed, so
// the description may lag an addition but never contradicts a response.
func oaShaped(desc string, props oaObj) oaObj {
	req := make([]string, 0, len(props))
	for k := range props {
		req = append(req, k)
	}
	slices.Sort(req)
	o := oaObj{"type": "object", "additionalProperties": true, "required": req, "properties": props}
	if desc != "" {
		o["description"] = desc
	}
	return o
}

// oaWith adds optional members to an object schema.
func oaWith(o oaObj, optional oaObj) oaObj {
	props := oaObj{}
	for k, v := range o["properties"].(oaObj) {
		props[k] = v
	}
	for k, v := range optional {
		props[k] = v
	}
	o["properties"] = props
	return o
}

func oaArray(items oaObj) oaObj { return oaObj{"type": "array", "items": items} }

// oaList is the list envelope (spec: Resources, List envelope) around
// items of the schema named item.
func oaList(desc, item string, closed bool) oaObj {
	props := oaObj{
		"items":          oaObj{"type": "array", "items": oaRef("schemas", item)},
		"total":          oaObj{"type": "integer", "minimum": 0, "description": "Count within the caller's granted set, not the page size."},
		"pageNum":        oaObj{"type": "integer", "minimum": 1},
		"totalPages":     oaObj{"type": "integer", "minimum": 1},
		"hasMore":        oaObj{"type": "boolean", "description": "True while more pages remain; stop when false."},
		"nextCursor":     oaObj{"type": []string{"string", "null"}, "description": "Pass back verbatim as cursor; null on the last page."},
		"contentVersion": oaRef("schemas", "ContentVersion"),
		"_license":       oaRef("schemas", "LicenseEnvelope"),
	}
	o := oaObj{"type": "object", "description": desc, "required": oaListKeys, "properties": props, "additionalProperties": !closed}
	return o
}

// oaXP is the learner's XP: over every recorded class, granted now or
// not, 10 plus a tenth of its best score rounded down.
var oaXP = oaObj{"type": "integer", "minimum": 0, "description": "Sum over every recorded class (granted now or not) of 10 + floor(bestScore / 10); 10 for a class without a score."}

// oaScore is a progress score, null when none.
func oaScore(desc string) oaObj {
	return oaObj{"type": []string{"number", "null"}, "minimum": 0, "maximum": 100, "description": desc}
}

func oaWithDesc(desc string, o oaObj) oaObj {
	o["description"] = desc
	return o
}

// oaProgress is GET /v1/progress's body: the list envelope of the
// recorded classes of subjects granted now, with the learner's id, XP and
// streak.
func oaProgress(tierEnum oaObj) oaObj {
	o := oaList("The signed-in learner's recorded classes of subjects granted now, ordered by tier (canonical order), subjectSlug and classNum; a class absent from items is not started. "+
		"A saved write during a walk may shift the pages after it.", "ProgressClass", true)
	props := o["properties"].(oaObj)
	props["learnerId"] = oaObj{"type": "string", "description": "The token's learner."}
	props["xp"] = oaXP
	props["streak"] = oaRef("schemas", "Streak")
	o["required"] = append(slices.Clone(oaListKeys), "learnerId", "xp", "streak")
	return o
}

// oaProgressClass is one recorded class.
func oaProgressClass(tierEnum oaObj) oaObj {
	at := oaObj{"type": "string", "format": "date-time"}
	return oaStrict([]string{"lessonId", "tier", "subjectSlug", "classNum", "score", "bestScore", "firstRecordedAt", "lastRecordedAt"}, oaObj{
		"lessonId": oaString, "tier": tierEnum, "subjectSlug": oaString, "classNum": oaClassNum,
		"score":           oaScore("The latest write's score; null when that write sent none."),
		"bestScore":       oaScore("The highest score ever sent; null when none was."),
		"firstRecordedAt": at, "lastRecordedAt": at,
	})
}

// oaSchemas are the components/schemas: the error body, the envelopes and
// every route's 200 body. Bodies of routes whose shape this package owns
// or that exist are closed (additionalProperties false); the others
// require the members the spec names and leave the rest open.
func oaSchemas(e oaEnums) oaObj {
	tierEnum := oaObj{"type": "string", "enum": e.tiers}
	errProps := oaObj{
		"code":              oaObj{"type": "string", "enum": oaCodes(), "description": "Branch on this, never on message or status alone."},
		"message":           oaString,
		"requestId":         oaObj{"type": "string", "description": "Equals the X-Request-Id header."},
		"parameter":         oaString,
		"allowed":           oaStrings,
		"received":          oaObj{"oneOf": []any{oaObj{"type": "string"}, oaObj{"type": "number"}}, "description": "The value refused: a string, or a number as sent."},
		"min":               oaInt,
		"max":               oaInt,
		"grant":             oaString,
		"tiers":             oaStrings,
		"allow":             oaStrings,
		"scope":             oaObj{"type": "string", "description": "insufficient_scope: the missing scope's full name."},
		"retryAfterSeconds": oaCount,
		"quotaResetsAt":     oaObj{"type": "string", "format": "date-time"},
		"hint":              oaString,
		"exportsUsed":       oaCount,
		"exportsLimit":      oaCount,
	}
	quota := oaStrict([]string{"used", "limit"}, oaObj{"used": oaCount, "limit": oaObj{"type": []string{"integer", "null"}}})
	nullInt := oaObj{"type": []string{"integer", "null"}}
	return oaObj{
		"Error": oaObj{
			"type": "object", "additionalProperties": false, "required": []string{"error"},
			"description": "The one error body of every route.",
			"properties": oaObj{"error": oaObj{
				"type": "object", "additionalProperties": false,
				"required":   []string{"code", "message", "requestId"},
				"properties": errProps,
			}},
		},
		"ContentVersion": oaObj{"type": "string", "pattern": `^[0-9]{4}-[0-9]{2}-[0-9]{2}\+[0-9A-Za-z]+$`,
			"description": "The corpus version, <date>+<hash>; it moves only on a corpus rebuild."},
		"ContentDigest": oaObj{"type": "string", "pattern": `^sha256:[0-9a-f]{64}$`,
			"description": "A subject's content digest: sha256: and the lowercase hex SHA-256 of everything an export bundle of the subject is made from " +
				"(the subject's own fields; each class's lesson at full detail with every include section, its transcript and quiz; " +
				"each media asset's id, type, MIME type, bytes, duration and location), and of nothing else: not the contentVersion, the organization, its grants or the caller. " +
				"It is the same at every detail level and on the single subject. After contentVersion moves, every ETag moves; " +
				"compare each subject's contentDigest with the one recorded at its last export, and export again only the subjects whose digest differs."},
		"LicenseEnvelope": oaStrict([]string{"lic", "tag"}, oaObj{"lic": oaString, "tag": oaObj{"type": "string", "description": "Forensic marker of organization and scope."}}),
		"OpenAPIDocument": oaOpen("This document.", []string{"openapi", "info", "paths"}, oaObj{"openapi": oaObj{"type": "string", "const": "3.1.0"}}),

		"TierList": oaList("Tiers the organization holds grants in, in canonical order; an absent tier is not licensed.", "TierRow", true),
		"TierRow":  oaStrict([]string{"tier", "label", "count"}, oaObj{"tier": tierEnum, "label": oaString, "count": oaObj{"type": "integer", "minimum": 0, "description": "Granted subjects in the tier."}}),
		"Subject": oaStrict([]string{"slug", "tier", "name", "description", "classCount", "mediaCoverage", "difficulty", "tags", "prerequisites", "related", "classesUrl", "contentDigest", "contentVersion", "_license"}, oaObj{
			"slug": oaString, "tier": tierEnum, "name": oaString, "description": oaString, "classCount": oaCount,
			"mediaCoverage": oaRef("schemas", "MediaCoverage"),
			"difficulty":    oaRef("schemas", "Difficulty"),
			"tags":          oaStrings, "prerequisites": oaStrings, "related": oaStrings,
			"classesUrl":     oaString,
			"contentDigest":  oaRef("schemas", "ContentDigest"),
			"contentVersion": oaRef("schemas", "ContentVersion"), "_license": oaRef("schemas", "LicenseEnvelope"),
		}),
		"SubjectList": oaList("Page of granted subjects, ordered tier then name.", "SubjectRow", false),
		"SubjectRow": oaShaped("A subject row; detail=full fills tags, prerequisites and related subjects, which are null below it.", oaObj{
			"slug": oaString, "tier": tierEnum, "name": oaString, "description": oaString, "classCount": oaCount,
			"mediaCoverage": oaRef("schemas", "MediaCoverage"),
			"difficulty":    oaRef("schemas", "Difficulty"),
			"tags":          oaNullStrings, "prerequisites": oaNullStrings, "related": oaNullStrings,
			"classesUrl":    oaString,
			"contentDigest": oaRef("schemas", "ContentDigest"),
		}),
		"ClassList": oaList("Page of class entries, in class order.", "ClassEntry", false),
		"ClassEntry": oaShaped("A class entry with a ready-made lessonId and availability flags.", oaObj{
			"lessonId": oaString, "classNum": oaClassNum, "title": oaString, "subtitle": oaString,
			"hasVideo": oaBool, "hasNarration": oaBool, "hasTranscript": oaBool,
			"mediaCount": oaCount, "estimatedMinutes": oaCount,
		}),
		"Lesson": oaWith(oaShaped("A class as structured JSON. detail changes how much, never which members exist; include adds the optional sections.", oaObj{
			"lessonId": oaString, "tier": tierEnum, "subjectSlug": oaString, "classNum": oaClassNum,
			"title": oaString, "subtitle": oaString, "hasVideo": oaBool, "hasNarration": oaBool, "hasTranscript": oaBool,
			"estimatedMinutes": oaCount,
			"keyTerms":         oaArray(oaShaped("", oaObj{"term": oaString, "definition": oaString, "cardId": oaString})),
			"cards": oaArray(oaShaped("", oaObj{"id": oaString, "label": oaString, "hasVideo": oaBool, "hasNarration": oaBool,
				"hasImage": oaBool, "body": oaString, "keyPoints": oaStrings, "illustrationAlt": oaString})),
			"truncated":      oaObj{"type": "boolean", "description": "True when any long text was cut at the level's cap."},
			"contentVersion": oaRef("schemas", "ContentVersion"), "_license": oaRef("schemas", "LicenseEnvelope"),
		}), oaObj{
			"quiz":            oaArray(oaRef("schemas", "QuizQuestion")),
			"inlineChecks":    oaArray(oaRef("schemas", "InlineCheck")),
			"interactives":    oaArray(oaShaped("", oaObj{"id": oaString, "cardId": oaString, "kind": oaString, "prompt": oaString, "config": oaObj{"type": "object"}})),
			"narrationText":   oaArray(oaShaped("", oaObj{"cardId": oaString, "text": oaString})),
			"videoTranscript": oaArray(oaShaped("", oaObj{"cardId": oaString, "text": oaString})),
			"media":           oaArray(oaRef("schemas", "MediaAsset")),
			"workedExample": oaObj{"oneOf": []any{oaObj{"type": "null"},
				oaShaped("", oaObj{"problem": oaString, "steps": oaStrings, "answer": oaString})}},
		}),
		"Transcript": oaWith(oaShaped("The spoken text of a class, per card in items; cards with neither narration nor video voiceover are left out.", oaObj{
			"lessonId": oaString, "title": oaString,
			"items": oaArray(oaShaped("", oaObj{"cardId": oaString, "label": oaString,
				"narration": oaNullString, "videoVoiceover": oaNullString})),
			"contentVersion": oaRef("schemas", "ContentVersion"), "_license": oaRef("schemas", "LicenseEnvelope"),
		}), oaObj{"markdown": oaObj{"type": "string", "description": "include=markdown: the same words as one joined string."}}),
		"Quiz": oaShaped("The end-of-class quiz in items and the inline checks, with answer keys.", oaObj{
			"lessonId": oaString, "title": oaString,
			"items": oaArray(oaRef("schemas", "QuizQuestion")), "inlineChecks": oaArray(oaRef("schemas", "InlineCheck")),
			"contentVersion": oaRef("schemas", "ContentVersion"), "_license": oaRef("schemas", "LicenseEnvelope"),
		}),
		"QuizQuestion": oaShaped("", oaObj{"question": oaString, "options": oaStrings, "answerIndex": oaCount}),
		"InlineCheck": oaShaped("A mid-lesson check with graduated hints.", oaObj{"afterCard": oaString, "question": oaString,
			"options": oaStrings, "answerIndex": oaCount, "hints": oaStrings, "rationale": oaString}),
		"MediaList": oaList("Page of the class's media assets; nothing is minted.", "MediaAsset", false),
		"MediaAsset": oaShaped("A media asset; url is always null in a listing.", oaObj{
			"mediaId": oaString, "type": oaObj{"type": "string", "enum": []string{"video", "audio", "image"}},
			"cardId": oaString, "mimeType": oaString, "bytes": oaCount, "durationSeconds": oaObj{"type": []string{"integer", "null"}, "minimum": 0},
			"url": oaObj{"type": "null"},
		}),
		"SearchResults": oaList("Page of hits, filtered to grants before pagination.", "SearchHit", false),
		"SearchHit": oaShaped("A hit with a ready-to-use lessonId and the field that matched.", oaObj{
			"lessonId": oaString, "tier": tierEnum, "subject": oaString, "classNum": oaClassNum, "title": oaString,
			"matchedField": oaObj{"type": "string", "enum": []string{"title", "subtitle", "cardLabel", "keyPoint", "quizQuestion"}},
			"cardId":       oaNullString, "snippet": oaString,
		}),
		"MediaCoverage": oaStrict([]string{"video", "narration", "transcript", "media"}, oaObj{"video": oaCount, "narration": oaCount, "transcript": oaCount, "media": oaCount}),
		"Difficulty":    oaObj{"type": "string", "enum": []string{"beginner", "intermediate", "advanced"}},
		"MintResult": oaStrict([]string{"items", "expiresIn", "contentVersion", "_license"}, oaObj{
			"items": oaObj{"type": "array", "minItems": 1, "maxItems": 100, "description": "One per requested id, in request order; duplicates each get their own URL.",
				"items": oaStrict([]string{"mediaId", "url", "expiresAt"}, oaObj{
					"mediaId":   oaString,
					"url":       oaObj{"type": "string", "format": "uri", "description": "Signed, absolute, under /files/; no token needed until expiresAt."},
					"expiresAt": oaObj{"type": "string", "format": "date-time"}})},
			"expiresIn":      oaObj{"type": "integer", "minimum": 60, "maximum": 3600, "description": "Seconds each URL lives, as applied (the request's value clamped to the caller's cap)."},
			"contentVersion": oaRef("schemas", "ContentVersion"),
			"_license":       oaRef("schemas", "LicenseEnvelope"),
		}),
		"ExportResult": oaObj{
			"description": "format=zip_url: url, a signed link to the zip valid 15 minutes, and its expiresAt. format=inline: data, the bundle's tar gzip-compressed then base64-encoded, as encoding and archive say. classes is the number of classes in the bundle (the downloads billed).",
			"oneOf": []any{
				oaStrict([]string{"format", "url", "expiresAt", "classes", "contentVersion", "_license"}, oaObj{
					"format": oaObj{"type": "string", "enum": []string{"zip_url"}}, "url": oaObj{"type": "string", "format": "uri"},
					"expiresAt": oaObj{"type": "string", "format": "date-time"}, "classes": oaCount,
					"contentVersion": oaRef("schemas", "ContentVersion"), "_license": oaRef("schemas", "LicenseEnvelope")}),
				oaStrict([]string{"format", "encoding", "archive", "data", "classes", "contentVersion", "_license"}, oaObj{
					"format": oaObj{"type": "string", "enum": []string{"inline"}}, "encoding": oaObj{"type": "string", "enum": []string{"gzip+base64"}},
					"archive": oaObj{"type": "string", "enum": []string{"tar"}}, "data": oaObj{"type": "string", "contentEncoding": "base64"},
					"classes": oaCount, "contentVersion": oaRef("schemas", "ContentVersion"), "_license": oaRef("schemas", "LicenseEnvelope")}),
			},
		},
		"TestprepCatalog": oaList("The tests, each with its sections in the spec's order and per-section item counts.", "TestprepTest", true),
		"TestprepTest": oaStrict([]string{"id", "name", "itemCount", "itemsUrl", "sections"}, oaObj{
			"id": oaObj{"type": "string", "enum": e.tests}, "name": oaString, "itemCount": oaCount, "itemsUrl": oaString,
			"sections": oaObj{"type": "array", "items": oaStrict([]string{"id", "label", "itemCount", "itemsUrl"}, oaObj{
				"id": oaObj{"type": "string", "enum": e.sections}, "label": oaString, "itemCount": oaCount, "itemsUrl": oaString})},
		}),
		"TestprepItemList": oaList("Page of practice items; shorter than limit when the monthly item allowance runs low.", "TestprepItem", true),
		"TestprepItem": oaStrict([]string{"id", "section", "domain", "difficulty", "prompt", "options", "answerIndex", "rationale"}, oaObj{
			"id": oaString, "section": oaObj{"type": "string", "enum": e.sections}, "domain": oaString,
			"difficulty": oaObj{"type": "string", "enum": []string{"easy", "medium", "hard"}},
			"passage":    oaObj{"type": "string", "description": "Reading items only."},
			"prompt":     oaString, "options": oaObj{"type": "array", "minItems": 2, "items": oaString},
			"answerIndex":      oaObj{"type": "integer", "minimum": 0, "description": "Zero-based index into options."},
			"rationale":        oaString,
			"optionRationales": oaObj{"type": "array", "items": oaString, "description": "When present, one per option."},
		}),
		"LicenseStatus": oaStrict([]string{"orgId", "orgName", "tier", "status", "contentGrants", "quota", "rateLimits", "resetsAt", "eclaVersion", "requiredEclaVersion", "renewsAt", "contentVersion", "licenseUrl"}, oaObj{
			"orgId": oaString, "orgName": oaString, "tier": oaString, "status": oaString,
			"contentGrants": oaObj{"type": "array", "items": oaString, "description": "<tier> or <tier>/<subjectSlug>."},
			"quota": oaStrict([]string{"calls", "downloads", "exports", "testprepitems"}, oaObj{
				"calls": quota, "downloads": quota, "exports": quota, "testprepitems": quota}),
			"rateLimits": oaStrict([]string{"callsPerHour", "lessonReadsPerHour", "urlMintsPerHour"}, oaObj{
				"callsPerHour": nullInt, "lessonReadsPerHour": nullInt, "urlMintsPerHour": nullInt}),
			"resetsAt":    oaObj{"type": "string", "format": "date-time"},
			"eclaVersion": oaInt, "requiredEclaVersion": oaInt,
			"renewsAt":       oaObj{"type": "string", "format": "date-time"},
			"contentVersion": oaRef("schemas", "ContentVersion"),
			"licenseUrl":     oaString,
		}),
		"Progress":      oaProgress(tierEnum),
		"ProgressClass": oaProgressClass(tierEnum),
		"Streak": oaStrict([]string{"current", "longest", "lastDay"}, oaObj{
			"current": oaObj{"type": "integer", "minimum": 0, "description": "Consecutive UTC days with a saved write, ending today or yesterday; otherwise 0."},
			"longest": oaObj{"type": "integer", "minimum": 0, "description": "The longest such run ever."},
			"lastDay": oaObj{"type": []string{"string", "null"}, "format": "date", "description": "The UTC day of the last saved write; null when none."},
		}),
		"ProgressAck": oaWithDesc("The class as recorded, with the learner's XP and streak; under 384 bytes, never compressed.",
			oaStrict([]string{"lessonId", "score", "bestScore", "xp", "streak"}, oaObj{
				"lessonId": oaString, "score": oaScore("The score this write sent; null when it sent none."),
				"bestScore": oaScore("The highest score ever sent for the class; null when none was."),
				"xp":        oaXP, "streak": oaRef("schemas", "Streak"),
			})),
	}
}

func oaCodes() []string {
	cs := apierr.Codes()
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

// oaDownloads adds the signed download links (shared/link) to paths: the
// URLs a mint (route 10) and a zip_url export (routes 12 and 13) answer
// with. They are outside /v1 and the route table; they take no token (the
// link is the capability), bill nothing, and answer GET and HEAD (the
// routes' HEAD is 405; a link's is served).
func oaDownloads(paths oaObj, e oaEnums) {
	str := func(desc, pattern string, max int) oaObj {
		s := oaObj{"type": "string", "minLength": 1}
		if pattern != "" {
			s["pattern"] = pattern
		}
		if max > 0 {
			s["maxLength"] = max
		}
		return oaObj{"description": desc, "schema": s}
	}
	q := func(name string, required bool, p oaObj) oaObj {
		p["name"], p["in"], p["required"] = name, "query", required
		return p
	}
	const (
		namePattern = `^[A-Za-z0-9_-][A-Za-z0-9._-]*$`
		intPattern  = `^(0|-?[1-9][0-9]*)$`
	)
	name := str("The download's file name.", namePattern, link.MaxName)
	name["name"], name["in"], name["required"] = "name", "path", true
	common := []any{name,
		q("k", true, str("The id of the URL key that signed the link.", namePattern, link.MaxKeyID)),
		q("x", true, str("The expiry, in unix seconds: the link is valid while the server's clock is before it.", intPattern, 0)),
		q("r", true, str("The ledger row the link was minted as, so that two mints of one target are two links.", intPattern, 0)),
		q("o", true, str("The organisation the link was made for.", "", 0)),
		q("g", true, oaObj{"description": "The generation of that organisation: a link of a deleted organisation stays refused when one of the same id is created again.",
			"schema": oaObj{"type": "string"}}),
	}
	sig := q("s", true, str("The unpadded base64url HMAC-SHA-256, with key k, over every other field of the link.", `^[A-Za-z0-9_-]{43}$`, 0))
	desc := "The URL is used as it was answered: its fields are signed, and a link with any field changed, added or " +
		"removed, past its expiry, or signed with a key the server no longer holds is 404 `NOT_FOUND`, whose message " +
		"says to mint or export again. A link ends with its organisation: at every download the organisation it names is " +
		"read, and a suspended, expired or no longer granted one is refused (403), a deleted one 404. No token; nothing is metered. Other methods than GET and HEAD answer 405 " +
		"`METHOD_NOT_ALLOWED` in the Error body, with `Allow: GET, HEAD`."
	cost := func(note string) oaObj { return oaObj{"meters": []string{}, "note": note} }
	refused := func() oaObj {
		hs := oaObj{"X-Request-Id": oaRef("headers", "X-Request-Id"), "Cache-Control": oaRef("headers", "Cache-Control")}
		return oaObj{
			"403": oaError(403, []apierr.Code{apierr.OrgSuspended, apierr.LicenseExpired, apierr.LicenseRequired, apierr.TierNotLicensed, apierr.ContentNotGranted}, hs,
				"The organisation the link was made for may no longer read it: its plan is suspended (by an operator or the enumeration alarm), "+
					"its licence expired or awaits a newer agreement, or its grants no longer cover the subject. Checked at every download."),
			"404": oaError(404, []apierr.Code{apierr.NotFound}, hs, "The link is expired, altered, of an unknown key, names what the server no longer serves, "+
				"or an organisation that no longer exists (deleted, or deleted and created again): mint or export again."),
			"429": oaError(429, []apierr.Code{apierr.RateLimited}, oaObj{"X-Request-Id": oaRef("headers", "X-Request-Id"),
				"Cache-Control": oaRef("headers", "Cache-Control"), "Retry-After": oaRef("headers", "Retry-After")},
				"The organisation has the most downloads in progress served at once (8 per origin), or started more than 50 a second (in bursts of 100): retry after Retry-After seconds."),
			"500": oaError(500, []apierr.Code{apierr.Internal}, oaObj{"X-Request-Id": oaRef("headers", "X-Request-Id")}, ""),
		}
	}
	op := func(id, summary, note string, params []any, rs oaObj) oaObj {
		o := oaObj{"operationId": id, "summary": summary, "tags": []string{"Downloads"}, "security": []any{},
			"x-service-cost": cost(note), "responses": rs}
		if params != nil {
			o["parameters"] = params
		}
		return o
	}

	// A download: a file's bytes, ranges and revalidation as
	// http.ServeContent answers them, a media asset's or a stored bundle's.
	binary := oaObj{"type": "string", "format": "binary"}
	hdr := func(desc string, required bool, schema oaObj) oaObj {
		return oaObj{"description": desc, "required": required, "schema": schema}
	}
	length := func(desc string) oaObj { return hdr(desc, true, oaObj{"type": "integer", "minimum": 0}) }
	disposition := hdr("attachment, with the link's file name (unique per lesson for an asset, per target for a bundle): a name safe to save as.", true, oaObj{"type": "string"})
	fileResponses := func(head bool, what string, content oaObj, etagH oaObj) oaObj {
		parts := oaObj{"multipart/byteranges": oaObj{"schema": binary}}
		for k, v := range content {
			parts[k] = v
		}
		with := func(content oaObj, r oaObj) oaObj {
			if !head && len(content) > 0 {
				r["content"] = content
			}
			return r
		}
		base := func(more oaObj) oaObj {
			hs := oaObj{"X-Request-Id": oaRef("headers", "X-Request-Id"), "Cache-Control": oaRef("headers", "Cache-Control")}
			for k, v := range more {
				hs[k] = v
			}
			return hs
		}
		rs := refused()
		rs["200"] = with(content, oaObj{
			"description": what,
			"headers": base(oaObj{"ETag": etagH, "Content-Length": length("The size in bytes."), "Content-Disposition": disposition,
				"Accept-Ranges": hdr("Byte ranges are served.", true, oaObj{"type": "string", "const": "bytes"})}),
		})
		rs["206"] = with(parts, oaObj{
			"description": "Partial content: the requested range (Range, and If-Range naming the current ETag); several ranges come as multipart/byteranges.",
			"headers": base(oaObj{"ETag": etagH, "Content-Length": length("The bytes sent."), "Content-Disposition": disposition,
				"Content-Range": hdr("The range sent, of the whole size; absent from a multipart answer.", false, oaObj{"type": "string", "pattern": `^bytes [0-9]+-[0-9]+/[0-9]+$`}),
				"Accept-Ranges": hdr("Byte ranges are served.", true, oaObj{"type": "string", "const": "bytes"})}),
		})
		rs["304"] = oaObj{
			"description": "Not modified: If-None-Match names the ETag (or is *); empty body.",
			"headers":     base(oaObj{"ETag": etagH, "Content-Disposition": disposition}),
		}
		rs["412"] = oaObj{
			"description": "Precondition failed: If-Match names no current ETag; empty body.",
			"headers":     base(oaObj{"ETag": etagH, "Content-Disposition": disposition}),
		}
		rs["416"] = with(oaObj{"text/plain": oaObj{"schema": oaObj{"type": "string"}}}, oaObj{
			"description": "Range not satisfiable: no range of the request overlaps the file, or the Range header does not parse. " +
				"As Go's http.ServeContent answers it: a plain-text message, not the Error body, without ETag or Cache-Control.",
			"headers": oaObj{"X-Request-Id": oaRef("headers", "X-Request-Id"), "Content-Disposition": disposition,
				"Content-Range": hdr("bytes */<size>, the whole size, when the range parsed but lies past the end.", false, oaObj{"type": "string", "pattern": `^bytes \*/[0-9]+$`})},
		})
		return rs
	}
	fileParams := []any{
		oaObj{"name": "Range", "in": "header", "required": false, "schema": oaObj{"type": "string"},
			"description": "Byte ranges (RFC 9110 §14.2): bytes=<first>-[<last>], bytes=-<suffix>, or several, comma-separated."},
		oaObj{"name": "If-Range", "in": "header", "required": false, "schema": oaObj{"type": "string"},
			"description": "The ETag kept with the bytes already held: the range is sent while it is current, else the whole file."},
		oaIfNoneMatch,
		oaObj{"name": "If-Match", "in": "header", "required": false, "schema": oaObj{"type": "string"},
			"description": "An ETag, several, or *: when none is current the answer is 412."},
	}

	assets := oaObj{}
	for _, m := range e.mimes {
		assets[m] = oaObj{"schema": binary}
	}
	assetTag := hdr("The asset's strong validator: it names one sequence of bytes, so If-Range may use it.", true,
		oaObj{"type": "string", "pattern": `^"[0-9a-f]{16}"$`})
	assetWhat := "The asset, with its MIME type (the media listing's mimeType) and its declared size in bytes."
	mediaNote := "Unmetered: the mint billed the download; repeatable until the link expires while its organisation may read it."
	paths[link.Prefix+"m/{name}"] = oaObj{
		"summary":     "A minted media URL",
		"description": "The `url` of a mint (POST /v1/media/urls). " + desc,
		"parameters":  append(slices.Clone(common), q("m", true, str("The asset's mediaId.", "", 0)), sig),
		"get":         op("downloadMedia", "Download a media asset by its signed URL", mediaNote, fileParams, fileResponses(false, assetWhat, assets, assetTag)),
		"head":        op("headMedia", "The headers of a media download, without its bytes", mediaNote, fileParams, fileResponses(true, assetWhat, assets, assetTag)),
	}

	// An export bundle: a zip built once and kept.
	zip := oaObj{"application/zip": oaObj{"schema": binary}}
	zipTag := hdr("The bundle's strong validator (a hash of all that makes its bytes), so If-Range may use it to resume.", true,
		oaObj{"type": "string", "pattern": `^"[0-9a-f]{64}"$`})
	zipWhat := "The bundle as a zip (manifest.json, class-<N>.json, class-<N>.transcript.md, media-manifest.json, LICENSE.txt): " +
		"built on its first download and kept, the same bytes on every download of the link, with its size and byte ranges, so a download resumes."
	exportNote := "Unmetered: the export billed its downloads; repeatable until the link expires while its organisation may read it."
	exportParams := append(slices.Clone(common),
		q("sc", true, str("The scope set of the token that exported it, as its scope claim writes it.", "", 0)),
		q("v", true, str("The contentVersion it was exported under; once the corpus moves on, the link is 404.", "", 0)),
		q("t", true, str("The subject's tier.", "", 0)),
		q("sl", true, str("The subject's slug.", "", 0)),
		q("c", false, str("A class export's class number; absent for a whole subject.", `^[1-9][0-9]*$`, 0)),
		sig)
	paths[link.Prefix+"e/{name}"] = oaObj{
		"summary":     "A zip export's URL",
		"description": "The `url` of a format=zip_url export (routes /v1/exports/…), valid 15 minutes. " + desc,
		"parameters":  exportParams,
		"get":         op("downloadExport", "Download an export bundle by its signed URL", exportNote, fileParams, fileResponses(false, zipWhat, zip, zipTag)),
		"head":        op("headExport", "The headers and size of an export download, without its bytes", exportNote, fileParams, fileResponses(true, zipWhat, zip, zipTag)),
	}
}
