//go:build !race

package codemode

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// limitAddressSpace bounds the child's address space (RLIMIT_AS) to n
// bytes beyond what it has mapped already, so that an allocation no
// watchdog can stop fails in the child, which dies of it alone, before
// it takes the machine's memory. Beyond: the Go runtime reserves about
// 1.3 GiB of address space at start (its heap's metadata, never touched
// unless used; glibc's arenas add more in a cgo build), which took the
// whole budget of a small MaxMemory and left every script to die.
func limitAddressSpace(n int64) {
	n += mappedBytes()
	_ = syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: uint64(n), Max: uint64(n)})
}

// mappedBytes is this process's address space (VmSize), or 0 where
// /proc does not say.
func mappedBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	pages, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}
