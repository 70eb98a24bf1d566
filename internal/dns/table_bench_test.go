package dns

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"
)

// heapAlloc is the live heap after a full collection.
func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// tableUpserts is how many one-endpoint changes a run times.
const tableUpserts = 100_000

// BenchmarkTable is DNS3: one agent's table of 20,000 endpoints (1,000
// nodes × 20 replicas, fleetEndpoint's fleet) and one of 2,000, each built
// one Upsert at a time as the network stream fills it. "MiB" is the heap the table holds
// (HeapAlloc after GC, less before; every endpoint's strings made inside
// the window, so that the table's own copies count); "ns/upsert" is one
// endpoint's change (readiness flipped, address moved) in the full
// table, averaged over 100,000 changes spread over the whole table.
func BenchmarkTable(b *testing.B) {
	for _, n := range []int{20_000, 2_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				mib, ns := measureTable(n)
				b.ReportMetric(mib, "MiB")
				b.ReportMetric(ns, "ns/upsert")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

func measureTable(n int) (mib, nsPerUpsert float64) {
	before := heapAlloc()
	t := NewTable()
	for i := range n {
		t.Upsert(fleetEndpoint(i))
	}
	after := heapAlloc()
	if t.Len() != n {
		panic(fmt.Sprintf("table of %d, want %d", t.Len(), n))
	}
	// The changes are made outside the clock, so that their strings'
	// formatting is not timed.
	changes := make([]Endpoint, tableUpserts)
	for k := range changes {
		i := (k * 7919) % n
		e := fleetEndpoint(i)
		e.Ready = k%2 == 1
		e.Addr = netip.AddrFrom4([4]byte{10, 128 | byte(i>>16), byte(i >> 8), byte(i)})
		changes[k] = e
	}
	start := time.Now()
	for _, e := range changes {
		t.Upsert(e)
	}
	d := time.Since(start)
	if t.Len() != n {
		panic(fmt.Sprintf("table of %d after the changes, want %d", t.Len(), n))
	}
	runtime.KeepAlive(t)
	return float64(after-before) / (1 << 20), float64(d.Nanoseconds()) / tableUpserts
}
