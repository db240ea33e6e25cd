package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/shared/scope"
)

// mintBatch is the number of media ids of one mint of (i).
const mintBatch = 100

// exportClasses is the size of the subject (j) and (k) export: the
// subject with the fewest classes among those with at least this many,
// else the largest.
const exportClasses = 30

// exportSubject picks the subject of (j) and (k) from c.
func exportSubject(c *corpus.Corpus) *corpus.Subject {
	var pick *corpus.Subject
	for _, s := range c.Subjects {
		n := len(s.Lessons)
		switch {
		case pick == nil:
			pick = s
		case n >= exportClasses && (len(pick.Lessons) < exportClasses || n < len(pick.Lessons)):
			pick = s
		case len(pick.Lessons) < exportClasses && n > len(pick.Lessons):
			pick = s
		}
	}
	return pick
}

// scoped is the header of client c's requests with a token of toks, and
// the extra name, value pairs.
func scoped(toks []string, extra ...string) func(int) http.Header {
	return func(c int) http.Header {
		h := http.Header{"User-Agent": {"lectern-bench"}, "Authorization": {"Bearer " + toks[c%len(toks)]}}
		for i := 0; i+1 < len(extra); i += 2 {
			h.Set(extra[i], extra[i+1])
		}
		return h
	}
}

// get makes one request with header and returns the answer's status,
// header and body.
func get(ctx context.Context, hc *http.Client, method, u string, header http.Header, body io.Reader) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header = header
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

