// Package sockets lists the sockets the test process listens on, the way
// another process on the machine finds them (Linux /proc): every TCP port,
// IPv4 and IPv6, and every unix socket with a path. Security tests try
// each one as an attacker would, instead of trusting the addresses the
// code under test says it serves.
package sockets

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Listener is one listening socket: Network "tcp" with Addr host:port, or
// "unix" with Addr its path.
type Listener struct {
	Network, Addr string
}

func (l Listener) String() string { return l.Network + " " + l.Addr }

// Listening returns the sockets this process listens on now.
func Listening(t testing.TB) []Listener {
	t.Helper()
	own, err := socketInodes()
	if err != nil {
		t.Fatalf("sockets: %v", err)
	}
	var out []Listener
	for _, f := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		ls, err := tcpListeners(f, own)
		if err != nil {
			t.Fatalf("sockets: %v", err)
		}
		out = append(out, ls...)
	}
	ls, err := unixListeners(own)
	if err != nil {
		t.Fatalf("sockets: %v", err)
	}
	return append(out, ls...)
}

// socketInodes are the inodes of the sockets among this process's files.
func socketInodes() (map[string]bool, error) {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	own := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if ino, ok := strings.CutPrefix(link, "socket:["); ok {
			own[strings.TrimSuffix(ino, "]")] = true
		}
	}
	return own, nil
}

// tcpListeners parses /proc/net/tcp or tcp6: the lines in state 0A
// (LISTEN) whose inode (the 10th field) is one of own.
func tcpListeners(file string, own map[string]bool) ([]Listener, error) {
	var out []Listener
	err := eachLine(file, func(f []string) error {
		if len(f) < 10 || f[3] != "0A" || !own[f[9]] {
			return nil
		}
		addr, err := parseHexAddr(f[1])
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		out = append(out, Listener{"tcp", addr})
		return nil
	})
	return out, err
}

// unixListeners parses /proc/net/unix: the lines with the listening flag
// (__SO_ACCEPTCON) and a path in the file system.
func unixListeners(own map[string]bool) ([]Listener, error) {
	var out []Listener
	err := eachLine("/proc/self/net/unix", func(f []string) error {
		if len(f) < 8 || f[3] != "00010000" || !own[f[6]] || !strings.HasPrefix(f[7], "/") {
			return nil
		}
		out = append(out, Listener{"unix", f[7]})
		return nil
	})
	return out, err
}

func eachLine(file string, fn func(fields []string) error) error {
	fh, err := os.Open(file)
	if err != nil {
		return err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Scan() // the header
	for sc.Scan() {
		if err := fn(strings.Fields(sc.Text())); err != nil {
			return err
		}
	}
	return sc.Err()
}

// parseHexAddr turns /proc/net/tcp's "0100007F:1F90" into 127.0.0.1:8080:
// the address is in 32-bit words of host (little-endian) byte order.
func parseHexAddr(s string) (string, error) {
	hexIP, hexPort, ok := strings.Cut(s, ":")
	b, err := hex.DecodeString(hexIP)
	if !ok || err != nil || (len(b) != 4 && len(b) != 16) {
		return "", fmt.Errorf("bad address %q", s)
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		return "", fmt.Errorf("bad port in %q", s)
	}
	ip := make(net.IP, len(b))
	for i := 0; i < len(b); i += 4 {
		ip[i], ip[i+1], ip[i+2], ip[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(int(port))), nil
}
