package etcdserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/stratahq/strata/internal/config"
	stransport "github.com/stratahq/strata/internal/transport"
)

// Open connects to the etcd a tier is configured with, starting an
// embedded member first when the configuration asks for one. close
// releases the client and stops the member. dial adds options to the
// client's connections (a tier's metrics interceptor).
func Open(ctx context.Context, name string, c config.Etcd, dial ...grpc.DialOption) (cli *clientv3.Client, closeFn func(), err error) {
	cc := clientv3.Config{
		Endpoints:   c.Endpoints,
		DialTimeout: c.DialTimeout,
		// Keepalives notice a dead member within seconds, so watches
		// move to a healthy one.
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		MaxCallSendMsgSize:   32 << 20,
		// Transactions and watch responses of tens of KiB: buffers
		// sized to them, not gRPC's 1 MiB (see transport.Codec).
		DialOptions: append([]grpc.DialOption{grpc.WithDefaultCallOptions(stransport.Codec()), reconnect}, dial...),
	}
	stop := func() {}
	if c.Embedded {
		// The member is reached on its unix socket as its root user
		// (see Start); no TLS.
		srv, err := Start(ctx, Config{Name: name, Dir: c.DataDir, Auth: true})
		if err != nil {
			return nil, nil, err
		}
		stop = srv.Close
		member := srv.ClientConfig()
		cc.Endpoints, cc.Username, cc.Password = member.Endpoints, member.Username, member.Password
	} else if err := clientAuth(&cc, c); err != nil {
		return nil, nil, err
	}
	endpoints := cc.Endpoints
	cli, err = clientv3.New(cc)
	if err != nil {
		stop()
		// clientv3's errors name endpoints and users, never passwords.
		// A dial that timed out (a client with a password logs in
		// first) says only that; say why it failed.
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (%s)", err, diagnose(ctx, endpoints, cc.TLS))
		}
		return nil, nil, fmt.Errorf("etcd %v: %w", endpoints, err)
	}
	return cli, func() { cli.Close(); stop() }, nil
}

// reconnect is how soon a client dials a member again after losing it.
// gRPC's default backoff grows 1.6 times per failed attempt up to two
// minutes: after an outage of 30 s the next attempt came up to 8 s after
// etcd answered again, and every request waited for it (the election's
// included: no region leader meanwhile). Capped at a second, a client is
// back within a second of its member answering; an attempt costs a
// refused or timed-out connect, and only the tiers' few replicas dial
// etcd.
var reconnect = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff: backoff.Config{
		BaseDelay:  100 * time.Millisecond,
		Multiplier: 1.6,
		Jitter:     0.2,
		MaxDelay:   time.Second,
	},
	// A member whose host is gone answers no connect: give up on it
	// within the time a member takes to answer (the default is 20 s).
	MinConnectTimeout: 5 * time.Second,
})

// LogUnreachable runs Check and logs, once, what it finds when no
// member answers; the tiers call it (in its own goroutine) after Open.
func LogUnreachable(ctx context.Context, cli *clientv3.Client, c config.Etcd, log *slog.Logger) {
	if err := Check(ctx, cli, c); err != nil && ctx.Err() == nil {
		log.Warn("etcd does not answer yet; requests wait for it", "err", err)
	}
}

// Check says whether some etcd member answers cli within c's dial
// timeout, and if none does, why: a client without a password connects
// lazily, so a wrong certificate, CA or address shows only as requests
// that time out. The tiers run it once at start and log what it finds;
// they do not stop for it (etcd may come up later). The read is
// serializable: one live member is enough, a cluster without quorum is
// not reported here.
func Check(ctx context.Context, cli *clientv3.Client, c config.Etcd) error {
	rctx := ctx
	if c.DialTimeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, c.DialTimeout)
		defer cancel()
	}
	_, err := cli.Get(rctx, c.Prefix, clientv3.WithSerializable(), clientv3.WithCountOnly())
	if err == nil {
		return nil
	}
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		cfg, _ := tlsConfig(c) // Open built it from the same settings
		err = fmt.Errorf("%w (%s)", err, diagnose(ctx, cli.Endpoints(), cfg))
	}
	return fmt.Errorf("etcd %v: %w", cli.Endpoints(), err)
}

// clientAuth sets TLS (etcd.tls) and the user (etcd.username and
// password) of a client.
func clientAuth(cc *clientv3.Config, c config.Etcd) error {
	tlsCfg, err := tlsConfig(c)
	if err != nil {
		return err
	}
	cc.TLS = tlsCfg
	if c.Username != "" {
		password, err := c.EtcdPassword()
		if err != nil {
			return err
		}
		cc.Username, cc.Password = c.Username, password
	}
	return nil
}

// tlsConfig is the client TLS configuration of etcd.tls; nil without
// TLS (and for an embedded member).
func tlsConfig(c config.Etcd) (*tls.Config, error) {
	if c.Embedded || !c.TLS.Enabled() {
		return nil, nil
	}
	info := transport.TLSInfo{TrustedCAFile: c.TLS.CA, CertFile: c.TLS.Cert, KeyFile: c.TLS.Key}
	cfg, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd.tls: %w", err)
	}
	return cfg, nil
}
