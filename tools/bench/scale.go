package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
)

// Section scale: how the origin's costs grow with its corpus (#38 point
// 2). For each -scales K (1, 4 and 10 by default) the generator writes K
// times the deployed corpus (gen.Options.Scale: K× subjects per tier,
// classes and media), and the origin binary as shipped runs on it as a
// child process (the first -db backend), as (o) runs it:
//
//	ready     from the process's start to its demo organisation created
//	          (the corpus loaded and built, listeners up)
//	RSS       VmRSS settled memSettle after the start; the peak of the
//	          start (VmHWM) and under the rows' reads; settled again
//	          after a reload
//	reload    the same directory reloaded through the admin API, and the
//	          peak RSS meanwhile
//	lesson    lesson reads with one client (standard detail, gzip) over
//	          scaleLessons lessons spread over the whole corpus: p50
//	search    (d)'s search with one client and with -clients: p99
//	export    the inline export of the largest subject (its lesson file
//	          the largest): the first request (a cold build) and the
//	          median of the next scaleExports (the stored bundle)
//
// Goals at 10× (issue #38): RSS settled ≤ 1.5 GiB, ready in < 30 s,
// search p99 with one client < 5 ms, lesson read p50 within 1.2× of 1×'s
// (measured in the same run).

// scaleLessons is how many lessons the lesson reads go over: few enough
// that the enumeration alarm (40% of the lessons a day) never trips.
const scaleLessons = 200

// scaleExports is how many stored-bundle exports the export row times
// after the cold one.
const scaleExports = 5

