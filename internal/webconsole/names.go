package webconsole

import "github.com/stratahq/strata/internal/dns"

// DNSNames are the forms of a resource's names as package dns spells
// them (dns.Names, dns.ReplicaName), with {tenant}, {resource},
// {region}, {replica}, {port} and {proto} where the labels go: a page
// puts them in data attributes, and common.js's resourceNames fills them
// in, so that the consoles spell names as stratactl describe does. They
// are under dns.DefaultZone, the agents' default: a node configured with
// another zone answers under it instead.
type DNSNames struct {
	Zone        string
	Service     string // <resource>.<tenant>.<zone>
	Regional    string // <resource>.<tenant>.<region>.<zone>
	Replica     string // <replica>.<resource>.<tenant>.<region>.<zone>
	SRV         string // _<port>._<proto>.<resource>.<tenant>.<zone>
	RegionalSRV string // _<port>._<proto>.<resource>.<tenant>.<region>.<zone>
}

// Names are the DNSNames under dns.DefaultZone.
func Names() DNSNames {
	const zone = dns.DefaultZone
	n := dns.Names(zone, "{tenant}", "{resource}", []string{"{region}"}, []dns.Port{{Name: "{port}", Proto: "{proto}"}})
	return DNSNames{
		Zone:        dns.NormalizeZone(zone),
		Service:     n.Name,
		Regional:    n.Regions[0].Name,
		Replica:     dns.ReplicaName(zone, "{tenant}", "{resource}", "{region}", "{replica}"),
		SRV:         n.SRV[0].Name,
		RegionalSRV: n.Regions[0].SRV[0].Name,
	}
}
