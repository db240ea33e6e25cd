package main

import (
	"os"
	"runtime/metrics"
	"runtime/trace"
)

// startTrace writes a runtime/trace (go tool trace) to path until the
// function it returns is called: -trace, around (d)'s one-client run.
func startTrace(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { trace.Stop(); f.Close() }, nil
}

// gcStats are the process's completed GC cycles and the CPU seconds its
// collector has spent (runtime/metrics), so far.
func gcStats() [2]float64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	var out [2]float64
	if s[0].Value.Kind() == metrics.KindUint64 {
		out[0] = float64(s[0].Value.Uint64())
	}
	if s[1].Value.Kind() == metrics.KindFloat64 {
		out[1] = s[1].Value.Float64()
	}
	return out
}
