// The responses of the route table's operations: 200 and 304 with their
// headers, each error status with the codes it can carry (ErrorCodes),
// the Error answers, and components/headers.

package openapi

import (
	"maps"
	"strconv"
	"strings"

	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/route"
	"github.com/lectern-api/lectern/shared/scope"
)

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
	add(apierr.BadRequest) // every route refuses an unknown query parameter
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
	if rt.ID == route.Changes {
		add(apierr.ChangesExpired)
	}
	if rt.ID == route.ExportSubject || rt.ID == route.ExportClass { // format=inline over the response ceiling
		add(apierr.PayloadTooLarge)
		// format=inline whose bundle the origin has no disk room for:
		// 503, a status the spec's codes do not name (origin/server
		// bundleFailed).
		m[503] = []apierr.Code{apierr.Internal}
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
	408: "Request timeout", 409: "Conflict", 410: "Gone", 413: "Payload too large", 429: "Too many requests", 500: "Internal error",
	503: "Service unavailable",
}

// oaResponses documents every answer of rt: 200 (and 304 where an ETag
// applies) and each error status with the codes it can carry.
func oaResponses(rt *route.Route) oaObj {
	rs := oaObj{}
	ok := oaHeaderRefs("X-Request-Id", "Cache-Control", "X-Service-Content-Version")
	if rt.Validator != route.NoETag {
		ok["ETag"] = oaRef("headers", "ETag")
	}
	if rt.Metered {
		maps.Copy(ok, oaHeaderRefs("RateLimit", "RateLimit-Policy"))
	}
	okDesc := "OK."
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
		nm := oaHeaderRefs("X-Request-Id", "ETag", "X-Service-Content-Version")
		desc := "Not modified: If-None-Match matched the current ETag; empty body."
		if rt.Metered {
			maps.Copy(nm, oaHeaderRefs("RateLimit", "RateLimit-Policy"))
			desc += " Bills one call and nothing else."
		}
		rs["304"] = oaObj{"description": desc, "headers": nm}
	}
	for st, codes := range ErrorCodes(rt) {
		hs := oaHeaderRefs("X-Request-Id")
		switch st {
		case 401, 403:
			if rt.Scope != "" {
				hs["WWW-Authenticate"] = oaRef("headers", "WWW-Authenticate")
			}
		case 409, 429, 503:
			hs["Retry-After"] = oaRef("headers", "Retry-After")
		}
		more := ""
		switch st {
		case 408:
			more = "The body did not arrive within the server's read limit; nothing was done and the connection is closed. Send the request again."
		case 503:
			more = oaNoRoom
		}
		rs[strconv.Itoa(st)] = oaError(st, codes, hs, more)
	}
	return rs
}

// oaNoRoom describes the 503 of an export whose bundle the server has
// no disk room to build (origin/bundles ErrNoSpace).
const oaNoRoom = "The export's bundle cannot be built now: the server is short of disk space. Nothing is billed; retry after Retry-After seconds."

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
		route.Changes: "ChangeList",
	}[id]
}
