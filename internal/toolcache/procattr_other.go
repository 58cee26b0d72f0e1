//go:build unix && !linux

package toolcache

import "syscall"

// childProcAttr puts a stdio server in its own process group; see the Linux
// version for why.
func childProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
