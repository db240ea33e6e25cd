// Package apierr is the API's error vocabulary: exactly the codes of the
// spec's Errors table, the status each one answers with, and the one error
// body every route writes:
//
//	{"error": {"code": ..., "message": ..., "requestId": ..., <per-code keys>}}
package apierr

import (
	"unicode/utf8"

	"github.com/lectern-api/lectern/shared/jsonenc"
)

// Code is an error code of the spec's Errors table. The list is
// append-only: clients branch on these strings.
type Code string

// The codes, in the order of the spec's table.
const (
	BadRequest        Code = "BAD_REQUEST"
	InvalidParameter  Code = "INVALID_PARAMETER" // accepted synonym of BAD_REQUEST; never emitted
	BadLessonID       Code = "BAD_LESSON_ID"
	BadMediaID        Code = "BAD_MEDIA_ID" // reserved; BAD_LESSON_ID is returned instead
	CursorExpired     Code = "CURSOR_EXPIRED"
	BatchTooLarge     Code = "BATCH_TOO_LARGE"
	AmbiguousSubject  Code = "AMBIGUOUS_SUBJECT"
	InvalidToken      Code = "invalid_token"
	InvalidRequest    Code = "invalid_request" // reserved; those cases answer invalid_token
	InsufficientScope Code = "insufficient_scope"
	NoOrganization    Code = "NO_ORGANIZATION"
	LicenseRequired   Code = "LICENSE_REQUIRED"
	LicenseExpired    Code = "LICENSE_EXPIRED"
	TierNotLicensed   Code = "TIER_NOT_LICENSED"
	ContentNotGranted Code = "CONTENT_NOT_GRANTED"
	OrgSuspended      Code = "ORG_SUSPENDED"
	LearnerRequired   Code = "LEARNER_REQUIRED"
	UnknownSubject    Code = "UNKNOWN_SUBJECT"
	LessonNotFound    Code = "LESSON_NOT_FOUND"
	UnknownMedia      Code = "UNKNOWN_MEDIA"
	UnknownTest       Code = "UNKNOWN_TEST"
	UnknownSection    Code = "UNKNOWN_SECTION"
	NotFound          Code = "NOT_FOUND"
	MethodNotAllowed  Code = "METHOD_NOT_ALLOWED"
	WriteConflict     Code = "WRITE_CONFLICT"
	PayloadTooLarge   Code = "PAYLOAD_TOO_LARGE"
	RateLimited       Code = "RATE_LIMITED"
	QuotaExceeded     Code = "QUOTA_EXCEEDED"
	ExportLimit       Code = "EXPORT_LIMIT"
	Internal          Code = "INTERNAL"
)

// The extensions' codes: beyond the spec's table, each answered only by
// an extension route (documented as one in the OpenAPI description).
const (
	// ChangesExpired: GET /v1/changes was given a since the feed no longer
	// holds (past its history): run a full sync.
	ChangesExpired Code = "CHANGES_EXPIRED"
)

// extensions maps each extension code to its HTTP status.
var extensions = [...]struct {
	code   Code
	status int
}{
	{ChangesExpired, 410},
}

// Extensions returns the extensions' codes.
func Extensions() []Code {
	out := make([]Code, len(extensions))
	for i, c := range extensions {
		out[i] = c.code
	}
	return out
}

// codes maps every code to its HTTP status; its order is the spec's.
var codes = [...]struct {
	code   Code
	status int
}{
	{BadRequest, 400},
	{InvalidParameter, 400},
	{BadLessonID, 400},
	{BadMediaID, 400},
	{CursorExpired, 400},
	{BatchTooLarge, 400},
	{AmbiguousSubject, 400},
	{InvalidToken, 401},
	{InvalidRequest, 401},
	{InsufficientScope, 403},
	{NoOrganization, 403},
	{LicenseRequired, 403},
	{LicenseExpired, 403},
	{TierNotLicensed, 403},
	{ContentNotGranted, 403},
	{OrgSuspended, 403},
	{LearnerRequired, 403},
	{UnknownSubject, 404},
	{LessonNotFound, 404},
	{UnknownMedia, 404},
	{UnknownTest, 404},
	{UnknownSection, 404},
	{NotFound, 404},
	{MethodNotAllowed, 405},
	{WriteConflict, 409},
	{PayloadTooLarge, 413},
	{RateLimited, 429},
	{QuotaExceeded, 429},
	{ExportLimit, 429},
	{Internal, 500},
}

// Codes returns every code in the spec's order: the enum of the error
// schema in the OpenAPI description.
func Codes() []Code {
	out := make([]Code, len(codes))
	for i, c := range codes {
		out[i] = c.code
	}
	return out
}

// Status returns the HTTP status of code, and 500 for a string that is
// neither one of the spec's codes nor an extension's.
func Status(code Code) int {
	for _, c := range codes {
		if c.code == code {
			return c.status
		}
	}
	for _, c := range extensions {
		if c.code == code {
			return c.status
		}
	}
	return 500
}

// Known reports whether code is one of the spec's codes or an
// extension's.
func Known(code Code) bool {
	return Status(code) != 500 || code == Internal
}

// Error is an API error: a code, a human message and the per-code keys of
// the spec (parameter, allowed, received, min, max, grant, tiers, allow,
// retryAfterSeconds, quotaResetsAt, hint, exportsUsed, exportsLimit), plus
// scope for insufficient_scope. Unset keys are not written.
type Error struct {
	Code    Code
	Message string

	Parameter string
	Allowed   []string
	// Received is the offending value as the client sent it. When
	// ReceivedNumber is set it is written as a JSON number instead.
	Received       string
	ReceivedNumber bool
	Min, Max       *int64
	Grant          string
	Tiers          []string
	Allow          []string
	Scope          string
	RetryAfter     *int64 // retryAfterSeconds
	QuotaResetsAt  string
	Hint           string
	ExportsUsed    *int64
	ExportsLimit   *int64
}

