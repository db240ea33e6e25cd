package progress

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/lectern-api/lectern/shared/id"
	"github.com/lectern-api/lectern/shared/jsonenc"
	"github.com/valyala/fastjson"
)

// Resolution is the precision to which a Store keeps the instants of a
// record (FirstRecordedAt, LastRecordedAt): microseconds, as every
// instant the stores keep (PostgreSQL's resolution). They read back in
// UTC; LastDay, a UTC midnight, reads back exactly.
const Resolution = time.Microsecond

// The stored form is one JSON document per organisation and learner,
// beside its version: the streak, then each class as an array of tier,
// slug, class number, score, best score (null when absent), first and
// last recorded (microseconds since the Unix epoch):
//
//	{"run":2,"longest":5,"lastDay":"2026-03-14","classes":[
//	 ["high","algebra",3,70,70,1773482966535897,1773482966535897], ...]}
//
// lastDay is absent when nothing was saved. Arrays rather than objects
// halve the document, and it is written and read without reflection:
// encoding/json took 0.2 ms to write and 0.4 ms to read a record of 100
// classes (decisions-store.md).

const dayLayout = "2006-01-02"

// Encode is the stored form of r's classes and streak, shared by
// sqlitestore and pgstore (the stores keep OrgID, Learner and Version
// beside it): its classes in listing order (Less) even when r's are not,
// with instants truncated to Resolution. It refuses what the rules never
// make: a record with no OrgID or Learner or a negative Version, a
// lesson recorded twice or with a tier or slug empty or not UTF-8, a
// score that is not a finite number, a LastDay that is not a UTC
// midnight.
func Encode(r *Record) ([]byte, error) {
	if r.OrgID == "" || r.Learner == "" || r.Version < 0 {
		return nil, fmt.Errorf("progress: invalid record (org %q, learner %q, version %d)", r.OrgID, r.Learner, r.Version)
	}
	cs := r.Classes
	if !slices.IsSortedFunc(cs, compare) {
		cs = slices.Clone(cs)
		slices.SortStableFunc(cs, compare)
	}
	b := make([]byte, 0, 64+80*len(cs))
	b = append(b, `{"run":`...)
	b = strconv.AppendInt(b, r.Run, 10)
	b = append(b, `,"longest":`...)
	b = strconv.AppendInt(b, r.Longest, 10)
	if !r.LastDay.IsZero() {
		if !r.LastDay.Equal(day(r.LastDay)) {
			return nil, fmt.Errorf("progress: last day %v is not a UTC midnight", r.LastDay)
		}
		b = append(b, `,"lastDay":"`...)
		b = r.LastDay.UTC().AppendFormat(b, dayLayout)
		b = append(b, '"')
	}
	b = append(b, `,"classes":[`...)
	for i, c := range cs {
		l := c.Lesson
		if i > 0 && cs[i-1].Lesson == l {
			return nil, fmt.Errorf("progress: lesson %s recorded twice", l)
		}
		if l.Tier == "" || l.Slug == "" || !utf8.ValidString(l.Tier) || !utf8.ValidString(l.Slug) ||
			!finite(c.Score) || !finite(c.BestScore) {
			return nil, fmt.Errorf("progress: invalid class %s", dumpClass(c))
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = jsonenc.String(b, l.Tier)
		b = append(b, ',')
		b = jsonenc.String(b, l.Slug)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(l.Class), 10)
		b = append(b, ',')
		b = appendScore(b, c.Score)
		b = append(b, ',')
		b = appendScore(b, c.BestScore)
		b = append(b, ',')
		b = strconv.AppendInt(b, c.FirstRecordedAt.UnixMicro(), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, c.LastRecordedAt.UnixMicro(), 10)
		b = append(b, ']')
	}
	return append(b, "]}"...), nil
}

func finite(p *float64) bool {
	return p == nil || !math.IsNaN(*p) && !math.IsInf(*p, 0)
}

