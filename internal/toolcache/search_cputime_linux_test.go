package toolcache

import (
	"syscall"
	"time"
	"unsafe"
)

// threadCPU is the CPU time of the calling OS thread
// (CLOCK_THREAD_CPUTIME_ID): with the goroutine locked to its thread, the
// difference across a search is the search's own cost, without the time
// a busy machine kept it waiting.
func threadCPU() (time.Duration, bool) {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
