package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/redact"
)

const defaultTask = "What is the weather in Lisbon right now, and what is 19.5 + 22.5?"

func main() {
	task, keep, err := parseArgs(os.Args[1:], os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return
	case err != nil:
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(2)
	}
	// A write to a closed stdout (bin/demo | head) killed the demo with
	// SIGPIPE, before its deferred cleanup: the worker and the MCP server
	// it starts kept running and the temporary directory stayed. Once
	// SIGPIPE is asked for, Go returns EPIPE from such a write instead
	// (os/signal, "SIGPIPE"); stdoutWatch then stops the demo, and the
	// cleanup runs. The channel is never read: nothing is to be done
	// with the signal itself.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancelCause(sigCtx)
	defer cancel(nil)
	err = run(ctx, stdoutWatch{os.Stdout, cancel}, task, keep)
	switch {
	case errors.Is(err, errStdoutClosed):
		fmt.Fprintln(os.Stderr, "demo: stdout was closed; stopped the worker and removed the temporary directory")
		os.Exit(1)
	case err != nil:
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// errStdoutClosed is why the demo stops when its stdout is closed.
var errStdoutClosed = errors.New("stdout closed")

// stdoutWatch is stdout that ends the demo's context when it is closed.
type stdoutWatch struct {
	w      io.Writer
	cancel context.CancelCauseFunc
}

func (s stdoutWatch) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		s.cancel(errStdoutClosed)
	}
	return n, err
}

// parseArgs reads the flags. An empty --task (the demo then started a
// worker only for submit to refuse it) and words beside the flags (a task
// given without --task was ignored, and the default task ran) are refused.
func parseArgs(args []string, stderr io.Writer) (task string, keep bool, err error) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&task, "task", defaultTask, "the task to submit")
	fs.BoolVar(&keep, "keep", false, "keep the temporary directory (NATS store, MCP config)")
	if err := fs.Parse(args); err != nil {
		return "", false, err
	}
	if fs.NArg() > 0 {
		return "", false, fmt.Errorf("unexpected argument %q: give the task with --task %q (see demo -h)",
			fs.Arg(0), strings.Join(fs.Args(), " "))
	}
	if strings.TrimSpace(task) == "" {
		return "", false, errors.New("--task is empty: give a task, or leave --task out for the default one")
	}
	return task, keep, nil
}

// run runs the demo, writing to out (the subcommands write to os.Stdout).
// When ctx ends it returns ctx's cause, after the cleanup.
func run(ctx context.Context, out io.Writer, task string, keep bool) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	bin := filepath.Dir(exe)
	for _, b := range []string{"worker", "submit", "mcpserver"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return fmt.Errorf("%s not found beside the demo binary: run `make demo` (it builds bin/ first)", b)
		}
	}
	dir, err := os.MkdirTemp("", "jetagent-demo-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Fprintln(out, "demo: keeping", dir)
	} else {
		defer os.RemoveAll(dir)
	}

	// The MCP configuration, in the mcpServers format users already have.
	mcpConfig := filepath.Join(dir, "mcp.json")
	conf := fmt.Sprintf(`{"mcpServers": {"example": {"command": %q}}}`, filepath.Join(bin, "mcpserver"))
	if err := os.WriteFile(mcpConfig, []byte(conf), 0o600); err != nil {
		return err
	}

	modelEnv, closeModel, err := model(out, os.Getenv)
	if err != nil {
		return err
	}
	defer closeModel()

	addr, err := freeAddr()
	if err != nil {
		return err
	}
	natsURL := "nats://" + addr
	workerEnv := append(os.Environ(), modelEnv...)
	workerEnv = append(workerEnv,
		"NATS_URL=", // embedded default
		"JETAGENT_DATA_DIR="+filepath.Join(dir, "data"),
		"JETAGENT_LISTEN="+addr,
		"JETAGENT_MCP_CONFIG="+mcpConfig,
		"JETAGENT_SHUTDOWN_GRACE=5s",
	)
	workerEnv = append(workerEnv, pinnedEnv(os.Getenv)...)
	if ctx.Err() != nil { // stdout closed already (bin/demo | head -1)
		return context.Cause(ctx)
	}
	fmt.Fprintf(out, "\n$ JETAGENT_MCP_CONFIG=%s JETAGENT_LISTEN=%s bin/worker\n", mcpConfig, addr)
	worker := exec.Command(filepath.Join(bin, "worker"))
	worker.Env = workerEnv
	worker.SysProcAttr = childProcAttr()
	ready, err := startPrefixed(worker, "[worker] ", `msg="worker ready"`)
	if err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- worker.Wait() }()
	defer func() {
		_ = worker.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited: //nolint:errcheck // how a worker told to stop exits is of no interest here
		case <-time.After(10 * time.Second):
			_ = worker.Process.Kill()
			<-exited //nolint:errcheck // killed: its exit status says nothing
		}
	}()
	select {
	case <-ready:
	case err := <-exited:
		return fmt.Errorf("worker exited before it was ready: %w", err)
	case <-time.After(60 * time.Second):
		return errors.New("worker not ready after 60s")
	case <-ctx.Done():
		return context.Cause(ctx)
	}

	id := fmt.Sprintf("demo-%d", time.Now().Unix())
	submitEnv := append(os.Environ(), "NATS_URL="+natsURL)
	fmt.Fprintf(out, "\n$ NATS_URL=%s bin/submit --id %s -- %q\n", natsURL, id, task)
	// After "--" a task that looks like a flag or a command ("-v", "status x") is still the task.
	if err := runCmd(ctx, submitEnv, filepath.Join(bin, "submit"), "--id", id, "--", task); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	fmt.Fprintf(out, "\n$ NATS_URL=%s bin/submit transcript %s\n", natsURL, id)
	if err := runCmd(ctx, submitEnv, filepath.Join(bin, "submit"), "transcript", id); err != nil {
		return fmt.Errorf("submit transcript: %w", err)
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	fmt.Fprintln(out, "\ndemo: done — the job ran through NATS JetStream, an MCP server and the model above.")
	return nil
}

