package api

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	mdns "github.com/miekg/dns"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/dns"
)

// resolveZone is the zone the nodes' name servers answer (the agent's
// default network.dns.zone).
const resolveZone = dns.DefaultZone

// resolveTTL is the TTL of the nodes' answers (the agent's default).
const resolveTTL = dns.DefaultTTL

// resolveTypes are the record types resolve asks for.
var resolveTypes = map[string]uint16{"A": mdns.TypeA, "AAAA": mdns.TypeAAAA, "SRV": mdns.TypeSRV}

// ResolveQuery is what GET /v1/resolve asks: a name, as a replica would
// write it, of a type, as a node of Region would answer it.
type ResolveQuery struct {
	Name string
	// Type is A, AAAA or SRV (any case); empty is A.
	Type string
	// Region is the asking node's region; empty: the name's, else the
	// resource's first scheduled region.
	Region string
}

// Resolution is a name server's answer to one question, as resolve shows
// it.
type Resolution struct {
	// Name is the name asked, completed and fully qualified.
	Name  string `json:"name"`
	Type  string `json:"type"`
	Rcode string `json:"rcode"`
	// Answers and Additional are the answer and additional sections.
	Answers    []ResolvedRecord `json:"answers"`
	Additional []ResolvedRecord `json:"additional"`
	// Unreachable are the regions that did not say what replicas they
	// hold: the answer may miss theirs.
	Unreachable []string `json:"unreachable,omitempty"`
}

// ResolvedRecord is one record of an answer.
type ResolvedRecord struct {
	Name string `json:"name"`
	Type string `json:"type"`
	TTL  uint32 `json:"ttl"`
	// Data is the address (A, AAAA) or "priority weight port target"
	// (SRV).
	Data string `json:"data"`
}

// Resolve answers q as a node's name server of q's region would answer
// tenant's replicas (empty: the caller's tenant): from the replicas the
// regions hold now, the ready ones only. A name that is no resource of
// the tenant, another tenant's included, is NXDOMAIN, not an error.
func (p *Replicas) Resolve(ctx context.Context, tenant string, q ResolveQuery) (Resolution, error) {
	tenant, err := tenantScope(ctx, readResources, tenant)
	if err != nil {
		return Resolution{}, err
	}
	qtype, fqdn, err := q.check(tenant)
	if err != nil {
		return Resolution{}, err
	}
	n, _ := dns.ParseName(fqdn, resolveZone)
	region := q.Region
	if region == "" {
		region = n.Region
	}
	table := dns.NewTable()
	var unreachable []string
	if n.Resource != "" && n.Tenant == tenant && api.ValidateName("name", n.Resource) == nil {
		eps, first, missed, err := p.endpoints(ctx, tenant, n.Resource)
		if err != nil {
			return Resolution{}, err
		}
		table.Reset(eps)
		unreachable = missed
		if region == "" {
			region = first
		}
	}
	srv := dns.NewServer(dns.Config{Zone: resolveZone, TTL: resolveTTL, Region: region}, table)
	m := srv.Answer(tenant, mdns.Question{Name: fqdn, Qtype: qtype, Qclass: mdns.ClassINET})
	return Resolution{
		Name:        fqdn,
		Type:        mdns.TypeToString[qtype],
		Rcode:       mdns.RcodeToString[m.Rcode],
		Answers:     records(m.Answer),
		Additional:  records(m.Extra),
		Unreachable: unreachable,
	}, nil
}

// check validates q and returns its type and its name completed as a
// replica of tenant's resolver would (its search path): a name outside
// the zone gets <tenant>.<region>.<zone> when q names a region, else
// <tenant>.<zone>.
func (q ResolveQuery) check(tenant string) (uint16, string, error) {
	typ := strings.ToUpper(q.Type)
	if typ == "" {
		typ = "A"
	}
	qtype, ok := resolveTypes[typ]
	if !ok {
		return 0, "", api.Invalid("type", "%q is not a type resolve answers (A, AAAA or SRV)", q.Type)
	}
	if q.Name == "" {
		return 0, "", api.Invalid("name", "is required")
	}
	if err := checkDNSName(q.Name); err != nil {
		return 0, "", api.Invalid("name", "%q is not a DNS name: %v", q.Name, err)
	}
	if q.Region != "" {
		if err := api.ValidateName("region", q.Region); err != nil {
			return 0, "", err
		}
	}
	name := strings.ToLower(strings.TrimSuffix(q.Name, "."))
	if _, inZone := dns.ParseName(name, resolveZone); !inZone {
		suffix := tenant + "." + resolveZone
		if q.Region != "" {
			suffix = tenant + "." + q.Region + "." + resolveZone
		}
		name += "." + suffix
	}
	if len(name) > 253 {
		return 0, "", api.Invalid("name", "%q is longer than 253 characters once completed (%s)", q.Name, name)
	}
	return qtype, mdns.Fqdn(name), nil
}

