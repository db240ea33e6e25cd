package wiring

import (
	"runtime/debug"
	"runtime/metrics"
)

// The origin's memory (issue #18; docs/bench.md, Memory). Nearly all of
// it is the corpus served and what server.Build precomputed from it,
// allocated once per corpus; requests allocate little beside it. Two
// things would otherwise keep the resident memory near twice that:
//
//   - loading and building a corpus leaves as much again of garbage (the
//     files read, the JSON decoded, the renderers' buffers, after a
//     reload the old corpus), which the runtime keeps mapped for reuse
//     and returns to the operating system only slowly;
//   - with GOGC's default of 100 the heap grows to twice what is live
//     before the collector runs.
//
// So once a corpus is swapped in, SettleMemory returns the free memory to
// the operating system and, unless the operator set GOMEMLIMIT, sets the
// soft memory limit a headroom above what the process then holds: under
// load the collector runs when the heap reaches the limit, not twice the
// corpus. While a reload builds a corpus beside the served one both are
// live: for that time ReloadMemoryLimit doubles the limit, room for two
// corpora of the served one's size, so that the collector does not run
// continuously against a limit the two exceed, yet still collects the
// garbage of the load (measured: a reload of the full corpus peaks at
// about 770 MiB against 920 with no limit, and takes as long).
// Open runs them, through the corpus follower's Lift and Settle
// (origin/corpus/follow says when), for origin/cmd/origin and tools/bench
// alike.

// memHeadroomMin and memHeadroomShare make the headroom above the
// footprint: the larger of memHeadroomMin and the footprint divided by
// memHeadroomShare.
const (
	memHeadroomMin   = 48 << 20
	memHeadroomShare = 6
)

// MemoryLimit is the soft memory limit for a process holding footprint
// bytes once its corpus is built.
func MemoryLimit(footprint uint64) int64 {
	return int64(footprint + max(memHeadroomMin, footprint/memHeadroomShare))
}

// SettleMemory returns the memory that is free to the operating system
// and, when limit is set (GOMEMLIMIT is not), sets the memory limit to
// MemoryLimit of the memory the runtime then holds. Run after a corpus is
// swapped in; it collects once, which takes a fraction of a second with
// the full corpus.
func SettleMemory(limit bool) {
	debug.FreeOSMemory()
	if limit {
		debug.SetMemoryLimit(MemoryLimit(Footprint()))
	}
}

// ReloadMemoryLimit, when limit is set, doubles the memory limit
// SettleMemory sets for what the process holds now, before a corpus is
// built beside the served one; SettleMemory sets it again after the swap.
// A new corpus much larger than the served one makes the collector work
// harder during that build, not fail it.
func ReloadMemoryLimit(limit bool) {
	if limit {
		debug.SetMemoryLimit(2 * MemoryLimit(Footprint()))
	}
}

// Footprint is the memory the Go runtime holds from the operating system
// and has not released: what the memory limit bounds.
func Footprint() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}
