//go:build !race

package codemode

import "syscall"

// limitAddressSpace bounds the child's address space (RLIMIT_AS) to n
// bytes, so that an allocation no watchdog can stop fails in the child,
// which dies of it alone, before it takes the machine's memory.
func limitAddressSpace(n int64) {
	_ = syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: uint64(n), Max: uint64(n)})
}
