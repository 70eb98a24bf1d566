// Package dns is the core of the per-node DNS server: a table of the
// replicas' endpoints and a server that answers the zone's names from it
// (strata.internal by default), to the host's own replicas only, each
// tenant seeing only its own names, and forwards other names to the node's
// upstream resolvers. The agent keeps the table up to date and runs the
// server; the global REST "resolve" endpoint calls Server.Answer to show
// what a tenant would get. Names, ServiceName and ReplicaName spell a
// resource's names for what lists them (stratactl describe, the consoles).
//
// The names, case-insensitive, under the zone Z:
//
//	<resource>.<tenant>.<region>.Z             the resource's ready replicas (A, AAAA)
//	<replica>.<resource>.<tenant>.<region>.Z   one replica, if ready
//	<resource>.<tenant>.Z                      the node's own region if it has ready
//	                                           replicas, else the first other region by name that has
//	_<port>._<proto>.<resource>.<tenant>[.<region>].Z
//	                                           SRV per ready replica and named port, addresses in Extra
//
// A name exists when its replica, or its resource (in its region, when the
// name has one), is in the table, ready or not: asked for a type it has no
// record of, it answers NOERROR with no records (NODATA); any other name in
// the zone, another tenant's names included, answers NXDOMAIN, both with the
// zone's SOA in the authority section. The zone itself has its SOA and no
// other record. Answers are authoritative and their records sorted by
// address.
//
// The package is a low layer: it imports the standard library and
// github.com/miekg/dns only.
package dns
