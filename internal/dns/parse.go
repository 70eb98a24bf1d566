package dns

import (
	"slices"
	"strings"
)

// Kind is the form of a name inside the zone.
type Kind int

const (
	// Invalid is a name inside the zone that has none of the forms below:
	// it never exists (NXDOMAIN).
	Invalid Kind = iota
	// Apex is the zone itself, which has only its SOA.
	Apex
	// Service is <resource>.<tenant>[.<region>]: the ready replicas of a
	// resource.
	Service
	// Replica is <replica>.<resource>.<tenant>.<region>: one replica.
	Replica
	// SRV is _<port>._<proto>.<resource>.<tenant>[.<region>]: the SRV
	// records of a resource's named port.
	SRV
)

// Name is a name inside the zone, taken apart. Its labels are lowercased;
// Region is empty in the region-less forms, Replica outside the Replica
// form, Port and Proto (without their underscores) outside the SRV form.
type Name struct {
	Kind                              Kind
	Replica, Resource, Tenant, Region string
	Port, Proto                       string
}

// NormalizeZone is the form of a zone the server compares names with:
// lowercased, without leading or trailing dots.
func NormalizeZone(zone string) string {
	return strings.Trim(strings.ToLower(zone), ".")
}

// ParseName classifies name (case-insensitive, with or without its
// trailing dot) against zone. ok is false when the name is not inside the
// zone, which the server forwards; a name inside the zone that has no
// known form comes back with ok and Kind Invalid. The label counts before
// the zone decide the form: 2 is resource.tenant, 3 resource.tenant.region,
// 4 replica.resource.tenant.region; SRV names are two underscore labels
// followed by 2 or 3 labels.
func ParseName(name, zone string) (Name, bool) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	zone = NormalizeZone(zone)
	var rest string
	switch {
	case name == zone:
		return Name{Kind: Apex}, true
	case zone == "":
		rest = name
	case strings.HasSuffix(name, "."+zone):
		rest = name[:len(name)-len(zone)-1]
	default:
		return Name{}, false
	}
	if rest == "" || strings.ContainsRune(rest, '\\') {
		return Name{}, true
	}
	labels := strings.Split(rest, ".")
	if slices.Contains(labels, "") {
		return Name{}, true
	}
	if len(labels) >= 2 && isService(labels[0]) && isService(labels[1]) {
		return parseSRV(labels), true
	}
	return parseHost(labels), true
}

// isService says whether a label is an SRV one: an underscore and a name.
func isService(label string) bool {
	return len(label) > 1 && label[0] == '_'
}

// parseSRV parses _<port>._<proto>.<resource>.<tenant>[.<region>].
func parseSRV(labels []string) Name {
	host := parseHost(labels[2:])
	if host.Kind != Service {
		return Name{}
	}
	host.Kind = SRV
	host.Port, host.Proto = labels[0][1:], labels[1][1:]
	return host
}

// parseHost parses the forms without SRV labels.
func parseHost(labels []string) Name {
	for _, l := range labels {
		if l[0] == '_' {
			return Name{}
		}
	}
	switch len(labels) {
	case 2:
		return Name{Kind: Service, Resource: labels[0], Tenant: labels[1]}
	case 3:
		return Name{Kind: Service, Resource: labels[0], Tenant: labels[1], Region: labels[2]}
	case 4:
		return Name{Kind: Replica, Replica: labels[0], Resource: labels[1], Tenant: labels[2], Region: labels[3]}
	}
	return Name{}
}
