package main

import (
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The origin's memory (issue #18; docs/bench.md, Memory). Nearly all of
// it is the corpus served and what Build precomputed from it, allocated
// once per corpus; requests allocate little beside it. Two things would
// otherwise keep the resident memory near twice that:
//
//   - loading and building a corpus leaves as much again of garbage (the
//     files read, the JSON decoded, the renderers' buffers, after a
//     reload the old corpus), which the runtime keeps mapped for reuse
//     and returns to the operating system only slowly;
//   - with GOGC's default of 100 the heap grows to twice what is live
//     before the collector runs.
//
// So once a corpus is swapped in, settleMemory returns the free memory to
// the operating system and, unless the operator set GOMEMLIMIT, sets the
// soft memory limit a headroom above what the process then holds: under
// load the collector runs when the heap reaches the limit, not twice the
// corpus. While a reload builds a corpus beside the served one both are
// live: for that time the limit is doubled, room for two corpora of the
// served one's size, so that the collector does not run continuously
// against a limit the two exceed, yet still collects the garbage of the
// load before it doubles them again (measured: a reload of the full
// corpus peaks at about 770 MiB against 920 with no limit, and takes
// as long).

// settleAgain is when settleMemory runs again after a swap: requests that
// began on the old corpus (a zip download streams for seconds) hold it
// until they end, and the limit must not count it.
const settleAgain = 30 * time.Second

// memHeadroomMin and memHeadroomShare make the headroom above the
// footprint: the larger of memHeadroomMin and the footprint divided by
// memHeadroomShare.
const (
	memHeadroomMin   = 48 << 20
	memHeadroomShare = 6
)

// memoryLimit is the soft memory limit for a process holding footprint
// bytes once its corpus is built.
func memoryLimit(footprint uint64) int64 {
	return int64(footprint + max(memHeadroomMin, footprint/memHeadroomShare))
}

// settleMemory returns the memory that is free to the operating system
// and, when the origin sets the memory limit (config.autoMemLimit), sets
// it to memoryLimit of the memory the runtime then holds. Run after a
// corpus is swapped in; it collects once, which takes a fraction of a
// second with the full corpus.
func (st *stack) settleMemory() {
	debug.FreeOSMemory()
	if st.autoMemLimit {
		debug.SetMemoryLimit(memoryLimit(footprint()))
	}
}

// swapped settles the memory after a corpus swap, now and again after
// settleAgain unless a reload runs then (it settles when it ends). Run
// under st.reloading.
func (st *stack) swapped() {
	st.settleMemory()
	if st.resettle != nil {
		st.resettle.Stop()
	}
	st.resettle = time.AfterFunc(settleAgain, func() {
		if st.reloading.TryLock() {
			defer st.reloading.Unlock()
			st.settleMemory()
		}
	})
}

// liftMemoryLimit doubles the memory limit the origin sets for what it
// holds now, before a corpus is built beside the served one;
// settleMemory sets it again. A new corpus much larger than the served
// one makes the collector work harder during that build, not fail it.
func (st *stack) liftMemoryLimit() {
	if st.autoMemLimit {
		debug.SetMemoryLimit(2 * memoryLimit(footprint()))
	}
}

// footprint is the memory the Go runtime holds from the operating system
// and has not released: what the memory limit bounds.
func footprint() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}
