package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stratahq/strata/testkit/testenv"
)

// TestLabPartition checks that hosts reach each other through the
// bridge, that a partition cuts exactly the pairs it names, both ways,
// and that Heal undoes it.
func TestLabPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("network namespaces")
	}
	busybox := testenv.LookPath(t, "busybox")
	l := NewLab(t, "stf-", "10.252.0")
	a, b, c := l.AddHost("a"), l.AddHost("b"), l.AddHost("c")
	for _, h := range []*Host{a, b} {
		h.Start(t, "nc-"+h.Name, busybox, []string{"nc", "-ll", "-p", "7000", "-e", "echo", "hi"})
	}
	dial := func(from, to *Host) error {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		conn, err := from.DialContext(ctx, "tcp", to.Addr(7000))
		if err != nil {
			return err
		}
		return conn.Close()
	}
	Eventually(t, 10*time.Second, "c reaches a and b", func() error {
		if err := dial(c, a); err != nil {
			return err
		}
		return dial(c, b)
	})
	l.Partition([]*Host{a}, []*Host{b})
	tests := []struct {
		from, to *Host
		want     bool
	}{{a, b, false}, {b, a, false}, {c, a, true}, {c, b, true}}
	for _, tt := range tests {
		if err := dial(tt.from, tt.to); (err == nil) != tt.want {
			t.Errorf("%s dials %s during the partition: got error %v; want reachable %v", tt.from.Name, tt.to.Name, err, tt.want)
		}
	}
	l.Heal([]*Host{a})
	for _, p := range [][2]*Host{{a, b}, {b, a}} {
		if err := dial(p[0], p[1]); err != nil {
			t.Errorf("%s dials %s after Heal: %v", p[0].Name, p[1].Name, err)
		}
	}
	if got := fmt.Sprint(len(NetNSWithPrefix(l.prefix))); got != "4" {
		t.Errorf("namespaces of the lab: got %s; want 4 (hub and 3 hosts)", got)
	}
}
