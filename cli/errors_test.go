package cli

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/stratahq/strata/cli/client"
	"github.com/stratahq/strata/cli/contexts"
	"github.com/stratahq/strata/cli/manifest"
)

func TestExitCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, ExitOK},
		{"bad request", &client.APIError{Status: 400, Code: "InvalidArgument"}, ExitFailed},
		{"conflict", &client.APIError{Status: 409, Code: "Conflict"}, ExitFailed},
		{"server error", &client.APIError{Status: 500, Code: "Internal"}, ExitFailed},
		{"unavailable", &client.APIError{Status: 503, Code: "Unavailable"}, ExitFailed},
		{"not found", &client.APIError{Status: 404, Code: "NotFound"}, ExitNotFound},
		{"not found, wrapped", fmt.Errorf("describe: %w", &client.APIError{Status: 404}), ExitNotFound},
		{"unauthenticated", &client.APIError{Status: 401, Code: "Unauthenticated"}, ExitUnauthorized},
		{"forbidden", &client.APIError{Status: 403, Code: "Forbidden"}, ExitUnauthorized},
		{"quota exceeded is forbidden too", &client.APIError{Status: 403, Code: "QuotaExceeded"}, ExitUnauthorized},
		{"cannot connect", &client.ConnError{URL: "http://x", Err: syscall.ECONNREFUSED}, ExitUnreachable},
		{"usage", usageErrorf("bad"), ExitUsage},
		{"a bad manifest", &manifest.Error{Err: errors.New("unknown kind")}, ExitUsage},
		{"no context", fmt.Errorf("%w: run ...", contexts.ErrNoContext), ExitUsage},
		{"an unknown context", fmt.Errorf("x: %w", contexts.ErrUnknownContext), ExitNotFound},
		{"a failed operation", &exitError{code: ExitFailed, err: errors.New("drain failed")}, ExitFailed},
		{"a failed apply takes its first failure's code", &exitError{code: ExitNotFound, err: errors.New("1 of 2 failed")}, ExitNotFound},
		{"a timeout", fmt.Errorf("x: %w", context.DeadlineExceeded), ExitFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ExitCode(tc.err); got != tc.want {
				t.Errorf("got %d; want %d", got, tc.want)
			}
		})
	}
}
