package api

import (
	"errors"
	"fmt"
)

// Sentinel errors that callers branch on. Every tier converts them to an
// HTTP status or a gRPC code once, at its edge (see status.go).
var (
	ErrInvalid         = errors.New("invalid")
	ErrNotFound        = errors.New("not found")
	ErrAlreadyExists   = errors.New("already exists")
	ErrConflict        = errors.New("conflict")
	ErrNotLeader       = errors.New("not the leader")
	ErrUnavailable     = errors.New("unavailable")
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrForbidden       = errors.New("forbidden")
	ErrQuotaExceeded   = errors.New("quota exceeded")
	ErrTooLarge        = errors.New("request too large")
	ErrExhausted       = errors.New("exhausted")
	// ErrUnsupportedMedia is a request body in another format than JSON.
	ErrUnsupportedMedia = errors.New("unsupported media type")
)

// FieldError is a validation failure that names the field at fault, in the
// JSON path form a user wrote it ("spec.compute.image", "replicas").
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// Unwrap makes errors.Is(err, ErrInvalid) hold for every field error.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Invalid returns a FieldError.
func Invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// within prefixes the field of a FieldError with a parent path.
func within(parent string, err error) error {
	var fe *FieldError
	if err == nil || !errors.As(err, &fe) {
		return err
	}
	f := parent
	if fe.Field != "" {
		if fe.Field[0] == '[' {
			f += fe.Field
		} else {
			f += "." + fe.Field
		}
	}
	return &FieldError{Field: f, Message: fe.Message}
}

// NotFound wraps ErrNotFound with what was looked for.
func NotFound(what, name string) error {
	return fmt.Errorf("%s %q %w", what, name, ErrNotFound)
}

// AlreadyExists wraps ErrAlreadyExists with what collided.
func AlreadyExists(what, name string) error {
	return fmt.Errorf("%s %q %w", what, name, ErrAlreadyExists)
}
