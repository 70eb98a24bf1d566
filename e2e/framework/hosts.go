package framework

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/testkit/simhost"
	"github.com/stratahq/strata/testkit/testenv"
)

// This file runs agents as hosts of their own: each in a network
// namespace (testkit/simhost) with its own underlay address on a shared
// segment, its own bridge and VXLAN device, while containerd, the
// control plane and the test stay in the machine's namespace.

// RequireHosts stops the test (a failure under CI=true) unless network
// namespaces can be made: root, iproute2 and nsenter.
func RequireHosts(t testing.TB) {
	t.Helper()
	testenv.RequireRoot(t, "network namespaces (root)")
	testenv.LookPath(t, "ip")
	testenv.LookPath(t, "nsenter")
	testenv.LookPath(t, "bridge")
}

// NSCommand is the command line that runs bin with args in ns's network
// namespace only: `ip netns exec` would also give it a mount namespace of
// its own, hiding the namespaces it binds under /var/run/netns from
// containerd (runc then fails with "can't get final child's PID").
func NSCommand(ns *simhost.NS, bin string, args ...string) (string, []string) {
	return "nsenter", append([]string{"--net=" + ns.Path, "--", bin}, args...)
}

// Relay accepts connections on l and pipes each to a connection dial
// opens: a process in one namespace reaches a listener in another
// through it (an agent's region, the region's probe of an agent). It
// stops with the test.
func Relay(t testing.TB, l net.Listener, dial func(context.Context) (net.Conn, error)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		l.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer in.Close()
				dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
				out, err := dial(dctx)
				dcancel()
				if err != nil {
					return
				}
				defer out.Close()
				stop := context.AfterFunc(ctx, func() { in.Close(); out.Close() })
				defer stop()
				done := make(chan struct{}, 2)
				pipe := func(dst, src net.Conn) {
					_, _ = io.Copy(dst, src)
					if c, ok := dst.(*net.TCPConn); ok {
						_ = c.CloseWrite()
					}
					done <- struct{}{}
				}
				go pipe(out, in)
				go pipe(in, out)
				<-done
				<-done
			}()
		}
	}()
}

// NSHTTPClient is an HTTP client whose connections are made inside ns,
// each request on a new connection.
func NSHTTPClient(ns *simhost.NS, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:             nil,
			DisableKeepAlives: true,
			DialContext:       ns.Dial,
		},
	}
}
