package hostpolicy

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// Networks is the address policy of the connections Strata makes to
// where a client's URL points (a tenant's image archive, an alert
// rule's receiver): a public unicast address, or one inside a network
// the operator allows. It is checked on every connection with the
// address it is about to dial, after name resolution, so that DNS
// cannot answer one address for a check and another for the
// connection (rebinding).
type Networks struct {
	allow []netip.Prefix
}

// ParseNetworks parses the operator's allowed networks: CIDRs that may
// be reached although they are loopback, private, link-local or
// otherwise internal ("10.0.5.0/24"). None allows public unicast
// addresses only.
func ParseNetworks(cidrs []string) (Networks, error) {
	var n Networks
	for _, s := range cidrs {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return Networks{}, fmt.Errorf("%q is not a CIDR: %w", s, err)
		}
		n.allow = append(n.allow, pfx.Masked())
	}
	return n, nil
}

// Check refuses an address that is not public unicast and in no
// allowed network; the error wraps ErrNotAllowed and says why.
func (n Networks) Check(a netip.Addr) error {
	a = a.WithZone("").Unmap()
	for _, p := range n.allow {
		if p.Contains(a) {
			return nil
		}
	}
	if reason := internal(a); reason != "" {
		return fmt.Errorf("%w: %s is %s", ErrNotAllowed, a, reason)
	}
	return nil
}

// loopbackAddrs are what localhost names (RFC 6761): CheckHost checks
// a host named so as these.
var loopbackAddrs = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}

// CheckHost refuses, before anything is dialled, a URL's host
// (url.URL.Hostname) that is plainly internal: an address literal Check
// refuses, or localhost (and its subdomains) unless loopback is
// allowed. Any other name passes: where it leads is known only when it
// is dialled, and checked then.
func (n Networks) CheckHost(host string) error {
	if a, err := netip.ParseAddr(host); err == nil {
		return n.Check(a)
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if name != "localhost" && !strings.HasSuffix(name, ".localhost") {
		return nil
	}
	var err error
	for _, a := range loopbackAddrs {
		if err = n.Check(a); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is loopback", ErrNotAllowed, host)
}

// Control is a net.Dialer's Control: it runs on every connection with
// the address it is about to dial, after name resolution, and refuses
// what Check refuses.
func (n Networks) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: dial %s: %v", ErrNotAllowed, address, err)
	}
	if err := n.Check(ap.Addr()); err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	return nil
}

// Transport is an HTTP transport whose every connection Control
// checks. It never goes through an environment proxy: the proxy's
// address would be the one checked, not the server's.
func (n Networks) Transport() *http.Transport {
	dialer := &net.Dialer{Timeout: 30 * time.Second, Control: n.Control}
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: time.Minute,
		MaxIdleConns:          4,
		IdleConnTimeout:       30 * time.Second,
	}
}

// internalNets are the ranges, besides what netip classifies, that reach
// the operator's side rather than the internet: "this network", shared
// address space (carrier NAT, some clouds' metadata), IETF protocol
// assignments, benchmarking, reserved, NAT64 (which would reach IPv4
// private addresses) and the discard prefix.
var internalNets = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("100::/64"),
}

// internal says why a is not a public unicast address, "" when it is.
func internal(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "not an address"
	case a.IsLoopback():
		return "loopback"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast():
		return "multicast"
	case a.IsPrivate():
		return "private"
	}
	for _, n := range internalNets {
		if n.Contains(a) {
			return "internal (" + n.String() + ")"
		}
	}
	return ""
}
