package llm

import (
	"math"
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
		wantOK bool
	}{
		{"none", nil, 0, false},
		{"zero", map[string]string{"Retry-After": "0"}, 0, true},
		{"seconds", map[string]string{"Retry-After": "7"}, 7 * time.Second, true},
		{"fractional seconds", map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond, true},
		{"http date", map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second, true},
		{"date in the past", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0, true},
		{"milliseconds win", map[string]string{"Retry-After": "7", "Retry-After-Ms": "250"}, 250 * time.Millisecond, true},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0, false},
		{"negative", map[string]string{"Retry-After": "-3"}, 0, false},
		// As openai-go reads them:
		{"negative milliseconds fall back to seconds", map[string]string{"Retry-After-Ms": "-1", "Retry-After": "2"}, 2 * time.Second, true},
		{"not a number", map[string]string{"Retry-After": "NaN"}, 0, false},
		{"infinite", map[string]string{"Retry-After": "+Inf"}, 0, false},
		{"overflow is forever", map[string]string{"Retry-After": "1e999"}, math.MaxInt64, true},
		{"too long for a Duration", map[string]string{"Retry-After-Ms": "1e300"}, math.MaxInt64, true},
		{"RFC 850 date ignored", map[string]string{"Retry-After": now.Add(90 * time.Second).Format(time.RFC850)}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			if got, ok := retryAfter(h, now); got != tt.want || ok != tt.wantOK {
				t.Errorf("retryAfter = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
