package state

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/stratahq/strata/internal/api"
)

// decode is what the region's caches do with a stored object.
func decode[T any](t *testing.T, raw string) *T {
	t.Helper()
	v := new(T)
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		t.Fatal(err)
	}
	return v
}

func sameMemory(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// TestCompact checks that the caches' compaction changes no value and
// leaves two replicas of one resource sharing the strings they repeat.
func TestCompact(t *testing.T) {
	raws := []string{
		`{"id":"a1","tenant":"acme","resource":"web","resourceUID":"u-1","kind":"Compute","provider":"fake","node":"n1","desired":"running",` +
			`"spec":{"flavor":"tiny","compute":{"image":"busybox","network":"default","restartPolicy":"always"}},` +
			`"network":{"network":"default","bridge":"br0","subnet":"10.0.0.0/24","gateway":"10.0.0.1","address":"10.0.0.2"}}`,
		`{"id":"a2","tenant":"acme","resource":"web","resourceUID":"u-1","kind":"Compute","provider":"fake","node":"n1","desired":"running",` +
			`"spec":{"flavor":"tiny","compute":{"image":"busybox","network":"default","restartPolicy":"always"}},` +
			`"network":{"network":"default","bridge":"br0","subnet":"10.0.0.0/24","gateway":"10.0.0.1","address":"10.0.0.3"}}`,
	}
	var got [2]*api.Assignment
	for i, raw := range raws {
		a, want := decode[api.Assignment](t, raw), decode[api.Assignment](t, raw)
		name := strings.Clone(want.ID) // the record's name, as the cache holds it
		compactAssignment(name, a)
		if !reflect.DeepEqual(a, want) {
			t.Fatalf("compacted assignment %+v; want it equal to %+v", a, want)
		}
		if !sameMemory(a.ID, name) {
			t.Errorf("assignment %s keeps its own copy of its ID; want its record's name", a.ID)
		}
		got[i] = a
	}
	a, b := got[0], got[1]
	for _, f := range []struct {
		name string
		x, y string
	}{
		{"tenant", a.Tenant, b.Tenant}, {"resource", a.Resource, b.Resource}, {"resourceUID", a.ResourceUID, b.ResourceUID},
		{"node", a.Node, b.Node}, {"kind", string(a.Kind), string(b.Kind)}, {"flavor", a.Spec.Flavor, b.Spec.Flavor},
		{"image", a.Spec.Compute.Image, b.Spec.Compute.Image}, {"network", a.Network.Network, b.Network.Network},
		{"bridge", a.Network.Bridge, b.Network.Bridge}, {"subnet", a.Network.Subnet, b.Network.Subnet},
	} {
		if !sameMemory(f.x, f.y) {
			t.Errorf("got two copies of %s %q; want one shared", f.name, f.x)
		}
	}
	if sameMemory(a.Network.Address, b.Network.Address) || a.Network.Address == b.Network.Address {
		t.Errorf("got addresses %q and %q; want each replica's own", a.Network.Address, b.Network.Address)
	}

	const status = `{"id":"a1","node":"n1","phase":"ready","providerID":"p-1"}`
	s1, s2, want := decode[api.AssignmentStatus](t, status), decode[api.AssignmentStatus](t, status), decode[api.AssignmentStatus](t, status)
	name := strings.Clone("a1")
	compactStatus(name, s1)
	compactStatus("a1", s2)
	if !reflect.DeepEqual(s1, want) || !sameMemory(s1.Node, s2.Node) || !sameMemory(string(s1.Phase), string(s2.Phase)) || !sameMemory(s1.ID, name) {
		t.Errorf("got statuses %+v and %+v; want them equal to %+v, node and phase shared, the ID the record's name", s1, s2, want)
	}
	// A record whose ID is not its name (hand-written) keeps its ID.
	other := decode[api.AssignmentStatus](t, status)
	compactStatus("zz", other)
	if other.ID != "a1" {
		t.Errorf("status named zz with ID a1 compacted to ID %q; want a1", other.ID)
	}

	const port = `{"network":"default","address":"10.0.0.2","assignment":"a1"}`
	p1, p2, wantPort := decode[api.Port](t, port), decode[api.Port](t, port), decode[api.Port](t, port)
	compactPort("default/10.0.0.2", p1)
	compactPort("default/10.0.0.2", p2)
	if !reflect.DeepEqual(p1, wantPort) || !sameMemory(p1.Network, p2.Network) {
		t.Errorf("got ports %+v and %+v; want them equal to %+v, network shared", p1, p2, wantPort)
	}
}
