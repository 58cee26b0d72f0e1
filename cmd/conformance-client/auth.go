package main

import (
	"context"
	"errors"
)

// authScenarios are the OAuth scenarios of the core suite.
var authScenarios = []string{}

func authorizedToolCall(ctx context.Context, e *env) error {
	return errors.New("not implemented")
}
