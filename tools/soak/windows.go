package main

import (
	"fmt"
	"io"
	"sort"
	"time"
)

// fault is one fault injected during the run.
type fault struct {
	What string    // "SIGKILL origin", "restart PostgreSQL"
	At   time.Time // when it began
	Done time.Time // when its injection ended (the signal sent; the restart command returned)
	// Recovered is when the first request begun after Done succeeded;
	// zero when none did.
	Recovered time.Time
	Skipped   string // why it was not injected, when it was not
}

// window is the error rate and latency of the requests that ended in
// [From, To).
type window struct {
	Name     string
	From, To time.Time
	Requests int
	Errors   int // no answer, or 5xx
	P99      time.Duration
}

// errRate is the share of the window's requests that failed.
func (w window) errRate() float64 {
	if w.Requests == 0 {
		return 0
	}
	return float64(w.Errors) / float64(w.Requests)
}

// stats fills w from outs.
func stats(w window, outs []outcome) window {
	var lat []time.Duration
	for i := range outs {
		o := &outs[i]
		if o.End.Before(w.From) || !o.End.Before(w.To) {
			continue
		}
		w.Requests++
		if !o.answered() {
			w.Errors++
		}
		lat = append(lat, o.End.Sub(o.Start))
	}
	w.P99 = percentile(lat, 0.99)
	return w
}

// percentile is the p-th latency (nearest rank), 0 when there is none.
func percentile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	i := int(float64(len(lat))*p+0.999999) - 1
	return lat[max(0, min(i, len(lat)-1))]
}

// recoverTime sets f.Recovered: the end of the first successful request that
// began after the fault's injection was done.
func recoverTime(f *fault, outs []outcome) {
	for i := range outs {
		o := &outs[i]
		if o.success() && !o.Start.Before(f.Done) && o.Kind != kFile && (f.Recovered.IsZero() || o.End.Before(f.Recovered)) {
			f.Recovered = o.End
		}
	}
}

// faultWindows are the windows around f: span before it began, from it
// to its recovery (to the end of the run when it did not recover), and
// span after the recovery.
func faultWindows(f fault, span time.Duration, end time.Time, outs []outcome) []window {
	rec := f.Recovered
	if rec.IsZero() {
		rec = end
	}
	return []window{
		stats(window{Name: "before", From: f.At.Add(-span), To: f.At}, outs),
		stats(window{Name: "during", From: f.At, To: rec}, outs),
		stats(window{Name: "after", From: rec, To: rec.Add(span)}, outs),
	}
}

// printWindows writes the windows of every fault.
func printWindows(w io.Writer, faults []fault, span time.Duration, end time.Time, outs []outcome) (failures []string) {
	fmt.Fprintf(w, "\n(4) error rate and p99 latency around each fault (windows of %s; errors: no answer or 5xx)\n", span)
	for _, f := range faults {
		if f.Skipped != "" {
			fmt.Fprintf(w, "  %s at %s: skipped: %s\n", f.What, f.At.Format("15:04:05"), f.Skipped)
			continue
		}
		if f.Recovered.IsZero() {
			fmt.Fprintf(w, "  %s at %s: NOT RECOVERED (no request begun after it succeeded)\n", f.What, f.At.Format("15:04:05"))
			failures = append(failures, f.What+": not recovered")
		} else {
			fmt.Fprintf(w, "  %s at %s (injected in %s): recovered in %s\n", f.What, f.At.Format("15:04:05"),
				f.Done.Sub(f.At).Round(time.Millisecond), f.Recovered.Sub(f.At).Round(time.Millisecond))
		}
		for _, x := range faultWindows(f, span, end, outs) {
			fmt.Fprintf(w, "    %-7s %6d requests  %6.2f%% errors  p99 %s\n", x.Name, x.Requests, 100*x.errRate(), x.P99.Round(100*time.Microsecond))
		}
	}
	return failures
}
