package client

import (
	"errors"
	"fmt"
	"net/http"
)

// APIError is an error answered by the server: its HTTP status and the
// body {"error":{"code","message","field"}}.
type APIError struct {
	Status  int
	Code    string
	Message string
	Field   string
}

func (e *APIError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s (field %s)", e.Message, e.Field)
	}
	return e.Message
}

// ConnError is a failure to reach the server at all: refused, unresolvable,
// a TLS handshake that failed, a connection that broke.
type ConnError struct {
	URL string
	Err error
}

func (e *ConnError) Error() string {
	return fmt.Sprintf("cannot connect to %s: %v", e.URL, e.Err)
}

func (e *ConnError) Unwrap() error { return e.Err }

// StatusOf returns the HTTP status of an *APIError in err's chain, or 0.
func StatusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// IsNotFound reports whether the server answered 404.
func IsNotFound(err error) bool { return StatusOf(err) == http.StatusNotFound }
