package pipeline

import (
	"unicode/utf8"
	"unsafe"

	"github.com/lectern-api/lectern/shared/jsonenc"
)

// A single-pass reader of the host's start and resume messages. It checks
// the message's JSON syntax in full (nesting at most maxDepth deep, no
// trailing bytes) and records where the members the codec reads lie;
// their values are then read from those spans, strings unescaped
// straight into the request's arena. Under TinyGo, where every allocation
// and every call costs several times what it does natively, this replaces
// a depth pre-scan plus a general parser that built a value for every
// element of the message.

// kind is a JSON value's type.
type kind uint8

const (
	kString kind = iota + 1
	kNumber
	kTrue
	kFalse
	kNull
	kArray
	kObject
)

// raw is a value's kind and its bytes, b[from:to].
type raw struct {
	k        kind
	from, to int
}

// present reports whether the member was in the message.
func (r raw) present() bool { return r.k != 0 }

// scanner reads JSON from b at i.
type scanner struct {
	b   []byte
	i   int
	esc bool // a string so far held an escape
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// members reads b as one object and records, for each of names, the
// value of its first occurrence in vals (like a lookup by name in a
// parsed object). Other members are checked and skipped. escaped reports
// whether any string of b holds an escape: when none does, every string
// is its bytes between the quotes.
func members(b []byte, names []string, vals []raw) (escaped, ok bool) {
	s := scanner{b: b}
	ok = s.members(names, vals)
	return s.esc, ok
}

func (s *scanner) members(names []string, vals []raw) bool {
	b := s.b
	s.ws()
	if s.i >= len(b) || b[s.i] != '{' {
		return false
	}
	s.i++
	s.ws()
	if s.i < len(b) && b[s.i] == '}' {
		s.i++
		return s.end()
	}
	for {
		s.ws()
		kfrom := s.i
		if !s.str() {
			return false
		}
		key := b[kfrom+1 : s.i-1]
		s.ws()
		if s.i >= len(b) || b[s.i] != ':' {
			return false
		}
		s.i++
		s.ws()
		v, ok := s.value(1)
		if !ok {
			return false
		}
		for j, name := range names {
			if !vals[j].present() && sameKey(key, name) {
				vals[j] = v
				break
			}
		}
		s.ws()
		if s.i >= len(b) {
			return false
		}
		switch b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return s.end()
		default:
			return false
		}
	}
}

// sameKey compares a member name as written (escapes unresolved: hosts
// write the names of docs/edge.md plainly) with name.
func sameKey(key []byte, name string) bool {
	if len(key) != len(name) {
		return false
	}
	for i := range key {
		if key[i] != name[i] {
			return false
		}
	}
	return true
}

// end reports whether only whitespace follows.
func (s *scanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

// value checks the value at i, depth levels deep, and moves past it.
func (s *scanner) value(depth int) (raw, bool) {
	if s.i >= len(s.b) {
		return raw{}, false
	}
	from := s.i
	var k kind
	var ok bool
	switch c := s.b[s.i]; {
	case c == '"':
		k, ok = kString, s.str()
	case c == '-' || c >= '0' && c <= '9':
		k, ok = kNumber, s.number()
	case c == 't':
		k, ok = kTrue, s.lit("true")
	case c == 'f':
		k, ok = kFalse, s.lit("false")
	case c == 'n':
		k, ok = kNull, s.lit("null")
	case c == '[':
		k, ok = kArray, s.container(depth, ']')
	case c == '{':
		k, ok = kObject, s.container(depth, '}')
	}
	return raw{k, from, s.i}, ok
}

// container checks an array (close ']') or an object (close '}').
func (s *scanner) container(depth int, close byte) bool {
	if depth >= maxDepth {
		return false
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == close {
		s.i++
		return true
	}
	for {
		s.ws()
		if close == '}' {
			if !s.str() {
				return false
			}
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				return false
			}
			s.i++
			s.ws()
		}
		if _, ok := s.value(depth + 1); !ok {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case close:
			s.i++
			return true
		default:
			return false
		}
	}
}

// str checks a string: no raw control characters, valid escapes.
func (s *scanner) str() bool {
	b, i := s.b, s.i
	if i >= len(b) || b[i] != '"' {
		return false
	}
	for i++; i < len(b); i++ {
		if b[i] < utf8.RuneSelf { // past a multi-byte character, a byte at a time
			i += plain(b[i:])
			if i == len(b) {
				break
			}
		}
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			s.esc = true
			i++
			if i >= len(b) {
				return false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return false
				}
				for _, h := range b[i+1 : i+5] {
					if hexVal(h) < 0 {
						return false
					}
				}
				i += 4
			default:
				return false
			}
		}
	}
	return false
}

// skipStr moves past the string at i, which str has checked.
func (s *scanner) skipStr() {
	b, i := s.b, s.i+1
	for {
		if b[i] < utf8.RuneSelf {
			i += plain(b[i:])
		}
		switch b[i] {
		case '"':
			s.i = i + 1
			return
		case '\\':
			i += 2 // the escaped byte; a \u escape's hex digits are plain
		default:
			i++ // a byte of a multi-byte character
		}
	}
}