// checkDNSName says what makes name no DNS name: labels of 1 to 63
// letters, digits, '-' or '_' (SRV labels), 253 characters in all, an
// optional trailing dot.
func checkDNSName(name string) error {
	trimmed := strings.TrimSuffix(name, ".")
	if len(trimmed) > 253 {
		return errors.New("longer than 253 characters")
	}
	for _, l := range strings.Split(trimmed, ".") {
		switch {
		case l == "":
			return errors.New("an empty label")
		case len(l) > 63:
			return fmt.Errorf("label %q is longer than 63 characters", api.Clip(l))
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("label %q has %q (letters, digits, '-' and '_' only)", l, c)
			}
		}
	}
	return nil
}

// endpoints are the replicas of tenant's resource in every region, as a
// node's name server holds them, with the resource's first scheduled
// region and the regions that did not answer; a resource that does not
// exist has none.
func (p *Replicas) endpoints(ctx context.Context, tenant, name string) (eps []dns.Endpoint, first string, unreachable []string, err error) {
	it, st, err := p.resources.read(ctx, tenant, name)
	if errors.Is(err, api.ErrNotFound) {
		return nil, "", nil, nil
	}
	if err != nil {
		return nil, "", nil, err
	}
	r := it.Value
	if len(r.Schedule.Regions) > 0 {
		first = r.Schedule.Regions[0].Name
	}
	list, err := p.list(ctx, tenant, r, st)
	if err != nil {
		return nil, "", nil, err
	}
	for i := range list.Items {
		eps = append(eps, endpointOf(r, &list.Items[i]))
	}
	return eps, first, list.Unreachable, nil
}

// endpointOf is a replica as the nodes' name servers see it: ready when
// its phase is, at the address its status reports (else its network's),
// serving the ports its spec declares (else the resource's).
func endpointOf(r *api.Resource, rep *api.Replica) dns.Endpoint {
	e := dns.Endpoint{
		ID: rep.ID, Tenant: rep.Tenant, Region: rep.Region, Resource: rep.Resource,
		Ready: rep.Phase == api.PhaseReady,
	}
	if e.Tenant == "" {
		e.Tenant = r.Tenant
	}
	if e.Resource == "" {
		e.Resource = r.Name
	}
	addr := ""
	if rep.Status != nil {
		addr = rep.Status.Address
	}
	if addr == "" && rep.Network != nil {
		addr = rep.Network.Address
	}
	e.Addr = parseAddr(addr)
	compute := rep.Spec.Compute
	if compute == nil {
		compute = r.Spec.Compute
	}
	if compute != nil {
		for _, port := range compute.AllPorts() {
			if port.ContainerPort > 0 && port.ContainerPort <= 65535 {
				e.Ports = append(e.Ports, dns.Port{Name: port.Name, Proto: port.Protocol, Port: uint16(port.ContainerPort)})
			}
		}
	}
	return e
}

// parseAddr reads an address or the address of a prefix ("10.0.0.5/24");
// anything else is the invalid address, which answers nothing.
func parseAddr(s string) netip.Addr {
	if a, err := netip.ParseAddr(s); err == nil {
		return a
	}
	if pfx, err := netip.ParsePrefix(s); err == nil {
		return pfx.Addr()
	}
	return netip.Addr{}
}

// records are a section of an answer as resolve shows it.
func records(rrs []mdns.RR) []ResolvedRecord {
	out := make([]ResolvedRecord, 0, len(rrs))
	for _, rr := range rrs {
		h := rr.Header()
		rec := ResolvedRecord{Name: h.Name, Type: mdns.TypeToString[h.Rrtype], TTL: h.Ttl}
		switch v := rr.(type) {
		case *mdns.A:
			rec.Data = v.A.String()
		case *mdns.AAAA:
			rec.Data = v.AAAA.String()
		case *mdns.SRV:
			rec.Data = fmt.Sprintf("%d %d %d %s", v.Priority, v.Weight, v.Port, v.Target)
		default:
			rec.Data = strings.TrimPrefix(rr.String(), h.String())
		}
		out = append(out, rec)
	}
	return out
}
