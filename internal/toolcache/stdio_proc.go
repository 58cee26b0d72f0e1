package toolcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
)

// A stdio server's process is started here rather than by mcp-go, so that
// its stdout is read through a bound: mcp-go reads each line whole
// (bufio.Reader.ReadString), and a server that writes one endless line (a
// tool result of gigabytes, a server printing a binary file, garbage without
// a newline) grew the worker's memory until the machine killed it — and with
// it every job it ran, on every worker that picked the job up again. A line
// over maxMessageBytes now breaks the session, like an HTTP response over
// that size, and the call fails with the reason.

// stdioProc is a started stdio server.
type stdioProc struct {
	cmd *exec.Cmd
	// stderr is the read end of the child's stderr (EOF once every process
	// holding it exited).
	stderr *os.File
	// stdout is the read end of its stdout, read by mcp-go.
	stdout *os.File
	// out is how mcp-go reads stdout (bounded, and sniffed for stray lines).
	out *lineBound
	// done is closed when cmd.Wait returned; waitErr is its error.
	done    chan struct{}
	waitErr error
}

// The graceful end of a stdio server (mcp-go's figures for the processes it
// starts): stdin closed, then SIGTERM, then SIGKILL.
const (
	stdioGraceful  = 2 * time.Second
	stdioForceKill = 3 * time.Second
)

// startStdio starts cfg's command on ctx (which kills it when it ends) and
// returns the transport that speaks to it, logging to logger. When the
// server writes a line over maxMessageBytes, tooLarge is set, onTooLarge
// runs, and reading stops there.
func startStdio(ctx context.Context, cfg ServerConfig, logger *slog.Logger, tooLarge *atomic.Bool, onTooLarge func()) (*transport.Stdio, *stdioProc, error) {
	cmd := exec.CommandContext(ctx, cfg.Command, cfg.Args...)
	cmd.Env = childEnv(envList(cfg.Env)) // never the worker's secrets: see childenv.go
	cmd.Dir = cfg.Cwd
	cmd.SysProcAttr = childProcAttr()
	// Pipes of our own (not cmd.StdoutPipe): Wait then does not close them
	// under a reader, so it can run as soon as the process starts.
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("stdin pipe: %w", err)
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("stderr pipe: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("failed to start command: %w", err)
	}
	// The child has its ends now.
	_ = inR.Close()
	_ = outW.Close()
	_ = errW.Close()
	p := &stdioProc{cmd: cmd, stderr: errR, stdout: outR, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	out := &lineBound{b: &limitedBody{ReadCloser: outR, left: maxMessageBytes, perLine: true, tooLarge: tooLarge}, onTooLarge: onTooLarge}
	p.out = out
	// No logging reader: the session reads stderr itself (p.stderr), and
	// mcp-go's Close would otherwise close it under that reader.
	tr := transport.NewIO(out, inW, nil)
	transport.WithCommandLogger(logger)(tr)
	return tr, p, nil
}

// end waits for a child whose stdin was closed to exit: up to
// stdioGraceful, then SIGTERM and up to stdioForceKill, then SIGKILL to
// its process group. It returns how the process ended, or
// transport.ErrChildShutdownTimeout when it would not.
func (p *stdioProc) end() error {
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-p.done:
			return true
		case <-t.C:
			return false
		}
	}
	if wait(stdioGraceful) {
		return p.waitErr
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if wait(stdioForceKill) {
		return p.waitErr
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	if wait(stdioForceKill) {
		return p.waitErr
	}
	return transport.ErrChildShutdownTimeout
}

// lineBound reads a stdio server's stdout through limitedBody's per-line
// bound and ends it (io.EOF) at a line over maxMessageBytes, after calling
// onTooLarge, which says why (mcp-go would log any other error as its own).
type lineBound struct {
	b          *limitedBody
	onTooLarge func()
	err        error
	// The last line that was no JSON-RPC message (its start): mcp-go
	// drops such lines without a word, and a server that prints its usage
	// or a banner to stdout and exits, or then never answers, failed with
	// only "transport closed" or the connect timeout.
	mu         sync.Mutex
	midLine    bool // the last read ended inside a line
	inStray    bool // ... of a stray line, still being captured
	stray      []byte
	strayCount int
}

// maxStray bounds what is kept of a stray stdout line.
const maxStray = 200

// sniff records the stray (non-JSON) lines of p.
func (l *lineBound) sniff(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(p) > 0 {
		if !l.midLine {
			start := bytes.TrimLeft(p, " \t\r")
			if len(start) == 0 {
				return // the line's first byte is in a later read
			}
			if start[0] == '\n' {
				p = start[1:]
				continue
			}
			p = start
			l.midLine, l.inStray = true, p[0] != '{' && p[0] != '['
			if l.inStray {
				l.stray, l.strayCount = l.stray[:0], l.strayCount+1
			}
		}
		end := bytes.IndexByte(p, '\n')
		line := p
		if end >= 0 {
			line = p[:end]
		}
		if l.inStray && len(l.stray) < maxStray {
			l.stray = append(l.stray, line[:min(len(line), maxStray-len(l.stray))]...)
		}
		if end < 0 {
			return
		}
		l.midLine, l.inStray = false, false
		p = p[end+1:]
	}
}

// strayHint quotes the last stray stdout line, for error messages.
func (l *lineBound) strayHint() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.strayCount == 0 {
		return ""
	}
	line := strings.ToValidUTF8(strings.TrimSpace(string(l.stray)), "\uFFFD")
	more := ""
	if l.strayCount > 1 {
		more = fmt.Sprintf(", the last of %d", l.strayCount)
	}
	return fmt.Sprintf(" (server stdout, not JSON-RPC%s: %q)", more, line)
}

func (l *lineBound) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.b.Read(p)
	l.sniff(p[:n])
	switch {
	case errors.Is(err, errMessageTooLarge):
		l.err = io.EOF
		_ = l.b.Close() // the server blocks on a full pipe, not on us
		if l.onTooLarge != nil {
			l.onTooLarge()
		}
		return n, l.err
	case errors.Is(err, os.ErrClosed):
		err = io.EOF // closed by the session's close
	}
	return n, err
}
