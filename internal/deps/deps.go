//go:build tools

// Package deps pins the chosen dependencies in go.mod until code imports them.
package deps

import (
	_ "github.com/cenkalti/backoff/v4"
	_ "github.com/dop251/goja"
	_ "github.com/kelseyhightower/envconfig"
	_ "github.com/mark3labs/mcp-go/client"
	_ "github.com/mark3labs/mcp-go/server"
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go/jetstream"
	_ "github.com/oklog/ulid/v2"
	_ "github.com/openai/openai-go/v3"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/tiktoken-go/tokenizer"
	_ "go.uber.org/goleak"
)
