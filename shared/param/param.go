// Package param validates a request's query and body strictly against the
// route table (spec: Common parameters, Limits). Nothing is clamped and
// nothing falls back silently: every failure is a 400 in the spec's error
// body naming the parameter, with allowed values or bounds where they exist.
package param

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/id"
	"github.com/lectern-api/lectern/shared/route"
)

// MaxQuery bounds the raw query string; longer ones are refused before
// parsing. The longest legal query (q of 200 characters, each encoded in up
// to 12 bytes, plus a cursor and the filters) fits well within it.
const MaxQuery = 4096

// maxParams bounds the parameters of one route (route 11 has the most).
const maxParams = 8

// Values are a request's validated query parameters.
type Values struct {
	r       *route.Route
	raw     [maxParams]string // decoded values by index into r.Params
	set     uint16            // bit i: r.Params[i] was given
	limit   int
	include []string // sorted, without duplicates
}

// Parse validates rawQuery (the URL's query, still percent-encoded) against
// the route's query parameters.
func Parse(r *route.Route, rawQuery string) (Values, *apierr.Error) {
	v := Values{r: r}
	if len(rawQuery) > MaxQuery {
		return v, &apierr.Error{Code: apierr.BadRequest, Parameter: "query",
			Message: "The query string is longer than " + strconv.Itoa(MaxQuery) + " bytes.",
			Max:     apierr.Int(MaxQuery)}
	}
	for rawQuery != "" {
		var pair string
		pair, rawQuery, _ = strings.Cut(rawQuery, "&")
		if pair == "" {
			continue
		}
		rawKey, rawVal, _ := strings.Cut(pair, "=")
		key, ok := unescape(rawKey)
		if !ok {
			return v, &apierr.Error{Code: apierr.BadRequest, Parameter: rawKey,
				Message: "A query parameter name has malformed percent-encoding."}
		}
		if key == "" {
			return v, &apierr.Error{Code: apierr.BadRequest, Parameter: "query",
				Message: "A query parameter has an empty name."}
		}
		i := v.index(key)
		if i < 0 {
			names := v.queryNames()
			msg := "Unknown query parameter " + strconv.Quote(clip(key)) + "; this route takes "
			if len(names) == 0 {
				msg += "none."
			} else {
				msg += strings.Join(names, ", ") + "."
			}
			return v, &apierr.Error{Code: apierr.BadRequest, Parameter: clip(key), Message: msg, Allowed: names}
		}
		if v.set&(1<<i) != 0 {
			return v, &apierr.Error{Code: apierr.BadRequest, Parameter: key,
				Message: "The query parameter " + strconv.Quote(key) + " is given more than once."}
		}
		val, ok := unescape(rawVal)
		if !ok {
			return v, &apierr.Error{Code: apierr.BadRequest, Parameter: key,
				Message: "The value of " + strconv.Quote(key) + " has malformed percent-encoding."}
		}
		v.set |= 1 << i
		v.raw[i] = val
	}
	for i := range r.Params {
		p := &r.Params[i]
		if p.In != route.Query {
			continue
		}
		if v.set&(1<<i) == 0 {
			if p.Required {
				return v, &apierr.Error{Code: apierr.BadRequest, Parameter: p.Name,
					Message: "The query parameter " + strconv.Quote(p.Name) + " is required."}
			}
			v.raw[i] = p.Default
			if p.Kind == route.Int && p.Default != "" {
				v.limit, _ = strconv.Atoi(p.Default)
			}
			continue
		}
		if err := v.check(p, v.raw[i]); err != nil {
			return v, err
		}
	}
	return v, nil
}

func (v *Values) index(name string) int {
	for i := range v.r.Params {
		if v.r.Params[i].In == route.Query && v.r.Params[i].Name == name {
			return i
		}
	}
	return -1
}

func (v *Values) queryNames() []string {
	out := []string{}
	for _, p := range v.r.Params {
		if p.In == route.Query {
			out = append(out, p.Name)
		}
	}
	return out
}

// MaxCursor bounds a cursor's length; cursor.Open checks the rest.
const MaxCursor = 256

func (v *Values) check(p *route.Param, val string) *apierr.Error {
	switch p.Kind {
	case route.Enum:
		if !member(p.Enum, val) {
			return &apierr.Error{Code: apierr.BadRequest, Parameter: p.Name, Allowed: p.Enum, Received: val,
				Message: p.Name + " must be one of " + strings.Join(p.Enum, ", ") + "."}
		}
	case route.Int:
		n, ok := parseInt(val)
		if !ok || n < p.Min || n > p.Max {
			e := &apierr.Error{Code: apierr.BadRequest, Parameter: p.Name, Received: val,
				Min: apierr.Int(p.Min), Max: apierr.Int(p.Max),
				Message: p.Name + " must be an integer from " + strconv.FormatInt(p.Min, 10) + " to " + strconv.FormatInt(p.Max, 10) + "; it is rejected, never clamped."}
			e.ReceivedNumber = ok
			if ok {
				e.Received = strconv.FormatInt(n, 10)
			}
			return e
		}
		v.limit = int(n)
	case route.Text:
		n := utf8.RuneCountInString(val)
		if !utf8.ValidString(val) {
			return &apierr.Error{Code: apierr.BadRequest, Parameter: p.Name,
				Message: p.Name + " must be UTF-8 text, percent-encoded."}
		}
		if strings.TrimSpace(val) == "" {
			return &apierr.Error{Code: apierr.BadRequest, Parameter: p.Name,
				Message: p.Name + " must not be empty."}
		}
		if n > p.MaxLen {
			return &apierr.Error{Code: apierr.BadRequest, Parameter: p.Name, Max: apierr.Int(int64(p.MaxLen)),
				Message: p.Name + " is " + strconv.Itoa(n) + " characters long; at most " + strconv.Itoa(p.MaxLen) + " are allowed."}
		}
	case route.Slug:
		if !id.ValidSlug(val) {
			return &apierr.Error{Code: apierr.BadRequest, Parameter: p.Name, Received: clip(val),
				Message: p.Name + " must be a subject slug (lowercase letters, digits and single hyphens)."}
		}
	case route.Cursor:
		if val == "" || len(val) > MaxCursor {
			return &apierr.Error{Code: apierr.BadRequest, Parameter: p.Name,
				Message: "cursor is not a cursor this service issued; pass nextCursor back verbatim."}
		}
	case route.List:
		items, err := list(p, val)
		if err != nil {
			return err
		}
		v.include = items
	}
	return nil
}

