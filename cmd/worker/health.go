package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/telemetry"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// startState is what /readyz knows of a worker that is starting: what
// it waits for (stage), then the parts it runs with.
type startState struct {
	stage   atomic.Pointer[string]
	running atomic.Pointer[runningParts]
}

// runningParts are stored once the jobs.Worker exists.
type runningParts struct {
	w    *jobs.Worker
	nc   *nats.Conn
	pool *toolcache.Pool
}

// setStage says what the worker waits for now.
func (st *startState) setStage(what string) { st.stage.Store(&what) }

// readiness is what /readyz checks: the worker takes jobs, NATS is
// connected and every configured (enabled) MCP server is up. The error
// says what is not (while the worker starts: what it waits for). Once
// ctx (serve's: ended by SIGINT/SIGTERM/SIGHUP) is done the worker takes no new
// jobs, though its running ones have the grace period: not ready, so an
// orchestrator does not count it as capacity while it drains.
func readiness(ctx context.Context, st *startState) func() error {
	return func() error {
		if ctx.Err() != nil {
			return errors.New("shutting down: no new jobs (running ones have the grace period)")
		}
		r := st.running.Load()
		if r == nil {
			if stage := st.stage.Load(); stage != nil {
				return errors.New("worker starting: " + *stage)
			}
			return errors.New("worker starting")
		}
		select {
		case <-r.w.Ready():
		default:
			return errors.New("worker starting: JetStream topology not ensured yet")
		}
		if !r.nc.IsConnected() {
			return fmt.Errorf("NATS not connected (%s)", r.nc.Status())
		}
		return telemetry.Ready(r.pool)
	}
}

// serveMetrics serves /metrics, /healthz (the process answers) and /readyz
// (ready reports nil) on JETAGENT_METRICS_ADDR until stop is called.
func serveMetrics(s Settings, reg *prometheus.Registry, ready func() error, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", s.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("JETAGENT_METRICS_ADDR=%s: %w", s.MetricsAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintln(w, "ready")
	})
	if s.Pprof {
		telemetry.RegisterPprof(mux)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	addr := ln.Addr().String()
	log.Info("metrics on", "url", "http://"+addr+"/metrics", "health", "/healthz", "ready", "/readyz")
	if s.onMetrics != nil {
		s.onMetrics(addr)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}
