package etag

import "github.com/lectern-api/lectern/shared/ows"

// Match reports whether an If-None-Match field value matches the current
// tag, that is whether a GET should answer 304 (spec: Conditional requests
// (ETag), rule 3; RFC 9110 §13.1.2). It follows net/http's fs.go
// checkIfNoneMatch and scanETag, with these choices:
//
//   - Comparison is weak (RFC 9110 §8.8.3.2): W/"x" and "x" match each other
//     and either form of the current tag.
//   - "*" matches whatever is current; with no current tag (current == "",
//     a route without an ETag) nothing matches.
//   - The value is a comma-separated list; empty elements and optional
//     whitespace (SP, HTAB) are skipped, as RFC 9110 §5.6.1 asks of
//     recipients. A malformed element (no quotes, a character outside
//     etagc, junk after the closing quote, a "*" in a list element with
//     more text) is skipped up to the next comma, where fs.go gives up on
//     the rest of the list.
//
// It runs in one pass over the value and never panics.
func Match(ifNoneMatch, current string) bool {
	if current == "" {
		return false
	}
	cur := opaque(current)
	if cur == "" {
		return false
	}
	s := ifNoneMatch
	for {
		s = ows.Trim(s)
		if s == "" {
			return false
		}
		if s[0] == ',' {
			s = s[1:]
			continue
		}
		var tag string
		var ok bool
		if s[0] == '*' {
			s, ok = endOfElement(s[1:])
			if ok {
				return true
			}
			continue
		}
		tag, s = scanTag(s)
		if tag == "" {
			s = skipElement(s)
			continue
		}
		if s, ok = endOfElement(s); ok && tag == cur {
			return true
		}
	}
}

// opaque returns tag's opaque-tag (the quoted part, quotes included),
// dropping a W/ prefix, or "" if tag is not an entity-tag.
func opaque(tag string) string {
	t, rest := scanTag(ows.Trim(tag))
	if t == "" || ows.Trim(rest) != "" {
		return ""
	}
	return t
}

// scanTag scans an entity-tag at the start of s (RFC 9110 §8.8.3):
//
//	entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE
//	etagc      = %x21 / %x23-7E / obs-text
//
// It returns the opaque-tag, quotes included and W/ dropped, and what
// follows it; or "" and s with the bad prefix consumed when there is no
// entity-tag.
func scanTag(s string) (tag, rest string) {
	start := 0
	if len(s) >= 2 && s[0] == 'W' && s[1] == '/' {
		start = 2
	}
	if len(s) < start+2 || s[start] != '"' {
		return "", s[start:]
	}
	for i := start + 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == 0x21 || 0x23 <= c && c <= 0x7E || c >= 0x80:
		case c == '"':
			return s[start : i+1], s[i+1:]
		default:
			return "", s[i:]
		}
	}
	return "", ""
}

// endOfElement reports whether s, after optional whitespace, ends the list
// element (a comma or the end), and returns s past the element: past the
// next comma when the element had junk.
func endOfElement(s string) (string, bool) {
	s = ows.Trim(s)
	if s == "" || s[0] == ',' {
		return s, true
	}
	return skipElement(s), false
}

// skipElement drops s up to (not including) the next comma.
func skipElement(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == ',' {
			return s[i:]
		}
	}
	return ""
}