func (s *scanner) number() bool {
	b := s.b
	if s.i < len(b) && b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(b) && b[s.i] == '0':
		s.i++
	case s.i < len(b) && b[s.i] >= '1' && b[s.i] <= '9':
		s.digits()
	default:
		return false
	}
	if s.i < len(b) && b[s.i] == '.' {
		s.i++
		if !s.digits() {
			return false
		}
	}
	if s.i < len(b) && (b[s.i] == 'e' || b[s.i] == 'E') {
		s.i++
		if s.i < len(b) && (b[s.i] == '+' || b[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

// digits moves past one or more digits.
func (s *scanner) digits() bool {
	from := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > from
}

func (s *scanner) lit(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

func hexVal(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10
	}
	return -1
}

// The readers of checked values. Each reports false when the value has
// another type.

// integer reads a number that is an integer (no fraction, no exponent)
// fitting an int64; absent is 0.
func integer(b []byte, v raw) (int64, bool) {
	if !v.present() {
		return 0, true
	}
	if v.k != kNumber {
		return 0, false
	}
	d := b[v.from:v.to]
	neg := d[0] == '-'
	if neg {
		d = d[1:]
	}
	var n uint64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (1<<63)/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if neg {
		if n > 1<<63 {
			return 0, false
		}
		return -int64(n), true
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}

// str is the string v, unescaped in the arena; absent is empty.
func (a *arena) str(b []byte, v raw) (string, bool) {
	if !v.present() {
		return "", true
	}
	if v.k != kString {
		return "", false
	}
	from, to := a.unescape(b, v)
	if from == to {
		return "", true
	}
	return unsafe.String(&a.b[from], to-from), true
}

// unescape resolves the escapes of string v in place in the arena and
// returns where its contents lie there.
func (a *arena) unescape(b []byte, v raw) (from, to int) {
	from, to = v.from+1, v.to-1
	if a.escaped {
		to = from + unescape(a.b[from:to], b[from:to])
	}
	return from, to
}

// plain is jsonenc.Plain of b's bytes.
func plain(b []byte) int { return jsonenc.Plain(unsafe.String(unsafe.SliceData(b), len(b))) }

// unescape writes s, a checked string's contents, into dst with its
// escapes resolved and returns the length written, which is at most
// len(s): every escape is longer than what it stands for, so dst may be
// s's own place in a copy of the message. A \u escape that is half a
// surrogate pair becomes U+FFFD.
func unescape(dst, s []byte) int {
	n := 0
	for len(s) > 0 {
		i := plain(s)
		for i < len(s) && s[i] != '\\' {
			i++
		}
		n += copy(dst[n:], s[:i])
		if i == len(s) {
			return n
		}
		s = s[i+1:]
		switch c := s[0]; c {
		case 'b':
			dst[n] = '\b'
		case 'f':
			dst[n] = '\f'
		case 'n':
			dst[n] = '\n'
		case 'r':
			dst[n] = '\r'
		case 't':
			dst[n] = '\t'
		case 'u':
			r := hex4(s[1:5])
			s = s[4:]
			if utf16Surrogate(r) {
				r2 := rune(-1)
				if len(s) >= 7 && s[1] == '\\' && s[2] == 'u' {
					r2 = hex4(s[3:7])
				}
				if d := decodeSurrogates(r, r2); d != utf8.RuneError {
					r, s = d, s[6:]
				} else {
					r = utf8.RuneError
				}
			}
			n += utf8.EncodeRune(dst[n:], r) - 1
		default: // '"', '\\', '/'
			dst[n] = c
		}
		n++
		s = s[1:]
	}
	return n
}

func hex4(h []byte) rune {
	return hexVal(h[0])<<12 | hexVal(h[1])<<8 | hexVal(h[2])<<4 | hexVal(h[3])
}

func utf16Surrogate(r rune) bool { return r >= 0xd800 && r < 0xe000 }

// decodeSurrogates joins a high and a low surrogate; anything else is
// U+FFFD.
func decodeSurrogates(hi, lo rune) rune {
	if hi >= 0xd800 && hi < 0xdc00 && lo >= 0xdc00 && lo < 0xe000 {
		return (hi-0xd800)<<10 | (lo - 0xdc00) + 0x10000
	}
	return utf8.RuneError
}

// headers appends to dst[:0] the [[name, value], ...] pairs of v, their
// strings from the arena; absent is none. A name may not be empty.
func (a *arena) headers(dst []Header, b []byte, v raw) ([]Header, bool) {
	if !v.present() {
		return dst[:0], true
	}
	if v.k != kArray {
		return nil, false
	}
	s := scanner{b: b[:v.to], i: v.from + 1}
	out := dst[:0]
	if out == nil {
		out = make([]Header, 0, 16) // the common case in one allocation
	}
	s.ws()
	if s.b[s.i] == ']' {
		return out, true
	}
	for {
		s.ws()
		if s.b[s.i] != '[' {
			return nil, false
		}
		s.i++
		var pair [2]string
		for j := range pair {
			s.ws()
			if s.b[s.i] != '"' { // checked already: strings only
				return nil, false
			}
			from := s.i
			s.skipStr()
			pair[j], _ = a.str(b, raw{kString, from, s.i})
			s.ws()
			if want := [2]byte{',', ']'}[j]; s.b[s.i] != want {
				return nil, false
			}
			s.i++
		}
		if pair[0] == "" {
			return nil, false
		}
		out = append(out, Header{pair[0], pair[1]})
		s.ws()
		if s.b[s.i] == ']' {
			return out, true
		}
		s.i++ // ','
	}
}

// boolean reads true or false; absent is false.
func boolean(v raw) (bool, bool) {
	switch v.k {
	case 0, kFalse:
		return false, true
	case kTrue:
		return true, true
	}
	return false, false
}