// appendScore appends p as the shortest JSON number that reads back as
// the same float64, or null.
func appendScore(b []byte, p *float64) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, *p, 'g', -1, 64)
}

func dumpClass(c Class) string {
	f := func(p *float64) any {
		if p == nil {
			return nil
		}
		return *p
	}
	return fmt.Sprintf("{%q %q %d score %v best %v}", c.Lesson.Tier, c.Lesson.Slug, c.Lesson.Class, f(c.Score), f(c.BestScore))
}

// parsers are reused across Decodes.
var parsers fastjson.ParserPool

// Decode reads what Encode wrote into r's classes and streak. An empty
// document is a record with nothing saved. Instants read back in UTC.
func Decode(doc []byte, r *Record) error {
	r.Classes, r.Run, r.Longest, r.LastDay = []Class{}, 0, 0, time.Time{}
	if len(doc) == 0 {
		return nil
	}
	if decodeCanonical(doc, r) {
		return nil
	}
	return decodeAny(doc, r)
}

// decodeAny is Decode of any JSON document (fastjson): what
// decodeCanonical declines, and the errors.
func decodeAny(doc []byte, r *Record) error {
	r.Classes, r.Run, r.Longest, r.LastDay = []Class{}, 0, 0, time.Time{}
	p := parsers.Get()
	defer parsers.Put(p)
	v, err := p.ParseBytes(doc)
	if err != nil {
		return fmt.Errorf("progress: decode record: %w", err)
	}
	var d0 decoder
	arr := d0.array(d0.get(v, "classes"), "classes", -1)
	// The scores point into one slab rather than a heap object each.
	d := decoder{slugs: map[string]string{}, scores: make([]float64, 0, 2*len(arr)), err: d0.err}
	r.Classes = make([]Class, len(arr))
	for i, a := range arr {
		f := d.array(a, "class", 7)
		if f == nil {
			break
		}
		c := &r.Classes[i]
		c.Lesson.Tier = d.tier(f[0])
		c.Lesson.Slug = d.slug(f[1])
		c.Lesson.Class = int(d.int(f[2], "class number"))
		c.Score = d.score(f[3], "score")
		c.BestScore = d.score(f[4], "best score")
		c.FirstRecordedAt = time.UnixMicro(d.int(f[5], "first recorded")).UTC()
		c.LastRecordedAt = time.UnixMicro(d.int(f[6], "last recorded")).UTC()
	}
	r.Run = d.int(d.get(v, "run"), "run")
	r.Longest = d.int(d.get(v, "longest"), "longest")
	if s := v.Get("lastDay"); s != nil {
		b, err := s.StringBytes()
		if err != nil {
			d.fail("lastDay", err)
		} else if r.LastDay, err = time.Parse(dayLayout, string(b)); err != nil {
			d.fail("lastDay", err)
		}
	}
	if d.err != nil {
		return fmt.Errorf("progress: decode record: %w", d.err)
	}
	return nil
}

