package transport

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/pki"
)

// Message size limits. Most methods carry small messages; a server's
// Policy names the few that need more.
const (
	// DefaultMaxMessageBytes bounds one message a server receives unless
	// its rule says otherwise, and one message a client sends or
	// receives unless the call asks for LargeMessages.
	DefaultMaxMessageBytes = 4 << 20
	// LargeMessageBytes bounds the batches between tiers that
	// authenticate each other (placements from the global tier, an
	// agent's assignment snapshot, lists answered to the global tier).
	LargeMessageBytes = 64 << 20
)

// Rule says who may call the methods of one service (or one method) and
// how large a request may be. Every method a server serves needs a rule:
// the interceptor refuses methods its Policy does not name.
type Rule struct {
	// Kinds are the certificate identities that may call.
	Kinds []pki.Kind
	// Region, when set, admits region and node identities of that
	// region only (region:<Region>, node:<Region>/*).
	Region string
	// Token, when set, authenticates callers by the bearer token in
	// their "authorization" metadata instead of by certificate, and
	// returns the context the handler runs in. Tenant-facing services
	// use it: a tier certificate grants nothing there.
	Token func(ctx context.Context, bearer string) (context.Context, error)
	// Local admits the peers of a unix socket that run as this process's
	// user or as root (Local security).
	Local bool
	// MaxRecvBytes bounds one request message; zero is
	// DefaultMaxMessageBytes.
	MaxRecvBytes int
	// Audit, when set, is told of every unary call of the methods the
	// rule covers once it is answered, refused ones included.
	Audit Auditor
}

// Auditor records a unary call: ctx carries the caller the interceptor
// admitted (CallerFrom, and what a Token function added) when it
// admitted one; err is the call's error (nil for success).
type Auditor func(ctx context.Context, method string, req any, err error, took time.Duration)

// Policy maps a service name ("strata.region.v1.AgentService") or a full
// method name ("/strata.region.v1.AgentService/Register") to its rule; a
// method's own rule wins over its service's.
type Policy map[string]Rule

func (p Policy) rule(fullMethod string) (Rule, bool) {
	if r, ok := p[fullMethod]; ok {
		return r, true
	}
	svc, _, _ := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	r, ok := p[svc]
	return r, ok
}

// maxRecv is the largest request any rule admits: the server-wide limit,
// under which each rule's own is enforced.
func (p Policy) maxRecv() int {
	n := DefaultMaxMessageBytes
	for _, r := range p {
		n = max(n, r.MaxRecvBytes)
	}
	return n
}

// accepts describes who a rule admits, for refusals.
func (r Rule) accepts() string {
	var out []string
	for _, k := range r.Kinds {
		switch {
		case k == pki.KindNode && r.Region != "":
			out = append(out, "node:"+r.Region+"/<name>")
		case k == pki.KindNode:
			out = append(out, "node:<region>/<name>")
		case k == pki.KindRegion && r.Region != "":
			out = append(out, "region:"+r.Region)
		default:
			out = append(out, string(k)+":*")
		}
	}
	if r.Token != nil {
		out = append(out, "a bearer token")
	}
	if r.Local {
		out = append(out, "a local peer of the same user")
	}
	if len(out) == 0 {
		return "nobody"
	}
	return strings.Join(out, " or ")
}

func (r Rule) admits(id pki.Identity) bool {
	if !slices.Contains(r.Kinds, id.Kind) {
		return false
	}
	switch {
	case r.Region == "":
		return true
	case id.Kind == pki.KindNode:
		return id.Region == r.Region
	case id.Kind == pki.KindRegion:
		return id.Name == r.Region
	default:
		return true
	}
}

// Caller is who made a call, as the server's interceptor established it
// before the handler ran.
type Caller struct {
	// Identity is the verified certificate's (zero otherwise).
	Identity pki.Identity
	// Insecure is a plaintext peer on loopback of a tier in insecure
	// mode: it proved nothing and is trusted as any identity.
	Insecure bool
	// Token is a caller authenticated by a bearer token (Rule.Token).
	Token bool
	// Local is a unix-socket peer of this process's user (Rule.Local).
	Local bool
}

func (c Caller) String() string {
	switch {
	case c.Insecure:
		return "an insecure-mode loopback peer"
	case c.Token:
		return "a bearer-token caller"
	case c.Local:
		return "a local peer"
	default:
		return c.Identity.String()
	}
}

type callerKey struct{}

// CallerFrom returns the caller the interceptor admitted; ok is false
// outside a call served by NewServer.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// AuthorizeNode lets a node act for itself only: the caller must be
// node:<region>/<node> (or an insecure-mode loopback peer).
func AuthorizeNode(ctx context.Context, region, node string) error {
	c, ok := CallerFrom(ctx)
	switch {
	case !ok:
		return fmt.Errorf("no authenticated caller: %w", api.ErrUnauthenticated)
	case c.Insecure:
		return nil
	case c.Identity == pki.Node(region, node):
		return nil
	}
	return fmt.Errorf("%s may not act for %s: %w", c, pki.Node(region, node), api.ErrForbidden)
}

