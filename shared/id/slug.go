package id

// MaxSlugLen bounds a subject slug, in bytes.
const MaxSlugLen = 64

// MaxCardIDLen bounds a card id, in bytes.
const MaxCardIDLen = 32

// ValidSlug reports whether s is a subject slug: ^[a-z0-9]+(-[a-z0-9]+)*$,
// 1 to MaxSlugLen bytes. Slugs are matched exactly (spec: Conventions), so
// there is no case folding here.
func ValidSlug(s string) bool {
	if len(s) == 0 || len(s) > MaxSlugLen {
		return false
	}
	prevHyphen := true // a leading hyphen is as bad as a doubled one
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isLowerAlnum(c):
			prevHyphen = false
		case c == '-' && !prevHyphen:
			prevHyphen = true
		default:
			return false
		}
	}
	return !prevHyphen
}

// ValidCardID reports whether s is a card id: ^[a-z0-9][a-z0-9-]{0,31}$.
// The corpus uses c1..cN; the wider syntax leaves room for other corpora.
func ValidCardID(s string) bool {
	if len(s) == 0 || len(s) > MaxCardIDLen || !isLowerAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isLowerAlnum(c) && c != '-' {
			return false
		}
	}
	return true
}

func isLowerAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// MaxReceived bounds how much of a client's text an error echoes in its
// received key: enough to recognise the value, never a mirror for a
// megabyte of input.
const MaxReceived = 200

// clip returns s cut to at most MaxReceived bytes, on a UTF-8 boundary.
func clip(s string) string {
	if len(s) <= MaxReceived {
		return s
	}
	n := MaxReceived
	for n > 0 && s[n]&0xC0 == 0x80 { // do not split a rune
		n--
	}
	return s[:n]
}
