package progress_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/progress"
	"github.com/lectern-api/lectern/shared/id"
)

// recordOf is a record of n classes over every tier, some without a
// score, written over n minutes from t0.
func recordOf(n int) progress.Record {
	r := progress.Record{OrgID: "acme", Learner: "ada"}
	for i := range n {
		var sc *float64
		if i%5 != 0 {
			sc = score(float64(i%101) + 0.5)
		}
		r.Apply(lesson(id.Tiers[i%len(id.Tiers)], fmt.Sprintf("subject-%02d", i%13), 1+i/13), sc, t0.Add(time.Duration(i)*time.Minute))
	}
	return r
}

func TestEncodeDecode(t *testing.T) {
	r := recordOf(40)
	r.Apply(lesson("high", "algebra", 1), nil, t0.AddDate(0, 0, 1))
	b, err := progress.Encode(&r)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	got := progress.Record{OrgID: r.OrgID, Learner: r.Learner}
	if err := progress.Decode(b, &got); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	want := r.Clone()
	for i := range want.Classes {
		c := &want.Classes[i]
		c.FirstRecordedAt = c.FirstRecordedAt.Truncate(time.Microsecond)
		c.LastRecordedAt = c.LastRecordedAt.Truncate(time.Microsecond)
	}
	if !equalRecords(got, want) {
		t.Errorf("Decode(Encode(r)):\n got %+v\nwant %+v", got, want)
	}
	if got.Run != 2 || !got.LastDay.Equal(time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("streak read back as run %d, last day %v", got.Run, got.LastDay)
	}
	// An empty document is a record with nothing saved.
	empty := progress.Record{Run: 4, LastDay: t0}
	if err := progress.Decode(nil, &empty); err != nil || len(empty.Classes) != 0 || empty.Run != 0 || !empty.LastDay.IsZero() {
		t.Errorf("Decode(nil): got %+v, %v; want nothing saved", empty, err)
	}
	if err := progress.Decode([]byte(`{"classes":[`), &empty); err == nil {
		t.Error("Decode of a truncated document: no error")
	}
}

func TestEncodeRefuses(t *testing.T) {
	valid := recordOf(3)
	tests := []struct {
		name   string
		change func(r *progress.Record)
		want   string
	}{
		{"no org", func(r *progress.Record) { r.OrgID = "" }, "invalid record"},
		{"no learner", func(r *progress.Record) { r.Learner = "" }, "invalid record"},
		{"negative version", func(r *progress.Record) { r.Version = -1 }, "invalid record"},
		{"a lesson twice", func(r *progress.Record) { r.Classes = append(r.Classes, r.Classes[1]) }, "recorded twice"},
		{"last day not midnight", func(r *progress.Record) { r.LastDay = r.LastDay.Add(time.Second) }, "not a UTC midnight"},
		{"NaN score", func(r *progress.Record) { r.Classes[0].Score = score(math.NaN()) }, "invalid class"},
		{"infinite best", func(r *progress.Record) { r.Classes[1].BestScore = score(math.Inf(1)) }, "invalid class"},
		{"no tier", func(r *progress.Record) { r.Classes[0].Lesson.Tier = "" }, "invalid class"},
		{"no slug", func(r *progress.Record) { r.Classes[2].Lesson.Slug = "" }, "invalid class"},
		{"slug not UTF-8", func(r *progress.Record) { r.Classes[2].Lesson.Slug = "a\x8d" }, "invalid class"},
		{"last day a local midnight", func(r *progress.Record) {
			r.LastDay = time.Date(2026, 3, 2, 0, 0, 0, 0, time.FixedZone("UTC+1", 3600))
		}, "not a UTC midnight"},
	}
	if _, err := progress.Encode(&valid); err != nil {
		t.Fatalf("Encode of a valid record: %v", err)
	}
	for _, tt := range tests {
		r := valid.Clone()
		tt.change(&r)
		if _, err := progress.Encode(&r); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got error %v, want one saying %q", tt.name, err, tt.want)
		}
	}
}

