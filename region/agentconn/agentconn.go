// Package agentconn keeps the region's gRPC connections to agents
// (NodeService), by address: the API streams logs through them and the
// node monitor probes agents with them.
//
// A connection that failed is dropped, not kept: gRPC reconnects a
// broken connection on its own, but with a backoff that grows to two
// minutes, and while it waits every call fails at once with the last
// error. An agent that restarted on the same address would then look
// dead ("connection refused") long after it listens again. Dropping the
// connection makes the next call dial afresh.
package agentconn

import (
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/transport"
)

// Pool keeps connections to agents by node and address: an agent must
// present node:<region>/<node>, so that an address registered by one
// agent does not lead the region to another. Connections in use are
// never closed under their users; idle ones are, least recently used
// first, beyond max. Safe for concurrent use.
type Pool struct {
	region string
	sec    *transport.Security
	max    int
	dial   []grpc.DialOption

	mu     sync.Mutex
	conns  map[string]*conn
	closed bool
}

type conn struct {
	cc       *grpc.ClientConn
	users    int
	lastUsed time.Time
	dropped  bool // out of the pool: closed when its last user is done
}

// New returns a pool dialing region's agents with sec that keeps at most
// max idle connections.
func New(region string, sec *transport.Security, max int, opts ...grpc.DialOption) *Pool {
	return &Pool{region: region, sec: sec, max: max, dial: opts, conns: map[string]*conn{}}
}

// Release ends a use of a connection. failed says the call on it failed
// in a way that may be the connection's (the agent restarted, the
// network broke): the connection leaves the pool and the next Get dials
// again.
type Release func(failed bool)

// Get returns a connection to node's agent at addr; call release when
// done with it.
func (p *Pool) Get(node, addr string) (*grpc.ClientConn, Release, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, nil, fmt.Errorf("agent connections are closed: %w", api.ErrUnavailable)
	}
	key := node + "@" + addr
	c, ok := p.conns[key]
	if !ok {
		cc, err := transport.Dial(addr, p.sec, transport.ServerIs(pki.Node(p.region, node)), p.dial...)
		if err != nil {
			return nil, nil, fmt.Errorf("dial agent at %s: %w", addr, api.ErrUnavailable)
		}
		c = &conn{cc: cc}
		p.conns[key] = c
	}
	c.users++
	var once sync.Once
	return c.cc, func(failed bool) { once.Do(func() { p.release(key, c, failed) }) }, nil
}

func (p *Pool) release(key string, c *conn, failed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.users--
	c.lastUsed = time.Now()
	if failed && !c.dropped {
		c.dropped = true
		if p.conns[key] == c {
			delete(p.conns, key)
		}
	}
	if c.dropped && c.users == 0 {
		c.cc.Close()
	}
	p.evictLocked()
}

func (p *Pool) evictLocked() {
	for len(p.conns) > p.max {
		var (
			oldest string
			at     time.Time
		)
		for key, c := range p.conns {
			if c.users == 0 && (oldest == "" || c.lastUsed.Before(at)) {
				oldest, at = key, c.lastUsed
			}
		}
		if oldest == "" {
			return // all in use
		}
		p.conns[oldest].cc.Close()
		delete(p.conns, oldest)
	}
}

// Len is how many connections the pool holds.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close closes every connection, ending streams still using them; later
// calls to Get fail.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for key, c := range p.conns {
		c.cc.Close()
		delete(p.conns, key)
	}
}
