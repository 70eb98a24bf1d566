package cli

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/stratahq/strata/cli/client"
	"github.com/stratahq/strata/cli/contexts"
	"github.com/stratahq/strata/cli/manifest"
)

// Exit codes scripts can trust.
const (
	ExitOK = 0
	// ExitFailed is a failure the server reported, or an operation that
	// failed (a drain that failed, an apply with a failed object).
	ExitFailed = 1
	// ExitUsage is a bad command line, manifest or configuration: nothing
	// was sent.
	ExitUsage = 2
	// ExitNotFound is an object (or context) that does not exist.
	ExitNotFound = 3
	// ExitUnauthorized is a missing, wrong or insufficient token.
	ExitUnauthorized = 4
	// ExitUnreachable is a server that cannot be reached at all.
	ExitUnreachable = 5
)

// usageError is a bad command line: exit code 2, with a pointer to --help.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// exitError carries its own exit code: a failed operation whose details
// were already printed, or a local "not found".
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// ExitCode is the exit code for err (0 for nil).
func ExitCode(err error) int {
	var (
		usage *usageError
		exit  *exitError
		conn  *client.ConnError
		apiE  *client.APIError
		doc   *manifest.Error
	)
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &exit):
		return exit.code
	case errors.As(err, &usage), errors.As(err, &doc), errors.Is(err, contexts.ErrNoContext):
		return ExitUsage
	case errors.Is(err, contexts.ErrUnknownContext):
		return ExitNotFound
	case errors.As(err, &conn):
		return ExitUnreachable
	case errors.As(err, &apiE):
		switch apiE.Status {
		case http.StatusNotFound:
			return ExitNotFound
		case http.StatusUnauthorized, http.StatusForbidden:
			return ExitUnauthorized
		}
	}
	return ExitFailed
}

// hint is a line that tells what to do about err, or "".
func hint(err error) string {
	var conn *client.ConnError
	switch {
	case client.StatusOf(err) == http.StatusUnauthorized:
		return "check the token: --token, STRATA_TOKEN or the context's (stratactl config get-contexts)"
	case errors.As(err, &conn):
		return "is the server running? Check the URL: --url, STRATA_URL or the context's (stratactl config get-contexts)"
	}
	return ""
}

// failures tallies what a command over several objects could not do: each
// failure is reported as it happens, the others go on, and the exit code
// is that of the first.
type failures struct {
	w     io.Writer
	first error
	n     int
}

func (f *failures) add(ref string, err error) {
	f.n++
	if f.first == nil {
		f.first = err
	}
	fmt.Fprintf(f.w, "error: %s: %v\n", ref, err)
}

// err is the command's error after total objects, nil without failures.
func (f *failures) err(total int) error {
	if f.n == 0 {
		return nil
	}
	return &exitError{code: ExitCode(f.first), err: fmt.Errorf("%d of %d objects failed", f.n, total)}
}