// TestStoredScoresExact: every score reads back as the same float64,
// and a string that needs escaping reads back as written.
func TestStoredScoresExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	r := progress.Record{OrgID: "acme", Learner: "ada"}
	var want []float64
	for i := range 2000 {
		var v float64
		switch i % 4 {
		case 0:
			v = rng.Float64() * 100
		case 1:
			v = float64(rng.IntN(10001)) / 100
		case 2:
			v = 100 / float64(1+rng.IntN(999))
		case 3:
			v = []float64{0, 100, 0.1, 1e-9, 5e-324, 99.99999999999999, 33.333333333333336}[i%7]
		}
		want = append(want, v)
		r.Classes = append(r.Classes, progress.Class{Lesson: lesson("high", "a\"b\u2028", i+1), Score: score(v), BestScore: score(100 - v)})
	}
	doc, err := progress.Encode(&r)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	var got progress.Record
	if err := progress.Decode(doc, &got); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	for i, v := range want {
		c := got.Classes[i]
		if c.Lesson.Slug != "a\"b\u2028" || !eq(c.Score, v) || !eq(c.BestScore, 100-v) {
			t.Fatalf("class %d: got %q, %v, %v; want %v, %v", i, c.Lesson.Slug, deref(c.Score), deref(c.BestScore), v, 100-v)
		}
	}
}

// TestDecodeRefuses: a document that is not what Encode writes is an
// error, not a record read wrong.
func TestDecodeRefuses(t *testing.T) {
	class := `["high","algebra",1,null,5,1,2]`
	valid := `{"run":1,"longest":1,"lastDay":"2026-03-02","classes":[` + class + `]}`
	var r progress.Record
	if err := progress.Decode([]byte(valid), &r); err != nil || len(r.Classes) != 1 || !eq(r.Classes[0].BestScore, 5) {
		t.Fatalf("Decode of a valid document: %+v, %v", r, err)
	}
	for _, doc := range []string{
		`{"classes":[`,
		`[]`,
		`{"run":1,"longest":1}`,
		`{"run":1,"longest":1,"classes":{}}`,
		`{"run":"1","longest":1,"classes":[]}`,
		`{"run":1,"classes":[]}`,
		`{"run":1,"longest":1,"lastDay":"2026-3-2","classes":[]}`,
		`{"run":1,"longest":1,"lastDay":20260302,"classes":[]}`,
		strings.Replace(valid, `,1,null`, `,"1",null`, 1),
		strings.Replace(valid, `,1,null`, `,null`, 1),
		strings.Replace(valid, `,2]`, `,2,3]`, 1),
		strings.Replace(valid, `"high"`, `1`, 1),
		strings.Replace(valid, `"algebra"`, `null`, 1),
		strings.Replace(valid, `,5,`, `,"5",`, 1),
		strings.Replace(valid, `,1,2]`, `,1.5,2]`, 1),
		strings.Replace(valid, class, `{}`, 1),
	} {
		if err := progress.Decode([]byte(doc), &r); err == nil {
			t.Errorf("Decode(%s): no error", doc)
		}
	}
}

