package api

// PlanRequest is a what-if: actions to weigh together, without doing
// them (POST /v1/plan). At least one is needed.
type PlanRequest struct {
	// LoseRegions: these regions are Down, for longer than any
	// failover.after.
	LoseRegions []string `json:"loseRegions,omitempty"`
	// Scale: resources of the tenant, by name, scaled to these replicas.
	Scale map[string]int `json:"scale,omitempty"`
	// Apply: resources as a manifest would create or update them.
	Apply []Resource `json:"apply,omitempty"`
}

// Plan is what a PlanRequest would do, decided by the same placement
// code as the master's, on what the global tier knows now: the stored
// statuses and the regions' health and headroom.
type Plan struct {
	// Resources lists every resource whose split would change, and every
	// one the request names, by tenant and name.
	Resources []ResourcePlan `json:"resources"`
	// Moved counts the replicas that would change region, Unfit those
	// that would find room in no region, Blocked the resources whose
	// change the API would refuse.
	Moved   int `json:"moved"`
	Unfit   int `json:"unfit"`
	Blocked int `json:"blocked"`
}

// ResourcePlan is what a plan does to one resource.
type ResourcePlan struct {
	Tenant string       `json:"tenant"`
	Name   string       `json:"name"`
	Kind   ResourceKind `json:"kind"`
	// Before and After are its replicas per region, as the master splits
	// them now and would after the actions.
	Before map[string]int `json:"before"`
	After  map[string]int `json:"after"`
	// Moves pairs the regions that would lose replicas with those that
	// would gain them.
	Moves []ReplicaMove `json:"moves,omitempty"`
	// Unfit counts its replicas that would find room in no region.
	Unfit int `json:"unfit,omitempty"`
	// Split and Reserve are what its status would say (ResourceStatus).
	Split   string         `json:"split,omitempty"`
	Reserve *ReserveStatus `json:"reserve,omitempty"`
	// Reason says why it could not be placed as asked (no failover
	// region up, a region not registered).
	Reason string `json:"reason,omitempty"`
	// Blocked says why the API would refuse the change (invalid, over
	// quota); the split shown is then the one it has now.
	Blocked string `json:"blocked,omitempty"`
}

// ReplicaMove is replicas leaving one region for another.
type ReplicaMove struct {
	From     string `json:"from,omitempty"` // "" for new replicas
	To       string `json:"to,omitempty"`   // "" for replicas removed
	Replicas int    `json:"replicas"`
}
