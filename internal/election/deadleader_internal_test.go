package election

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestProbeTCP: a listening port answers; a port nothing listens on is
// refused. (Which error an unanswering address gives depends on the
// network: a rejecting firewall refuses too, hence the "served first"
// guard; the watch's handling of each outcome is tested with scripted
// probes in deadleader_test.go.)
func TestProbeTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := l.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := probeTCP(ctx, addr); err != nil {
		t.Errorf("probe of a listening address: %v; want nil", err)
	}
	l.Close()
	if err := probeTCP(ctx, addr); !refused(err) {
		t.Errorf("probe of a closed port: %v; want a refusal", err)
	}
}

func TestServingAddr(t *testing.T) {
	tests := []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(10, 1, 0, 11), Port: 9091}, "10.1.0.11:9091"},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 9091}, "[::1]:9091"},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 9091}, ""},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 9091}, ""},
		{&net.TCPAddr{Port: 9091}, ""},
		{&net.UnixAddr{Name: "/run/x.sock", Net: "unix"}, ""},
	}
	for _, tt := range tests {
		if got := ServingAddr(tt.addr); got != tt.want {
			t.Errorf("ServingAddr(%v) = %q; want %q", tt.addr, got, tt.want)
		}
	}
}
