package toolcache

import "syscall"

// childProcAttr puts a stdio server in its own process group (a terminal's
// Ctrl-C does not reach it before the pool has shut it down, and the whole
// group — npx wrappers, shells — can be killed at close) and, on Linux, has
// the kernel kill it if the worker dies without closing the pool (SIGKILL,
// OOM): otherwise a server that does not exit on stdin EOF would be
// orphaned. Pdeathsig follows the OS thread that started the child; the Go
// runtime only retires threads of goroutines that exit while locked to one,
// which this package never does.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
