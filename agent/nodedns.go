package agent

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratahq/strata/agent/netplane"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/dns"
	"github.com/stratahq/strata/internal/hostpolicy"
	"github.com/stratahq/strata/internal/metrics"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
)

// dnsPort is where the name server listens, at the gateway of the node's
// block: the port resolv.conf cannot change.
const dnsPort = 53

// nodeDNS is the node's name server for its replicas (docs/api.md,
// "Names (DNS)"): it answers the names of the asking tenant's ready
// replicas from the endpoints the region's network stream carries, on
// the gateway of the node's block, and forwards other names to the
// node's resolvers. Replicas learn of it from the resolver attach puts
// into their assignment.
type nodeDNS struct {
	cfg   config.AgentDNS
	table *dns.Table
	log   *slog.Logger
	// region is the node's region: from its certificate, else from the
	// network stream's snapshot.
	region atomic.Pointer[string]
	// down: the last attempt to listen failed; replicas created meanwhile
	// keep the node's resolv.conf.
	down atomic.Bool

	upstreams []string
	queries   func(result string, d time.Duration)

	mu      sync.Mutex
	srv     *dns.Server
	at      netip.Addr
	lastErr string
}

// newNodeDNS returns the name server of a node of region (empty: learnt
// from the network stream), with its metrics in reg (nil: none).
func newNodeDNS(cfg config.AgentDNS, region string, reg *metrics.Registry, log *slog.Logger) *nodeDNS {
	n := &nodeDNS{cfg: cfg, table: dns.NewTable(), log: log, upstreams: upstreams(resolvConf)}
	if region != "" {
		n.region.Store(&region)
	}
	if reg != nil {
		queries := reg.CounterVec("strata_dns_queries_total", "DNS queries the node's name server answered, by result (answered, nodata, nxdomain, refused, forwarded, upstream_failure, notimp, formerr).", "result")
		latency := reg.Histogram("strata_dns_query_duration_seconds", "Time the node's name server took to answer a query (forwarded ones included).")
		reg.GaugeFunc("strata_dns_endpoints", "Replicas the node's name server knows (of the tenants with replicas on the node).", func() float64 { return float64(n.table.Len()) })
		n.queries = func(result string, d time.Duration) {
			queries.WithLabelValues(result).Inc()
			latency.Observe(d.Seconds())
		}
	}
	return n
}

// services are the host's ports the name server needs open to replicas:
// DNS at the gateway.
func (n *nodeDNS) services() []netplane.HostService {
	if n == nil {
		return nil
	}
	p := hostpolicy.MustParsePorts(fmt.Sprint(dnsPort))
	return []netplane.HostService{{Proto: "udp", Ports: p}, {Proto: "tcp", Ports: p}}
}

// attach returns asg with the resolver its replica gets, the node's name
// server at its network's gateway with its tenant's names as search
// path, or asg itself: not on the region network, no name server, or its
// last attempt to listen failed.
func (n *nodeDNS) attach(asg *api.Assignment) *api.Assignment {
	if n == nil || n.down.Load() || asg.Network == nil || asg.Network.Address == "" || asg.Network.Gateway == "" {
		return asg
	}
	region := n.regionName()
	if region == "" {
		return asg
	}
	zone := strings.TrimSuffix(n.cfg.Zone, ".")
	cp, nw := *asg, *asg.Network
	nw.DNS = &api.DNSConfig{
		Nameservers: []string{nw.Gateway},
		Search:      []string{asg.Tenant + "." + region + "." + zone, asg.Tenant + "." + zone},
		Options:     []string{"ndots:5"},
	}
	cp.Network = &nw
	return &cp
}

func (n *nodeDNS) regionName() string {
	if p := n.region.Load(); p != nil {
		return *p
	}
	return ""
}

// merge brings the table up to date with one batch of the network
// stream: a snapshot replaces it, then endpoints change one by one.
func (n *nodeDNS) merge(b *agentv1.NetworkBatch) {
	if n == nil {
		return
	}
	if b.GetSnapshot() {
		if r := b.GetNetwork().GetRegion(); r != "" && n.regionName() == "" {
			n.region.Store(&r)
		}
		eps := make([]dns.Endpoint, 0, len(b.GetEndpoints()))
		for _, e := range b.GetEndpoints() {
			eps = append(eps, n.endpointFromPB(e))
		}
		n.table.Reset(eps)
		return
	}
	for _, e := range b.GetEndpoints() {
		n.table.Upsert(n.endpointFromPB(e))
	}
	for _, id := range b.GetEndpointsRemoved() {
		n.table.Remove(id)
	}
}

// endpointFromPB reads a replica for the table; an address that does
// not parse stays invalid, and the table answers nothing for it.
func (n *nodeDNS) endpointFromPB(e *agentv1.NetworkEndpoint) dns.Endpoint {
	addr, _ := netip.ParseAddr(e.GetAddress())
	out := dns.Endpoint{ID: e.GetId(), Tenant: e.GetTenant(), Region: n.regionName(), Resource: e.GetResource(), Addr: addr, Ready: e.GetReady()}
	for _, p := range e.GetPorts() {
		if p.GetPort() > 0 && p.GetPort() <= 65535 {
			out.Ports = append(out.Ports, dns.Port{Name: p.GetName(), Proto: p.GetProtocol(), Port: uint16(p.GetPort())})
		}
	}
	return out
}

// serve makes the name server listen at gw, the gateway of the node's
// block (which the data plane has just put on the bridge), moving it
// when the block changed. A failure is logged once per distinct error
// and tried again on the next call.
func (n *nodeDNS) serve(gw netip.Addr) {
	if n == nil || !gw.IsValid() {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil && n.at == gw {
		return
	}
	if n.srv != nil {
		n.srv.Close()
		n.srv = nil
	}
	srv := dns.NewServer(dns.Config{Zone: n.cfg.Zone, TTL: n.cfg.TTL, Region: n.regionName(), Upstreams: n.upstreams, Observe: n.queries}, n.table)
	addr := net.JoinHostPort(gw.String(), fmt.Sprint(dnsPort))
	if err := srv.Listen(addr); err != nil {
		n.down.Store(true)
		if err.Error() != n.lastErr {
			n.log.Warn("dns: cannot listen; replicas get the node's resolv.conf", "addr", addr, "err", err)
			n.lastErr = err.Error()
		}
		return
	}
	n.srv, n.at, n.lastErr = srv, gw, ""
	n.down.Store(false)
	n.log.Info("dns listening", "addr", addr, "zone", n.cfg.Zone, "upstreams", n.upstreams)
}

// close stops the name server.
func (n *nodeDNS) close() {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil {
		n.srv.Close()
		n.srv = nil
	}
}

// upstreams are the name servers of the resolv.conf at path, as
// host:port: where names outside the zone go. Loopback ones count (the
// agent runs on the host); none, no file: nothing is forwarded.
func upstreams(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		if a, err := netip.ParseAddr(f[1]); err == nil && !a.IsUnspecified() {
			out = append(out, net.JoinHostPort(a.String(), "53"))
		}
	}
	return out
}
