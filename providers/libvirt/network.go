package libvirt

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/stratahq/strata/internal/api"
)

// bridger makes sure the Linux bridge a VM's NIC joins exists. It is the
// bridge of the region network, the same one containers join; whichever
// provider comes first creates it.
type bridger interface {
	// Ensure creates the bridge when missing, with the gateway (CIDR) on
	// it, and brings it up.
	Ensure(ctx context.Context, name, gatewayCIDR string) error
	// Check reports a bridge that is missing or down.
	Check(name string) error
}

// noBridges is the bridger of libvirt's test driver, which starts nothing
// on the host.
type noBridges struct{}

func (noBridges) Ensure(context.Context, string, string) error { return nil }
func (noBridges) Check(string) error                           { return nil }

// ipBridges manages bridges with iproute2.
type ipBridges struct {
	log *slog.Logger
	// mu serialises creation, so that concurrent Applies do not race to
	// add the same bridge.
	mu sync.Mutex
}

func (b *ipBridges) Ensure(ctx context.Context, name, gatewayCIDR string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	gw, err := netip.ParsePrefix(gatewayCIDR)
	if err != nil {
		return fmt.Errorf("bridge %s: gateway %q: %w", name, gatewayCIDR, err)
	}
	iface, err := net.InterfaceByName(name)
	if err != nil {
		b.log.Info("creating bridge", "bridge", name, "gateway", gatewayCIDR)
		if err := ip(ctx, "link", "add", "name", name, "type", "bridge"); err != nil && !strings.Contains(err.Error(), "File exists") {
			return fmt.Errorf("create bridge %s: %w", name, err)
		}
		if iface, err = net.InterfaceByName(name); err != nil {
			return fmt.Errorf("bridge %s: %w", name, err)
		}
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return fmt.Errorf("bridge %s: addresses: %w", name, err)
	}
	has := slices.ContainsFunc(addrs, func(a net.Addr) bool {
		p, err := netip.ParsePrefix(a.String())
		return err == nil && p.Addr() == gw.Addr()
	})
	if !has {
		// Without the gateway on the bridge the host cannot reach the
		// guests, nor route for them.
		if err := ip(ctx, "addr", "add", gatewayCIDR, "dev", name); err != nil && !strings.Contains(err.Error(), "File exists") {
			return fmt.Errorf("bridge %s: add %s: %w", name, gatewayCIDR, err)
		}
	}
	if iface.Flags&net.FlagUp == 0 {
		if err := ip(ctx, "link", "set", name, "up"); err != nil {
			return fmt.Errorf("bridge %s: set up: %w", name, err)
		}
	}
	return nil
}

func (b *ipBridges) Check(name string) error {
	iface, err := net.InterfaceByName(name)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", name, err)
	}
	if iface.Flags&net.FlagUp == 0 {
		return fmt.Errorf("bridge %s is down", name)
	}
	return nil
}

func ip(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// network owns the bridges VMs join: it ensures each when a VM is
// attached to it and remembers it (inUse), so that Health can say
// whether they are still up. The guest's address itself is the region's
// IPAM's, handed to the kernel on its command line (domainspec.go).
type network struct {
	bridges bridger

	mu    sync.Mutex
	inUse map[string]struct{}
}

func newNetwork(b bridger) *network {
	return &network{bridges: b, inUse: map[string]struct{}{}}
}

// use ensures a VM's bridge and remembers it for Health.
func (nw *network) use(ctx context.Context, n *api.NetworkAttachment) error {
	if n.Bridge == "" {
		return badSpec("network %q has no bridge", n.Network)
	}
	gw, err := gatewayCIDR(n)
	if err != nil {
		return err
	}
	if err := nw.bridges.Ensure(ctx, n.Bridge, gw); err != nil {
		return err
	}
	nw.mu.Lock()
	nw.inUse[n.Bridge] = struct{}{}
	nw.mu.Unlock()
	return nil
}

// condition is the CNI condition: the bridges VMs were attached to
// exist and are up. There is none before a VM joined a bridge.
func (nw *network) condition() (api.Condition, bool) {
	nw.mu.Lock()
	names := make([]string, 0, len(nw.inUse))
	for n := range nw.inUse {
		names = append(names, n)
	}
	nw.mu.Unlock()
	if len(names) == 0 {
		return api.Condition{}, false
	}
	sort.Strings(names)
	c := api.Condition{Type: api.ConditionCNI, Status: api.ConditionReady, Message: "VM bridges up: " + strings.Join(names, ", ")}
	var bad []string
	for _, n := range names {
		if err := nw.bridges.Check(n); err != nil {
			bad = append(bad, err.Error())
		}
	}
	if len(bad) > 0 {
		c.Status, c.Reason, c.Message = api.ConditionError, "BridgeDown", strings.Join(bad, "; ")
	}
	return c, true
}

// ---- guest addressing ----

// ipArgument is the kernel's static IP configuration,
// ip=<client>:<server>:<gateway>:<netmask>:<hostname>:<device>:<autoconf>,
// for the guest's first NIC (eth0).
func ipArgument(n *api.NetworkAttachment, host string) (string, error) {
	addr, err := parseAddr(n.Address)
	if err != nil {
		return "", badSpec("network address %q: %v", n.Address, err)
	}
	if !addr.Is4() {
		return "", badSpec("network address %s: the kernel's ip= argument takes IPv4 only", addr)
	}
	subnet, err := netip.ParsePrefix(n.Subnet)
	if err != nil {
		return "", badSpec("network subnet %q: %v", n.Subnet, err)
	}
	if !subnet.Addr().Is4() || !subnet.Contains(addr) {
		return "", badSpec("network address %s is not in subnet %s", addr, subnet)
	}
	gw := ""
	if n.Gateway != "" {
		g, err := netip.ParseAddr(n.Gateway)
		if err != nil {
			return "", badSpec("network gateway %q: %v", n.Gateway, err)
		}
		gw = g.String()
	}
	return fmt.Sprintf("ip=%s::%s:%s:%s:eth0:off", addr, gw, netmask(subnet.Bits()), host), nil
}

// parseAddr takes an address with or without a prefix length.
func parseAddr(s string) (netip.Addr, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Addr(), nil
	}
	return netip.ParseAddr(s)
}

func netmask(bits int) string {
	m := uint32(math.MaxUint32) << (32 - bits)
	if bits == 0 {
		m = 0
	}
	return fmt.Sprintf("%d.%d.%d.%d", m>>24, m>>16&0xff, m>>8&0xff, m&0xff)
}

// gatewayCIDR is the gateway address with the subnet's prefix length, as
// it is put on the bridge.
func gatewayCIDR(n *api.NetworkAttachment) (string, error) {
	gw, err := netip.ParseAddr(n.Gateway)
	if err != nil {
		return "", badSpec("network gateway %q: %v", n.Gateway, err)
	}
	subnet, err := netip.ParsePrefix(n.Subnet)
	if err != nil {
		return "", badSpec("network subnet %q: %v", n.Subnet, err)
	}
	return netip.PrefixFrom(gw, subnet.Bits()).String(), nil
}
