//go:build !linux

package main

import "syscall"

// childProcAttr: only Linux can have a child signalled at its parent's
// death (see procattr_linux.go).
func childProcAttr() *syscall.SysProcAttr { return nil }
