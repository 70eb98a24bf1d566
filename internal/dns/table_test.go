package dns

import (
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"testing"

	mdns "github.com/miekg/dns"
)

func ep(id, tenant, region, resource, addr string, ready bool, ports ...Port) Endpoint {
	return Endpoint{ID: id, Tenant: tenant, Region: region, Resource: resource,
		Addr: netip.MustParseAddr(addr), Ready: ready, Ports: ports}
}

// members is the labels of a set, or nil when the set does not exist.
func members(t *Table, tenant, resource, region string) map[string]bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s := t.set(setKey{tenant, resource, region})
	if s == nil {
		return nil
	}
	out := map[string]bool{}
	for l, e := range s.byLabel {
		out[l] = e.Ready
	}
	return out
}

func readyCount(t *Table, tenant, resource, region string) int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if s := t.set(setKey{tenant, resource, region}); s != nil {
		return s.ready
	}
	return -1
}

func TestTableUpsertRemove(t *testing.T) {
	tb := NewTable()
	tb.Upsert(ep("A1", "Acme", "eu", "Web", "10.0.0.1", true))
	tb.Upsert(ep("a2", "acme", "eu", "web", "10.0.0.2", false))
	if tb.Len() != 2 {
		t.Fatalf("Len = %d, want 2", tb.Len())
	}
	if got := members(tb, "acme", "web", "eu"); len(got) != 2 || !got["a1"] || got["a2"] {
		t.Fatalf("set = %v, want a1 ready, a2 not", got)
	}
	if n := readyCount(tb, "acme", "web", "eu"); n != 1 {
		t.Fatalf("ready = %d, want 1", n)
	}

	// Replacing by id moves the endpoint: a2 becomes ready in another region.
	tb.Upsert(ep("a2", "acme", "us", "web", "10.0.0.3", true))
	if got := members(tb, "acme", "web", "eu"); len(got) != 1 || !got["a1"] {
		t.Fatalf("eu after move = %v", got)
	}
	if got := members(tb, "acme", "web", "us"); len(got) != 1 || !got["a2"] {
		t.Fatalf("us after move = %v", got)
	}
	if _, ok := tb.TenantOf(netip.MustParseAddr("10.0.0.2")); ok {
		t.Fatal("the old address still maps to a tenant")
	}
	if tb.Len() != 2 {
		t.Fatalf("Len = %d, want 2", tb.Len())
	}
}

func TestTableReadinessAndRemove(t *testing.T) {
	tb := NewTable()
	tb.Upsert(ep("A1", "acme", "eu", "web", "10.0.0.1", true))
	tb.Upsert(ep("a2", "acme", "us", "web", "10.0.0.3", true))
	// Readiness flips count.
	tb.Upsert(ep("A1", "acme", "eu", "web", "10.0.0.1", false))
	if n := readyCount(tb, "acme", "web", "eu"); n != 0 {
		t.Fatalf("ready = %d, want 0", n)
	}

	tb.Remove("A1")
	tb.Remove("missing")
	if got := members(tb, "acme", "web", "eu"); got != nil {
		t.Fatalf("empty set kept: %v", got)
	}
	if tb.Len() != 1 {
		t.Fatalf("Len = %d, want 1", tb.Len())
	}
	tb.Remove("a2")
	if tb.Len() != 0 || len(tb.res) != 0 || len(tb.byAddr) != 0 {
		t.Fatalf("table not empty: %d ids, %d resources, %d addresses", tb.Len(), len(tb.res), len(tb.byAddr))
	}
}

func TestTableReset(t *testing.T) {
	tb := NewTable()
	tb.Upsert(ep("old", "acme", "eu", "web", "10.0.0.9", true))
	tb.Reset([]Endpoint{
		ep("x", "acme", "eu", "db", "10.0.0.1", true),
		ep("y", "beta", "eu", "db", "fd00::1", true),
	})
	if tb.Len() != 2 {
		t.Fatalf("Len = %d, want 2", tb.Len())
	}
	if members(tb, "acme", "web", "eu") != nil {
		t.Fatal("Reset kept an old set")
	}
	if _, ok := tb.TenantOf(netip.MustParseAddr("10.0.0.9")); ok {
		t.Fatal("Reset kept an old address")
	}
	if got := members(tb, "beta", "db", "eu"); len(got) != 1 || !got["y"] {
		t.Fatalf("beta db = %v", got)
	}
	tb.Reset(nil)
	if tb.Len() != 0 {
		t.Fatalf("Len after Reset(nil) = %d", tb.Len())
	}
}

