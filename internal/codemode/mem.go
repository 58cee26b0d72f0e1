package codemode

import (
	"runtime/metrics"
)

// The memory limit. goja has no allocation accounting, so the watchdog
// samples the process's Go heap every memEvery: an execution is stopped
// when, since it started, the live heap (as of the last collection) grew
// by more than MaxMemory, or the whole heap (garbage included, so it needs
// no collection to see a fast growth) by more than twice MaxMemory. No
// collection is forced: runtime.GC waits for the allocating goroutine and
// takes seconds with a large heap, which is when the check matters.

var heapSamples = []string{"/memory/classes/heap/objects:bytes", "/gc/heap/live:bytes"}

type heapStat struct{ objects, live int64 }

func readHeap() heapStat {
	s := make([]metrics.Sample, len(heapSamples))
	for i, n := range heapSamples {
		s[i].Name = n
	}
	metrics.Read(s)
	v := func(i int) int64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(s[i].Value.Uint64())
	}
	return heapStat{objects: v(0), live: v(1)}
}

// heapGrowth returns how much the heap grew past base when that is over
// the limit max, else 0.
func heapGrowth(base heapStat, max int64) int64 {
	now := readHeap()
	if grew := now.live - base.live; grew > max {
		return grew
	}
	if grew := now.objects - base.objects; grew > 2*max {
		return grew
	}
	return 0
}
