package cfgerr

import (
	"errors"
	"fmt"
)

// FieldError is an invalid configuration value. It wraps the library's own
// sentinel (for example jobs.ErrConfig), so errors.Is keeps working.
type FieldError struct {
	// Fields are the Go field paths involved, the one at fault first (a
	// rule between two fields names both: Heartbeat, Topology.AckWait).
	Fields []string
	// Name is what the library calls the setting in prose ("heartbeat");
	// empty when Msg says it.
	Name string
	// Msg says what is wrong with the value, without the name.
	Msg string
	// Sentinel is the library's ErrConfig.
	Sentinel error
}

// Fields returns a FieldError about fields (the one at fault first).
func Fields(sentinel error, fields []string, name, format string, a ...any) *FieldError {
	return &FieldError{Fields: fields, Name: name, Msg: fmt.Sprintf(format, a...), Sentinel: sentinel}
}

// Field is Fields for a single field.
func Field(sentinel error, field, name, format string, a ...any) *FieldError {
	return Fields(sentinel, []string{field}, name, format, a...)
}

func (e *FieldError) Error() string {
	msg := e.Msg
	if e.Name != "" {
		msg = e.Name + " " + msg
	}
	if e.Sentinel == nil {
		return msg
	}
	return e.Sentinel.Error() + ": " + msg
}

func (e *FieldError) Unwrap() error { return e.Sentinel }

// As returns the FieldError in err's chain, if any.
func As(err error) (*FieldError, bool) {
	var fe *FieldError
	ok := errors.As(err, &fe)
	return fe, ok
}