func TestTableTenantOf(t *testing.T) {
	tb := NewTable()
	tb.Upsert(ep("a", "Acme", "eu", "web", "10.0.0.1", false))
	tb.Upsert(ep("b", "beta", "eu", "web", "fd00::2", true))
	for _, tc := range []struct {
		addr   string
		tenant string
		ok     bool
	}{
		{"10.0.0.1", "Acme", true}, // any readiness
		{"::ffff:10.0.0.1", "Acme", true},
		{"fd00::2", "beta", true},
		{"10.0.0.3", "", false},
	} {
		got, ok := tb.TenantOf(netip.MustParseAddr(tc.addr))
		if got != tc.tenant || ok != tc.ok {
			t.Errorf("TenantOf(%s) = %q, %v; want %q, %v", tc.addr, got, ok, tc.tenant, tc.ok)
		}
	}
}

func TestTableSharedAddress(t *testing.T) {
	tb := NewTable()
	addr := netip.MustParseAddr("10.0.0.1")
	tb.Upsert(ep("old", "acme", "eu", "web", "10.0.0.1", false))
	tb.Upsert(ep("new", "beta", "eu", "web", "10.0.0.1", true))
	if got, _ := tb.TenantOf(addr); got != "beta" {
		t.Fatalf("TenantOf = %q, want the newer endpoint's tenant", got)
	}
	tb.Remove("old")
	if got, ok := tb.TenantOf(addr); got != "beta" || !ok {
		t.Fatalf("after removing the older: %q, %v", got, ok)
	}
}

// TestTableConcurrent: writers and readers at once (go test -race).
func TestTableConcurrent(t *testing.T) {
	tb := NewTable()
	s := NewServer(Config{Region: "region-0"}, tb)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := range 2000 {
				e := fleetEndpoint(i%200 + w*200)
				if i%3 == 0 {
					tb.Remove(e.ID)
				} else {
					tb.Upsert(e)
				}
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			q := mdns.Question{Name: "svc-00.tenant-000.strata.internal.", Qtype: mdns.TypeA, Qclass: mdns.ClassINET}
			for range 2000 {
				if m := s.Answer("tenant-000", q); m.Rcode != mdns.RcodeSuccess && m.Rcode != mdns.RcodeNameError {
					t.Errorf("rcode %d", m.Rcode)
					return
				}
				tb.TenantOf(netip.MustParseAddr("10.0.0.5"))
			}
		})
	}
	wg.Wait()
	tb.Reset(nil)
	if tb.Len() != 0 {
		t.Fatal("Reset after the writers left endpoints")
	}
}

func TestTablePortsCopied(t *testing.T) {
	tb := NewTable()
	e := ep("a", "acme", "eu", "web", "10.0.0.1", true, Port{Name: "http", Proto: "tcp", Port: 80})
	tb.Upsert(e)
	e.Ports[0].Port = 81
	if got := tb.byID["a"].Ports[0].Port; got != 80 {
		t.Fatalf("the table shares the caller's ports: %d", got)
	}
}

// fleet is nodes×perNode endpoints spread over tenants, resources and
// regions as a real fleet would be.
func fleetEndpoint(i int) Endpoint {
	tenant := fmt.Sprintf("tenant-%03d", i%50)
	resource := fmt.Sprintf("svc-%02d", (i/50)%40)
	region := fmt.Sprintf("region-%d", i%5)
	return Endpoint{
		ID:       fmt.Sprintf("rep-%06d-%08x", i, uint32(i)*2654435761),
		Tenant:   tenant,
		Region:   region,
		Resource: resource,
		Addr:     netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}),
		Ready:    i%7 != 0,
		Ports:    []Port{{Name: "http", Proto: "tcp", Port: 8080}, {Name: "metrics", Proto: "tcp", Port: 9090}},
	}
}

const fleetSize = 1000 * 20

func TestTableMemory(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tb := NewTable()
	for i := range fleetSize {
		tb.Upsert(fleetEndpoint(i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if tb.Len() != fleetSize {
		t.Fatalf("Len = %d, want %d", tb.Len(), fleetSize)
	}
	used := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d endpoints: %.2f MiB (%d bytes per endpoint)", fleetSize, float64(used)/(1<<20), used/fleetSize)
	if used > 20<<20 {
		t.Fatalf("table of %d endpoints takes %d bytes, over 20 MiB", fleetSize, used)
	}
	runtime.KeepAlive(tb)
}

func BenchmarkTableUpsert(b *testing.B) {
	tb := NewTable()
	eps := make([]Endpoint, fleetSize)
	for i := range eps {
		eps[i] = fleetEndpoint(i)
		tb.Upsert(eps[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		e := eps[i%fleetSize]
		e.Ready = i%2 == 0
		tb.Upsert(e)
	}
}

func BenchmarkTableRemoveUpsert(b *testing.B) {
	tb := NewTable()
	eps := make([]Endpoint, fleetSize)
	for i := range eps {
		eps[i] = fleetEndpoint(i)
		tb.Upsert(eps[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		e := eps[i%fleetSize]
		tb.Remove(e.ID)
		tb.Upsert(e)
	}
}
