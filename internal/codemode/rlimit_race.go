//go:build race

package codemode

// limitAddressSpace does nothing under the race detector: its shadow
// memory takes terabytes of address space, which RLIMIT_AS would refuse.
func limitAddressSpace(int64) {}
