package dns

import "strings"

// ResourceNames are the names one resource of a tenant has under a zone,
// spelled as the server answers them (lowercase, no trailing dot), for
// what shows them (stratactl describe, the consoles): they need no table
// and say nothing of what the names answer.
type ResourceNames struct {
	// Name is the region-less <resource>.<tenant>.<zone>.
	Name string `json:"name"`
	// SRV are the region-less SRV names of the named ports.
	SRV []SRVName `json:"srv,omitempty"`
	// Regions are <resource>.<tenant>.<region>.<zone> and their SRV
	// names, in the order of the regions given.
	Regions []RegionNames `json:"regions"`
}

// RegionNames are a resource's names in one region.
type RegionNames struct {
	Region string    `json:"region"`
	Name   string    `json:"name"`
	SRV    []SRVName `json:"srv,omitempty"`
}

// SRVName is _<port>._<proto>.<resource>.<tenant>[.<region>].<zone>
// and the port number and protocol its records give.
type SRVName struct {
	Name  string `json:"name"`
	Port  uint16 `json:"port"`
	Proto string `json:"proto"`
}

// Names are the names of tenant's resource under zone in regions, with
// the SRV names of ports that have a name (the others have none), in
// their order.
func Names(zone, tenant, resource string, regions []string, ports []Port) ResourceNames {
	n := ResourceNames{Name: ServiceName(zone, tenant, resource, ""), SRV: srvNames(zone, tenant, resource, "", ports)}
	for _, r := range regions {
		n.Regions = append(n.Regions, RegionNames{Region: r, Name: ServiceName(zone, tenant, resource, r), SRV: srvNames(zone, tenant, resource, r, ports)})
	}
	return n
}

// ServiceName is <resource>.<tenant>.<region>.<zone>, or
// <resource>.<tenant>.<zone> when region is empty.
func ServiceName(zone, tenant, resource, region string) string {
	return join(resource, tenant, region, NormalizeZone(zone))
}

// ReplicaName is <replica>.<resource>.<tenant>.<region>.<zone>: one
// replica, by its id.
func ReplicaName(zone, tenant, resource, region, replica string) string {
	return join(replica, ServiceName(zone, tenant, resource, region))
}

func srvNames(zone, tenant, resource, region string, ports []Port) []SRVName {
	var out []SRVName
	for _, p := range ports {
		if p.Name != "" {
			out = append(out, SRVName{Name: join("_"+p.Name, "_"+p.Proto, ServiceName(zone, tenant, resource, region)), Port: p.Port, Proto: strings.ToLower(p.Proto)})
		}
	}
	return out
}

// join lowercases labels and joins the non-empty ones with dots.
func join(labels ...string) string {
	var b strings.Builder
	for _, l := range labels {
		if l == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strings.ToLower(l))
	}
	return b.String()
}
