package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/lectern-api/lectern/shared/scope"
)

// The learner progress rows (issue #17), scenarios of the throughput
// rounds, so their rates are ratios to (a) of the same run:
//
//	(l) PUTs by -clients learners at once, each its own record of
//	    progressSeeded classes, every PUT a saved write (200)
//	(m) GET /v1/progress?limit=100 of a learner with progressClasses
//	    recorded classes, as a 200 and as a 304 (If-None-Match)
//	(n) -clients writers on one learner: PUTs answered 200 (saved) or
//	    409 (lost the compare and swap), saved writes per second and the
//	    share answered 409
//
// Every PUT of (l) and (n) sends a score other than the one before it on
// the class (the next of a counter, modulo 101), so a 200 is a saved
// write, never a harmless retry that saves nothing.

// progressClasses is the size of (m)'s learner's record.
const progressClasses = 100

// progressSeeded is the size of each (l) and (n) learner's record before
// the rounds: the PUTs rewrite a record of this many classes.
const progressSeeded = 20

// progressSetups are the setups of (l), (m) 200, (m) 304 and (n).
func (tb *throughputBench) progressSetups() []func() (*scenario, error) {
	var m304 *scenario
	return []func() (*scenario, error){
		tb.progressWrites,
		func() (m200 *scenario, err error) { m200, m304, err = tb.progressReads(); return m200, err },
		func() (*scenario, error) { return m304, nil },
		tb.progressRace,
	}
}

// progressPath is the progress route of class i of the corpus.
func (tb *throughputBench) progressPath(i int) string {
	return "/v1/progress/" + tb.st.Content.Lessons[i].ID
}

// seedProgress records the first n classes of the corpus for the learner
// of tok, one PUT each.
func (tb *throughputBench) seedProgress(tok string, n int) error {
	if have := len(tb.st.Content.Lessons); n > have {
		return fmt.Errorf("the progress rows record %d classes; this corpus has %d (use the full corpus)", n, have)
	}
	hc := &http.Client{Transport: newTransport(1)}
	for i := range n {
		status, _, b, err := get(tb.ctx, hc, "PUT", tb.st.OriginURL+tb.progressPath(i),
			scoped([]string{tok}, "Content-Type", "application/json")(0), strings.NewReader(fmt.Sprintf(`{"score":%d}`, i%101)))
		if err != nil {
			return err
		}
		if status != 200 {
			return fmt.Errorf("PUT %s: status %d: %.300s", tb.progressPath(i), status, b)
		}
	}
	return nil
}

// scores returns the body of client c's next PUT: the next score of
// counter(c), modulo 101.
func scores(counter func(c int) *atomic.Int64) func(int) string {
	return func(c int) string {
		return fmt.Sprintf(`{"score":%d}`, counter(c).Add(1)%101)
	}
}

// progressWrites is (l): -clients learners, one per client, each
// rewriting one class of its record; all 200s. Its latency row gives p50
// and p99 over every run.
func (tb *throughputBench) progressWrites() (*scenario, error) {
	n := tb.o.clients
	toks := make([]string, n)
	for c := range n {
		t, err := tb.st.learnerTokens(tb.ctx, fmt.Sprintf("bench-l-%d", c), 1, scope.ProgressWrite)
		if err != nil {
			return nil, err
		}
		if err := tb.seedProgress(t[0], progressSeeded); err != nil {
			return nil, fmt.Errorf("(l) %w", err)
		}
		toks[c] = t[0]
	}
	counters := make([]atomic.Int64, n)
	s := &scenario{target: &target{id: "l", name: fmt.Sprintf("PUT /v1/progress/{lesson}, %d learners at once (%d-class records)", n, progressSeeded),
		url: tb.st.OriginURL + tb.progressPath(0), method: "PUT", header: scoped(toks, "Content-Type", "application/json"),
		bodyOf: scores(func(c int) *atomic.Int64 { return &counters[c] }), want: 200}}
	s.rows = func(main row) []row {
		lat := s.latencies()
		return []row{main, {id: "l", what: fmt.Sprintf("  PUT latency, %d learners at once (client side)", n),
			result: fmt.Sprintf("p50 %s, p99 %s", ms(percentile(lat, 50)), ms(percentile(lat, 99))),
			detail: fmt.Sprintf("over %d saved writes", len(lat))}}
	}
	return s, nil
}

