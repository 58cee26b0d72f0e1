package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetagent/jetagent/internal/telemetry"
)

// startTrace starts the span "submit" (or "submit <command>") when the
// standard OTEL_* variables configure an OTLP endpoint
// (telemetry.TracingEnabled); the jobs submitted under it carry its trace
// context in their NATS headers (jobs.Client.Submit), so the workers' job
// spans are its children. end records the outcome and flushes the spans.
// Without an endpoint ctx is returned as is and end does nothing.
func startTrace(ctx context.Context, command string, stderr io.Writer) (context.Context, func(code int, err error)) {
	if !telemetry.TracingEnabled(os.Getenv) {
		return ctx, func(int, error) {}
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { fmt.Fprintf(stderr, "submit: tracing: %v\n", err) }))
	tp, shutdown, err := telemetry.StartTracing(ctx, "jetagent-submit", os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "submit: tracing off: %v\n", err)
		return ctx, func(int, error) {}
	}
	name := "submit"
	if command != "" {
		name += " " + command
	}
	ctx, span := tp.Tracer(telemetry.TracerName).Start(ctx, name, trace.WithSpanKind(trace.SpanKindProducer))
	return ctx, func(code int, err error) {
		switch {
		case err != nil:
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		case code != exitOK:
			span.SetStatus(codes.Error, fmt.Sprintf("exit status %d", code))
		}
		span.End()
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(fctx); err != nil {
			fmt.Fprintf(stderr, "submit: tracing: flush failed: %v\n", err)
		}
	}
}
