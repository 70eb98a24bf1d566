package audit

import (
	"context"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/stratahq/strata/internal/transport"
)

// mutatingVerbs start the names of the gRPC methods that change
// something and are called by people or their tools (not the tiers'
// own heartbeats, reports and placements, which are not audited: the
// call that caused them is).
var mutatingVerbs = []string{"Create", "Update", "Delete", "Scale", "Rollback", "Register", "Cordon", "Uncordon", "Drain", "Pin", "Unpin", "Pause", "Resume", "Cancel"}

// MutatingRPC reports whether the gRPC method (full name) changes
// something, by its verb.
func MutatingRPC(fullMethod string) bool {
	name := fullMethod[strings.LastIndexByte(fullMethod, '/')+1:]
	for _, v := range mutatingVerbs {
		if strings.HasPrefix(name, v) {
			return true
		}
	}
	return false
}

// HTTPEntry is the entry of a REST call, who made it aside.
func HTTPEntry(tier string, r *http.Request, code int, took time.Duration) Entry {
	return Entry{
		Time: time.Now(), Tier: tier, Method: r.Method, Path: r.URL.Path, Status: code,
		Remote: r.RemoteAddr, DurationMS: ms(took),
	}
}

// GRPCEntry is the entry of a gRPC call: the caller's certificate
// identity when the interceptor admitted one (token callers' tiers add
// the token's), and the object its request names.
func GRPCEntry(ctx context.Context, tier, method string, req any, err error, took time.Duration) Entry {
	e := Entry{Time: time.Now(), Tier: tier, Method: "gRPC", Path: method, Code: status.Code(err).String(), DurationMS: ms(took)}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		e.Remote = p.Addr.String()
	}
	if c, ok := transport.CallerFrom(ctx); ok && !c.Token {
		e.Who.Identity = c.String()
	}
	e.Object = Object(req)
	return e
}

// Object is "tenant/name", "region/node" or "name" from a request's
// getters, "" when it has none.
// A create or update that carries the object itself passes the object
// (Object): the tier knows its messages, this package does not.
func Object(req any) string {
	var parts []string
	for _, get := range []func(any) string{
		func(r any) string {
			if g, ok := r.(interface{ GetTenant() string }); ok {
				return g.GetTenant()
			}
			return ""
		},
		func(r any) string {
			if g, ok := r.(interface{ GetRegion() string }); ok {
				return g.GetRegion()
			}
			return ""
		},
		func(r any) string {
			if g, ok := r.(interface{ GetName() string }); ok {
				return g.GetName()
			}
			return ""
		},
	} {
		if v := get(req); v != "" {
			parts = append(parts, v)
		}
	}
	return strings.Join(parts, "/")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
