package api

import (
	"cmp"
	"slices"
	"strings"
)

// Usage is what one replica has used, as its provider measures it: the
// counters only grow (the agent turns two samples into rates), the gauges
// are the value now. A provider leaves a dimension it does not measure at
// zero.
type Usage struct {
	// CPUSeconds is the CPU time the replica's processes have used since
	// it started (user and system, every container of a pod; a VM's
	// vCPUs), a counter.
	CPUSeconds float64 `json:"cpuSeconds,omitempty"`
	// MemoryMiB is the memory the replica holds now, a gauge.
	MemoryMiB float64 `json:"memoryMiB,omitempty"`
	// Requests is what a load balancer has served since it started: HTTP
	// requests for its http listeners, connections for its tcp ones, a
	// counter.
	Requests float64 `json:"requests,omitempty"`
	// Sessions is a load balancer's connections open now, a gauge.
	Sessions float64 `json:"sessions,omitempty"`
}

// The heartbeat metrics an agent's beat carries for what the node's
// replicas use, per resource: LoadPrefix + "<tenant>/<resource>/" + one of
// the Load* suffixes. The region sums them over its nodes into its own
// beat's load (ResourceLoad, SumLoad), the autoscaler's input.
const (
	LoadPrefix = "load/"
	// LoadReplicas counts the replicas the other numbers cover: those
	// running, measured twice (a rate needs two readings).
	LoadReplicas = "replicas"
	// LoadMilliCPU is their CPU use, in thousandths of a CPU.
	LoadMilliCPU = "milli_cpu"
	// LoadMemoryMiB is their memory now.
	LoadMemoryMiB = "memory_mib"
	// LoadRequestRate is a load balancer's requests (or connections) per
	// second, LoadSessions its open connections.
	LoadRequestRate = "request_rate"
	LoadSessions    = "sessions"
)

// SumLoad adds up the load metrics of nodes' beats (each a beat's
// metrics) per resource, by tenant and name; metrics of another shape are
// ignored.
func SumLoad(nodes []map[string]float64) []ResourceLoad {
	by := map[string]*ResourceLoad{}
	for _, m := range nodes {
		for k, v := range m {
			rest, ok := strings.CutPrefix(k, LoadPrefix)
			if !ok {
				continue
			}
			parts := strings.Split(rest, "/")
			if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
				continue
			}
			key := parts[0] + "/" + parts[1]
			l := by[key]
			if l == nil {
				l = &ResourceLoad{Tenant: parts[0], Resource: parts[1]}
				by[key] = l
			}
			switch parts[2] {
			case LoadReplicas:
				l.Replicas += int(v)
			case LoadMilliCPU:
				l.MilliCPU += v
			case LoadMemoryMiB:
				l.MemoryMiB += v
			case LoadRequestRate:
				l.RequestRate += v
			case LoadSessions:
				l.Sessions += v
			}
		}
	}
	out := make([]ResourceLoad, 0, len(by))
	for _, l := range by {
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b ResourceLoad) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Resource, b.Resource))
	})
	return out
}