// model returns the OPENAI_* environment for the worker: the caller's own
// when OPENAI_BASE_URL is set, otherwise a scripted model started here.
// getenv is os.Getenv (a test's own in tests).
func model(out io.Writer, getenv func(string) string) (env []string, closeFn func(), err error) {
	if base := getenv("OPENAI_BASE_URL"); base != "" {
		// The demo's output is pasted into issues: a gateway's key in the URL stays out.
		fmt.Fprintf(out, "demo: model %s at %s\n", getenv("OPENAI_MODEL"), redact.URL(base))
		return nil, func() {}, nil
	}
	s, err := llmtest.Start(llmtest.Script{Model: "jetagent-scripted-demo", Handler: scripted})
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintln(out, strings.Repeat("=", 78))
	fmt.Fprintln(out, "demo: OPENAI_BASE_URL is not set, so this demo uses a SCRIPTED model")
	fmt.Fprintln(out, "      (internal/llm/llmtest at "+s.URL()+"): it follows a fixed script,")
	fmt.Fprintln(out, "      no real LLM is involved. Set OPENAI_BASE_URL, OPENAI_API_KEY and")
	fmt.Fprintln(out, "      OPENAI_MODEL to run the same demo against a real model.")
	fmt.Fprintln(out, strings.Repeat("=", 78))
	return []string{"OPENAI_BASE_URL=" + s.URL(), "OPENAI_API_KEY=scripted", "OPENAI_MODEL=jetagent-scripted-demo"}, s.Close, nil
}

// pinnedEnv is the worker settings the demo depends on, whatever the
// caller's environment says (other JETAGENT_* variables reach the worker,
// so that JETAGENT_TOOL_MODE=search bin/demo tries search mode). The demo
// knows the worker is ready by its "worker ready" line in the text format
// at info level: with JETAGENT_LOG_FORMAT=json or JETAGENT_LOG_LEVEL=warn
// set it waited 60 s and said the worker was not ready. It submits to the
// default queue: a JETAGENT_QUEUES without it left the job queued for ever.
// getenv is os.Getenv (a test's own in tests).
func pinnedEnv(getenv func(string) string) []string {
	env := []string{"JETAGENT_LOG_FORMAT=text", "JETAGENT_QUEUES=default"}
	if !strings.EqualFold(strings.TrimSpace(getenv("JETAGENT_LOG_LEVEL")), "debug") {
		env = append(env, "JETAGENT_LOG_LEVEL=info")
	}
	return env
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startPrefixed starts cmd with its output prefixed on our stderr; the
// returned channel closes when a line contains marker.
func startPrefixed(cmd *exec.Cmd, prefix, marker string) (<-chan struct{}, error) {
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	var once sync.Once
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(os.Stderr, prefix+line)
			if strings.Contains(line, marker) {
				once.Do(func() { close(ready) })
			}
		}
		// A line over the scanner's 1 MiB ends the loop: the rest is
		// discarded, or the child would block on its next write, and
		// Wait (which waits for os/exec's copy into pw) would never
		// return, not even after a kill.
		_, _ = io.Copy(io.Discard, pr)
	}()
	return ready, nil
}

// runCmd runs a command writing to our stdout and stderr. One that ctx
// ended, or that died of a write to the closed stdout, returns
// context.Cause(ctx) or errStdoutClosed.
func runCmd(ctx context.Context, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	cmd.SysProcAttr = childProcAttr()
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err != nil && ctx.Err() != nil:
		return context.Cause(ctx)
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGPIPE {
			return errStdoutClosed
		}
	}
	return err
}
