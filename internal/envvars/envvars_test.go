package envvars

import (
	"slices"
	"testing"
	"time"
)

func TestKeys(t *testing.T) {
	t.Parallel()
	var spec struct {
		AckWait     time.Duration `split_words:"true"`
		Queues      []string
		MCPTimeout  time.Duration `envconfig:"MCP_TIMEOUT"`
		unexported  int
		Concurrency int
	}
	_ = spec.unexported
	got, err := Keys("APP", &spec)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"APP_ACK_WAIT", "APP_QUEUES", "APP_MCP_TIMEOUT", "APP_CONCURRENCY"}
	if !slices.Equal(got, want) {
		t.Fatalf("Keys = %q, want %q", got, want)
	}
	if _, err := Keys("APP", spec); err == nil {
		t.Fatal("Keys of a non-pointer: no error")
	}
}

func TestStrays(t *testing.T) {
	t.Parallel()
	known := []string{"APP_CONCURRENCY", "APP_MCP_CONFIG", "APP_QUEUES", "APP_ACK_WAIT", "APP_LISTEN"}
	tests := []struct {
		name    string
		environ []string
		want    []Stray
	}{
		{"none set", nil, nil},
		{"known and other prefixes are not strays", []string{"APP_QUEUES=a", "PATH=/bin", "APPLE=1", "X=APP_Y"}, nil},
		{"a swap", []string{"APP_CONCURENCY=4"}, []Stray{{"APP_CONCURENCY", "APP_CONCURRENCY"}}},
		{"singular", []string{"APP_QUEUE=a"}, []Stray{{"APP_QUEUE", "APP_QUEUES"}}},
		{"underscore dropped", []string{"APP_MCPCONFIG=x"}, []Stray{{"APP_MCPCONFIG", "APP_MCP_CONFIG"}}},
		{"lower case", []string{"APP_ack_wait=1s"}, []Stray{{"APP_ack_wait", "APP_ACK_WAIT"}}},
		{"all in lower case", []string{"app_ack_wait=1s", "app_other=1"}, []Stray{{"app_ack_wait", "APP_ACK_WAIT"}, {"app_other", ""}}},
		{"mixed-case prefix", []string{"App_Listen=x"}, []Stray{{"App_Listen", "APP_LISTEN"}}},
		{"lower-case other prefix", []string{"apple=1", "ap=2"}, nil},
		{"nothing close", []string{"APP_SOMETHING_ELSE=1"}, []Stray{{"APP_SOMETHING_ELSE", ""}}},
		{"two edits from a short name are not close", []string{"APP_QUERY=a"}, []Stray{{"APP_QUERY", ""}}},
		{"two edits from a long name are", []string{"APP_CONCURENC=4"}, []Stray{{"APP_CONCURENC", "APP_CONCURRENCY"}}},
		{"value with '='", []string{"APP_LISTN=a=b"}, []Stray{{"APP_LISTN", "APP_LISTEN"}}},
		{"sorted", []string{"APP_Z=1", "APP_B=2"}, []Stray{{"APP_B", ""}, {"APP_Z", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Strays(tt.environ, "APP_", known)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Strays = %+v, want %+v", got, tt.want)
			}
		})
	}
}
