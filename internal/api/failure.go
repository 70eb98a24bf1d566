package api

import (
	"context"
	"log/slog"
	"net/http"
)

// FailureLevel is the level a server logs a failed request at, given the
// request's context and the HTTP status the failure maps to (for gRPC,
// the status of the same error class).
//
// ERROR is for what the operator must look at: an internal error. A
// request whose client went away (its context is done: a load balancer's
// /readyz probe that timed out, a CLI interrupted) fails with whatever
// the handler was doing when it noticed, often an unclassified error from
// etcd; that is no fault of the server, so it is DEBUG, like a refusal
// (4xx) and "unavailable" (503: the reason is logged where it arises, and
// probes would repeat it every second).
func FailureLevel(ctx context.Context, code int) slog.Level {
	if ctx.Err() != nil || code < http.StatusInternalServerError || code == http.StatusServiceUnavailable {
		return slog.LevelDebug
	}
	return slog.LevelError
}
