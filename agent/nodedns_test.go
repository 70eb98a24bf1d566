package agent

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/dns"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
)

func testDNS(region string) *nodeDNS {
	return newNodeDNS(config.AgentDNS{Enabled: true, Zone: "strata.internal", TTL: 5 * time.Second}, region, nil, slog.New(slog.DiscardHandler))
}

// TestNodeDNSAttach: a replica on the region network gets the name
// server at its gateway with its tenant's names as search path, in a
// copy (the table's assignment is not changed); one off the network, a
// node whose region is not known yet and a name server that failed to
// listen give none.
func TestNodeDNSAttach(t *testing.T) {
	asg := &api.Assignment{ID: "web-1", Tenant: "acme", Network: &api.NetworkAttachment{Address: "10.88.1.5", Gateway: "10.88.1.1"}}
	got := testDNS("eu").attach(asg)
	want := "nameserver 10.88.1.1\nsearch acme.eu.strata.internal acme.strata.internal\noptions ndots:5\n"
	if got == asg || got.Network.DNS == nil || got.Network.DNS.ResolvConf() != want {
		t.Fatalf("attach: got %+v; want a copy whose resolv.conf is %q", got.Network, want)
	}
	if asg.Network.DNS != nil {
		t.Errorf("attach changed the assignment it was given")
	}
	if got := testDNS("").attach(asg); got != asg {
		t.Errorf("region unknown: got %+v; want the assignment unchanged", got.Network)
	}
	off := &api.Assignment{ID: "vm-1", Tenant: "acme"}
	if got := testDNS("eu").attach(off); got != off {
		t.Errorf("off the network: got %+v; want the assignment unchanged", got.Network)
	}
	down := testDNS("eu")
	down.down.Store(true)
	if got := down.attach(asg); got != asg {
		t.Errorf("name server down: got %+v; want the assignment unchanged", got.Network)
	}
	var none *nodeDNS
	if got := none.attach(asg); got != asg || none.services() != nil {
		t.Errorf("no name server: attach %+v, services %v; want nothing", got.Network, none.services())
	}
}

// TestNodeDNSMerge: the network stream's snapshot sets the region (when
// the certificate did not) and the table, later batches change single
// endpoints, and the answers follow: only ready replicas, with their
// declared ports as SRV records.
func TestNodeDNSMerge(t *testing.T) {
	n := testDNS("")
	n.merge(&agentv1.NetworkBatch{Snapshot: true, Network: &agentv1.RegionNetwork{Region: "eu"}, Endpoints: []*agentv1.NetworkEndpoint{
		{Id: "db-1", Address: "10.88.2.5", Tenant: "acme", Resource: "db", Ready: true, Ports: []*agentv1.EndpointPort{{Name: "pg", Protocol: "tcp", Port: 5432}}},
		{Id: "db-2", Address: "10.88.3.5", Tenant: "acme", Resource: "db"},
	}})
	if n.regionName() != "eu" || n.table.Len() != 2 {
		t.Fatalf("after the snapshot: region %q, %d endpoints; want eu, 2", n.regionName(), n.table.Len())
	}
	ask := func(name string, qtype uint16) []string {
		s := dns.NewServer(dns.Config{Zone: n.cfg.Zone, TTL: n.cfg.TTL, Region: n.regionName()}, n.table)
		m := s.Answer("acme", mdns.Question{Name: name, Qtype: qtype, Qclass: mdns.ClassINET})
		var out []string
		for _, rr := range m.Answer {
			switch r := rr.(type) {
			case *mdns.A:
				out = append(out, r.A.String())
			case *mdns.SRV:
				out = append(out, r.Target+":"+strconv.Itoa(int(r.Port)))
			}
		}
		slices.Sort(out)
		return out
	}
	if got := ask("db.acme.eu.strata.internal.", mdns.TypeA); !slices.Equal(got, []string{"10.88.2.5"}) {
		t.Errorf("A after the snapshot: got %v; want the ready replica only", got)
	}
	n.merge(&agentv1.NetworkBatch{Endpoints: []*agentv1.NetworkEndpoint{{Id: "db-2", Address: "10.88.3.5", Tenant: "acme", Resource: "db", Ready: true}}, EndpointsRemoved: []string{"db-1"}})
	if got := ask("db.acme.eu.strata.internal.", mdns.TypeA); !slices.Equal(got, []string{"10.88.3.5"}) {
		t.Errorf("A after db-2 turned ready and db-1 left: got %v; want 10.88.3.5", got)
	}
	n.merge(&agentv1.NetworkBatch{Endpoints: []*agentv1.NetworkEndpoint{{Id: "db-3", Address: "10.88.4.5", Tenant: "acme", Resource: "db", Ready: true, Ports: []*agentv1.EndpointPort{{Name: "pg", Protocol: "tcp", Port: 5432}}}}})
	if got := ask("_pg._tcp.db.acme.eu.strata.internal.", mdns.TypeSRV); !slices.Equal(got, []string{"db-3.db.acme.eu.strata.internal.:5432"}) {
		t.Errorf("SRV: got %v; want db-3's port 5432", got)
	}
}

// TestUpstreams: names outside the zone go to every name server of the
// node's resolv.conf, loopback ones included (the agent runs on the
// host), IPv6 bracketed.
func TestUpstreams(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(path, []byte("search example.com\nnameserver 127.0.0.53\nnameserver 2001:db8::1\nnameserver bad\nnameserver 0.0.0.0\noptions edns0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := upstreams(path), []string{"127.0.0.53:53", "[2001:db8::1]:53"}; !slices.Equal(got, want) {
		t.Errorf("got %q; want %q", got, want)
	}
	if got := upstreams(filepath.Join(t.TempDir(), "missing")); got != nil {
		t.Errorf("no resolv.conf: got %q; want none", got)
	}
}
