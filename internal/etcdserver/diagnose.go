package etcdserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
)

// probeTimeout bounds each step of diagnose.
const probeTimeout = 2 * time.Second

// diagnose says why no connection to etcd came up, by connecting to the
// first endpoint itself the way the client did: a TCP connection, then
// (for an https:// endpoint) a TLS handshake with the client's own
// configuration and a read, which is where a server that requires a
// client certificate refuses one it did not get. Each step waits at
// most probeTimeout. gRPC's own dial only
// says "context deadline exceeded" for all of these.
func diagnose(ctx context.Context, endpoints []string, cfg *tls.Config) string {
	if len(endpoints) == 0 {
		return "no endpoints"
	}
	u, err := url.Parse(endpoints[0])
	network, addr := "tcp", ""
	if err == nil {
		addr = u.Host
		if u.Scheme == "unix" || u.Scheme == "unixs" {
			// unix:///abs/path, or etcd's unix://relative/path
			network, addr = "unix", u.Host+u.Path
		}
	}
	if addr == "" {
		return fmt.Sprintf("endpoint %q is not a URL such as https://10.0.0.1:2379 or unix:///run/etcd.sock", endpoints[0])
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return fmt.Sprintf("cannot connect to %s: %v", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(probeTimeout))
	if u.Scheme != "https" || cfg == nil {
		return plaintextVerdict(conn, addr)
	}
	return tlsVerdict(conn, u, cfg)
}

// tlsVerdict runs the TLS handshake on conn with the client's
// configuration, then waits briefly for the server's first word: with
// TLS 1.3 a server refuses a client certificate only after the client
// thinks the handshake is done.
func tlsVerdict(conn net.Conn, u *url.URL, cfg *tls.Config) string {
	c := cfg.Clone()
	if c.ServerName == "" {
		c.ServerName = u.Hostname()
	}
	tc := tls.Client(conn, c)
	if err := tc.Handshake(); err != nil {
		return fmt.Sprintf("TLS handshake with %s failed: %v (check etcd.tls: the CA, and the names in the server's certificate)", u.Host, err)
	}
	// A gRPC server that accepted the client sends its settings at once.
	if _, err := tc.Read(make([]byte, 1)); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Sprintf("%s refused the connection after the TLS handshake: %v (check etcd.tls.cert and etcd.tls.key: the server may require a client certificate it trusts)", u.Host, err)
	}
	return fmt.Sprintf("TCP and TLS to %s work; etcd did not answer in time (overloaded, or not a member of a healthy cluster?)", u.Host)
}

// plaintextVerdict tells a server that expects TLS from one that does
// not answer: a TLS server answers a plaintext HTTP/2 preface by
// closing the connection or with a TLS alert.
func plaintextVerdict(conn net.Conn, addr string) string {
	if _, err := conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err != nil {
		return fmt.Sprintf("%s closed the connection: %v", addr, err)
	}
	buf := make([]byte, 16)
	n, err := conn.Read(buf)
	switch {
	case n > 0 && buf[0] == 0x15: // a TLS alert record
		return fmt.Sprintf("%s speaks TLS: use an https:// endpoint and set etcd.tls", addr)
	case n > 0:
		return fmt.Sprintf("connecting to %s works; etcd did not answer in time (overloaded, or not a member of a healthy cluster?)", addr)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Sprintf("%s accepts connections but does not answer", addr)
	default:
		return fmt.Sprintf("%s closed a plaintext connection (%v): if it serves TLS, use an https:// endpoint and set etcd.tls", addr, strings.TrimSpace(fmt.Sprint(err)))
	}
}
