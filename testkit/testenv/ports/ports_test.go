package ports

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"syscall"
	"testing"
)

func TestGetHandsOutDistinctBindablePortsOutsideTheEphemeralRange(t *testing.T) {
	lo, hi, err := ephemeralRange()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for range 50 {
		port := Get(t)
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
		if port < lowest || port > highest || (port >= lo && port <= hi) {
			t.Fatalf("got port %d; want one in %d-%d outside the ephemeral range %d-%d", port, lowest, highest, lo, hi)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("bind reserved port %d: %v", port, err)
		}
		l.Close()
	}
}

// A reservation is a lock on an open file description: any other one (in
// another test process, or here a second open of the same file) cannot
// take it until Release.
func TestReservedPortIsLockedForOthersUntilReleased(t *testing.T) {
	port, err := Reserve()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := lockDir()
	if err != nil {
		t.Fatal(err)
	}
	other := func() error {
		f, err := os.Open(filepath.Join(dir, strconv.Itoa(port)))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err := other(); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("lock a reserved port from elsewhere: got %v; want EWOULDBLOCK", err)
	}
	Release(port)
	if err := other(); err != nil {
		t.Fatalf("lock a released port from elsewhere: got %v; want nil", err)
	}
}

func TestPortSomethingListensOnIsSkipped(t *testing.T) {
	port, err := Reserve()
	if err != nil {
		t.Fatal(err)
	}
	Release(port)
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir, err := lockDir()
	if err != nil {
		t.Fatal(err)
	}
	ok, err := tryReserve(dir, port)
	if err != nil || ok {
		Release(port)
		t.Fatalf("reserve port %d with a listener on it: got %v, %v; want false, nil", port, ok, err)
	}
}

func TestOutside(t *testing.T) {
	tests := []struct {
		name    string
		lo, hi  int
		want    []segment
		wantErr bool
	}{
		{"linux default", 32768, 60999, []segment{{10000, 32767}, {61000, 65535}}, false},
		{"up to the top", 40000, 65535, []segment{{10000, 39999}}, false},
		{"low range", 1024, 20000, []segment{{20001, 65535}}, false},
		{"below lowest", 2000, 5000, []segment{{10000, 65535}}, false},
		{"everything", 1024, 65535, nil, true},
		{"too little left", 10500, 65535, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := outside(tc.lo, tc.hi)
			if (err != nil) != tc.wantErr || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("outside(%d, %d): got %v, %v; want %v (error %v)", tc.lo, tc.hi, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestNth(t *testing.T) {
	segs := []segment{{10, 12}, {20, 21}}
	var got []int
	for i := range 5 {
		got = append(got, nth(segs, i))
	}
	if want := []int{10, 11, 12, 20, 21}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v; want %v", got, want)
	}
}

func TestGetRangeReservesConsecutivePorts(t *testing.T) {
	first := GetRange(t, 3)
	for k := range 3 {
		mu.Lock()
		held := reserved[first+k] != nil
		mu.Unlock()
		if !held {
			t.Errorf("port %d (first %d + %d) is not reserved", first+k, first, k)
		}
		if p, err := Reserve(); err != nil || (p >= first && p < first+3) {
			t.Errorf("Reserve after GetRange: %d, %v; want a port outside %d-%d", p, err, first, first+2)
		} else {
			Release(p)
		}
	}
}