// AuthorizeRegion lets a region speak for itself only: the caller must
// be region:<name> (or an insecure-mode loopback peer).
func AuthorizeRegion(ctx context.Context, name string) error {
	c, ok := CallerFrom(ctx)
	switch {
	case !ok:
		return fmt.Errorf("no authenticated caller: %w", api.ErrUnauthenticated)
	case c.Insecure:
		return nil
	case c.Identity == pki.Region(name):
		return nil
	}
	return fmt.Errorf("%s may not act for %s: %w", c, pki.Region(name), api.ErrForbidden)
}

// authenticate establishes the caller of method under the server's
// security and policy, or says why it is refused.
func (s *Security) authenticate(ctx context.Context, p Policy, method string) (context.Context, Rule, error) {
	rule, ok := p.rule(method)
	if !ok {
		return nil, rule, fmt.Errorf("%s is not open to anyone on this server: %w", method, api.ErrForbidden)
	}
	pr, _ := peer.FromContext(ctx)
	if pr == nil {
		return nil, rule, fmt.Errorf("no peer: %w", api.ErrUnauthenticated)
	}
	caller, err := s.callerOf(pr, rule, method)
	if err != nil {
		return nil, rule, err
	}
	if rule.Token != nil {
		// Tenant-facing: the token is the identity, whatever the link.
		bearer, err := bearerToken(ctx)
		if err != nil {
			return nil, rule, fmt.Errorf("%s: %w (a certificate grants nothing there)", method, err)
		}
		tctx, err := rule.Token(ctx, bearer)
		if err != nil {
			return nil, rule, err
		}
		return context.WithValue(tctx, callerKey{}, Caller{Token: true}), rule, nil
	}
	switch {
	case caller.Insecure, caller.Local:
	case caller.Identity.Kind == "":
		return nil, rule, fmt.Errorf("no verified client certificate: %s accepts %s: %w", method, rule.accepts(), api.ErrUnauthenticated)
	case !rule.admits(caller.Identity):
		return nil, rule, fmt.Errorf("%s may not call %s (it accepts %s): %w", caller.Identity, method, rule.accepts(), api.ErrForbidden)
	}
	return context.WithValue(ctx, callerKey{}, caller), rule, nil
}

// callerOf is who peer pr is under the server's security mode: a
// loopback peer (insecure), a local process of this user or root (unix
// socket), or the identity its verified certificate names (none without
// one; the rule decides whether that is enough).
func (s *Security) callerOf(pr *peer.Peer, rule Rule, method string) (Caller, error) {
	var caller Caller
	switch s.mode {
	case modeInsecure:
		if !isLoopback(pr.Addr) {
			return caller, fmt.Errorf("insecure mode answers loopback peers only; %s is not one: %w", pr.Addr, api.ErrUnauthenticated)
		}
		caller.Insecure = true
	case modeLocal:
		li, ok := pr.AuthInfo.(localInfo)
		if !ok || !rule.Local {
			return caller, fmt.Errorf("%s accepts %s: %w", method, rule.accepts(), api.ErrForbidden)
		}
		if li.uid != uint32(os.Getuid()) && li.uid != 0 {
			return caller, fmt.Errorf("uid %d may not call %s (it accepts uid %d or root): %w", li.uid, method, os.Getuid(), api.ErrForbidden)
		}
		caller.Local = true
	default:
		if ti, ok := pr.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 {
			id, err := pki.IdentityOf(ti.State.VerifiedChains[0][0])
			if err != nil {
				return caller, fmt.Errorf("the client certificate names no Strata identity (%v): %w", err, api.ErrForbidden)
			}
			caller.Identity = id
		}
	}
	return caller, nil
}

// bearerToken reads the "authorization: Bearer <token>" metadata; a call
// without one is unauthenticated.
func bearerToken(ctx context.Context) (string, error) {
	var header string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			header = v[0]
		}
	}
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", fmt.Errorf("a bearer token is required (authorization: Bearer <token>): %w", api.ErrUnauthenticated)
	}
	return strings.TrimSpace(token), nil
}

// checkSize enforces a rule's request limit on one received message.
func checkSize(rule Rule, method string, m any) error {
	limit := rule.MaxRecvBytes
	if limit == 0 {
		limit = DefaultMaxMessageBytes
	}
	pm, ok := m.(proto.Message)
	if !ok {
		return nil
	}
	if n := proto.Size(pm); n > limit {
		return fmt.Errorf("%s: a message of %d bytes is over this method's limit of %d: %w", method, n, limit, api.ErrTooLarge)
	}
	return nil
}

// authStream is a server stream whose context carries the caller and
// whose received messages are held to the rule's size limit.
type authStream struct {
	grpc.ServerStream
	ctx    context.Context
	rule   Rule
	method string
}

func (s *authStream) Context() context.Context { return s.ctx }

func (s *authStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return checkSize(s.rule, s.method, m)
}
