package clienttools

import (
	"fmt"
	"regexp"
	"time"
)

// Defaults of Options.
const (
	DefaultPrefix    = "agent"
	DefaultTimeout   = 60 * time.Second
	DefaultMaxArgs   = 256 << 10
	DefaultMaxAnswer = 512 << 10
	DefaultMaxActive = 16
)

// Options tune NewCaller and Serve; zero fields take the defaults.
type Options struct {
	// Prefix of the subjects (default "agent": agent.client.<job_id>).
	Prefix string
	// Timeout: how long Call waits for an answer (the per-job client tool
	// timeout); in Serve, how long one handler may run at least (longer
	// when the request's deadline is later).
	Timeout time.Duration
	// MaxArgs limits the arguments' JSON text, in bytes.
	MaxArgs int
	// MaxAnswer limits an answer's output, in bytes. Call fails with
	// ErrAnswerTooLarge beyond it; Serve answers an error instead.
	MaxAnswer int
	// MaxActive limits the handlers Serve runs at once.
	MaxActive int
	// OnReject, when set, is told of every ignored message (wrapping
	// ErrRejected), for logs and metrics. It must not block.
	OnReject func(error)
	// OnPanic, when set, is told of a Serve handler that panicked (its
	// call is answered as a tool error quoting the panic's value), with
	// the goroutine's stack, for logs. It must not block.
	OnPanic func(err error, stack []byte)
}

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

func (o Options) withDefaults() (Options, error) {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxArgs == 0 {
		o.MaxArgs = DefaultMaxArgs
	}
	if o.MaxAnswer == 0 {
		o.MaxAnswer = DefaultMaxAnswer
	}
	if o.MaxActive == 0 {
		o.MaxActive = DefaultMaxActive
	}
	if o.OnReject == nil {
		o.OnReject = func(error) {}
	}
	if o.OnPanic == nil {
		o.OnPanic = func(error, []byte) {}
	}
	switch {
	case !prefixRE.MatchString(o.Prefix):
		return o, fmt.Errorf("%w: prefix %q is not a subject of plain tokens", ErrConfig, o.Prefix)
	case o.Timeout < 0, o.MaxArgs < 0, o.MaxAnswer < 0, o.MaxActive < 0:
		return o, fmt.Errorf("%w: negative timeout or limit", ErrConfig)
	}
	return o, nil
}

func checkJobID(jobID string) error {
	if !tokenRE.MatchString(jobID) {
		return fmt.Errorf("%w: job id %q is not a subject token", ErrConfig, jobID)
	}
	return nil
}
