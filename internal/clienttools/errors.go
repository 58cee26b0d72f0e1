package clienttools

import "errors"

var (
	// ErrNoAnswer: the submitter did not answer within the per-job timeout.
	ErrNoAnswer = errors.New("client tool: no answer from the submitter in time")
	// ErrAnswerTooLarge: an authentic answer exceeded the answer size limit.
	ErrAnswerTooLarge = errors.New("client tool: answer too large")
	// ErrArgsTooLarge: the arguments exceed the request size limit.
	ErrArgsTooLarge = errors.New("client tool: arguments too large")
	// ErrRejected: a message failed authentication or was malformed,
	// stale or replayed. Rejected messages are ignored, never fatal.
	ErrRejected = errors.New("client tool: message rejected")
	// ErrInvalidDecl: a client tool declaration is invalid or too large.
	ErrInvalidDecl = errors.New("client tool: invalid declaration")
	// ErrConfig: invalid configuration given to NewCaller or Serve.
	ErrConfig = errors.New("client tool: invalid configuration")
)
