package agentconn

import (
	"errors"
	"testing"

	"google.golang.org/grpc/connectivity"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/transport"
)

// The pool dials lazily, so no agent needs to listen for these tests.

func TestReuseAndDrop(t *testing.T) {
	p := New("r1", transport.Insecure(), 8)
	t.Cleanup(p.Close)
	a, releaseA, err := p.Get("n1", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	b, releaseB, err := p.Get("n1", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("two uses of one address: got two connections; want one")
	}
	// A failed call drops the connection from the pool, but does not close
	// it under the other user.
	releaseA(true)
	releaseA(true) // a second release is a no-op
	if a.GetState() == connectivity.Shutdown {
		t.Fatal("dropped connection closed while still in use")
	}
	c, releaseC, err := p.Get("n1", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if c == a {
		t.Fatal("after a failure: got the dropped connection again; want a new one")
	}
	releaseB(false)
	if a.GetState() != connectivity.Shutdown {
		t.Errorf("dropped connection after its last user: state %v; want Shutdown", a.GetState())
	}
	releaseC(false)
	if c.GetState() == connectivity.Shutdown || p.Len() != 1 {
		t.Errorf("healthy idle connection: state %v, pool %d; want kept", c.GetState(), p.Len())
	}
}

func TestEvictsIdleBeyondMax(t *testing.T) {
	p := New("r1", transport.Insecure(), 1)
	t.Cleanup(p.Close)
	first, release1, _ := p.Get("n1", "127.0.0.1:1")
	_, release2, _ := p.Get("n2", "127.0.0.1:2")
	if p.Len() != 2 {
		t.Fatalf("in use: pool %d; want both kept", p.Len())
	}
	release1(false)
	release2(false)
	if p.Len() != 1 || first.GetState() != connectivity.Shutdown {
		t.Errorf("idle beyond max: pool %d, oldest %v; want 1, the oldest closed", p.Len(), first.GetState())
	}
}

func TestClosed(t *testing.T) {
	p := New("r1", transport.Insecure(), 1)
	p.Close()
	if _, _, err := p.Get("n1", "127.0.0.1:1"); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("Get after Close: got %v; want ErrUnavailable", err)
	}
}
