package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/server"
	"github.com/lectern-api/lectern/origin/store"
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
// first (200) or, when repeated, revalidated (If-None-Match, 304). Since
// the bundle store (origin/bundles) the 200s are the stored bundle sent:
// the first request builds it and the rounds read its file; (k) times a
// cold build.
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
	return &scenario{target: &target{id: "j", name: what + ", 200 (the stored bundle)", url: u, header: scoped(toks), want: 200}}, nil
}

// zipExport is (k): a zip_url export and the download of its zip, timed
// against reading the same lessons (route 6) and transcripts (route 7)
// one by one, serially, median of runs; then the peak heap of 16
// concurrent zip downloads above idle. The stack's bundle store is purged
// before each zip run and before the 16 downloads, so that every build in
// (k) is cold: the first download of a link builds its bundle, as it did
// before the store (origin/bundles), and the row checks the store's
// count of builds.
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
	var (
		zipBytes int
		refused  atomic.Int64 // downloads answered 429, retried
	)
	// download reads the zip of link u whole; a 429 (the organisation's
	// downloads at once, server.DefaultDownloadsPerOrg) is retried after
	// its Retry-After.
	download := func(u string) error {
		for {
			status, h, b, err := get(ctx, hc, "GET", u, http.Header{"User-Agent": {"lectern-bench"}}, nil)
			if err != nil {
				return err
			}
			if status == http.StatusTooManyRequests {
				refused.Add(1)
				if err := sleep(ctx, retryAfter(h)); err != nil {
					return err
				}
				continue
			}
			if status != 200 || len(b) == 0 {
				return fmt.Errorf("(k) GET %s: status %d, %s, %d bytes", u, status, h.Get("Content-Type"), len(b))
			}
			zipBytes = len(b)
			return nil
		}
	}
	var (
		linkT []time.Duration // the export call's share of each zip run
		last  string          // the link of the last zip run
	)
	zip := func() error {
		t0 := time.Now()
		u, err := link()
		if err != nil {
			return err
		}
		linkT = append(linkT, time.Since(t0))
		last = u
		return download(u)
	}
	// again downloads the last zip run's link again: its bundle stored.
	again := func() error { return download(last) }
	builds := func() int64 { return st.Bundles.Stats().Builds }
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
	var zipT, warmT, seqT, earlierT []time.Duration
	b0 := builds()
	for end := time.Now().Add(3 * o.time); len(zipT) < 5 || time.Now().Before(end); {
		for _, f := range []struct {
			run   func() error
			to    *[]time.Duration
			purge bool
		}{{zip, &zipT, true}, {again, &warmT, false}, {oneByOne(same, &sameBytes), &seqT, false}, {oneByOne(earlier, &earlierBytes), &earlierT, false}} {
			if f.purge {
				if err := st.Bundles.Purge(); err != nil {
					return nil, fmt.Errorf("(k) %w", err)
				}
			}
			t0 := time.Now()
			if err := f.run(); err != nil {
				return nil, err
			}
			*f.to = append(*f.to, time.Since(t0))
		}
	}
	if n := builds() - b0; n != int64(len(zipT)) {
		return nil, fmt.Errorf("(k) %d bundle builds in %d zip runs: a run was not cold", n, len(zipT))
	}
	zq, sq, eq := quartiles(zipT), quartiles(seqT), quartiles(earlierT)
	ratio := float64(zq[1]) / float64(sq[1])
	rows := []row{{id: "k", what: fmt.Sprintf("zip_url export of %s + its zip download", sub.Ref()),
		result: ms(zq[1]), ratio: fmt.Sprintf("%.2f× of 1 by 1", ratio), goal: "< 1× of 1 by 1", verdict: verdict(ratio < 1),
		detail: fmt.Sprintf("zip %d KB (IQR %s–%s; the export call alone %s, the same link downloaded again from the store %s, not counted); 1 by 1: %d lessons detail=full + %d transcripts include=markdown (routes 6, 7; %d KB, identity) %s (IQR %s–%s); "+
			"serial, one client, medians of %d interleaved runs, the bundle store purged before each zip run (every zip built, cold); the earlier 1 by 1 (standard detail, %d transcripts without markdown, %d KB) %s, %.2f×",
			(zipBytes+1023)/1024, ms(zq[0]), ms(zq[2]), ms(medianDuration(linkT)), ms(medianDuration(warmT)), len(sub.Lessons), len(same)-len(sub.Lessons), (sameBytes+1023)/1024, ms(sq[1]), ms(sq[0]), ms(sq[2]),
			len(zipT), len(sub.Lessons), (earlierBytes+1023)/1024, ms(eq[1]), float64(zq[1])/float64(eq[1]))}}

	progress("(k) peak heap of %d concurrent zip downloads", downloads)
	links := make([]string, downloads)
	for i := range links {
		if links[i], err = link(); err != nil {
			return nil, err
		}
	}
	if err := st.Bundles.Purge(); err != nil {
		return nil, fmt.Errorf("(k) %w", err)
	}
	b0, r0 := builds(), refused.Load()
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
		detail: fmt.Sprintf("runtime/metrics heap objects + unused (HeapInuse) sampled every ms in the bench process (origin and clients, bodies read whole) over %v; idle %.1f MiB after a GC; "+
			"store purged first: %d build(s), the other downloads waited for it and read its file; %d answered 429 (%d of an organisation's downloads at once) and retried after Retry-After",
			took.Round(time.Millisecond), float64(idle)/(1<<20), builds()-b0, refused.Load()-r0, server.DefaultDownloadsPerOrg)})
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

