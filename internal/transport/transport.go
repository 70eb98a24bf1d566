// Package transport sets up Strata's gRPC links: mutual TLS when
// configured, keepalives that notice a dead peer in seconds, errors
// converted to and from gRPC status codes at the edge (so every tier's
// code speaks api sentinels), panics turned into Internal errors, and the
// peer's identity taken from its certificate.
package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/pki"
)

// MaxMessageBytes bounds one gRPC message; snapshots of many assignments
// are sent in batches below it.
const MaxMessageBytes = 64 << 20

// ServerTLS builds the server side of mutual TLS, or nil for plaintext.
func ServerTLS(c config.TLS) (*tls.Config, error) {
	if !c.Enabled() {
		return nil, nil
	}
	return pki.ServerConfig(c.CA, c.Cert, c.Key)
}

// ClientTLS builds the client side of mutual TLS, or nil for plaintext.
func ClientTLS(c config.TLS) (*tls.Config, error) {
	if !c.Enabled() {
		return nil, nil
	}
	return pki.ClientConfig(c.CA, c.Cert, c.Key)
}

// NewServer returns a gRPC server with Strata's interceptors.
func NewServer(tlsCfg *tls.Config, log *slog.Logger, opts ...grpc.ServerOption) *grpc.Server {
	creds := insecure.NewCredentials()
	if tlsCfg != nil {
		creds = credentials.NewTLS(tlsCfg)
	}
	base := []grpc.ServerOption{
		grpc.Creds(creds),
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 2 * time.Second, PermitWithoutStream: true}),
		grpc.ChainUnaryInterceptor(unaryServer(log)),
		grpc.ChainStreamInterceptor(streamServer(log)),
	}
	// The caller's options go first so that its interceptors (metrics)
	// wrap Strata's and see errors as the client will.
	return grpc.NewServer(append(opts, base...)...)
}

// Dial returns a client connection to target (host:port). The connection
// is lazy: it connects on first use and reconnects by itself.
func Dial(target string, tlsCfg *tls.Config, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if tlsCfg != nil {
		creds = credentials.NewTLS(tlsCfg)
	}
	base := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 5 * time.Second, Timeout: 3 * time.Second, PermitWithoutStream: true}),
		grpc.WithChainUnaryInterceptor(unaryClient),
		grpc.WithChainStreamInterceptor(streamClient),
	}
	cc, err := grpc.NewClient(target, append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("transport: dial %s: %w", target, err)
	}
	return cc, nil
}

func unaryServer(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				log.Error("panic in gRPC handler", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
				err = status.Error(codes.Internal, "internal error")
			}
		}()
		resp, err = h(ctx, req)
		if err != nil {
			logFailure(log, info.FullMethod, err)
			return resp, api.GRPCError(err)
		}
		return resp, nil
	}
}

func streamServer(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
		defer func() {
			if r := recover(); r != nil {
				log.Error("panic in gRPC stream", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
				err = status.Error(codes.Internal, "internal error")
			}
		}()
		if err = h(srv, ss); err != nil {
			logFailure(log, info.FullMethod, err)
			return api.GRPCError(err)
		}
		return nil
	}
}

func logFailure(log *slog.Logger, method string, err error) {
	code, _ := api.HTTPError(err)
	if code >= 500 && code != 503 {
		log.Error("gRPC call failed", "method", method, "err", err)
		return
	}
	log.Debug("gRPC call refused", "method", method, "err", err)
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

// Identity is who a peer is, from its certificate's common name
// "<kind>:<name>".
type Identity struct {
	Kind string // "node", "region", "global"
	Name string
}

func (i Identity) String() string { return i.Kind + ":" + i.Name }

// PeerIdentity returns the TLS identity of the caller; ok is false on a
// plaintext link.
func PeerIdentity(ctx context.Context) (Identity, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return Identity{}, false
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.PeerCertificates) == 0 {
		return Identity{}, false
	}
	cn := ti.State.PeerCertificates[0].Subject.CommonName
	kind, name, _ := strings.Cut(cn, ":")
	return Identity{Kind: kind, Name: name}, true
}

// AuthorizeNode lets a node act for itself only: on a TLS link the caller
// must be node:<node>. Plaintext links (dev without TLS) are not checked.
func AuthorizeNode(ctx context.Context, node string) error {
	id, ok := PeerIdentity(ctx)
	if !ok {
		return nil
	}
	if id.Kind == "node" && id.Name == node {
		return nil
	}
	return fmt.Errorf("%s may not act for node %q: %w", id, node, api.ErrForbidden)
}

// AuthorizeKind requires the TLS caller to be of one of kinds.
func AuthorizeKind(ctx context.Context, kinds ...string) error {
	id, ok := PeerIdentity(ctx)
	if !ok {
		return nil
	}
	for _, k := range kinds {
		if id.Kind == k {
			return nil
		}
	}
	return fmt.Errorf("%s may not call this: %w", id, api.ErrForbidden)
}
