package api

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