// scaleRows measures the scale section.
func scaleRows(ctx context.Context, o options, root, dir string, progress func(string, ...any)) ([]row, error) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		return []row{{id: "s", what: "scale: not measured (no /proc here)"}}, nil
	}
	childBackend = o.backends[0]
	bin, err := buildOrigin(ctx, root, dir, progress)
	if err != nil {
		return nil, err
	}
	var rows []row
	var lesson1 time.Duration // 1×'s lesson read p50, when measured
	for _, k := range o.scales {
		r, p50, err := scaleOne(ctx, o, bin, dir, k, lesson1, progress)
		if err != nil {
			return nil, fmt.Errorf("(s) %d×: %w", k, err)
		}
		if k == 1 {
			lesson1 = p50
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

// scaleOne measures scale k; lesson1 is 1×'s lesson read p50 (0: not
// measured), the unit of the lesson row's goal.
func scaleOne(ctx context.Context, o options, bin, dir string, k int, lesson1 time.Duration,
	progress func(string, ...any)) ([]row, time.Duration, error) {
	cdir := filepath.Join(dir, fmt.Sprintf("scale-%d", k))
	progress("(s) %d×: generating the corpus", k)
	t0 := time.Now()
	sum, err := gen.Write(cdir, gen.Options{Seed: 1, Scale: k})
	if err != nil {
		return nil, 0, err
	}
	defer os.RemoveAll(cdir)
	genTook := time.Since(t0)
	lessons, largest, err := scaleTargets(cdir)
	if err != nil {
		return nil, 0, err
	}

	progress("(s) %d×: starting the origin (%s) on %d classes", k, childBackend.label(), sum.Classes)
	ch, err := startChild(ctx, bin, filepath.Join(dir, fmt.Sprintf("scale-%d-db", k)), cdir)
	if err != nil {
		return nil, 0, err
	}
	defer ch.stop()
	pid := ch.cmd.Process.Pid
	time.Sleep(memSettle)
	settled, err := rss(pid)
	if err != nil {
		return nil, 0, err
	}
	startPeak, _ := statusKB(pid, "VmHWM")

	toks, err := ch.clientTokens(ctx, "demo", o.clients, "content.read", "content.export")
	if err != nil {
		return nil, 0, err
	}
	header := scoped(toks, "Accept-Encoding", "gzip")
	var (
		lessonRun, search1, searchN result
		exportCold                  time.Duration
		exportWarm                  []time.Duration
		exportBytes                 int
	)
	searchURL := ch.api + "/v1/search?q=" + url.QueryEscape(o.query)
	loadPeak, err := peakRSS(pid, func() error {
		progress("(s) %d×: lesson reads, 1 client", k)
		var i int
		lt := &target{url: ch.api + "/v1/lessons/" + lessons[0], header: header, want: 200}
		lt.next = func() string { i++; return ch.api + "/v1/lessons/" + lessons[i%len(lessons)] }
		if _, err := lt.measure(ctx, 1, min(o.time/3, time.Second), false); err != nil {
			return fmt.Errorf("lesson reads: %w", err)
		}
		if lessonRun, err = lt.measure(ctx, 1, o.time, true); err != nil {
			return fmt.Errorf("lesson reads: %w", err)
		}
		progress("(s) %d×: search, 1 client and %d", k, o.clients)
		st := &target{url: searchURL, header: scoped(toks), want: 200}
		if _, err := st.measure(ctx, o.clients, min(o.time/3, time.Second), false); err != nil {
			return fmt.Errorf("search: %w", err)
		}
		if search1, err = st.measure(ctx, 1, o.time, true); err != nil {
			return fmt.Errorf("search: %w", err)
		}
		if searchN, err = st.measure(ctx, o.clients, o.time, true); err != nil {
			return fmt.Errorf("search: %w", err)
		}
		progress("(s) %d×: inline export of %s", k, largest)
		tier, slug, _ := strings.Cut(largest, "/")
		u := ch.api + "/v1/exports/subjects/" + url.PathEscape(slug) + "?format=inline&tier=" + url.QueryEscape(tier)
		hc := &http.Client{Transport: newTransport(1)}
		for i := range 1 + scaleExports {
			t0 := time.Now()
			status, _, b, err := get(ctx, hc, "GET", u, scoped(toks)(0), nil)
			took := time.Since(t0)
			if err != nil {
				return err
			}
			if status != 200 {
				return fmt.Errorf("GET %s: status %d: %.300s", u, status, b)
			}
			if i == 0 {
				exportCold, exportBytes = took, len(b)
			} else {
				exportWarm = append(exportWarm, took)
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}

	progress("(s) %d×: corpus reload", k)
	t0 = time.Now()
	reloadPeak, err := peakRSS(pid, func() error { return ch.reload(ctx, cdir) })
	if err != nil {
		return nil, 0, err
	}
	reloadTook := time.Since(t0)
	time.Sleep(memSettle)
	after, err := rss(pid)
	if err != nil {
		return nil, 0, err
	}

	mib := func(kb int64) string { return fmt.Sprintf("%.0f MiB", float64(kb)/1024) }
	ten := k == 10
	lp50 := percentile(lessonRun.lat, 50)
	s1, sN := percentile(search1.lat, 99), percentile(searchN.lat, 99)
	head := row{id: "s", what: fmt.Sprintf("scale %d×: %d subjects, %d classes, %d media; origin RSS settled", k, sum.Subjects, sum.Classes, sum.Media),
		result: mib(settled),
		detail: fmt.Sprintf("VmRSS %v after the start; peak of the start (VmHWM) %s, under the reads below %s; settled after the reload %s; corpus written in %v",
			memSettle, mib(startPeak), mib(loadPeak), mib(after), genTook.Round(100*time.Millisecond))}
	ready := row{id: "s", what: fmt.Sprintf("  %d×: ready after the start", k), result: fmt.Sprintf("%.1f s", ch.started.Seconds()),
		detail: "process start to its demo organisation made: the corpus loaded and built, the listeners up"}
	reload := row{id: "s", what: fmt.Sprintf("  %d×: corpus reload", k), result: fmt.Sprintf("%.1f s", reloadTook.Seconds()),
		detail: fmt.Sprintf("the same directory through the admin API; peak RSS meanwhile %s (both corpora live until the swap)", mib(reloadPeak))}
	lesson := row{id: "s", what: fmt.Sprintf("  %d×: lesson read, 1 client (client side)", k), result: "p50 " + ms(lp50),
		detail: fmt.Sprintf("p99 %s over %d reads of %d lessons spread over the corpus, standard detail, gzip", ms(percentile(lessonRun.lat, 99)), len(lessonRun.lat), len(lessons))}
	searchOne := row{id: "s", what: fmt.Sprintf("  %d×: search latency, 1 client (client side)", k), result: "p99 " + ms(s1),
		detail: fmt.Sprintf("p50 %s over %d requests, %.0f req/s; %s", ms(percentile(search1.lat, 50)), len(search1.lat), search1.rate(), searchURL[len(ch.api):])}
	searchMany := row{id: "s", what: fmt.Sprintf("  %d×: search latency, %d clients (client side)", k, o.clients), result: "p99 " + ms(sN),
		detail: fmt.Sprintf("p50 %s over %d requests, %.0f req/s", ms(percentile(searchN.lat, 50)), len(searchN.lat), searchN.rate())}
	export := row{id: "s", what: fmt.Sprintf("  %d×: inline export of the largest subject", k),
		result: fmt.Sprintf("cold %s, stored %s", ms(exportCold), ms(medianDuration(exportWarm))),
		detail: fmt.Sprintf("%s, %d KB; the first request builds the bundle, then the median of %d served from the store", largest, (exportBytes+1023)/1024, len(exportWarm))}
	if ten {
		head.goal, head.verdict = "≤ 1.5 GiB", verdict(settled <= 1536*1024)
		ready.goal, ready.verdict = "< 30 s", verdict(ch.started < 30*time.Second)
		searchOne.goal, searchOne.verdict = "p99 < 5 ms", verdict(s1 < 5*time.Millisecond)
	}
	if k == 1 {
		searchOne.goal, searchOne.verdict = "p99 < 2 ms", verdict(s1 < 2*time.Millisecond)
	}
	if k != 1 && lesson1 > 0 {
		r := float64(lp50) / float64(lesson1)
		lesson.ratio = fmt.Sprintf("%.2f× 1×", r)
		if ten {
			lesson.goal, lesson.verdict = "≤ 1.2× 1×'s", verdict(r <= 1.2)
		}
	}
	rows := []row{head, ready, reload, lesson, searchOne, searchMany, export}
	for i := range rows {
		rows[i].backend = childBackend.name
	}
	return rows, lp50, nil
}

// scaleTargets reads the corpus in dir's subjects and lesson files: the
// ids of scaleLessons lessons spread over it (classes 1–5 of evenly spaced
// subjects: every subject has at least 10), and the ref of the subject
// whose lesson file is the largest.
func scaleTargets(dir string) (lessons []string, largest string, err error) {
	b, err := os.ReadFile(filepath.Join(dir, "subjects.json"))
	if err != nil {
		return nil, "", err
	}
	var sf corpus.SubjectsJSON
	if err := json.Unmarshal(b, &sf); err != nil {
		return nil, "", err
	}
	subs := sf.Subjects
	const perSubject = 5
	n := min(len(subs), scaleLessons/perSubject)
	for i := range n {
		s := subs[i*len(subs)/n]
		for c := 1; c <= perSubject; c++ {
			lessons = append(lessons, fmt.Sprintf("%s/%s/%d", s.Tier, s.Slug, c))
		}
	}
	var size int64
	for _, s := range subs {
		fi, err := os.Stat(filepath.Join(dir, "lessons", s.Tier, s.Slug+".json"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, "", err
		}
		if err == nil && fi.Size() > size {
			size, largest = fi.Size(), s.Tier+"/"+s.Slug
		}
	}
	return lessons, largest, nil
}
