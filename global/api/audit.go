package api

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/audit"
	"github.com/stratahq/strata/internal/transport"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// What the audit log records (Options.Audit): every call that changes
// something, on REST (the edge's Auditor: auditREST) and gRPC
// (auditGRPC), and every read that returns, or tries to, secret values,
// a replica's logs or another tenant's objects. Which reads those are is
// decided where the services authorize (noteTenant, noteRead), into the
// access that the call's context carries; the audit reads it once the
// call is answered.

// access is what one call reached, for its audit entry: who made it,
// the tenant it acted in, and why a read is worth recording.
type access struct {
	mu     sync.Mutex
	who    Identity
	tenant string
	reads  []string
}

type accessKey struct{}

// withAccess returns ctx carrying an access, the one it carries already
// if any: the REST edge's read audit makes it before authentication,
// which makes it for gRPC.
func withAccess(ctx context.Context) (context.Context, *access) {
	if a, ok := ctx.Value(accessKey{}).(*access); ok {
		return ctx, a
	}
	a := &access{}
	return context.WithValue(ctx, accessKey{}, a), a
}

func accessFrom(ctx context.Context) *access {
	a, _ := ctx.Value(accessKey{}).(*access)
	return a
}

// noteCaller notes who the call is made by.
func noteCaller(ctx context.Context, id Identity) {
	if a := accessFrom(ctx); a != nil {
		a.mu.Lock()
		a.who = id
		a.mu.Unlock()
	}
}

// noteTenant notes that the call acts in tenant, and, when that is not
// id's own tenant, that it reaches another tenant's objects: allowed (an
// admin) or not (a probe), the audit records it.
func noteTenant(ctx context.Context, id Identity, tenant string) {
	a := accessFrom(ctx)
	if a == nil || tenant == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tenant = tenant
	if tenant != id.Tenant && !slices.Contains(a.reads, audit.ReadOtherTenant) {
		a.reads = append(a.reads, audit.ReadOtherTenant)
	}
}

// noteRead notes that the call returns, or asks for, what (one of
// audit's Read constants).
func noteRead(ctx context.Context, what string) {
	a := accessFrom(ctx)
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !slices.Contains(a.reads, what) {
		a.reads = append(a.reads, what)
	}
}

// fill adds to e what a noted: the tenant, and with reads why a read is
// recorded; it reports whether a read is to be.
func (a *access) fill(e *audit.Entry, reads bool) bool {
	if a == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	e.Tenant = a.tenant
	if reads {
		e.Reads = slices.Clone(a.reads)
	}
	return len(a.reads) > 0
}

// auditREST records a REST call that changes something.
func (s *Server) auditREST(r *http.Request, code int, took time.Duration) {
	e := audit.HTTPEntry("global:"+s.id, r, code, took)
	e.Who = whoOf(r.Context())
	accessFrom(r.Context()).fill(&e, false)
	s.audit.Record(e)
}

// auditReads records the REST reads that return secret values, logs or
// another tenant's objects; the edge (auditREST) records the rest.
func (s *Server) auditReads(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if audit.Mutating(r.Method) {
			next.ServeHTTP(w, r)
			return
		}
		ctx, a := withAccess(r.Context())
		sw := &statusWriter{ResponseWriter: w}
		start := time.Now()
		next.ServeHTTP(sw, r.WithContext(ctx))
		e := audit.HTTPEntry("global:"+s.id, r, sw.status(), time.Since(start))
		if !a.fill(&e, true) {
			return
		}
		a.mu.Lock()
		e.Who = who(a.who)
		a.mu.Unlock()
		s.audit.Record(e)
	})
}

// statusWriter remembers the status written; it flushes, for the
// streams (logs, events) it carries.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// auditGRPC records a ResourceService call that changes something, or a
// read that returns another tenant's objects.
func (s *Server) auditGRPC(ctx context.Context, method string, req any, err error, took time.Duration) {
	mutating := audit.MutatingRPC(method)
	e := audit.GRPCEntry(ctx, "global:"+s.id, method, req, err, took)
	if reads := accessFrom(ctx).fill(&e, !mutating); !mutating && !reads {
		return
	}
	if _, ok := IdentityFrom(ctx); ok {
		e.Who = whoOf(ctx)
	}
	// A create or update names the object inside it.
	switch r := req.(type) {
	case interface{ GetResource() *resourcev1.Resource }:
		e.Object = audit.Object(r.GetResource())
	case interface{ GetFlavor() *resourcev1.Flavor }:
		e.Object = audit.Object(r.GetFlavor())
	case interface{ GetRegion() *resourcev1.Region }:
		e.Object = audit.Object(r.GetRegion())
	}
	s.audit.Record(e)
}

// auditOrNil is auditGRPC when the Server audits.
func (s *Server) auditOrNil() transport.Auditor {
	if s.audit == nil {
		return nil
	}
	return s.auditGRPC
}

// whoOf is the caller in ctx as the audit log names it: by its token's
// id and name, never the token.
func whoOf(ctx context.Context) audit.Who {
	id, ok := IdentityFrom(ctx)
	if !ok {
		return audit.Who{}
	}
	return who(id)
}

func who(id Identity) audit.Who {
	return audit.Who{TokenID: id.TokenID, TokenName: id.TokenName, Tenant: id.Tenant, Role: string(id.Role)}
}
