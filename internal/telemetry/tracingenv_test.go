package telemetry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/telemetry"
)

// TestStartTracingRefusesUnusableEnv: an endpoint the OTLP/HTTP exporter
// cannot use, or a protocol it does not speak, is an error naming the
// variable, rather than spans sent elsewhere (collector:4318 went to
// https://localhost:4318) or nowhere with a warning at each export.
func TestStartTracingRefusesUnusableEnv(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		env     map[string]string
		wantErr string // "" for none
	}{
		{"http URL", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ""},
		{"https URL with a path", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": " HTTPS://collector:4318/otlp "}, ""},
		{"traces URL", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, ""},
		{"protocol http/protobuf", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, ""},
		{"traces URL wins over a bad general one", map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "c:4317", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, ""},
		{"host:port without a scheme", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "127.0.0.1:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{"name:port without a scheme", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{"other scheme", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://collector:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{"not a URL", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "not a url"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{"no host", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http:///v1/traces"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{"grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"traces protocol http/json", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{"credentials masked", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://u:SECRETPW@c:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		// Headers the exporter drops, logging them whole (the token too).
		{"headers ok", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
			"OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20SECRETPW, x-team = a%2Cb"}, ""},
		{"header with a colon", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
			"OTEL_EXPORTER_OTLP_HEADERS": "Authorization: Bearer SECRETPW"}, "OTEL_EXPORTER_OTLP_HEADERS: entry 1 (Authorization) has no '='"},
		{"traces header without '='", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
			"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=b,SECRETPW"}, "OTEL_EXPORTER_OTLP_TRACES_HEADERS: entry 2 has no '='"},
		{"header name not a token", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
			"OTEL_EXPORTER_OTLP_HEADERS": "api key=SECRETPW"}, `OTEL_EXPORTER_OTLP_HEADERS: entry 1: "api key" is not a header name`},
		{"header value with a bare %", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
			"OTEL_EXPORTER_OTLP_HEADERS": "api-key=SECRETPW%zz"}, "OTEL_EXPORTER_OTLP_HEADERS: entry 1 (api-key): the value has a '%'"},
		{"trailing comma", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
			"OTEL_EXPORTER_OTLP_HEADERS": "api-key=SECRETPW,"}, "OTEL_EXPORTER_OTLP_HEADERS: entry 2 is empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tp, shutdown, err := telemetry.StartTracing(context.Background(), "w", func(k string) string { return tt.env[k] })
			if err == nil {
				_ = shutdown(context.Background())
				if tt.wantErr != "" {
					t.Fatalf("no error (provider %T), want one naming %s", tp, tt.wantErr)
				}
				return
			}
			if tt.wantErr == "" || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q, want one naming %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "SECRETPW") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}
