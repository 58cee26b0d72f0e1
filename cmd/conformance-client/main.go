package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"
)

// deadline stays under the runner's 30 s client timeout, so that a stuck
// scenario reports its own error instead of being killed silently.
const deadline = 25 * time.Second

func main() {
	if err := run(os.Args, os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "conformance-client:", err)
		os.Exit(1)
	}
}

// run is main without the process globals, so a test could drive it.
func run(args []string, getenv func(string) string, stderr io.Writer) error {
	if len(args) < 2 {
		return errors.New("usage: conformance-client <server URL> (scenario in MCP_CONFORMANCE_SCENARIO)")
	}
	// The runner appends the URL as the last argument.
	serverURL := args[len(args)-1]
	name := getenv("MCP_CONFORMANCE_SCENARIO")
	scenario, ok := scenarios[name]
	if !ok {
		return fmt.Errorf("unknown scenario %q", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	env := &env{
		url:     serverURL,
		context: getenv("MCP_CONFORMANCE_CONTEXT"),
		log:     slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	env.log.Info("scenario start", "scenario", name, "url", serverURL)
	if err := scenario(ctx, env); err != nil {
		return fmt.Errorf("scenario %s: %w", name, err)
	}
	env.log.Info("scenario done", "scenario", name)
	return nil
}

// env is what a scenario gets from the runner.
type env struct {
	url     string
	context string // raw MCP_CONFORMANCE_CONTEXT JSON, empty for most scenarios
	log     *slog.Logger
}
