package etcdserver

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratahq/strata/internal/config"
)

// Open connects to the etcd a tier is configured with, starting an
// embedded member first when the configuration asks for one. close
// releases the client and stops the member.
func Open(ctx context.Context, name string, c config.Etcd) (cli *clientv3.Client, closeFn func(), err error) {
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
	cli, err = clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: c.DialTimeout,
		// Keepalives notice a dead member within seconds, so watches
		// move to a healthy one.
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		MaxCallSendMsgSize:   32 << 20,
	})
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("etcd %v: %w", endpoints, err)
	}
	return cli, func() { cli.Close(); stop() }, nil
}
