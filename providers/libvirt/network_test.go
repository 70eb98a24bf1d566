package libvirt

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

// fakeBridges records the bridges ensured; down are the ones Check
// reports down.
type fakeBridges struct {
	mu      sync.Mutex
	ensured map[string]string // bridge: gateway CIDR
	down    map[string]bool
}

func (f *fakeBridges) Ensure(_ context.Context, name, gw string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ensured == nil {
		f.ensured = map[string]string{}
	}
	f.ensured[name] = gw
	return nil
}

func (f *fakeBridges) Check(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[name] {
		return errors.New("bridge " + name + " is down")
	}
	return nil
}

func TestNetworkUse(t *testing.T) {
	b := &fakeBridges{down: map[string]bool{}}
	nw := newNetwork(b)
	if _, ok := nw.condition(); ok {
		t.Errorf("condition before any VM joined a bridge: got one; want none")
	}
	n := &api.NetworkAttachment{Network: "default", Bridge: "br-t", Subnet: "10.9.0.0/24", Gateway: "10.9.0.1", Address: "10.9.0.5"}
	if err := nw.use(t.Context(), n); err != nil {
		t.Fatalf("use: %v", err)
	}
	if got := b.ensured["br-t"]; got != "10.9.0.1/24" {
		t.Errorf("bridge br-t ensured with gateway %q; want 10.9.0.1/24", got)
	}
	if c, ok := nw.condition(); !ok || c.Type != api.ConditionCNI || c.Status != api.ConditionReady || !strings.Contains(c.Message, "br-t") {
		t.Errorf("condition: got %+v, %v; want CNI ready naming br-t", c, ok)
	}
	b.down["br-t"] = true
	if c, _ := nw.condition(); c.Status != api.ConditionError || c.Reason != "BridgeDown" {
		t.Errorf("condition of a bridge down: got %+v; want error BridgeDown", c)
	}
	for _, bad := range []*api.NetworkAttachment{
		{Network: "nobridge", Subnet: "10.9.0.0/24", Gateway: "10.9.0.1"},
		{Network: "badgw", Bridge: "br-x", Subnet: "10.9.0.0/24", Gateway: "nope"},
	} {
		if err := nw.use(t.Context(), bad); !errors.Is(err, ErrBadSpec) {
			t.Errorf("use of network %s: got %v; want ErrBadSpec", bad.Network, err)
		}
	}
	if _, ok := b.ensured["br-x"]; ok {
		t.Errorf("a bridge with a bad gateway was ensured")
	}
}

func TestNetmask(t *testing.T) {
	tests := []struct {
		bits int
		want string
	}{
		{0, "0.0.0.0"}, {8, "255.0.0.0"}, {16, "255.255.0.0"}, {20, "255.255.240.0"}, {24, "255.255.255.0"}, {32, "255.255.255.255"},
	}
	for _, tc := range tests {
		if got := netmask(tc.bits); got != tc.want {
			t.Errorf("netmask(%d): got %s; want %s", tc.bits, got, tc.want)
		}
	}
}