// decodeCanonical reads doc when it is exactly as Encode writes it (no
// space, members in Encode's order, strings without escapes or control
// characters, numbers in JSON's grammar) and reports whether it did; on
// false, Decode reads doc with decodeAny, which says what is wrong. It
// reads the document in one pass without building fastjson's tree, and
// integer scores without strconv: a quarter less time than decodeAny
// (BenchmarkDecode100 against BenchmarkDecodeAny100, bench-progfast.md). It sets r's classes and streak, nothing else; what
// it reads is what decodeAny reads (FuzzDecode compares them).
func decodeCanonical(doc []byte, r *Record) bool {
	s := canonScanner{b: doc, ok: true}
	s.want(`{"run":`)
	run := s.int()
	s.want(`,"longest":`)
	longest := s.int()
	var last time.Time
	if s.has(`,"lastDay":`) {
		d := s.str()
		if len(d) != len(dayLayout) {
			return false
		}
		var err error
		if last, err = time.Parse(dayLayout, string(d)); err != nil {
			return false
		}
	}
	s.want(`,"classes":[`)
	if !s.ok {
		return false
	}
	// Every class opens a '[': an upper bound of their number.
	n := bytes.Count(doc[s.i:], []byte{'['})
	cs := make([]Class, 0, n)
	scores := make([]float64, 0, 2*n) // backs the scores read, never grown
	var slugs map[string]string
	for s.ok && !s.has("]}") {
		if len(cs) > 0 {
			s.want(",")
		}
		s.want("[")
		if len(cs) == cap(cs) {
			return false
		}
		cs = cs[:len(cs)+1] // filled in place: no copy of the Class
		c := &cs[len(cs)-1]
		t := s.str()
		c.Lesson.Tier = internTier(t)
		s.want(",")
		sl := s.str()
		switch {
		case len(cs) > 1 && string(sl) == cs[len(cs)-2].Lesson.Slug:
			c.Lesson.Slug = cs[len(cs)-2].Lesson.Slug
		case slugs[string(sl)] != "":
			c.Lesson.Slug = slugs[string(sl)]
		default:
			if slugs == nil {
				slugs = map[string]string{}
			}
			c.Lesson.Slug = string(sl)
			slugs[c.Lesson.Slug] = c.Lesson.Slug
		}
		s.want(",")
		c.Lesson.Class = int(s.int())
		s.want(",")
		c.Score = s.score(&scores)
		s.want(",")
		c.BestScore = s.score(&scores)
		s.want(",")
		c.FirstRecordedAt = time.UnixMicro(s.int()).UTC()
		s.want(",")
		c.LastRecordedAt = time.UnixMicro(s.int()).UTC()
		s.want("]")
	}
	if !s.ok || s.i != len(doc) {
		return false
	}
	r.Classes, r.Run, r.Longest, r.LastDay = cs, run, longest, last
	return true
}

// canonScanner reads a document as Encode writes it; ok turns false, for
// good, at the first byte it does not expect.
type canonScanner struct {
	b  []byte
	i  int
	ok bool
}

// has consumes l if the document goes on with it.
func (s *canonScanner) has(l string) bool {
	if s.ok && len(s.b)-s.i >= len(l) && string(s.b[s.i:s.i+len(l)]) == l {
		s.i += len(l)
		return true
	}
	return false
}

// want consumes l, which must come next.
func (s *canonScanner) want(l string) {
	if !s.has(l) {
		s.ok = false
	}
}

// int reads an integer as strconv.AppendInt writes it (no leading zero,
// no plus sign) that fits an int64.
func (s *canonScanner) int() int64 {
	if !s.ok {
		return 0
	}
	neg := s.has("-")
	start := s.i
	var n uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' && s.i-start < 19 {
		n = n*10 + uint64(s.b[s.i]-'0')
		s.i++
	}
	digits := s.i - start
	if digits == 0 || digits > 1 && s.b[start] == '0' || s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' ||
		n > math.MaxInt64 && !(neg && n == math.MaxInt64+1) {
		s.ok = false // 19 digits at most: no overflow of n above
		return 0
	}
	if neg {
		return -int64(n)
	}
	return int64(n)
}

// str reads a string without escapes or control characters, as bytes of
// the document.
func (s *canonScanner) str() []byte {
	s.want(`"`)
	start := s.i
	for s.ok && s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start : s.i-1]
		case c == '\\' || c < 0x20:
			s.ok = false
		}
		s.i++
	}
	s.ok = false
	return nil
}

