package export

import (
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/klauspost/compress/flate"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/forensic"
	"github.com/lectern-api/lectern/origin/lessondoc"
)

var (
	fullOnce sync.Once
	full     *Builder
	full30   *corpus.Subject
)

// thirty is a builder over the full corpus and a subject of 30 classes
// (the spec's cost example), made once per test binary.
func thirty(b testing.TB) (*Builder, *corpus.Subject) {
	b.Helper()
	fullOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lectern-export-full-")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(dir)
		if _, err := gen.Write(dir, gen.Options{Seed: 1}); err != nil {
			b.Fatal(err)
		}
		c, err := corpus.Load(dir)
		if err != nil {
			b.Fatal(err)
		}
		set, err := lessondoc.Build(c)
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range c.Subjects {
			if len(s.Lessons) == 30 {
				full30 = s
				break
			}
		}
		full = New(c, set, Config{CanaryKey: testCanaryKey})
	})
	if full30 == nil {
		b.Fatal("the full corpus has no subject of 30 classes")
	}
	return full, full30
}

// heapSampler is a sink that records the live heap at every eighth of
// its writes, as the archive reaches it file by file: a collection, then
// HeapAlloc, so garbage awaiting a cycle is not counted.
type heapSampler struct {
	peak   uint64
	n      int64
	writes int
	ms     runtime.MemStats
}

func (h *heapSampler) Write(p []byte) (int, error) {
	if h.writes%8 == 0 {
		runtime.GC()
		runtime.ReadMemStats(&h.ms)
		h.peak = max(h.peak, h.ms.HeapAlloc)
	}
	h.writes++
	h.n += int64(len(p))
	return len(p), nil
}

// peaks keeps each benchmark's measure: the collections make it slow
// over the full corpus's heap, so it is taken once per benchmark.
var peaks sync.Map // benchmark name -> [2]uint64{peak, n}

// peakAbove runs write into a heapSampler and reports the highest live
// heap above the start's, and the bytes written.
func peakAbove(b *testing.B, write func(w io.Writer) error) (peak uint64, n int64) {
	if v, ok := peaks.Load(b.Name()); ok {
		p := v.([2]uint64)
		return p[0], int64(p[1])
	}
	defer func() { peaks.Store(b.Name(), [2]uint64{peak, uint64(n)}) }()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h := &heapSampler{}
	if err := write(h); err != nil {
		b.Fatal(err)
	}
	if h.peak < ms.HeapAlloc {
		return 0, h.n
	}
	return h.peak - ms.HeapAlloc, h.n
}

// BenchmarkZip30 writes a 30-class subject's zip, on one goroutine
// (sequential) and with a helper on an idle core as WriteZip takes one
// (helper: the same when GOMAXPROCS is 1); peak-heap-B is the heap one
// download holds above idle.
func BenchmarkZip30(b *testing.B) {
	bld, sub := thirty(b)
	req := request("acme", Target{Subject: sub})
	for _, mode := range []struct {
		name    string
		helpers int
	}{{"sequential", 0}, {"helper", runtime.GOMAXPROCS(0) - 1}} {
		b.Run(mode.name, func(b *testing.B) {
			saved := bld.helpers
			defer func() { bld.helpers = saved }()
			bld.helpers = make(chan struct{}, mode.helpers)
			peak, n := peakAbove(b, func(w io.Writer) error { _, err := bld.WriteZip(w, req); return err })
			b.ReportAllocs()
			b.SetBytes(n)
			b.ResetTimer()
			for range b.N {
				if _, err := bld.WriteZip(io.Discard, req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(peak), "peak-heap-B")
		})
	}
}

// BenchmarkDeflateLevels deflates a 30-class subject's files, each as
// its own zip entry, at klauspost's levels (-2 is Huffman only): the
// measure behind zipLevel. zbytes is the deflated size.
func BenchmarkDeflateLevels(b *testing.B) {
	bld, sub := thirty(b)
	fs := files(b, bld, request("acme", Target{Subject: sub}))
	total := 0
	for _, f := range fs {
		total += len(f.data)
	}
	for _, level := range []int{1, 2, 3, 4, 5, 6, flate.HuffmanOnly} {
		b.Run(strconv.Itoa(level), func(b *testing.B) {
			fw, err := flate.NewWriter(io.Discard, level)
			if err != nil {
				b.Fatal(err)
			}
			cw := &countWriter{w: io.Discard}
			b.SetBytes(int64(total))
			for range b.N {
				cw.n = 0
				for _, f := range fs {
					fw.Reset(cw)
					fw.Write(f.data)
					fw.Close()
				}
			}
			b.ReportMetric(float64(cw.n), "zbytes")
		})
	}
}

// TestFullCorpusCanaryBits: every class of the full corpus carries at
// least 64 independent canary bits in the texts its class file marks
// (the small corpus's class files are checked whole by TestCanaryBits).
func TestFullCorpusCanaryBits(t *testing.T) {
	if testing.Short() {
		t.Skip("generates the full corpus")
	}
	bld, _ := thirty(t)
	least := 1 << 30
	for _, l := range bld.corpus.Lessons {
		var texts []string
		for _, c := range l.Cards {
			texts = append(texts, c.Body, c.Narration(), c.VideoVoiceover)
		}
		bits, _ := forensic.NewCanary(testCanaryKey, "acme", l.ID).MatchTexts(texts)
		if bits < 64 {
			t.Errorf("%s: %d canary bits, want at least 64", l.ID, bits)
		}
		least = min(least, bits)
	}
	t.Logf("the fewest canary bits in a class of the full corpus: %d", least)
}

// BenchmarkInline30 writes a 30-class subject's inline data.
func BenchmarkInline30(b *testing.B) {
	bld, sub := thirty(b)
	req := request("acme", Target{Subject: sub})
	peak, n := peakAbove(b, func(w io.Writer) error { _, err := bld.WriteInline(w, req, 0); return err })
	b.ReportAllocs()
	b.SetBytes(n)
	b.ResetTimer()
	for range b.N {
		if _, err := bld.WriteInline(io.Discard, req, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(peak), "peak-heap-B")
}