// retryAfter is the wait a 429's Retry-After asks for, in whole seconds
// (RFC 9110 §10.2.3); one second when it is missing or not a number.
func retryAfter(h http.Header) time.Duration {
	n, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || n < 0 {
		n = 1
	}
	return time.Duration(n) * time.Second
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// spentOrg is (k3)'s organisation: every tier granted, its monthly
// exports quota 0, so every export it asks for is refused.
const spentOrg = "bench-exports-spent"

// refusedExports is (k3): an export the meters refuse (429 EXPORT_LIMIT,
// the exports quota spent) asked for inline against the same asked for
// as zip_url. Since the bundle store, an inline export reads the
// organisation's meters first and refuses before any bundle work
// (origin/server exports.go exportRefused); the goal is that its refusal
// costs about what a zip_url one does (the meters' Apply alone, which
// bills the call and makes no link). That read is timed alone in the same
// rounds, for the detail. Serial, interleaved pairs (which goes
// first alternates), for 3 × -time and at least 200 pairs: the origin
// handler alone in process (ServeHTTP into a discarding writer: the
// origin's time, no network), and the same requests over loopback by
// one keep-alive client.
func refusedExports(ctx context.Context, o options, st *stack, progress func(string, ...any)) ([]row, error) {
	err := st.createOrg(ctx, spentOrg, "Spent Exports Organisation", func(org *store.Org) {
		org.Quota.Exports = new(int64)
	})
	if err != nil {
		return nil, err
	}
	toks, err := st.tokensOf(ctx, spentOrg, 1, scope.ContentExport)
	if err != nil {
		return nil, err
	}
	header := scoped(toks)(0)
	sub := exportSubject(st.Content.Corpus)
	path := func(format string) string {
		return "/v1/exports/subjects/" + url.PathEscape(sub.Slug) + "?format=" + format + "&tier=" + url.QueryEscape(sub.Tier)
	}
	hc := &http.Client{Transport: newTransport(1)}
	b0 := st.Bundles.Stats().Builds
	org, err := st.store.GetOrg(ctx, spentOrg)
	if err != nil {
		return nil, err
	}
	// The read an inline export makes before it bills (exportRefused),
	// as the handler calls it.
	var usageT []time.Duration
	usage := func() error {
		t0 := time.Now()
		_, err := st.meters.Usage(ctx, meter.Key(org), time.Now())
		usageT = append(usageT, time.Since(t0))
		return err
	}
	type arm struct {
		format        string
		handler, wire []time.Duration
		code          string
	}
	arms := []*arm{{format: "inline"}, {format: "zip_url"}}
	// refused checks one answer: 429 EXPORT_LIMIT.
	refused := func(a *arm, status int, b []byte) error {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if status != http.StatusTooManyRequests || json.Unmarshal(b, &e) != nil || e.Error.Code != "EXPORT_LIMIT" {
			return fmt.Errorf("(k3) GET %s: status %d, want 429 EXPORT_LIMIT: %.300s", path(a.format), status, b)
		}
		a.code = e.Error.Code
		return nil
	}
	inProcess := func(a *arm) error {
		r := httptest.NewRequest("GET", path(a.format), nil)
		r.Header = header.Clone()
		w := &recorder{discard: discard{h: http.Header{}}}
		t0 := time.Now()
		st.API.ServeHTTP(w, r)
		d := time.Since(t0)
		if err := refused(a, w.status, w.body.Bytes()); err != nil {
			return err
		}
		a.handler = append(a.handler, d)
		return nil
	}
	overWire := func(a *arm) error {
		t0 := time.Now()
		status, _, b, err := get(ctx, hc, "GET", st.OriginURL+path(a.format), header.Clone(), nil)
		d := time.Since(t0)
		if err != nil {
			return err
		}
		if err := refused(a, status, b); err != nil {
			return err
		}
		a.wire = append(a.wire, d)
		return nil
	}
	progress("(k3) refused exports (quota spent), inline against zip_url, serial")
	// Warm-up: both paths once each way, not counted.
	for _, a := range arms {
		if err := inProcess(a); err != nil {
			return nil, err
		}
		if err := overWire(a); err != nil {
			return nil, err
		}
		a.handler, a.wire = nil, nil
	}
	if err := usage(); err != nil {
		return nil, err
	}
	usageT = nil
	const minPairs = 200
	for i, end := 0, time.Now().Add(3*o.time); i < minPairs || time.Now().Before(end); i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		first, second := arms[i%2], arms[1-i%2]
		for _, f := range []func(*arm) error{inProcess, overWire} {
			if err := f(first); err != nil {
				return nil, err
			}
			if err := f(second); err != nil {
				return nil, err
			}
		}
		if err := usage(); err != nil {
			return nil, err
		}
	}
	if n := st.Bundles.Stats().Builds - b0; n != 0 {
		return nil, fmt.Errorf("(k3) %d bundles built for refused exports", n)
	}
	in, zip := arms[0], arms[1]
	hi, hz := quartiles(in.handler), quartiles(zip.handler)
	wi, wz := quartiles(in.wire), quartiles(zip.wire)
	ratio := float64(hi[1]) / float64(hz[1])
	return []row{{id: "k3", what: fmt.Sprintf("refused inline export of %s (429 %s, exports quota 0), origin handler", sub.Ref(), in.code),
		result: us(hi[1]), ratio: fmt.Sprintf("%.2f× of zip_url", ratio), goal: "≤ 1.5× of zip_url", verdict: verdict(ratio <= 1.5),
		detail: fmt.Sprintf("origin handler alone in process (ServeHTTP, no network), medians of %d interleaved pairs: inline %s (IQR %s–%s), zip_url %s (IQR %s–%s); "+
			"over loopback, one client, the same pairs: inline %s, zip_url %s, %.2f×; no bundle built; the meters' Usage read an inline export makes first (exportRefused), alone: %s",
			len(in.handler), us(hi[1]), us(hi[0]), us(hi[2]), us(hz[1]), us(hz[0]), us(hz[2]), us(wi[1]), us(wz[1]), float64(wi[1])/float64(wz[1]),
			us(medianDuration(usageT)))}}, nil
}

// recorder is a discard that keeps the body too (an error body is small).
type recorder struct {
	discard
	body bytes.Buffer
}

func (w *recorder) Write(p []byte) (int, error) {
	w.discard.Write(p)
	return w.body.Write(p)
}

// us formats d in microseconds.
func us(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e3, 'f', 0, 64) + " µs" }
