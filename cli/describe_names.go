package cli

import (
	"cmp"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"

	"github.com/stratahq/strata/cli/printers"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/dns"
)

// namesNote says which zone describe's names are under: the agents'
// network.dns.zone is set per node.
const namesNote = "under " + dns.DefaultZone + ", the agents' default zone"

// resourceNames is what describe shows of a container resource's names
// (dns.Names), each region's with the ready replicas it answers.
type resourceNames struct {
	Zone    string        `json:"zone"`
	Name    string        `json:"name"`
	SRV     []dns.SRVName `json:"srv,omitempty"`
	Regions []regionNames `json:"regions"`
}

// regionNames are a resource's names in one region and the endpoints
// they answer.
type regionNames struct {
	dns.RegionNames
	// Endpoints are the ready replicas on the region network, by address.
	Endpoints []nameEndpoint `json:"endpoints"`
}

// nameEndpoint is one ready replica: its id, its own name and address.
type nameEndpoint struct {
	Replica string `json:"replica"`
	Name    string `json:"name"`
	Address string `json:"address"`
}

// namesOf are the names of r, a Compute resource whose container
// replicas are on a region network, or nil for any other: in the regions
// it is scheduled to or has replicas in, by name.
func namesOf(r api.Resource, reps []api.Replica) *resourceNames {
	if r.Kind != api.KindCompute || r.Spec.Compute == nil || !slices.ContainsFunc(reps, onNetwork) {
		return nil
	}
	var regions []string
	for _, t := range r.Schedule.Regions {
		regions = append(regions, t.Name)
	}
	for _, rep := range reps {
		regions = append(regions, rep.Region)
	}
	slices.Sort(regions)
	regions = slices.Compact(slices.DeleteFunc(regions, func(s string) bool { return s == "" }))
	var ports []dns.Port
	for _, p := range r.Spec.Compute.AllPorts() {
		if p.ContainerPort > 0 && p.ContainerPort <= 65535 {
			ports = append(ports, dns.Port{Name: p.Name, Proto: p.Protocol, Port: uint16(p.ContainerPort)})
		}
	}
	n := dns.Names(dns.DefaultZone, r.Tenant, r.Name, regions, ports)
	out := &resourceNames{Zone: dns.DefaultZone, Name: n.Name, SRV: n.SRV}
	for _, rn := range n.Regions {
		out.Regions = append(out.Regions, regionNames{RegionNames: rn, Endpoints: readyEndpoints(r, reps, rn.Region)})
	}
	return out
}

// onNetwork says whether a replica is a container with an address on a
// region network: what the nodes' name servers hold.
func onNetwork(rep api.Replica) bool {
	return rep.Provider == api.ProviderContainer && rep.Network != nil && rep.Network.Address != ""
}

// readyEndpoints are the replicas of r in region that its name answers:
// ready, on the network, at their network address, ordered as answers are.
func readyEndpoints(r api.Resource, reps []api.Replica, region string) []nameEndpoint {
	out := []nameEndpoint{}
	for _, rep := range reps {
		if rep.Region == region && rep.Phase == api.PhaseReady && onNetwork(rep) {
			out = append(out, nameEndpoint{Replica: rep.ID, Name: dns.ReplicaName(dns.DefaultZone, r.Tenant, r.Name, region, rep.ID), Address: rep.Network.Address})
		}
	}
	slices.SortFunc(out, func(a, b nameEndpoint) int {
		x, _ := netip.ParseAddr(a.Address)
		y, _ := netip.ParseAddr(b.Address)
		return cmp.Or(x.Compare(y), cmp.Compare(a.Replica, b.Replica))
	})
	return out
}

// namesSection prints the names, each with what it answers.
func namesSection(w io.Writer, n *resourceNames) {
	if n == nil {
		return
	}
	t := printers.Table{Header: []string{"NAME", "ANSWERS"}}
	t.Rows = append(t.Rows, []string{n.Name, "the asking node's region, else the first by name with a ready replica"})
	for _, s := range n.SRV {
		t.Rows = append(t.Rows, []string{s.Name, srvAnswer(s)})
	}
	for _, rn := range n.Regions {
		t.Rows = append(t.Rows, []string{rn.Name, endpointsLine(rn.Endpoints)})
		for _, s := range rn.SRV {
			t.Rows = append(t.Rows, []string{s.Name, srvAnswer(s)})
		}
	}
	section(w, "Names ("+namesNote+")", t, "", "")
}

func srvAnswer(s dns.SRVName) string {
	return fmt.Sprintf("SRV: port %d/%s of each ready replica", s.Port, s.Proto)
}

// endpointsLine is "web-1 10.88.1.5, web-2 10.88.1.6" or "no ready replica".
func endpointsLine(eps []nameEndpoint) string {
	if len(eps) == 0 {
		return "no ready replica"
	}
	parts := make([]string, len(eps))
	for i, e := range eps {
		parts[i] = e.Replica + " " + e.Address
	}
	return strings.Join(parts, ", ")
}
