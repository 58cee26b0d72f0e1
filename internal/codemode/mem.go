package codemode

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// The memory limit. goja has no allocation accounting, so the watchdog
// samples the process's Go heap: an execution is stopped when the heap has
// grown by more than MaxMemory since it started, and still has after a
// garbage collection (so garbage does not count). Collections forced for
// this are at most one per gcEvery for the whole process.

const heapMetric = "/memory/classes/heap/objects:bytes"

const gcEvery = 100 * time.Millisecond

var gcMu sync.Mutex
var lastGC time.Time

func heapBytes() int64 {
	s := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// heapGrowth returns how much the heap grew past base when that exceeds
// max after a collection, else 0.
func heapGrowth(base, max int64) int64 {
	if heapBytes()-base <= max {
		return 0
	}
	gcMu.Lock()
	if time.Since(lastGC) < gcEvery {
		// Another execution collected a moment ago; look again at the
		// next sample rather than count garbage.
		gcMu.Unlock()
		return 0
	}
	runtime.GC()
	lastGC = time.Now()
	gcMu.Unlock()
	if grew := heapBytes() - base; grew > max {
		return grew
	}
	return 0
}
