package main

import "syscall"

// childProcAttr has the kernel send a child of the demo (its worker, its
// submit) SIGTERM when the demo dies without its cleanup (SIGKILL, an
// IDE's stop button, a CI timeout's kill): they went on running, the
// worker with its embedded NATS and MCP server, submit following the job
// for ever. SIGTERM lets the worker stop as it does at the demo's end.
// Pdeathsig follows the OS thread that started the child; the Go runtime
// only retires threads of goroutines that exit while locked to one, which
// the demo never does.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