func BenchmarkEncode100(b *testing.B) {
	r := recordOf(100)
	for b.Loop() {
		if _, err := progress.Encode(&r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode100(b *testing.B) { benchDecode(b, progress.Decode) }

// BenchmarkDecodeAny100 is Decode's general reader alone (fastjson), what
// Decode was before its fast reader.
func BenchmarkDecodeAny100(b *testing.B) { benchDecode(b, progress.DecodeAny) }

func benchDecode(b *testing.B, decode func([]byte, *progress.Record) error) {
	r := recordOf(100)
	doc, err := progress.Encode(&r)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		var got progress.Record
		if err := decode(doc, &got); err != nil {
			b.Fatal(err)
		}
	}
}

// sameReaders: a document Decode's fast reader (DecodeCanonical) takes
// reads the same with its general one (DecodeAny), member for member.
func sameReaders(t *testing.T, doc []byte) {
	t.Helper()
	var fast, general progress.Record
	if !progress.DecodeCanonical(doc, &fast) {
		return
	}
	if err := progress.DecodeAny(doc, &general); err != nil {
		t.Fatalf("DecodeCanonical took %q, DecodeAny refuses it: %v", doc, err)
	}
	b1, err1 := progress.Encode(&progress.Record{OrgID: "o", Learner: "l", Classes: fast.Classes, Run: fast.Run, Longest: fast.Longest, LastDay: fast.LastDay})
	b2, err2 := progress.Encode(&progress.Record{OrgID: "o", Learner: "l", Classes: general.Classes, Run: general.Run, Longest: general.Longest, LastDay: general.LastDay})
	if !reflect.DeepEqual(fast, general) || string(b1) != string(b2) || (err1 == nil) != (err2 == nil) {
		t.Fatalf("%q read differently:\nfast    %+v\ngeneral %+v", doc, fast, general)
	}
}

// TestDecodeCanonical: what Encode writes takes the fast reader and
// reads as the general one reads it; a document it declines (spaces,
// escapes, members out of order, numbers Encode never writes) still
// reads, through the general one.
func TestDecodeCanonical(t *testing.T) {
	for _, n := range []int{0, 1, 7, 100} {
		r := recordOf(n)
		r.Apply(lesson("high", "algebra", 1), score(1e-7), t0.AddDate(0, 0, 1))
		r.Apply(lesson("high", "algebra", 2), score(100), t0.AddDate(0, 0, 3))
		r.Apply(lesson("middle", "ünïcode", 3), score(math.Copysign(0, -1)), t0.AddDate(-60, 0, 0))
		doc, err := progress.Encode(&r)
		if err != nil {
			t.Fatal(err)
		}
		var got progress.Record
		if !progress.DecodeCanonical(doc, &got) {
			t.Fatalf("DecodeCanonical declines Encode's %s", doc)
		}
		sameReaders(t, doc)
	}
	class := `["high","algebra",1,null,5.25,1,2]`
	for _, doc := range []string{
		`{"run":1,"longest":1,"lastDay":"2026-03-02","classes":[` + class + `] }`,
		`{"longest":1,"run":1,"classes":[` + class + `]}`,
		`{"run":1,"longest":1,"classes":[["hi\u0067h","algebra",1,null,5,1,2]]}`,
		`{"run":1,"longest":1,"classes":[["high","algebra",1,null,5E0,1,2]]}`,
		`{"run":1,"longest":01,"classes":[]}`,
		`{"run":1,"longest":1,"classes":[["high","algebra",1,null,5,1,2],]}`,
	} {
		var fast progress.Record
		if progress.DecodeCanonical([]byte(doc), &fast) && !strings.Contains(doc, "5E0") {
			t.Errorf("DecodeCanonical takes %s", doc)
		}
		sameReaders(t, []byte(doc))
	}
	var r progress.Record
	if err := progress.Decode([]byte(`{"run":1,"longest":1,"lastDay":"2026-03-02","classes":[`+class+`] }`), &r); err != nil ||
		len(r.Classes) != 1 || !eq(r.Classes[0].BestScore, 5.25) || r.Run != 1 {
		t.Errorf("Decode of a declined document: %+v, %v", r, err)
	}
}

// FuzzDecode: no document makes Decode panic, whatever its fast reader
// takes its general one reads the same, and whatever it reads, Encode
// writes a document that reads back to the same record.
func FuzzDecode(f *testing.F) {
	for _, n := range []int{0, 1, 7} {
		r := recordOf(n)
		doc, err := progress.Encode(&r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(doc)
	}
	f.Add([]byte(`{"run":1,"longest":1,"classes":[["x","y",-1,1e308,-0,-9223372036854775808,9223372036854775807]]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		sameReaders(t, doc)
		r := progress.Record{OrgID: "acme", Learner: "ada"}
		if progress.Decode(doc, &r) != nil {
			return
		}
		b1, err := progress.Encode(&r)
		if err != nil {
			return // e.g. a lesson twice: the stores never wrote it
		}
		r2 := progress.Record{OrgID: "acme", Learner: "ada"}
		if err := progress.Decode(b1, &r2); err != nil {
			t.Fatalf("Decode(Encode(r)) of %s: %v", b1, err)
		}
		b2, err := progress.Encode(&r2)
		if err != nil || string(b2) != string(b1) {
			t.Fatalf("not stable:\n%s\n%s (%v)", b1, b2, err)
		}
	})
}
