package storetest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// proxy is a proxy between a client (over TCP) and etcd (over TCP or a
// unix socket) that a test can cut: Cut drops every connection and holds
// new ones until Restore. That takes one client off etcd while the test
// keeps writing through another, which is how a watcher misses revisions
// for real.
type proxy struct {
	ln      net.Listener
	network string // etcd's: "tcp" or "unix"
	target  string
	done    chan struct{}
	wg      sync.WaitGroup

	mu     sync.Mutex
	gate   chan struct{} // closed while the proxy forwards
	conns  map[net.Conn]struct{}
	closed bool
}

func startProxy(t testing.TB, network, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &proxy{
		ln:      ln,
		network: network,
		target:  target,
		done:    make(chan struct{}),
		gate:    make(chan struct{}),
		conns:   map[net.Conn]struct{}{},
	}
	close(p.gate)
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

// Cut drops all connections; new ones wait until Restore.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default: // already cut
	}
	for c := range p.conns {
		c.Close()
	}
}

// Restore lets waiting and new connections through.
func (p *proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

func (p *proxy) close() {
	close(p.done)
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.handle(c)
	}
}

func (p *proxy) handle(c net.Conn) {
	defer p.wg.Done()
	defer p.drop(c)
	p.mu.Lock()
	gate := p.gate
	p.mu.Unlock()
	select {
	case <-gate:
	case <-p.done:
		return
	}
	up, err := net.Dial(p.network, p.target)
	if err != nil {
		return
	}
	if !p.track(up) {
		return
	}
	defer p.drop(up)
	ended := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); ended <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); ended <- struct{}{} }()
	<-ended
	// One direction ended: close both so that the other ends too.
	c.Close()
	up.Close()
	<-ended
}

// track registers a connection so Cut and close can drop it; it closes the
// connection and reports false once the proxy is closed.
func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) drop(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}
