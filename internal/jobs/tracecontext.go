package jobs

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
)

// Trace context travels with a job in the W3C traceparent/tracestate
// headers of its NATS message: Client.Submit injects the caller's span (when
// ctx carries one), and the worker hands the delivered message's headers to
// the runner through the run context (MessageHeader), where a tracing
// runner (internal/telemetry) extracts them and parents the job's span on
// the submitter's.

// HeaderCarrier adapts nats.Header to OpenTelemetry's TextMapCarrier.
// nats.Header keys are case-sensitive, so Get matches a key in any case
// (a traceparent set by hand or by another client may be "Traceparent").
type HeaderCarrier nats.Header

var _ propagation.TextMapCarrier = HeaderCarrier(nil)

// Get returns the first value of key, matched case-insensitively.
func (c HeaderCarrier) Get(key string) string {
	if v, ok := c[key]; ok && len(v) > 0 {
		return v[0]
	}
	for k, v := range c {
		if strings.EqualFold(k, key) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// Set sets key (as given: W3C names are lower case) to value.
func (c HeaderCarrier) Set(key, value string) { c[key] = []string{value} }

// Keys lists the header's keys.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// injectTraceContext writes ctx's span context, if it has a valid one, into
// h as W3C trace context. Without a span it writes nothing.
func injectTraceContext(ctx context.Context, h nats.Header) {
	propagation.TraceContext{}.Inject(ctx, HeaderCarrier(h))
}

type headerKey struct{}

// withMessageHeader makes the job message's headers available to the runner.
func withMessageHeader(ctx context.Context, h nats.Header) context.Context {
	if len(h) == 0 {
		return ctx
	}
	return context.WithValue(ctx, headerKey{}, h)
}

// MessageHeader returns the headers of the job message whose attempt ctx
// runs (the context a Worker passes to Runner.Run), or nil. They are the
// publisher's headers as delivered (Nats-Msg-Id, a traceparent, ...); a
// runner must not modify them. A context value rather than a RunEnv method
// so that RunEnv implementations need not change: the headers are
// request-scoped data crossing process boundaries, what context values are
// for.
func MessageHeader(ctx context.Context) nats.Header {
	h, _ := ctx.Value(headerKey{}).(nats.Header)
	return h
}
