package telemetry

import (
	"net/http"
	"net/http/pprof"
)

// PprofPath is where RegisterPprof serves the Go runtime's profiles.
const PprofPath = "/debug/pprof/"

// RegisterPprof serves net/http/pprof on mux under /debug/pprof/: the
// index, cmdline, profile (CPU, ?seconds=N), symbol, trace and every named
// profile (heap, allocs, goroutine, block, mutex, threadcreate), e.g.
//
//	go tool pprof http://HOST:9090/debug/pprof/profile?seconds=30
//	go tool pprof http://HOST:9090/debug/pprof/heap
//
// The worker does so on its metrics listener only when JETAGENT_PPROF is
// set: profiles show the process's internals (command line included).
func RegisterPprof(mux *http.ServeMux) {
	mux.HandleFunc(PprofPath, pprof.Index) // named profiles: /debug/pprof/heap, ...
	mux.HandleFunc(PprofPath+"cmdline", pprof.Cmdline)
	mux.HandleFunc(PprofPath+"profile", pprof.Profile)
	mux.HandleFunc(PprofPath+"symbol", pprof.Symbol)
	mux.HandleFunc(PprofPath+"trace", pprof.Trace)
}