// mint is (i): one mint of mintBatch media ids (100 ledger rows) per
// request, in the rounds, and after them its latency with one client.
func (tb *throughputBench) mint() (*scenario, error) {
	toks, err := tb.st.tokens(tb.ctx, tb.o.clients, scope.MediaDownload)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, l := range tb.st.Content.Lessons {
		for _, m := range l.Media {
			if len(ids) < mintBatch {
				ids = append(ids, m.ID)
			}
		}
	}
	if len(ids) < mintBatch {
		return nil, fmt.Errorf("(i) the corpus holds %d media, want %d", len(ids), mintBatch)
	}
	body, err := json.Marshal(map[string]any{"mediaIds": ids})
	if err != nil {
		return nil, err
	}
	header := scoped(toks, "Content-Type", "application/json")
	u := tb.st.OriginURL + "/v1/media/urls"
	// One mint first: every id answered, in order.
	status, _, b, err := get(tb.ctx, &http.Client{Transport: newTransport(1)}, "POST", u, header(0), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	var minted struct {
		Items []struct {
			MediaID string `json:"mediaId"`
		} `json:"items"`
	}
	if status != 200 || json.Unmarshal(b, &minted) != nil || len(minted.Items) != mintBatch || minted.Items[0].MediaID != ids[0] {
		return nil, fmt.Errorf("(i) POST %s: status %d, want %d items: %.300s", u, status, mintBatch, b)
	}
	s := &scenario{target: &target{id: "i", name: fmt.Sprintf("mint %d media URLs (POST /v1/media/urls), %d ledger rows each", mintBatch, mintBatch),
		url: u, method: "POST", body: string(body), header: header, want: 200}}
	var one result
	s.after = func() (err error) {
		tb.progress("(i) mint latency with 1 client")
		alone := &target{url: u, method: "POST", body: string(body), header: header, want: 200}
		one, err = alone.measure(tb.ctx, 1, tb.o.time, true)
		return err
	}
	s.rows = func(main row) []row {
		p50 := percentile(one.lat, 50)
		return []row{main, {id: "i", what: "  mint latency, 1 client (client side)",
			result: "p50 " + ms(p50), goal: "p50 < 2 ms", verdict: verdict(p50 < 2*time.Millisecond),
			detail: fmt.Sprintf("p99 %s over %d requests, %.0f req/s", ms(percentile(one.lat, 99)), len(one.lat), one.rate())}}
	}
	return s, nil
}

// inlineExport is (j): the inline export of exportSubject's subject,
// first (200, the bundle built) or, when repeated, revalidated
// (If-None-Match, 304).
func (tb *throughputBench) inlineExport(repeated bool) (*scenario, error) {
	toks, err := tb.st.tokens(tb.ctx, tb.o.clients, scope.ContentExport)
	if err != nil {
		return nil, err
	}
	sub := exportSubject(tb.st.Content.Corpus)
	u := tb.st.OriginURL + "/v1/exports/subjects/" + url.PathEscape(sub.Slug) + "?format=inline&tier=" + url.QueryEscape(sub.Tier)
	status, h, b, err := get(tb.ctx, &http.Client{Transport: newTransport(1)}, "GET", u, scoped(toks)(0), nil)
	if err != nil {
		return nil, err
	}
	if status != 200 || h.Get("ETag") == "" {
		return nil, fmt.Errorf("(j) GET %s: status %d, ETag %q: %.300s", u, status, h.Get("ETag"), b)
	}
	what := fmt.Sprintf("inline export of %s (%d classes, %d KB)", sub.Ref(), len(sub.Lessons), (len(b)+1023)/1024)
	if repeated {
		return &scenario{target: &target{id: "j", name: what + ", repeated: If-None-Match 304", url: u,
			header: scoped(toks, "If-None-Match", h.Get("ETag")), want: 304}}, nil
	}
	return &scenario{target: &target{id: "j", name: what + ", 200", url: u, header: scoped(toks), want: 200}}, nil
}

// zipExport is (k): a zip_url export and the download of its zip, timed
// against reading the same lessons (route 6) and transcripts (route 7)
// one by one, serially, median of runs; then the peak heap of 16
// concurrent zip downloads above idle.
func zipExport(ctx context.Context, o options, st *stack, progress func(string, ...any)) ([]row, error) {
	toks, err := st.tokens(ctx, 1, scope.ContentRead, scope.ContentExport)
	if err != nil {
		return nil, err
	}
	header := scoped(toks)(0)
	hc := &http.Client{Transport: newTransport(downloads)}
	sub := exportSubject(st.Content.Corpus)
	exportURL := st.OriginURL + "/v1/exports/subjects/" + url.PathEscape(sub.Slug) + "?format=zip_url&tier=" + url.QueryEscape(sub.Tier)
	link := func() (string, error) {
		status, _, b, err := get(ctx, hc, "GET", exportURL, header, nil)
		if err != nil {
			return "", err
		}
		var res struct {
			URL string `json:"url"`
		}
		if status != 200 || json.Unmarshal(b, &res) != nil || res.URL == "" {
			return "", fmt.Errorf("(k) GET %s: status %d: %.300s", exportURL, status, b)
		}
		return res.URL, nil
	}
	var zipBytes int
	download := func(u string) error {
		status, h, b, err := get(ctx, hc, "GET", u, http.Header{"User-Agent": {"lectern-bench"}}, nil)
		if err != nil {
			return err
		}
		if status != 200 || len(b) == 0 {
			return fmt.Errorf("(k) GET %s: status %d, %s, %d bytes", u, status, h.Get("Content-Type"), len(b))
		}
		zipBytes = len(b)
		return nil
	}
	var linkT []time.Duration // the export call's share of each zip run
	zip := func() error {
		t0 := time.Now()
		u, err := link()
		if err != nil {
			return err
		}
		linkT = append(linkT, time.Since(t0))
		return download(u)
	}
	// The zip ships each class as route 6 answers detail=full (which has
	// every include) and, for a class with a transcript, route 7's
	// markdown: reading the same one by one is those requests, as a client
	// would make them (hasTranscript says which classes have one). Both
	// sides use the same client, without compression: the zip's deflate
	// is the export's cost, while the lessons pay no gzip (the
	// conservative side for the ratio). The earlier reading (standard
	// detail, every class's transcript rows without markdown) is measured
	// too and named in the detail.
	var same, earlier []string
	for _, l := range sub.Lessons {
		same = append(same, "/v1/lessons/"+l.ID+"?detail=full")
		if l.HasTranscript {
			same = append(same, "/v1/lessons/"+l.ID+"/transcript?include=markdown")
		}
		earlier = append(earlier, "/v1/lessons/"+l.ID, "/v1/lessons/"+l.ID+"/transcript")
	}
	var sameBytes, earlierBytes int
	oneByOne := func(paths []string, bytes *int) func() error {
		return func() error {
			n := 0
			for _, p := range paths {
				status, _, b, err := get(ctx, hc, "GET", st.OriginURL+p, header, nil)
				if err != nil {
					return err
				}
				if status != 200 {
					return fmt.Errorf("(k) GET %s: status %d: %.300s", p, status, b)
				}
				n += len(b)
			}
			*bytes = n
			return nil
		}
	}
	// Interleaved, as the throughput rounds, for o.time each at least 5 times.
	progress("(k) zip_url export + download against %d lessons and transcripts one by one", len(same))
	var zipT, seqT, earlierT []time.Duration
	for end := time.Now().Add(3 * o.time); len(zipT) < 5 || time.Now().Before(end); {
		for _, f := range []struct {
			run func() error
			to  *[]time.Duration
		}{{zip, &zipT}, {oneByOne(same, &sameBytes), &seqT}, {oneByOne(earlier, &earlierBytes), &earlierT}} {
			t0 := time.Now()
			if err := f.run(); err != nil {
				return nil, err
			}
			*f.to = append(*f.to, time.Since(t0))
		}
	}
	zq, sq, eq := quartiles(zipT), quartiles(seqT), quartiles(earlierT)
	ratio := float64(zq[1]) / float64(sq[1])
	rows := []row{{id: "k", what: fmt.Sprintf("zip_url export of %s + its zip download", sub.Ref()),
		result: ms(zq[1]), ratio: fmt.Sprintf("%.2f× of 1 by 1", ratio), goal: "< 1× of 1 by 1", verdict: verdict(ratio < 1),
		detail: fmt.Sprintf("zip %d KB (IQR %s–%s; the export call alone %s); 1 by 1: %d lessons detail=full + %d transcripts include=markdown (routes 6, 7; %d KB, identity) %s (IQR %s–%s); "+
			"serial, one client, medians of %d interleaved runs; the earlier 1 by 1 (standard detail, %d transcripts without markdown, %d KB) %s, %.2f×",
			(zipBytes+1023)/1024, ms(zq[0]), ms(zq[2]), ms(medianDuration(linkT)), len(sub.Lessons), len(same)-len(sub.Lessons), (sameBytes+1023)/1024, ms(sq[1]), ms(sq[0]), ms(sq[2]),
			len(zipT), len(sub.Lessons), (earlierBytes+1023)/1024, ms(eq[1]), float64(zq[1])/float64(eq[1]))}}

	progress("(k) peak heap of %d concurrent zip downloads", downloads)
	links := make([]string, downloads)
	for i := range links {
		if links[i], err = link(); err != nil {
			return nil, err
		}
	}
	peak, idle, took, err := peakHeap(func() error {
		var wg sync.WaitGroup
		errs := make([]error, downloads)
		for i, u := range links {
			wg.Go(func() { errs[i] = download(u) })
		}
		wg.Wait()
		return errors.Join(errs...)
	})
	if err != nil {
		return nil, err
	}
	above := float64(peak-idle) / (1 << 20)
	rows = append(rows, row{id: "k", what: fmt.Sprintf("  peak heap in use, %d concurrent zip downloads, above idle", downloads),
		result: fmt.Sprintf("%.1f MiB", above), goal: "< 64 MiB", verdict: verdict(above < 64),
		detail: fmt.Sprintf("runtime/metrics heap objects + unused (HeapInuse) sampled every ms in the bench process (origin and clients, bodies read whole) over %v; idle %.1f MiB after a GC",
			took.Round(time.Millisecond), float64(idle)/(1<<20))})
	return rows, nil
}

// quartiles are the first quartile, the median and the third quartile of
// d, which it sorts.
func quartiles(d []time.Duration) [3]time.Duration {
	slices.Sort(d)
	n := len(d)
	return [3]time.Duration{d[n/4], d[n/2], d[(3*n)/4]}
}

// downloads is the number of concurrent zip downloads of (k).
const downloads = 16

// heapInUse reads HeapInuse's equivalent in runtime/metrics, which does
// not stop the world as runtime.ReadMemStats does.
var heapInUse = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}

func readHeap(s []metrics.Sample) uint64 {
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64()
}

// peakHeap runs f with the heap in use sampled every millisecond, and
// returns its peak and its idle value before f (after a collection).
func peakHeap(f func() error) (peak, idle uint64, took time.Duration, err error) {
	runtime.GC()
	idle = readHeap(slices.Clone(heapInUse))
	var max atomic.Uint64
	max.Store(idle)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := slices.Clone(heapInUse)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if v := readHeap(s); v > max.Load() {
				max.Store(v)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	t0 := time.Now()
	err = f()
	took = time.Since(t0)
	close(stop)
	<-done
	return max.Load(), idle, took, err
}
