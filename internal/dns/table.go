package dns

import (
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"unique"
)

// Port is one port a replica serves. Proto is "tcp" or "udp" (lowercase);
// Name (e.g. "http") names the port in SRV names, and a port without a
// name gets no SRV record.
type Port struct {
	Name, Proto string
	Port        uint16
}

// Endpoint is one replica as DNS sees it: where it runs, whose it is and
// whether it should be answered.
type Endpoint struct {
	// ID is the replica's id, unique in the table; lowercased, it is also
	// the replica's label in <replica>.<resource>.<tenant>.<region> names.
	ID       string
	Tenant   string
	Region   string
	Resource string
	// Addr is the replica's address: IPv4 answers A, IPv6 answers AAAA.
	Addr netip.Addr
	// Ready says whether the replica is answered: only ready replicas are.
	Ready bool
	Ports []Port
}

// setKey names one resource of one tenant in one region, lowercased: the
// set of replicas that <resource>.<tenant>.<region> answers.
type setKey struct{ tenant, resource, region string }

// resKey names one resource of one tenant across regions, lowercased.
type resKey struct{ tenant, resource string }

// entry is an endpoint as the table holds it. Its label and set key are
// computed when needed rather than kept: lowercasing a lowercase string
// allocates nothing, and 20,000 entries are a node's whole fleet view.
type entry struct {
	Endpoint
}

// label is the replica's label in its names.
func (e *entry) label() string { return strings.ToLower(e.ID) }

// key is the set the endpoint belongs to.
func (e *entry) key() setKey {
	return setKey{
		tenant:   strings.ToLower(e.Tenant),
		resource: strings.ToLower(e.Resource),
		region:   strings.ToLower(e.Region),
	}
}

// replicaSet is the replicas of one resource in one region, by label, with
// the count of ready ones (region-less names skip regions with none).
type replicaSet struct {
	byLabel map[string]*entry
	ready   int
}

// Table is the endpoints a node's DNS server answers from, indexed by id,
// by address and by (tenant, resource, region), so that a change touches
// only the changed endpoint's entries and an answer reads only the asked
// name's set. It is safe for concurrent use.
type Table struct {
	mu   sync.RWMutex
	byID map[string]*entry
	// byAddr holds the last endpoint upserted with each address. Of two
	// endpoints sharing one (a replica's address reused before its old
	// entry is removed) it keeps the newer, and removing the older leaves
	// it; removing the newer drops the address until the older is upserted
	// again (finding it would cost a scan).
	byAddr map[netip.Addr]*entry
	// res maps (tenant, resource) to its regions' sets.
	res map[resKey]map[string]*replicaSet
	// gen counts the table's changes: an answer computed at one
	// generation holds until the next (the server's answer cache).
	gen atomic.Uint64
}

// NewTable returns an empty table.
func NewTable() *Table {
	t := &Table{}
	t.clear()
	return t
}

func (t *Table) clear() {
	t.byID = make(map[string]*entry)
	t.byAddr = make(map[netip.Addr]*entry)
	t.res = make(map[resKey]map[string]*replicaSet)
}

// Reset replaces the whole table with eps (a full resync); of two
// endpoints with the same id the later wins.
func (t *Table) Reset(eps []Endpoint) {
	t.mu.Lock()
	defer t.mu.Unlock()
	defer t.gen.Add(1)
	t.clear()
	for _, e := range eps {
		t.upsert(e)
	}
}

// Upsert adds e or replaces the endpoint with its id. It costs the size of
// the sets it leaves and joins, not the size of the table.
func (t *Table) Upsert(e Endpoint) {
	t.mu.Lock()
	defer t.mu.Unlock()
	defer t.gen.Add(1)
	t.upsert(e)
}

// Remove drops the endpoint with that id, if any.
func (t *Table) Remove(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.byID[id]; ok {
		t.unlink(old)
		t.gen.Add(1)
	}
}

// Generation changes whenever the table does (after the change is
// visible to readers).
func (t *Table) Generation() uint64 { return t.gen.Load() }

// Len is the number of endpoints in the table, ready or not.
func (t *Table) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.byID)
}

// TenantOf is the tenant of the endpoint with address a, ready or not: the
// server's default way of telling who asks from a query's source.
func (t *Table) TenantOf(a netip.Addr) (string, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if e, ok := t.byAddr[a.Unmap()]; ok {
		return e.Tenant, true
	}
	return "", false
}

func (t *Table) upsert(e Endpoint) {
	if old, ok := t.byID[e.ID]; ok {
		t.unlink(old)
	}
	n := &entry{Endpoint: intern(e)}
	t.byID[n.ID] = n
	if n.Addr.IsValid() {
		t.byAddr[n.Addr] = n
	}
	k, label := n.key(), n.label()
	rk := resKey{k.tenant, k.resource}
	regions := t.res[rk]
	if regions == nil {
		regions = make(map[string]*replicaSet, 1)
		t.res[rk] = regions
	}
	s := regions[k.region]
	if s == nil {
		s = &replicaSet{byLabel: make(map[string]*entry, 1)}
		regions[k.region] = s
	}
	if prev, ok := s.byLabel[label]; ok && prev.Ready {
		// Two ids that differ only in case share a label: the later wins.
		s.ready--
	}
	s.byLabel[label] = n
	if n.Ready {
		s.ready++
	}
}

// intern is e as the table keeps it: its address unmapped, its ports its
// own, and its repeated strings (tenant, region, resource, port names and
// protocols, shared by many endpoints) held once.
func intern(e Endpoint) Endpoint {
	e.Addr = e.Addr.Unmap()
	e.Tenant = unique.Make(e.Tenant).Value()
	e.Region = unique.Make(e.Region).Value()
	e.Resource = unique.Make(e.Resource).Value()
	ports := make([]Port, len(e.Ports))
	for i, p := range e.Ports {
		ports[i] = Port{Name: unique.Make(p.Name).Value(), Proto: unique.Make(p.Proto).Value(), Port: p.Port}
	}
	e.Ports = ports
	return e
}

// unlink drops e from every index, and its set and resource when they
// become empty.
func (t *Table) unlink(e *entry) {
	delete(t.byID, e.ID)
	if t.byAddr[e.Addr] == e {
		delete(t.byAddr, e.Addr)
	}
	k, label := e.key(), e.label()
	rk := resKey{k.tenant, k.resource}
	regions := t.res[rk]
	s := regions[k.region]
	if s == nil || s.byLabel[label] != e {
		return
	}
	delete(s.byLabel, label)
	if e.Ready {
		s.ready--
	}
	if len(s.byLabel) == 0 {
		delete(regions, k.region)
	}
	if len(regions) == 0 {
		delete(t.res, rk)
	}
}

// set is the replicas of one resource in one region, or nil; the caller
// holds the lock.
func (t *Table) set(k setKey) *replicaSet {
	return t.res[resKey{k.tenant, k.resource}][k.region]
}

// pickRegion is the region a region-less name of (tenant, resource)
// answers: own if it has ready replicas, else the first other region by
// name that has; exists says whether the resource is in the table at all.
// The caller holds the lock.
func (t *Table) pickRegion(tenant, resource, own string) (region string, found, exists bool) {
	regions := t.res[resKey{tenant, resource}]
	if s := regions[own]; s != nil && s.ready > 0 {
		return own, true, true
	}
	for r, s := range regions {
		if s.ready > 0 && (!found || r < region) {
			region, found = r, true
		}
	}
	return region, found, len(regions) > 0
}
