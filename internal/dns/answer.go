package dns

import (
	"cmp"
	"net"
	"slices"
	"strings"

	mdns "github.com/miekg/dns"
)

// Results of a query, as Config.Observe gets them.
const (
	ResultAnswered        = "answered"
	ResultNXDomain        = "nxdomain"
	ResultNoData          = "nodata"
	ResultRefused         = "refused"
	ResultForwarded       = "forwarded"
	ResultUpstreamFailure = "upstream_failure"
	ResultNotImp          = "notimp"
	ResultFormErr         = "formerr"
	// ResultServFail: an in-zone answer that could not be packed.
	ResultServFail = "servfail"
)

// Answer is the answer to one question inside the zone as tenant would
// get it from the server (never forwarded: a name outside the zone is
// REFUSED). The server sends it for in-zone queries; the REST "resolve"
// endpoint shows it.
func (s *Server) Answer(tenant string, q mdns.Question) *mdns.Msg {
	m := new(mdns.Msg)
	m.Response = true
	m.Question = []mdns.Question{q}
	s.fill(m, tenant, q)
	return m
}

// fill writes the answer to q for tenant into m and says what it was.
func (s *Server) fill(m *mdns.Msg, tenant string, q mdns.Question) string {
	n, ok := ParseName(q.Name, s.zone)
	if !ok {
		m.Rcode = mdns.RcodeRefused
		return ResultRefused
	}
	m.Authoritative = true
	var answer, extra []mdns.RR
	exists := false
	switch {
	case n.Kind == Apex:
		exists = true
		if q.Qtype == mdns.TypeSOA || q.Qtype == mdns.TypeANY {
			answer = []mdns.RR{s.soa()}
		}
	case n.Kind != Invalid && n.Tenant == strings.ToLower(tenant):
		// Another tenant's name takes the path of a missing one: the
		// answers cannot tell them apart.
		answer, extra, exists = s.lookup(n, q)
	}
	switch {
	case !exists:
		m.Rcode = mdns.RcodeNameError
		m.Ns = []mdns.RR{s.soa()}
		return ResultNXDomain
	case len(answer) == 0:
		m.Rcode = mdns.RcodeSuccess
		m.Ns = []mdns.RR{s.soa()}
		return ResultNoData
	}
	m.Rcode = mdns.RcodeSuccess
	m.Answer, m.Extra = answer, extra
	return ResultAnswered
}

// soa is the zone's synthetic SOA, in the authority section of negative
// answers; its minimum (the negative-caching TTL) is the answers' TTL.
func (s *Server) soa() mdns.RR {
	return &mdns.SOA{
		Hdr:     mdns.RR_Header{Name: s.fqdn, Rrtype: mdns.TypeSOA, Class: mdns.ClassINET, Ttl: s.ttl},
		Ns:      "ns." + s.fqdn,
		Mbox:    "hostmaster." + s.fqdn,
		Serial:  1,
		Refresh: 3600,
		Retry:   600,
		Expire:  86400,
		Minttl:  s.ttl,
	}
}

// lookup reads the table for a name of the asking tenant: the records of
// the asked type and whether the name exists at all.
func (s *Server) lookup(n Name, q mdns.Question) (answer, extra []mdns.RR, exists bool) {
	t := s.table
	t.mu.RLock()
	defer t.mu.RUnlock()
	if n.Region == "" {
		region, found, any := t.pickRegion(n.Tenant, n.Resource, s.region)
		if !found {
			return nil, nil, any
		}
		n.Region = region
	}
	set := t.set(setKey{tenant: n.Tenant, resource: n.Resource, region: n.Region})
	if set == nil {
		return nil, nil, false
	}
	switch n.Kind {
	case Replica:
		e, ok := set.byLabel[n.Replica]
		if !ok {
			return nil, nil, false
		}
		if addr := s.addrRR(q.Name, e, q.Qtype); addr != nil && e.Ready {
			answer = []mdns.RR{addr}
		}
	case Service:
		answer = s.addrRRs(q.Name, ready(set), q.Qtype)
	case SRV:
		if q.Qtype == mdns.TypeSRV || q.Qtype == mdns.TypeANY {
			answer, extra = s.srvRRs(q.Name, n, ready(set))
		}
	}
	return answer, extra, true
}

// ready is the ready replicas of a set, by address (then id): the order
// of every answer.
func ready(set *replicaSet) []*entry {
	out := make([]*entry, 0, set.ready)
	for _, e := range set.byLabel {
		if e.Ready {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *entry) int {
		return cmp.Or(a.Addr.Compare(b.Addr), cmp.Compare(a.ID, b.ID))
	})
	return out
}

func (s *Server) addrRRs(name string, eps []*entry, qtype uint16) []mdns.RR {
	var out []mdns.RR
	for _, e := range eps {
		if rr := s.addrRR(name, e, qtype); rr != nil {
			out = append(out, rr)
		}
	}
	return out
}

// addrRR is e's A or AAAA record under name if qtype asks for its family
// (ANY asks for both), or nil.
func (s *Server) addrRR(name string, e *entry, qtype uint16) mdns.RR {
	hdr := mdns.RR_Header{Name: name, Class: mdns.ClassINET, Ttl: s.ttl}
	switch {
	case !e.Addr.IsValid():
		return nil
	case e.Addr.Is4() && (qtype == mdns.TypeA || qtype == mdns.TypeANY):
		hdr.Rrtype = mdns.TypeA
		return &mdns.A{Hdr: hdr, A: net.IP(e.Addr.AsSlice())}
	case e.Addr.Is6() && (qtype == mdns.TypeAAAA || qtype == mdns.TypeANY):
		hdr.Rrtype = mdns.TypeAAAA
		return &mdns.AAAA{Hdr: hdr, AAAA: net.IP(e.Addr.AsSlice())}
	}
	return nil
}

// srvRRs is one SRV per ready replica and matching port, targets named
// <replica>.<resource>.<tenant>.<region>.<zone>, with the targets'
// addresses for the extra section.
func (s *Server) srvRRs(name string, n Name, eps []*entry) (answer, extra []mdns.RR) {
	for _, e := range eps {
		target := e.label() + "." + n.Resource + "." + n.Tenant + "." + n.Region + "." + s.fqdn
		added := false
		for _, p := range e.Ports {
			if p.Name == "" || !strings.EqualFold(p.Name, n.Port) || !strings.EqualFold(p.Proto, n.Proto) {
				continue
			}
			answer = append(answer, &mdns.SRV{
				Hdr:      mdns.RR_Header{Name: name, Rrtype: mdns.TypeSRV, Class: mdns.ClassINET, Ttl: s.ttl},
				Priority: 0, Weight: 10, Port: p.Port, Target: target,
			})
			added = true
		}
		if added {
			if rr := s.addrRR(target, e, mdns.TypeANY); rr != nil {
				extra = append(extra, rr)
			}
		}
	}
	return answer, extra
}
