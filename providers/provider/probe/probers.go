package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/stratahq/strata/internal/api"
)

// newProber makes the prober of p's handler for the container k.
func (m *Manager) newProber(k key, p *api.Probe, target Target) (prober, error) {
	dial := target.Dial
	if dial == nil {
		dial = dialDirect
	}
	addr := func(port int) (string, error) {
		if target.Host == "" {
			return "", errors.New("the target has no host")
		}
		return net.JoinHostPort(target.Host, strconv.Itoa(port)), nil
	}
	switch {
	case p.HTTPGet != nil:
		return newHTTPProber(p.HTTPGet, target.Host, m.userAgent, dial, m.keepAlive)
	case p.TCPSocket != nil:
		a, err := addr(p.TCPSocket.Port)
		return &tcpProber{dial: dial, addr: a}, err
	case p.GRPC != nil:
		a, err := addr(p.GRPC.Port)
		return newGRPCProber(a, p.GRPC.Service, m.userAgent, dial), err
	case p.Exec != nil:
		if m.exec == nil {
			return nil, errors.New("exec: this provider runs no commands in its replicas")
		}
		return &execProber{exec: m.exec, key: k, cmd: p.Exec.Command}, nil
	case p.GuestAgent != nil:
		if m.agent == nil {
			return nil, errors.New("guestAgent: this provider runs no guest agents")
		}
		return &agentProber{agent: m.agent, replica: k.replica}, nil
	}
	return nil, errors.New("no handler")
}

// direct dials from the agent's network namespace. No TCP keep-alive
// probes: a check's connection lives for one request.
var direct = &net.Dialer{KeepAlive: -1}

// dialDirect dials an address that is an IP and a port without the
// resolver's work (and allocations), any other through it.
func dialDirect(ctx context.Context, network, addr string) (net.Conn, error) {
	if ap, err := netip.ParseAddrPort(addr); err == nil && network == "tcp" {
		c, err := direct.DialTCP(ctx, network, netip.AddrPort{}, ap)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	return direct.DialContext(ctx, network, addr)
}

// tcpProber passes when a connection opens.
type tcpProber struct {
	dial Dialer
	addr string
}

func (t *tcpProber) probe(ctx context.Context) (Result, string) {
	conn, err := t.dial(ctx, "tcp", t.addr)
	if err != nil {
		return Failure, err.Error()
	}
	_ = conn.Close()
	return Success, ""
}

// grpcProber calls grpc.health.v1.Health/Check on a new connection per
// check, as the kubelet does, and passes on SERVING.
type grpcProber struct {
	addr    string
	service string
	opts    []grpc.DialOption
}

func newGRPCProber(addr, service, userAgent string, dial Dialer) *grpcProber {
	return &grpcProber{addr: addr, service: service, opts: []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(userAgent),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return dial(ctx, "tcp", a) }),
	}}
}

func (g *grpcProber) probe(ctx context.Context) (Result, string) {
	cc, err := grpc.NewClient("passthrough:///"+g.addr, g.opts...)
	if err != nil {
		return Unknown, err.Error()
	}
	defer func() { _ = cc.Close() }()
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: g.service})
	if err != nil {
		switch st := status.Convert(err); st.Code() {
		case codes.Unimplemented:
			return Failure, "this server does not implement the grpc health protocol (grpc.health.v1.Health): " + st.Message()
		case codes.DeadlineExceeded:
			return Failure, "timeout: health rpc did not complete in time"
		default:
			return Failure, "error: health rpc probe failed: " + st.Message()
		}
	}
	if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return Failure, fmt.Sprintf("service unhealthy (responded with %q)", s)
	}
	return Success, ""
}

// execProber runs a command in the container through the provider's
// Execer: exit status 0 passes.
type execProber struct {
	exec Execer
	key  key
	cmd  []string
}

func (e *execProber) probe(ctx context.Context) (Result, string) {
	code, out, err := e.exec.Exec(ctx, e.key.replica, e.key.container, e.cmd)
	switch {
	case err != nil && ctx.Err() != nil:
		return Failure, fmt.Sprintf("command %s timed out", quoteArgv(e.cmd))
	case err != nil:
		// The command could not be run: no verdict on the container
		// (the kubelet drops such a result too).
		return Unknown, err.Error()
	case code != 0:
		return Failure, fmt.Sprintf("command %s exited with %d: %s", quoteArgv(e.cmd), code, clip(out))
	}
	return Success, ""
}

// agentProber pings the guest agent: an answer passes. A ping that
// fails is a failure, not Unknown: no answer is what the probe looks for
// (an agent not yet started, a guest whose userspace is wedged).
type agentProber struct {
	agent   GuestAgent
	replica string
}

func (a *agentProber) probe(ctx context.Context) (Result, string) {
	if err := a.agent.PingGuestAgent(ctx, a.replica); err != nil {
		return Failure, "guest agent: " + clip([]byte(err.Error()))
	}
	return Success, ""
}

func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = api.Quote(a)
	}
	return "[" + strings.Join(q, " ") + "]"
}
