// Package transport sets up Strata's gRPC links: mutual TLS (plaintext
// only in an explicit insecure mode, on loopback), one interceptor that
// refuses every call whose caller it cannot identify or whose identity the
// server's Policy does not admit, per-method message limits, keepalives
// that notice a dead peer in seconds, errors converted to and from gRPC
// status codes at the edge (so every tier's code speaks api sentinels),
// and panics turned into Internal errors.
package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/pki"
)

// NewServer returns a gRPC server with Strata's interceptors: every call
// is refused unless sec establishes who the caller is and policy admits
// that caller for the method (no handler runs for an anonymous caller);
// errors become gRPC statuses; panics become Internal errors.
func NewServer(sec *Security, policy Policy, log *slog.Logger, opts ...grpc.ServerOption) (*grpc.Server, error) {
	if sec == nil || sec.mode == modeTLS && sec.server == nil {
		return nil, ErrNoTLS
	}
	var creds credentials.TransportCredentials
	switch sec.mode {
	case modeTLS:
		// A certificate that is given must verify against the CA; one
		// that is missing is refused by the interceptor, per call, with
		// a status that says which identity was expected (a handshake
		// failure would say nothing). Token-authenticated callers
		// (tenants) hold no Strata certificate at all.
		cfg := sec.server.Clone()
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
		creds = credentials.NewTLS(cfg)
	case modeLocal:
		creds = localCreds{}
	default:
		creds = insecure.NewCredentials()
	}
	base := []grpc.ServerOption{
		grpc.Creds(creds),
		grpc.ForceServerCodecV2(protoCodec),
		grpc.MaxRecvMsgSize(policy.maxRecv()),
		grpc.MaxSendMsgSize(LargeMessageBytes),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 2 * time.Second, PermitWithoutStream: true}),
		grpc.ChainUnaryInterceptor(unaryServer(sec, policy, log)),
		grpc.ChainStreamInterceptor(streamServer(sec, policy, log)),
	}
	// The caller's options go first so that its interceptors (metrics)
	// wrap Strata's and see errors (refusals included) as the client will.
	return grpc.NewServer(append(opts, base...)...), nil
}

// WithLargeMessages lets every call on a connection send and receive
// messages up to LargeMessageBytes: the global tier's links to regions,
// whose lists and batches grow with the region. For one call, pass
// grpc.MaxCallRecvMsgSize(LargeMessageBytes).
func WithLargeMessages() grpc.DialOption {
	return grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(LargeMessageBytes), grpc.MaxCallSendMsgSize(LargeMessageBytes))
}

// Fixed flow-control windows: a stream's is the size of the largest
// message most calls may carry, a connection's room for a few of them.
const (
	fixedStreamWindow = DefaultMaxMessageBytes
	fixedConnWindow   = 4 * DefaultMaxMessageBytes
)

// FixedWindows turns off gRPC's measuring of a server's links for the
// links that carry many small calls: an agent's to its region. gRPC's
// window starts at 64 KiB and grows as it measures the link, and to
// measure it sends a PING (with a window update) on the first DATA frame
// after each acknowledged PING. On a link with one small call every few
// seconds that is every call: a heartbeat cost twice the frames, TLS
// records and system calls at both ends, 10,000 nodes making 5,000
// PINGs a second. A window of fixedStreamWindow from the start lets any
// message under DefaultMaxMessageBytes through in one round trip, which
// is what the measuring would grow it to for the links that need it.
func FixedWindows() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.InitialWindowSize(fixedStreamWindow), grpc.InitialConnWindowSize(fixedConnWindow)}
}

// WithFixedWindows is FixedWindows for the client end of a link.
func WithFixedWindows() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithInitialWindowSize(fixedStreamWindow), grpc.WithInitialConnWindowSize(fixedConnWindow)}
}

// Server is the identity a client expects the server it dials to have:
// a certificate signed by the CA is not enough, it must be the right
// holder (a node certificate must not pass for a region).
type Server struct {
	kind pki.Kind
	id   pki.Identity
}

// ServerIs expects exactly id.
func ServerIs(id pki.Identity) Server { return Server{kind: id.Kind, id: id} }

// ServerKind expects any identity of kind k (global replicas).
func ServerKind(k pki.Kind) Server { return Server{kind: k} }

// AnyServer expects nothing beyond the transport: for Local and insecure
// security only (Dial refuses it with TLS).
func AnyServer() Server { return Server{} }

func (want Server) String() string {
	if want.id.Kind != "" {
		return want.id.String()
	}
	return string(want.kind) + ":*"
}

