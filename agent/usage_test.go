package agent

import (
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// TestMeterRates: two readings make rates per resource; a first reading,
// a counter that went back (a restart) and a replica not running count
// for nothing.
func TestMeterRates(t *testing.T) {
	m := &meter{}
	t0 := time.Unix(100, 0)
	owners := map[string]string{"a": "acme/web", "b": "acme/web", "c": "acme/lb"}
	first := m.sum(t0, map[string]api.Usage{
		"a": {CPUSeconds: 10, MemoryMiB: 30}, "b": {CPUSeconds: 5}, "c": {Requests: 100}, "gone": {CPUSeconds: 1},
	}, owners)
	if len(first) != 0 {
		t.Fatalf("first reading: %v; want no rates", first)
	}
	got := m.sum(t0.Add(2*time.Second), map[string]api.Usage{
		"a": {CPUSeconds: 11, MemoryMiB: 40}, "b": {CPUSeconds: 1}, "c": {Requests: 180, Sessions: 3},
	}, owners)
	want := map[string]float64{
		"load/acme/web/replicas": 1, "load/acme/web/milli_cpu": 500, "load/acme/web/memory_mib": 40,
		"load/acme/web/request_rate": 0, "load/acme/web/sessions": 0,
		"load/acme/lb/replicas": 1, "load/acme/lb/milli_cpu": 0, "load/acme/lb/memory_mib": 0,
		"load/acme/lb/request_rate": 40, "load/acme/lb/sessions": 3,
	}
	if !api.SameJSON(got, want) {
		t.Errorf("second reading: %v; want %v", got, want)
	}
	// b restarted: its next reading is a rate again.
	got = m.sum(t0.Add(4*time.Second), map[string]api.Usage{"b": {CPUSeconds: 2}}, owners)
	if got["load/acme/web/replicas"] != 1 || got["load/acme/web/milli_cpu"] != 500 {
		t.Errorf("after a restart: %v; want b at 500 milli-CPU", got)
	}
}
