package redistest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// MasterName is the name the sentinels of StartSentinel monitor.
const MasterName = "strata"

// SentinelSettings are how quickly the sentinels of StartSentinel act:
// far below production values (30 s, 3 min) so that a test sees a
// failover within seconds.
const (
	// DownAfter is how long a master must not answer before a sentinel
	// thinks it down.
	DownAfter = time.Second
	// FailoverTimeout bounds one failover attempt; a failed attempt is
	// retried after twice this.
	FailoverTimeout = 3 * time.Second
)

// Sentinel is a master, one replica and three sentinels (quorum 2).
type Sentinel struct {
	// Master and Replica are the data nodes as started; after a failover
	// the replica is the master (see MasterAddr).
	Master, Replica *Server
	Sentinels       []*Server
	password        string
}

// SentinelOption configures StartSentinel.
type SentinelOption func(*sentinelSettings)

type sentinelSettings struct {
	password string
	server   []Option
}

// WithSentinelPassword makes the sentinels require password (requirepass
// in sentinel.conf).
func WithSentinelPassword(password string) SentinelOption {
	return func(s *sentinelSettings) { s.password = password }
}

// WithServerOptions configures the data nodes and, for TLS, the sentinels.
func WithServerOptions(opts ...Option) SentinelOption {
	return func(s *sentinelSettings) { s.server = append(s.server, opts...) }
}

// StartSentinel starts the group and waits until the sentinels know the
// replica and each other, so that a failover can start at once.
func StartSentinel(t testing.TB, opts ...SentinelOption) *Sentinel {
	t.Helper()
	var ss sentinelSettings
	for _, o := range opts {
		o(&ss)
	}
	var set settings
	for _, o := range ss.server {
		o(&set)
	}
	g := &Sentinel{password: ss.password}
	g.Master = newServer(t, set, false)
	g.Master.mustStart(t)
	g.Replica = newServer(t, set, false)
	// One admin password for both: sentinels and the replica log in to
	// whichever is master with it.
	if g.Master.adminPW != "" {
		g.Replica.adminPW = g.Master.adminPW
		g.Replica.authArgs = g.Master.authArgs
	}
	g.Replica.conf = append(g.Replica.baseConf(), fmt.Sprintf("replicaof %s %d", g.Master.ip(), g.Master.port))
	g.Replica.mustStart(t)
	g.waitReplicaInSync(t)

	// Each sentinel starts knowing the replica and the other sentinels
	// (by their fixed IDs), as a sentinel.conf does after its first run:
	// discovering them takes a sentinel several seconds of INFO and hello
	// rounds.
	sentinels := make([]*Server, 3)
	ids := make([]string, 3)
	for i := range sentinels {
		sentinels[i] = newServer(t, set, true)
		ids[i] = randomPassword() + randomPassword()[:8] // 40 hex digits
	}
	for i, s := range sentinels {
		s.conf = append(s.listenConf(),
			"sentinel myid "+ids[i],
			"bind "+s.ip(),
			"loglevel notice",
			fmt.Sprintf("sentinel monitor %s %s %d 2", MasterName, g.Master.ip(), g.Master.port),
			fmt.Sprintf("sentinel down-after-milliseconds %s %d", MasterName, DownAfter.Milliseconds()),
			fmt.Sprintf("sentinel failover-timeout %s %d", MasterName, FailoverTimeout.Milliseconds()),
			fmt.Sprintf("sentinel parallel-syncs %s 1", MasterName),
			fmt.Sprintf("sentinel known-replica %s %s %d", MasterName, g.Replica.ip(), g.Replica.port),
		)
		for j, o := range sentinels {
			if j != i {
				s.conf = append(s.conf, fmt.Sprintf("sentinel known-sentinel %s %s %d %s", MasterName, o.ip(), o.port, ids[j]))
			}
		}
		if g.Master.adminPW != "" {
			s.conf = append(s.conf,
				fmt.Sprintf("sentinel auth-user %s %s", MasterName, AdminUser),
				fmt.Sprintf("sentinel auth-pass %s %s", MasterName, g.Master.adminPW))
		}
		if g.password != "" {
			s.conf = append(s.conf, "requirepass "+g.password)
			s.authArgs = []string{"AUTH", g.password}
		}
		s.mustStart(t)
		g.Sentinels = append(g.Sentinels, s)
	}
	g.waitSentinelsReady(t)
	return g
}

// SentinelAddrs are the sentinels' host:port.
func (g *Sentinel) SentinelAddrs() []string {
	out := make([]string, len(g.Sentinels))
	for i, s := range g.Sentinels {
		out[i] = s.Addr()
	}
	return out
}

