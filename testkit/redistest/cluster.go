package redistest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stratahq/strata/testkit/testenv/ports"
)

// slots is the number of hash slots of a Redis Cluster.
const slots = 16384

// Cluster is a Redis Cluster of masters only, the slots split evenly.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts masters cluster nodes, assigns each a share of the
// slots, joins them and waits until every node reports the cluster ok.
func StartCluster(t testing.TB, masters int, opts ...Option) *Cluster {
	t.Helper()
	if masters < 1 {
		t.Fatalf("redistest: a cluster of %d masters", masters)
	}
	var set settings
	for _, o := range opts {
		o(&set)
	}
	c := &Cluster{}
	var admin []string
	for range masters {
		s := newServer(t, set, false)
		if admin != nil { // one admin password for the whole cluster
			s.adminPW, s.authArgs = admin[2], admin
		}
		admin = s.authArgs
		// The bus port is reserved too: the default (port+10000) may be
		// taken or past 65535.
		s.conf = append(s.baseConf(),
			"cluster-enabled yes",
			"cluster-config-file nodes.conf",
			"cluster-node-timeout 2000",
			"cluster-port "+strconv.Itoa(ports.Get(t)),
		)
		s.mustStart(t)
		c.Nodes = append(c.Nodes, s)
	}
	for i, s := range c.Nodes {
		lo, hi := i*slots/masters, (i+1)*slots/masters-1
		c.command(t, s, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi))
	}
	for _, s := range c.Nodes[1:] {
		c.command(t, c.Nodes[0], "CLUSTER", "MEET", s.ip(), strconv.Itoa(s.port), busPort(s))
	}
	for _, s := range c.Nodes {
		poll(t, 30*time.Second, "cluster node "+s.Addr()+" ok", func() (bool, string) {
			info := c.try(s, "CLUSTER", "INFO")
			ok := strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d\r", masters)) &&
				strings.Contains(info, fmt.Sprintf("cluster_slots_ok:%d\r", slots))
			return ok, info
		})
	}
	return c
}

// Addrs are the nodes' host:port.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		out[i] = s.Addr()
	}
	return out
}

// ClusterOptions are go-redis options for a client of the cluster logged
// in as the harness's admin.
func (c *Cluster) ClusterOptions() *redis.ClusterOptions {
	o := c.Nodes[0].Options()
	return &redis.ClusterOptions{
		Addrs: c.Addrs(), Username: o.Username, Password: o.Password,
		TLSConfig: o.TLSConfig, DialTimeout: o.DialTimeout,
	}
}

// Client returns a cluster client, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cli := redis.NewClusterClient(c.ClusterOptions())
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func busPort(s *Server) string {
	for _, line := range s.conf {
		if p, ok := strings.CutPrefix(line, "cluster-port "); ok {
			return p
		}
	}
	return ""
}

func (c *Cluster) command(t testing.TB, s *Server, args ...string) {
	t.Helper()
	if _, err := c.do(s, args...); err != nil {
		t.Fatalf("redistest: %s on %s: %v", strings.Join(args, " "), s.Addr(), err)
	}
}

func (c *Cluster) try(s *Server, args ...string) string {
	out, err := c.do(s, args...)
	if err != nil {
		return err.Error()
	}
	return out
}

func (c *Cluster) do(s *Server, args ...string) (string, error) {
	var cmds [][]string
	if s.authArgs != nil {
		cmds = append(cmds, s.authArgs)
	}
	return s.command(append(cmds, args)...)
}
