package etcdserver

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/config"
	stransport "github.com/stratahq/strata/internal/transport"
)

// Open connects to the etcd a tier is configured with, starting an
// embedded member first when the configuration asks for one. close
// releases the client and stops the member. dial adds options to the
// client's connections (a tier's metrics interceptor).
func Open(ctx context.Context, name string, c config.Etcd, dial ...grpc.DialOption) (cli *clientv3.Client, closeFn func(), err error) {
	endpoints := c.Endpoints
	stop := func() {}
	if c.Embedded {
		srv, err := Start(ctx, Config{Name: name, Dir: c.DataDir})
		if err != nil {
			return nil, nil, err
		}
		endpoints = srv.Endpoints()
		stop = srv.Close
	}
	cc := clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: c.DialTimeout,
		// Keepalives notice a dead member within seconds, so watches
		// move to a healthy one.
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		MaxCallSendMsgSize:   32 << 20,
		// Transactions and watch responses of tens of KiB: buffers
		// sized to them, not gRPC's 1 MiB (see transport.Codec).
		DialOptions: append([]grpc.DialOption{grpc.WithDefaultCallOptions(stransport.Codec())}, dial...),
	}
	// An embedded member lives in this process on loopback: it has
	// neither TLS nor users.
	if !c.Embedded {
		if err := clientAuth(&cc, c); err != nil {
			stop()
			return nil, nil, err
		}
	}
	cli, err = clientv3.New(cc)
	if err != nil {
		stop()
		// clientv3's errors name endpoints and users, never passwords.
		return nil, nil, fmt.Errorf("etcd %v: %w", endpoints, err)
	}
	return cli, func() { cli.Close(); stop() }, nil
}

// clientAuth sets TLS (etcd.tls) and the user (etcd.username and
// password) of a client.
func clientAuth(cc *clientv3.Config, c config.Etcd) error {
	if c.TLS.Enabled() {
		info := transport.TLSInfo{TrustedCAFile: c.TLS.CA, CertFile: c.TLS.Cert, KeyFile: c.TLS.Key}
		tlsCfg, err := info.ClientConfig()
		if err != nil {
			return fmt.Errorf("etcd.tls: %w", err)
		}
		cc.TLS = tlsCfg
	}
	if c.Username != "" {
		password, err := c.EtcdPassword()
		if err != nil {
			return err
		}
		cc.Username, cc.Password = c.Username, password
	}
	return nil
}
