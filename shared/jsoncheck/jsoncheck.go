// Package jsoncheck holds linear-time checks on raw JSON that run before a
// recursive parser sees it, so that code shared with the TinyGo edge, whose
// stack is small and fixed, never recurses deeper than it chose to.
package jsoncheck

// Shallow reports whether the brackets of b, outside strings, nest at most
// maxDepth deep. It does not validate b; a parser does that afterwards.
func Shallow(b []byte, maxDepth int) bool {
	depth := 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if depth > maxDepth {
				return false
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return true
}