// score reads null or a finite number in JSON's grammar into the next
// element of *slab (cap never exceeded: the caller sized it).
func (s *canonScanner) score(slab *[]float64) *float64 {
	if s.has("null") || !s.ok {
		return nil
	}
	start := s.i
	neg := s.has("-")
	var whole uint64 // the integer part, while it has at most 15 digits
	digits := func() int {
		n := 0
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			if n < 15 {
				whole = whole*10 + uint64(s.b[s.i]-'0')
			}
			s.i++
			n++
		}
		return n
	}
	n := digits()
	if n == 0 || n > 1 && s.b[s.i-n] == '0' {
		s.ok = false
	}
	integer := n <= 15 // then exact as a float64 (< 2^53)
	if s.has(".") {
		integer = false
		if digits() == 0 {
			s.ok = false
		}
	}
	if s.has("e") || s.has("E") {
		integer = false
		if !s.has("-") {
			s.has("+")
		}
		if digits() == 0 {
			s.ok = false
		}
	}
	if !s.ok || len(*slab) == cap(*slab) {
		s.ok = false
		return nil
	}
	f := float64(whole)
	if neg {
		f = -f // -0 included
	}
	if !integer {
		var err error
		if f, err = strconv.ParseFloat(string(s.b[start:s.i]), 64); err != nil || math.IsInf(f, 0) {
			s.ok = false
			return nil
		}
	}
	*slab = append(*slab, f)
	return &(*slab)[len(*slab)-1]
}

// internTier is t as the id.Tiers string equal to it, else a copy.
func internTier(t []byte) string {
	for _, x := range id.Tiers {
		if string(t) == x {
			return x
		}
	}
	return string(t)
}

// decoder reads the members of a stored record, keeping the first
// error. It interns tiers (id.Tiers) and slugs, which most classes share.
type decoder struct {
	slugs  map[string]string
	scores []float64 // backs the scores read; never grown past its capacity
	err    error
}

func (d *decoder) fail(name string, err error) {
	if d.err == nil {
		d.err = fmt.Errorf("%s: %w", name, err)
	}
}

func (d *decoder) get(v *fastjson.Value, name string) *fastjson.Value {
	m := v.Get(name)
	if m == nil {
		d.fail(name, errors.New("missing"))
	}
	return m
}

// array is v's elements, n of them unless n < 0.
func (d *decoder) array(v *fastjson.Value, name string, n int) []*fastjson.Value {
	if v == nil {
		return nil
	}
	a, err := v.Array()
	if err != nil {
		d.fail(name, err)
		return nil
	}
	if n >= 0 && len(a) != n {
		d.fail(name, fmt.Errorf("%d members, want %d", len(a), n))
		return nil
	}
	return a
}

func (d *decoder) int(v *fastjson.Value, name string) int64 {
	if v == nil {
		return 0
	}
	n, err := v.Int64()
	if err != nil {
		d.fail(name, err)
	}
	return n
}

func (d *decoder) score(v *fastjson.Value, name string) *float64 {
	if v == nil || v.Type() == fastjson.TypeNull {
		return nil
	}
	f, err := v.Float64()
	if err != nil {
		d.fail(name, err)
		return nil
	}
	if len(d.scores) == cap(d.scores) {
		return clone(&f)
	}
	d.scores = append(d.scores, f)
	return &d.scores[len(d.scores)-1]
}

func (d *decoder) bytes(v *fastjson.Value, name string) []byte {
	b, err := v.StringBytes()
	if err != nil {
		d.fail(name, err)
	}
	return b
}

func (d *decoder) tier(v *fastjson.Value) string {
	b := d.bytes(v, "tier")
	for _, t := range id.Tiers {
		if string(b) == t {
			return t
		}
	}
	return string(b)
}

func (d *decoder) slug(v *fastjson.Value) string {
	b := d.bytes(v, "slug")
	if s, ok := d.slugs[string(b)]; ok {
		return s
	}
	s := string(b)
	d.slugs[s] = s
	return s
}

// compare orders classes by Less.
func compare(a, b Class) int {
	switch {
	case Less(a.Lesson, b.Lesson):
		return -1
	case Less(b.Lesson, a.Lesson):
		return 1
	}
	return 0
}
