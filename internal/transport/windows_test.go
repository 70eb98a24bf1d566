package transport_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/transport"
	"github.com/stratahq/strata/internal/transport/transporttest"
)

// recordingListener keeps a copy of everything the server writes to its
// connections: in insecure mode, plain HTTP/2 frames.
type recordingListener struct {
	net.Listener
	mu  sync.Mutex
	out bytes.Buffer
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: c, l: l}, nil
}

func (l *recordingListener) written() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.out.Bytes())
}

type recordingConn struct {
	net.Conn
	l *recordingListener
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.l.mu.Lock()
	c.l.out.Write(p)
	c.l.mu.Unlock()
	return c.Conn.Write(p)
}

// TestFixedWindowsSendNoPings checks that with fixed windows at both ends
// a stream of small calls costs no PING frame: gRPC's measuring of the
// link (a PING from either end on the first DATA frame after the last
// acknowledged one, which the other end answers) is off, so the server
// writes neither PINGs nor answers to them.
func TestFixedWindowsSendNoPings(t *testing.T) {
	pings := func(fixed bool) int {
		sec := transport.Insecure()
		var sopts []grpc.ServerOption
		var dopts []grpc.DialOption
		if fixed {
			sopts, dopts = transport.FixedWindows(), transport.WithFixedWindows()
		}
		srv, err := transport.NewServer(sec, transport.Policy{healthSvc: {Kinds: []pki.Kind{pki.KindGlobal}}}, nil, sopts...)
		if err != nil {
			t.Fatal(err)
		}
		healthpb.RegisterHealthServer(srv, health.NewServer())
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		rec := &recordingListener{Listener: lis}
		go func() { _ = srv.Serve(rec) }()
		defer srv.Stop()
		cc := transporttest.Dial(t, lis.Addr().String(), sec, transport.AnyServer(), dopts...)
		for range 20 {
			if err := check(ctx(t), cc, ""); err != nil {
				t.Fatal(err)
			}
		}
		cc.Close()
		srv.Stop()
		return countPings(t, rec.written())
	}
	if n := pings(true); n != 0 {
		t.Errorf("20 calls with fixed windows: the server wrote %d PING frames; want none", n)
	}
	// The default, for contrast: the test sees the PINGs it counts.
	n := pings(false)
	if n == 0 {
		t.Errorf("20 calls with gRPC's default windows: the server wrote no PING frame; the test no longer sees what it checks")
	}
	t.Logf("20 calls with gRPC's default windows: the server wrote %d PING frames", n)
}

// countPings counts the PING frames (acknowledgements included) in what
// a server wrote.
func countPings(t *testing.T, written []byte) int {
	t.Helper()
	fr := http2.NewFramer(io.Discard, bytes.NewReader(written))
	n := 0
	for {
		f, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return n
		}
		if err != nil {
			t.Fatalf("reading the server's frames: %v", err)
		}
		if _, ok := f.(*http2.PingFrame); ok {
			n++
		}
	}
}
