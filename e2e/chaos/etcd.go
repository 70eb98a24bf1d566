package chaos

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/pki"
)

// etcdCluster is a 3-member etcd cluster of real etcd processes, one per
// test host, with mutual TLS on the client and the peer ports and stock
// flags otherwise (no --max-txn-ops: the tiers must cope with 128).
type etcdCluster struct {
	name    string
	members []*etcdMember
	client  *framework.Host // where the test's own etcd client dials from
	tls     *tls.Config
}

type etcdMember struct {
	name string
	host *framework.Host
	proc *framework.Proc
}

// startEtcd starts the members on hosts and waits until the cluster
// answers a linearizable read.
func startEtcd(t *testing.T, top *Topology, name string, hosts []*framework.Host) *etcdCluster {
	t.Helper()
	c := &etcdCluster{name: name, client: top.Client, tls: top.PKI.clientTLS(t, pki.Global("chaos-test"))}
	var initial []string
	for i, h := range hosts {
		m := &etcdMember{name: fmt.Sprintf("%s-%d", name, i), host: h}
		c.members = append(c.members, m)
		initial = append(initial, fmt.Sprintf("%s=https://%s", m.name, h.Addr(2380)))
	}
	for _, m := range c.members {
		f := top.PKI.files(t, "etcd-"+m.name, "etcd", m.host.IP)
		args := []string{
			"--name", m.name,
			"--data-dir", filepath.Join(top.Dir, m.name),
			"--listen-client-urls", "https://" + m.host.Addr(2379),
			"--advertise-client-urls", "https://" + m.host.Addr(2379),
			"--listen-peer-urls", "https://" + m.host.Addr(2380),
			"--initial-advertise-peer-urls", "https://" + m.host.Addr(2380),
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", "chaos-" + name,
			"--cert-file", f.Cert, "--key-file", f.Key,
			"--client-cert-auth", "--trusted-ca-file", f.CA,
			"--peer-cert-file", f.Cert, "--peer-key-file", f.Key,
			"--peer-client-cert-auth", "--peer-trusted-ca-file", f.CA,
			// The faults here are process faults: the page cache outlives
			// them, so fsync would only load a 2-core machine.
			"--unsafe-no-fsync",
			"--log-level", "warn",
		}
		m.proc = m.host.Start(t, m.name, top.etcdBin, args)
	}
	framework.Eventually(t, 60*time.Second, name+" etcd answers", func() error {
		cli, err := c.dial(5 * time.Second)
		if err != nil {
			return err
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = cli.Get(ctx, "chaos-probe")
		return err
	})
	return c
}

// Endpoints are the members' client URLs.
func (c *etcdCluster) Endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, "https://"+m.host.Addr(2379))
	}
	return out
}

// dial connects the test to the cluster from the client host.
func (c *etcdCluster) dial(timeout time.Duration) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   c.Endpoints(),
		DialTimeout: timeout,
		TLS:         c.tls,
		// The members the faults stop are expected to refuse: the
		// client's retry warnings would only bury the test's output.
		Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return c.client.DialContext(ctx, "tcp", addr)
		})},
	})
}

// Client is a client of the cluster, closed when the test ends.
func (c *etcdCluster) Client(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := c.dial(5 * time.Second)
	if err != nil {
		t.Fatalf("etcd %s: %v", c.name, err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// leader returns the index of the member that is raft leader. Each
// member is asked on a connection of its own, with a timeout of its own:
// a dead member must not use up the time of the others.
func (c *etcdCluster) leader(cli *clientv3.Client) (int, error) {
	var errs []error
	for i, m := range c.members {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		st, err := cli.Status(ctx, "https://"+m.host.Addr(2379))
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.name, err))
			continue
		}
		if st.Header.MemberId == st.Leader {
			return i, nil
		}
	}
	return -1, fmt.Errorf("etcd %s: no member says it leads: %w", c.name, errors.Join(errs...))
}