// New returns an error with code and message and no per-code keys.
func New(code Code, message string) *Error { return &Error{Code: code, Message: message} }

// Int returns a pointer to n, for the optional numeric keys.
func Int(n int64) *int64 { return &n }

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Status is the HTTP status the error answers with.
func (e *Error) Status() int { return Status(e.Code) }

// AppendJSON appends the error body to dst. requestID must equal the
// response's X-Request-Id header.
func (e *Error) AppendJSON(dst []byte, requestID string) []byte {
	dst = append(dst, `{"error":{`...)
	dst = jsonenc.Key(dst, "code")
	dst = jsonenc.String(dst, string(e.Code))
	dst = jsonenc.Key(dst, "message")
	dst = echo(dst, e.Message, MaxMessage)
	dst = jsonenc.Key(dst, "requestId")
	dst = jsonenc.String(dst, requestID)
	if e.Parameter != "" {
		dst = jsonenc.Key(dst, "parameter")
		dst = echo(dst, e.Parameter, MaxEcho)
	}
	if e.Allowed != nil {
		dst = jsonenc.Key(dst, "allowed")
		dst = jsonenc.Strings(dst, e.Allowed)
	}
	if e.Received != "" || e.ReceivedNumber {
		dst = jsonenc.Key(dst, "received")
		if e.ReceivedNumber && len(e.Received) <= MaxEcho {
			dst = append(dst, e.Received...)
		} else {
			dst = echo(dst, e.Received, MaxEcho) // a cut number is no number: a string
		}
	}
	dst = optInt(dst, "min", e.Min)
	dst = optInt(dst, "max", e.Max)
	if e.Grant != "" {
		dst = jsonenc.Key(dst, "grant")
		dst = echo(dst, e.Grant, MaxEcho)
	}
	if e.Tiers != nil {
		dst = jsonenc.Key(dst, "tiers")
		dst = jsonenc.Strings(dst, e.Tiers)
	}
	if e.Allow != nil {
		dst = jsonenc.Key(dst, "allow")
		dst = jsonenc.Strings(dst, e.Allow)
	}
	if e.Scope != "" {
		dst = jsonenc.Key(dst, "scope")
		dst = jsonenc.String(dst, e.Scope)
	}
	dst = optInt(dst, "retryAfterSeconds", e.RetryAfter)
	if e.QuotaResetsAt != "" {
		dst = jsonenc.Key(dst, "quotaResetsAt")
		dst = jsonenc.String(dst, e.QuotaResetsAt)
	}
	if e.Hint != "" {
		dst = jsonenc.Key(dst, "hint")
		dst = jsonenc.String(dst, e.Hint)
	}
	dst = optInt(dst, "exportsUsed", e.ExportsUsed)
	dst = optInt(dst, "exportsLimit", e.ExportsLimit)
	return append(dst, "}}"...)
}

// Bounds on what an error body echoes of a client's input (issue #13: a
// 200 KB slug came back twice). AppendJSON cuts received, parameter and
// grant to MaxEcho bytes and the message to MaxMessage, on a UTF-8
// boundary, and marks a cut value with a trailing "…"; code building a
// message from client text cuts that text with Clip, so the message keeps
// its own words.
const (
	MaxEcho    = 200 // docs/decisions.md: received echoes at most 200 bytes
	MaxMessage = 1024
)

// Ellipsis marks a value Clip or AppendJSON cut.
const Ellipsis = "…"

// Clip returns s cut to at most MaxEcho bytes on a UTF-8 boundary, with
// Ellipsis appended when it was cut: the form in which an error echoes
// client text. It allocates only when it cuts.
func Clip(s string) string {
	if len(s) <= MaxEcho {
		return s
	}
	return s[:cut(s, MaxEcho)] + Ellipsis
}

// cut is the largest n <= max (max < len(s)) such that s[:n] does not
// end inside a UTF-8 sequence.
func cut(s string, max int) int {
	n := max
	for n > 0 && n > max-utf8.UTFMax && !utf8.RuneStart(s[n]) {
		n--
	}
	if !utf8.RuneStart(s[n]) { // not UTF-8 here anyway: cut at max
		n = max
	}
	return n
}

// echo appends s as a JSON string of at most max bytes of s, marked with
// Ellipsis when cut. It allocates nothing beyond dst's growth.
func echo(dst []byte, s string, max int) []byte {
	if len(s) <= max {
		return jsonenc.String(dst, s)
	}
	dst = jsonenc.String(dst, s[:cut(s, max)])
	dst = append(dst[:len(dst)-1], Ellipsis...)
	return append(dst, '"')
}

func optInt(dst []byte, name string, n *int64) []byte {
	if n == nil {
		return dst
	}
	dst = jsonenc.Key(dst, name)
	return jsonenc.Int(dst, *n)
}

// Header is one response header an error requires.
type Header struct{ Name, Value string }

// Headers returns the headers the spec ties to the error: Allow on 405,
// Retry-After (seconds) on every 429 and on WRITE_CONFLICT.
func (e *Error) Headers() []Header {
	var h []Header
	if len(e.Allow) > 0 {
		v := e.Allow[0]
		for _, m := range e.Allow[1:] {
			v += ", " + m
		}
		h = append(h, Header{"Allow", v})
	}
	if e.RetryAfter != nil {
		h = append(h, Header{"Retry-After", string(jsonenc.Int(nil, *e.RetryAfter))})
	}
	return h
}