// progressReads is (m): GET /v1/progress?limit=100 of a learner with
// progressClasses recorded classes, the whole record in one page: a 200,
// and the same revalidated with its ETag (If-None-Match, 304).
func (tb *throughputBench) progressReads() (ok, notModified *scenario, err error) {
	const path = "/v1/progress?limit=100"
	toks, err := tb.st.learnerTokens(tb.ctx, "bench-m", tb.o.clients, scope.ProgressRead, scope.ProgressWrite)
	if err != nil {
		return nil, nil, err
	}
	if err := tb.seedProgress(toks[0], progressClasses); err != nil {
		return nil, nil, fmt.Errorf("(m) %w", err)
	}
	u := tb.st.OriginURL + path
	status, h, b, err := get(tb.ctx, &http.Client{Transport: newTransport(1)}, "GET", u, scoped(toks)(0), nil)
	if err != nil {
		return nil, nil, err
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if status != 200 || h.Get("ETag") == "" || json.Unmarshal(b, &list) != nil || len(list.Items) != progressClasses {
		return nil, nil, fmt.Errorf("(m) GET %s: status %d, ETag %q, want %d items: %.300s", u, status, h.Get("ETag"), progressClasses, b)
	}
	what := fmt.Sprintf("GET %s, a learner with %d classes", path, progressClasses)
	ok = &scenario{target: &target{id: "m", name: fmt.Sprintf("%s, 200 (%d KB)", what, (len(b)+1023)/1024), url: u,
		header: scoped(toks), want: 200},
		goal: &goal{"≥ 0.25×", func(ratio float64) bool { return ratio >= 0.25 }}}
	notModified = &scenario{target: &target{id: "m", name: what + ", If-None-Match 304", url: u,
		header: scoped(toks, "If-None-Match", h.Get("ETag")), want: 304}}
	return ok, notModified, nil
}

// progressRace is (n): -clients writers on one learner, every PUT
// answered 200 (saved) or 409 (lost the race; the bench retries nothing,
// a writer's next PUT is its next score); its second row is the saved
// writes per second and the share answered 409 over every run.
func (tb *throughputBench) progressRace() (*scenario, error) {
	n := tb.o.clients
	toks, err := tb.st.learnerTokens(tb.ctx, "bench-n", n, scope.ProgressWrite)
	if err != nil {
		return nil, err
	}
	if err := tb.seedProgress(toks[0], progressSeeded); err != nil {
		return nil, fmt.Errorf("(n) %w", err)
	}
	var counter atomic.Int64
	s := &scenario{target: &target{id: "n", name: fmt.Sprintf("PUT /v1/progress/{lesson}, %d writers on one learner, 200 or 409", n),
		url: tb.st.OriginURL + tb.progressPath(0), method: "PUT", header: scoped(toks, "Content-Type", "application/json"),
		bodyOf: scores(func(int) *atomic.Int64 { return &counter }), want: 200, also: []int{http.StatusConflict}}}
	s.rows = func(main row) []row {
		m, _ := s.median()
		var requests, conflicts int64
		for _, r := range s.runs {
			requests += r.requests
			conflicts += r.also
		}
		saved := float64(m.requests-m.also) / m.elapsed.Seconds()
		return []row{main, {id: "n", what: fmt.Sprintf("  saved writes, %d writers on one learner", n),
			result: fmt.Sprintf("%.0f writes/s", saved),
			detail: fmt.Sprintf("%.1f%% answered 409 WRITE_CONFLICT (%d of %d PUTs over every run); the run of median rate", 100*float64(conflicts)/float64(requests), conflicts, requests)}}
	}
	return s, nil
}
