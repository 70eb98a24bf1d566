package sockets

import (
	"net"
	"path/filepath"
	"slices"
	"testing"
)

func TestListeningFindsTCPAndUnix(t *testing.T) {
	tcp4, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp4.Close()
	want := []Listener{{"tcp", tcp4.Addr().String()}}
	// IPv6 where the machine has it (/proc/net/tcp6 then).
	if tcp6, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		defer tcp6.Close()
		want = append(want, Listener{"tcp", tcp6.Addr().String()})
	}
	path := filepath.Join(t.TempDir(), "s.sock")
	unix, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close()
	want = append(want, Listener{"unix", path})
	got := Listening(t)
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("got %v; want it to list %v", got, w)
		}
	}
	unix.Close()
	if slices.Contains(Listening(t), Listener{"unix", path}) {
		t.Errorf("a closed listener is still listed")
	}
}