// list parses a comma-separated list of values from p.Enum, sorted and
// without duplicates so that order never matters.
func list(p *route.Param, val string) ([]string, *apierr.Error) {
	var out []string
	for _, item := range strings.Split(val, ",") {
		if !member(p.Enum, item) {
			return nil, &apierr.Error{Code: apierr.BadRequest, Parameter: p.Name, Allowed: p.Enum, Received: clip(item),
				Message: p.Name + " takes a comma-separated list of " + strings.Join(p.Enum, ", ") + "."}
		}
		if !member(out, item) {
			out = append(out, item)
		}
	}
	sortStrings(out)
	return out, nil
}

// Get returns the value of the query parameter called name, its default
// when it was not given, or "" for a parameter the route does not have.
func (v *Values) Get(name string) string {
	if i := v.index(name); i >= 0 {
		return v.raw[i]
	}
	return ""
}

// Given reports whether the request named the query parameter.
func (v *Values) Given(name string) bool {
	i := v.index(name)
	return i >= 0 && v.set&(1<<i) != 0
}

// Limit is the page size (the default when not given).
func (v *Values) Limit() int { return v.limit }

// Include is the include list, sorted and without duplicates.
func (v *Values) Include() []string { return v.include }

// Includes reports whether the include list holds section.
func (v *Values) Includes(section string) bool { return member(v.include, section) }

// Canonical is the query in canonical form, for ETags: the route's query
// parameters that were given or have a default, in table order, defaults
// made explicit,
// include sorted, values percent-encoded; parameters that do not change
// the answer (route.Param.NoETag) are left out.
func (v *Values) Canonical() string { return string(v.appendCanonical(nil, false)) }

// AppendCanonical appends Canonical's form of the query to dst.
func (v *Values) AppendCanonical(dst []byte) []byte { return v.appendCanonical(dst, false) }

// Binding is the canonical query without cursor and limit: what a cursor is
// bound to, so that a walk may change its page size but not its set.
func (v *Values) Binding() string { return string(v.appendCanonical(nil, true)) }

// appendCanonical appends the canonical query to b: the route's query
// parameters in table order, given or defaulted, percent-encoded.
func (v *Values) appendCanonical(b []byte, binding bool) []byte {
	start := len(b)
	for i := range v.r.Params {
		p := &v.r.Params[i]
		if p.In != route.Query || p.NoETag {
			continue
		}
		if binding && (p.Kind == route.Cursor || p.Name == "limit") {
			continue
		}
		val := v.raw[i]
		if p.Kind == route.List {
			val = strings.Join(v.include, ",")
		}
		if val == "" {
			continue // neither given nor defaulted
		}
		if len(b) > start {
			b = append(b, '&')
		}
		b = append(b, p.Name...)
		b = append(b, '=')
		b = escape(b, val)
	}
	return b
}

func member(set []string, s string) bool {
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// Integer reads the API's integer syntax: an optionally signed run of
// decimal digits (no plus sign, point, exponent or space) whose value fits
// in int64. Query parameters use it, and so do the origin's JSON bodies
// (origin/internal/jsonbody), where it is a JSON number written as an
// integer.
func Integer(s string) (int64, bool) {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// parseInt accepts an Integer of at most 18 digits, so that out-of-range
// values can be reported as numbers.
func parseInt(s string) (int64, bool) {
	if len(strings.TrimPrefix(s, "-")) > 18 {
		return 0, false
	}
	return Integer(s)
}

// clip shortens a received value before it is echoed in an error body.
func clip(s string) string {
	const max = 100
	if len(s) <= max {
		return s
	}
	i := max
	for i > max-utf8.UTFMax && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// Unescape decodes a query component: percent escapes and '+' as space
// (application/x-www-form-urlencoded); false on a malformed escape.
// shared/link reads its links' queries with it.
func Unescape(s string) (string, bool) { return unescape(s) }

func unescape(s string) (string, bool) {
	if strings.IndexByte(s, '%') < 0 && strings.IndexByte(s, '+') < 0 {
		return s, true
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '+':
			b = append(b, ' ')
		case '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return "", false
			}
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		default:
			b = append(b, c)
		}
	}
	return string(b), true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// escape appends s percent-encoded, leaving only RFC 3986 unreserved
// characters as they are.
func escape(dst []byte, s string) []byte {
	const upper = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			dst = append(dst, c)
		} else {
			dst = append(dst, '%', upper[c>>4], upper[c&0xf])
		}
	}
	return dst
}