// FailoverOptions are go-redis options for a client of the group logged
// in as the harness's admin.
func (g *Sentinel) FailoverOptions() *redis.FailoverOptions {
	o := g.Master.Options()
	return &redis.FailoverOptions{
		MasterName:       MasterName,
		SentinelAddrs:    g.SentinelAddrs(),
		SentinelPassword: g.password,
		Username:         o.Username,
		Password:         o.Password,
		TLSConfig:        o.TLSConfig,
		DialTimeout:      o.DialTimeout,
		Dialer:           o.Dialer,
	}
}

// Client returns a Sentinel-aware client, closed when the test ends.
func (g *Sentinel) Client(t testing.TB) *redis.Client {
	t.Helper()
	cli := redis.NewFailoverClient(g.FailoverOptions())
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// MasterAddr asks the sentinels which address is master; every sentinel
// that answers must agree.
func (g *Sentinel) MasterAddr(ctx context.Context) (string, error) {
	var addr string
	for _, s := range g.Sentinels {
		cli := g.sentinelClient(s)
		res, err := cli.GetMasterAddrByName(ctx, MasterName).Result()
		_ = cli.Close()
		if err != nil {
			continue // a sentinel may be restarting; the others decide
		}
		a := net.JoinHostPort(res[0], res[1])
		if addr != "" && a != addr {
			return "", fmt.Errorf("sentinels disagree on the master: %s and %s", addr, a)
		}
		addr = a
	}
	if addr == "" {
		return "", fmt.Errorf("no sentinel answered")
	}
	return addr, nil
}

// WaitFailover waits until every sentinel names a master other than old
// and that master has taken the role, and returns its address.
func (g *Sentinel) WaitFailover(t testing.TB, old string, timeout time.Duration) string {
	t.Helper()
	var last string
	var lastErr error
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		last, lastErr = g.MasterAddr(ctx)
		cancel()
		if lastErr == nil && last != old {
			if srv := g.server(last); srv != nil && srv.role() == "master" {
				return last
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("redistest: no failover from %s within %s: sentinels say %q, %v\n%s", old, timeout, last, lastErr, g.Logs())
	return ""
}

// Logs are the ends of every process's log, for a failing test to show.
func (g *Sentinel) Logs() string {
	var b strings.Builder
	for _, s := range append([]*Server{g.Master, g.Replica}, g.Sentinels...) {
		fmt.Fprintf(&b, "--- %s (%s)\n%s\n", s.Addr(), s.confPath(), s.LogTail())
	}
	return b.String()
}

func (g *Sentinel) server(addr string) *Server {
	for _, s := range []*Server{g.Master, g.Replica} {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

func (g *Sentinel) sentinelClient(s *Server) *redis.SentinelClient {
	o := s.Options()
	return redis.NewSentinelClient(&redis.Options{
		Addr: s.Addr(), Password: g.password, TLSConfig: o.TLSConfig,
		DialTimeout: o.DialTimeout, MaxRetries: -1, Dialer: o.Dialer,
	})
}

// role is the server's replication role, or "" when it does not answer.
func (s *Server) role() string {
	info := s.info("replication")
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "role:"); ok {
			return v
		}
	}
	return ""
}

func (s *Server) info(section string) string {
	var cmds [][]string
	if s.authArgs != nil {
		cmds = append(cmds, s.authArgs)
	}
	out, err := s.command(append(cmds, []string{"INFO", section})...)
	if err != nil {
		return ""
	}
	return out
}

func (g *Sentinel) waitReplicaInSync(t testing.TB) {
	t.Helper()
	// The replica's link is up once it loaded the master's snapshot, but
	// the master streams writes to it only after its first REPLCONF ACK
	// (up to a second later): until then a killed master takes every
	// write with it.
	poll(t, readyTimeout, "replica in sync with its master", func() (bool, string) {
		info := g.Master.info("replication")
		return strings.Contains(g.Replica.info("replication"), "master_link_status:up") &&
			strings.Contains(info, fmt.Sprintf("port=%d,state=online", g.Replica.port)), info
	})
}

// waitSentinelsReady waits until every sentinel sees the master, its
// replica and the two other sentinels: without that, a failover would
// wait for discovery first.
func (g *Sentinel) waitSentinelsReady(t testing.TB) {
	t.Helper()
	for _, s := range g.Sentinels {
		poll(t, 30*time.Second, "sentinel "+s.Addr()+" sees the replica and 2 sentinels", func() (bool, string) {
			info := s.info("sentinel")
			want := fmt.Sprintf("name=%s,status=ok,address=%s,slaves=1,sentinels=3", MasterName, g.Master.Addr())
			return strings.Contains(info, want), info
		})
	}
}

// poll calls cond until it is done or timeout passes.
func poll(t testing.TB, timeout time.Duration, what string, cond func() (done bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, state := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: %s: not within %s; last state:\n%s", what, timeout, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
