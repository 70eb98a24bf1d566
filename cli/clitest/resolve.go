package clitest

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	mdns "github.com/miekg/dns"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/dns"
)

// resolveRoutes answer names as the real API does (internal/dns over the
// tenant's resource's Replicas), without its checks of the name's form:
// only a missing name and an unknown type are refused.
type resolveRoutes struct{ *Server }

func (s resolveRoutes) routes() map[string]handler {
	return map[string]handler{"GET /v1/resolve": s.resolve}
}

type resolvedRecord struct {
	Name string `json:"name"`
	Type string `json:"type"`
	TTL  uint32 `json:"ttl"`
	Data string `json:"data"`
}

var resolveTypes = map[string]uint16{"A": mdns.TypeA, "AAAA": mdns.TypeAAAA, "SRV": mdns.TypeSRV}

func (s resolveRoutes) resolve(r *http.Request) (int, any, error) {
	q := r.URL.Query()
	tenant, region := tenantOf(r, ""), q.Get("region")
	typ := strings.ToUpper(q.Get("type"))
	if typ == "" {
		typ = "A"
	}
	qtype, ok := resolveTypes[typ]
	if !ok {
		return 0, nil, api.Invalid("type", "%q is not a type resolve answers (A, AAAA or SRV)", q.Get("type"))
	}
	name := strings.ToLower(strings.TrimSuffix(q.Get("name"), "."))
	if name == "" {
		return 0, nil, api.Invalid("name", "is required")
	}
	if _, in := dns.ParseName(name, dns.DefaultZone); !in {
		if region != "" {
			name += "." + tenant + "." + region + "." + dns.DefaultZone
		} else {
			name += "." + tenant + "." + dns.DefaultZone
		}
	}
	n, _ := dns.ParseName(name, dns.DefaultZone)
	if region == "" {
		region = n.Region
	}
	table := dns.NewTable()
	if res, ok := s.Resources[tenant+"/"+n.Resource]; ok && n.Tenant == tenant {
		if region == "" && len(res.Schedule.Regions) > 0 {
			region = res.Schedule.Regions[0].Name
		}
		for _, rep := range s.Replicas[res.Name] {
			if rep.Tenant == tenant {
				table.Upsert(endpoint(res, rep))
			}
		}
	}
	m := dns.NewServer(dns.Config{Region: region}, table).Answer(tenant, mdns.Question{Name: mdns.Fqdn(name), Qtype: qtype, Qclass: mdns.ClassINET})
	return http.StatusOK, map[string]any{
		"name": mdns.Fqdn(name), "type": typ, "rcode": mdns.RcodeToString[m.Rcode],
		"answers": records(m.Answer), "additional": records(m.Extra),
	}, nil
}

func endpoint(res api.Resource, rep api.Replica) dns.Endpoint {
	e := dns.Endpoint{ID: rep.ID, Tenant: rep.Tenant, Region: rep.Region, Resource: res.Name, Ready: rep.Phase == api.PhaseReady}
	addr := ""
	if rep.Status != nil {
		addr = rep.Status.Address
	}
	if addr == "" && rep.Network != nil {
		addr = rep.Network.Address
	}
	e.Addr, _ = netip.ParseAddr(addr)
	if c := res.Spec.Compute; c != nil {
		for _, p := range c.AllPorts() {
			e.Ports = append(e.Ports, dns.Port{Name: p.Name, Proto: p.Protocol, Port: uint16(p.ContainerPort)})
		}
	}
	return e
}

func records(rrs []mdns.RR) []resolvedRecord {
	out := []resolvedRecord{}
	for _, rr := range rrs {
		h := rr.Header()
		rec := resolvedRecord{Name: h.Name, Type: mdns.TypeToString[h.Rrtype], TTL: h.Ttl}
		switch v := rr.(type) {
		case *mdns.A:
			rec.Data = v.A.String()
		case *mdns.AAAA:
			rec.Data = v.AAAA.String()
		case *mdns.SRV:
			rec.Data = fmt.Sprintf("%d %d %d %s", v.Priority, v.Weight, v.Port, v.Target)
		}
		out = append(out, rec)
	}
	return out
}
