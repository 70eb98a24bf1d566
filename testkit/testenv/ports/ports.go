// Package ports hands out loopback TCP ports for servers that tests (and
// the benchmark) start as separate processes, which bind the port only
// later.
//
// Listening on 127.0.0.1:0 and closing the listener to learn a free port
// is a race: the kernel may hand that port, from its ephemeral range, to
// the next bind(0) or outgoing connection anywhere on the machine before
// the server binds it, and the server fails with "address already in
// use". The ports here come from outside the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), which the kernel never hands out by
// itself, and each is locked (flock on a file under $TMPDIR/strata-ports)
// while its holder keeps it, so that test processes running in parallel
// never get the same port. A port that something already listens on is
// skipped.
package ports

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

const (
	// lowest keeps clear of the well-known and registered ports most
	// daemons use (the dev cluster's 8080-8082 and 9090-9092 among them).
	lowest  = 10000
	highest = 65535
	// minPorts is the fewest candidates worth working with.
	minPorts = 1000
)

// reserved are this process's locks, by port.
var (
	mu       sync.Mutex
	reserved = map[int]*os.File{}
)

// Reserve locks a free port until Release (or the process's exit).
func Reserve() (int, error) { return ReserveRange(1) }

// ReserveRange locks n consecutive free ports, first to first+n-1, until
// each is released: for a server that takes a port and binds the ones
// after it itself (`strata dev` serves region i on port+i).
func ReserveRange(n int) (first int, err error) {
	segs, err := candidates()
	if err != nil {
		return 0, err
	}
	dir, err := lockDir()
	if err != nil {
		return 0, err
	}
	total := 0
	for _, s := range segs {
		total += s.hi - s.lo + 1
	}
	start := rand.N(total)
	for i := range total {
		first = nth(segs, (start+i)%total)
		ok, err := tryReserveRange(dir, segs, first, n)
		if err != nil {
			return 0, err
		}
		if ok {
			return first, nil
		}
	}
	return 0, fmt.Errorf("ports: no %d consecutive free ports outside the kernel's ephemeral range", n)
}

// tryReserveRange takes first..first+n-1, which must all be candidates,
// or none of them.
func tryReserveRange(dir string, segs []segment, first, n int) (bool, error) {
	for k := range n {
		ok, err := false, error(nil)
		if slices.ContainsFunc(segs, func(s segment) bool { return s.lo <= first+k && first+k <= s.hi }) {
			ok, err = tryReserve(dir, first+k)
		}
		if err != nil || !ok {
			for j := range k {
				Release(first + j)
			}
			return false, err
		}
	}
	return true, nil
}

// Release unlocks a port from Reserve, once its server is gone.
func Release(port int) {
	mu.Lock()
	f := reserved[port]
	delete(reserved, port)
	mu.Unlock()
	if f != nil {
		f.Close() // closing the descriptor drops the lock
	}
}

// Get reserves a port for the rest of the test.
func Get(t testing.TB) int {
	t.Helper()
	port, err := Reserve()
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-in first-out: the server the test starts on the
	// port after this call is stopped before the port is released.
	t.Cleanup(func() { Release(port) })
	return port
}

// GetRange reserves n consecutive ports for the rest of the test and
// returns the first.
func GetRange(t testing.TB, n int) int {
	t.Helper()
	first, err := ReserveRange(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for k := range n {
			Release(first + k)
		}
	})
	return first
}

// Addr reserves a port for the rest of the test and returns it as
// 127.0.0.1:port.
func Addr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(Get(t)))
}

// tryReserve takes port if no process holds its lock and nothing listens
// on it.
func tryReserve(dir string, port int) (bool, error) {
	mu.Lock()
	defer mu.Unlock()
	if reserved[port] != nil {
		return false, nil
	}
	// Read-only is enough for flock and lets users share the directory.
	// The descriptor is close-on-exec: servers started later do not
	// inherit the lock.
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return false, fmt.Errorf("ports: lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil // another process holds it
		}
		return false, fmt.Errorf("ports: lock port %d: %w", port, err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		f.Close() // a daemon (or a server of a crashed test) listens there
		return false, nil
	}
	l.Close()
	reserved[port] = f
	return true, nil
}

func lockDir() (string, error) {
	dir := filepath.Join(os.TempDir(), "strata-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", fmt.Errorf("ports: %w", err)
	}
	// Shared by every user that runs tests, like /tmp itself; only its
	// owner can (and needs to) widen it past the umask. The lock files
	// stay: removing one would let two processes lock different files
	// for one port.
	if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm() != 0o777 {
		_ = os.Chmod(dir, 0o777|os.ModeSticky)
	}
	return dir, nil
}

// segment is an inclusive range of ports.
type segment struct{ lo, hi int }

func nth(segs []segment, i int) int {
	for _, s := range segs {
		if n := s.hi - s.lo + 1; i >= n {
			i -= n
			continue
		}
		return s.lo + i
	}
	panic("ports: index out of range")
}

// candidates are the ports from lowest to highest outside the kernel's
// ephemeral range.
func candidates() ([]segment, error) {
	lo, hi, err := ephemeralRange()
	if err != nil {
		return nil, err
	}
	return outside(lo, hi)
}

func outside(lo, hi int) ([]segment, error) {
	var segs []segment
	n := 0
	if lo-1 >= lowest {
		segs = append(segs, segment{lowest, lo - 1})
		n += lo - lowest
	}
	if hi+1 <= highest {
		s := segment{max(hi+1, lowest), highest}
		segs = append(segs, s)
		n += s.hi - s.lo + 1
	}
	if n < minPorts {
		return nil, fmt.Errorf("ports: the kernel's ephemeral range %d-%d leaves %d ports in %d-%d for tests; want %d (narrow net.ipv4.ip_local_port_range)", lo, hi, n, lowest, highest, minPorts)
	}
	return segs, nil
}

func ephemeralRange() (lo, hi int, err error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, fmt.Errorf("ports: the kernel's ephemeral range: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("ports: ip_local_port_range %q", b)
	}
	if lo, err = strconv.Atoi(f[0]); err == nil {
		hi, err = strconv.Atoi(f[1])
	}
	if err != nil {
		return 0, 0, fmt.Errorf("ports: ip_local_port_range %q: %w", b, err)
	}
	return lo, hi, nil
}