// verify checks the server's certificate chain, already verified against
// the CA, for the expected identity.
func (want Server) verify(cs tls.ConnectionState) error {
	if want.kind == "" {
		return nil
	}
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("the server presented no certificate; want %s", want)
	}
	got, err := pki.IdentityOf(cs.PeerCertificates[0])
	switch {
	case err != nil:
		return fmt.Errorf("the server's certificate: %w; want %s", err, want)
	case got.Kind != want.kind, want.id.Kind != "" && got != want.id:
		return fmt.Errorf("the server is %s; want %s", got, want)
	}
	return nil
}

// Dial returns a client connection to target (host:port, or unix:// with
// Local security) whose server must be server. The connection is lazy:
// it connects on first use and reconnects by itself. Without TLS
// (insecure mode) it connects to loopback addresses only.
func Dial(target string, sec *Security, server Server, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	if sec == nil {
		return nil, fmt.Errorf("transport: dial %s: %w", target, ErrNoTLS)
	}
	base := []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(DefaultMaxMessageBytes), grpc.MaxCallSendMsgSize(DefaultMaxMessageBytes)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 5 * time.Second, Timeout: 3 * time.Second, PermitWithoutStream: true}),
		grpc.WithChainUnaryInterceptor(unaryClient),
		grpc.WithChainStreamInterceptor(streamClient),
	}
	switch sec.mode {
	case modeTLS:
		if server.kind == "" {
			return nil, fmt.Errorf("transport: dial %s: a TLS client must say which identity it expects there", target)
		}
		cfg := sec.client.Clone()
		cfg.VerifyConnection = server.verify
		base = append(base, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	case modeLocal:
		base = append(base, grpc.WithTransportCredentials(localCreds{}))
	default:
		base = append(base, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(loopbackOnly))
	}
	cc, err := grpc.NewClient(target, append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("transport: dial %s: %w", target, err)
	}
	return cc, nil
}

func unaryServer(sec *Security, policy Policy, log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		// admitted is the admitted caller's context, ctx until then.
		admitted := ctx
		if rule, ok := policy.rule(info.FullMethod); ok && rule.Audit != nil {
			start := time.Now()
			// Deferred first, so run last: it sees the error a panic
			// became. It recovers its own panics: recording a call must
			// not cost the process.
			defer func() {
				defer func() {
					if r := recover(); r != nil {
						log.Error("panic in the gRPC audit", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
					}
				}()
				rule.Audit(admitted, info.FullMethod, req, err, time.Since(start))
			}()
		}
		defer func() {
			if r := recover(); r != nil {
				log.Error("panic in gRPC handler", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
				err = status.Error(codes.Internal, "internal error")
			}
		}()
		actx, rule, err := sec.authenticate(ctx, policy, info.FullMethod)
		if err == nil {
			err = checkSize(rule, info.FullMethod, req)
		}
		if err != nil {
			logRefusal(ctx, log, info.FullMethod, err)
			return nil, api.GRPCError(err)
		}
		admitted = actx
		resp, err = h(actx, req)
		if err != nil {
			logFailure(actx, log, info.FullMethod, err)
			return resp, api.GRPCError(err)
		}
		return resp, nil
	}
}

func streamServer(sec *Security, policy Policy, log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
		defer func() {
			if r := recover(); r != nil {
				log.Error("panic in gRPC stream", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
				err = status.Error(codes.Internal, "internal error")
			}
		}()
		actx, rule, err := sec.authenticate(ss.Context(), policy, info.FullMethod)
		if err != nil {
			logRefusal(ss.Context(), log, info.FullMethod, err)
			return api.GRPCError(err)
		}
		if err = h(srv, &authStream{ServerStream: ss, ctx: actx, rule: rule, method: info.FullMethod}); err != nil {
			logFailure(actx, log, info.FullMethod, err)
			return api.GRPCError(err)
		}
		return nil
	}
}

// logRefusal notes a refused caller: at Info, since a refusal is either
// a misconfigured peer an operator must hear about or an attack.
func logRefusal(ctx context.Context, log *slog.Logger, method string, err error) {
	from := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		from = p.Addr.String()
	}
	log.Info("gRPC call refused", "method", method, "peer", from, "err", err)
}

func logFailure(ctx context.Context, log *slog.Logger, method string, err error) {
	code, _ := api.HTTPError(err)
	log.Log(ctx, api.FailureLevel(ctx, code), "gRPC call failed", "method", method, "err", err)
}

func unaryClient(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return api.FromGRPC(invoker(ctx, method, req, reply, cc, opts...))
}

func streamClient(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, api.FromGRPC(err)
	}
	return &clientStream{ClientStream: s}, nil
}

type clientStream struct{ grpc.ClientStream }

func (s *clientStream) RecvMsg(m any) error { return api.FromGRPC(s.ClientStream.RecvMsg(m)) }
func (s *clientStream) SendMsg(m any) error { return api.FromGRPC(s.ClientStream.SendMsg(m)) }
