package printers

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stratahq/strata/cli/client"
	"github.com/stratahq/strata/internal/api"
)

// Flavors is the table of flavors.
func Flavors(items []api.Flavor, wide bool, now time.Time) Table {
	t := Table{Header: []string{"NAME", "PROVIDER", "VCPUS", "MEMORY", "DISK", "AGE"}}
	if wide {
		t.Header = append(t.Header, "UPDATED")
	}
	for _, f := range items {
		disk := "-"
		if f.Spec.DiskMiB > 0 {
			disk = MiB(f.Spec.DiskMiB)
		}
		row := []string{Cell(f.Name), Cell(string(f.Kind)), VCPUs(f.Spec.VCPUs), MiB(f.Spec.MemoryMiB), disk, Age(now, f.CreatedAt)}
		if wide {
			row = append(row, Age(now, f.UpdatedAt))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// Policies is the table of network policies: SELECTOR the replicas they
// select, RULES their ingress rules, ENFORCED the nodes and regions that
// enforce them at their generation ("2 nodes in dev-1").
func Policies(items []api.NetworkPolicy, wide bool, now time.Time) Table {
	t := Table{Header: []string{"NAME", "SELECTOR", "RULES", "GENERATION", "ENFORCED", "AGE"}}
	if wide {
		t.Header = append(t.Header, "TENANT", "UNREACHABLE")
	}
	for _, p := range items {
		sel := Labels(p.Selector)
		if len(p.Selector) == 0 {
			sel = "(all)"
		}
		row := []string{Cell(p.Name), sel, fmt.Sprint(len(p.Ingress)), fmt.Sprint(p.Generation), PolicyEnforced(p), Age(now, p.CreatedAt)}
		if wide {
			var unreachable []string
			if p.Status != nil {
				unreachable = p.Status.Unreachable
			}
			row = append(row, Cell(p.Tenant), Cell(strings.Join(unreachable, ",")))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// PolicyEnforced says where a policy is enforced at its generation:
// "3 nodes in dev-1, 1 node in dev-2", "-" when nowhere, with the regions
// that hold an older generation named "(dev-2: generation 1)".
func PolicyEnforced(p api.NetworkPolicy) string {
	if p.Status == nil {
		return "-"
	}
	var parts []string
	for _, r := range p.Status.Regions {
		switch {
		case r.ObservedGeneration != p.Generation:
			parts = append(parts, fmt.Sprintf("(%s: generation %d)", r.Region, r.ObservedGeneration))
		case r.Nodes == 1:
			parts = append(parts, "1 node in "+r.Region)
		case r.Nodes > 1:
			parts = append(parts, fmt.Sprintf("%d nodes in %s", r.Nodes, r.Region))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return Cell(strings.Join(parts, ", "))
}

// Resources is the table of resources: READY is ready/desired replicas,
// REGIONS the same per region ("dev-1:2/2 dev-2:1/1").
func Resources(items []api.Resource, wide bool, now time.Time) Table {
	t := Table{Header: []string{"NAME", "KIND", "READY", "STATUS", "REVISION", "REGIONS", "AGE"}}
	if wide {
		t.Header = append(t.Header, "TENANT", "FLAVOR", "IMAGE", "LABELS", "REASON")
	}
	for _, r := range items {
		row := []string{
			Cell(r.Name), Cell(string(r.Kind)), ResourceReady(r), ResourceStatus(r),
			fmt.Sprint(r.Revision), ResourceRegions(r), Age(now, r.CreatedAt),
		}
		if wide {
			reason := ""
			if r.Status != nil {
				reason = r.Status.Reason
			}
			row = append(row, Cell(r.Tenant), Cell(r.Spec.Flavor), Cell(ResourceImage(r.Spec)), Labels(r.Labels), Cell(reason))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// ResourceReady is "ready/desired".
func ResourceReady(r api.Resource) string {
	ready := 0
	if r.Status != nil {
		ready = r.Status.Ready
	}
	return fmt.Sprintf("%d/%d", ready, r.Replicas)
}

// ResourceStatus is the phase, "deleting" once deletion is requested, and
// "pending" before the controller first reported.
func ResourceStatus(r api.Resource) string {
	switch {
	case r.Deleting():
		return "deleting"
	case r.Status == nil:
		return "pending"
	}
	s := string(r.Status.Phase)
	if ro := r.Status.Rollout; ro != nil && ro.State != "" && ro.State != api.RolloutSucceeded {
		s += "/rollout-" + ro.State
	}
	return s
}

// ResourceRegions is each region's ready/desired, by region name.
func ResourceRegions(r api.Resource) string {
	if r.Status == nil || len(r.Status.Regions) == 0 {
		return "-"
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(r.Status.Regions)) {
		sh := r.Status.Regions[name]
		parts = append(parts, fmt.Sprintf("%s:%d/%d", name, sh.Ready, sh.Replicas))
	}
	return strings.Join(parts, " ")
}

// ResourceImage is what a resource runs or is: a compute image, an image's
// reference or archive.
func ResourceImage(s api.ResourceSpec) string {
	switch {
	case s.Compute != nil:
		return s.Compute.Image
	case s.Image != nil:
		for _, v := range []string{s.Image.Ref, s.Image.Archive, s.Image.Disk, s.Image.Kernel} {
			if v != "" {
				return v
			}
		}
	}
	return ""
}

// Regions is the table of regions: NODES is up/known, REPLICAS
// ready/placed.
func Regions(items []api.Region, wide bool, now time.Time) Table {
	t := Table{Header: []string{"NAME", "HEALTH", "NODES", "RESOURCES", "REPLICAS", "AGE"}}
	if wide {
		t.Header = append(t.Header, "ENDPOINT", "ZONES", "LEADER", "HEARTBEAT", "CONSOLE")
	}
	for _, r := range items {
		health, nodes, resources, replicas := "Unknown", "-", "-", "-"
		leader, beat := "", "-"
		if s := r.Status; s != nil {
			health = string(s.Health)
			nodes = fmt.Sprintf("%d/%d", s.NodesUp, s.Nodes)
			resources = fmt.Sprint(s.Resources)
			replicas = fmt.Sprintf("%d/%d", s.Ready, s.Replicas)
			leader = s.Leader
			beat = Age(now, s.LastHeartbeat)
		}
		row := []string{Cell(r.Name), Cell(health), nodes, resources, replicas, Age(now, r.RegisteredAt)}
		if wide {
			row = append(row, Cell(r.Endpoint), Cell(strings.Join(r.Zones, ",")), Cell(leader), beat, Cell(r.ConsoleURL))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// Nodes is the table of nodes: CPU and MEMORY are allocated/capacity.
func Nodes(items []api.Node, wide bool, now time.Time) Table {
	t := Table{Header: []string{"NAME", "REGION", "ZONE", "STATUS", "REPLICAS", "CPU", "MEMORY", "AGE"}}
	if wide {
		t.Header = append(t.Header, "ADDRESS", "PROVIDERS", "CONDITIONS", "VERSION", "LABELS")
	}
	for _, n := range items {
		var alloc api.Capacity
		replicas := 0
		if n.Status != nil {
			alloc, replicas = n.Status.Allocated, n.Status.Replicas
		}
		row := []string{
			Cell(n.Name), Cell(n.Region), Cell(n.Zone), NodeStatus(n), fmt.Sprint(replicas),
			CPU(alloc.MilliCPU) + "/" + CPU(n.Capacity.MilliCPU),
			MiB(alloc.MemoryMiB) + "/" + MiB(n.Capacity.MemoryMiB),
			Age(now, n.RegisteredAt),
		}
		if wide {
			var provs []string
			for _, p := range n.Providers {
				provs = append(provs, p.Name)
			}
			conds := "-"
			if n.Status != nil && len(n.Status.Conditions) > 0 {
				conds = string(api.WorstCondition(n.Status.Conditions))
			}
			row = append(row, Cell(n.Address), Cell(strings.Join(provs, ",")), conds, Cell(n.AgentVersion), Labels(n.Labels))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// NodeStatus is the node's health, then Cordoned and Draining when they
// hold: "Up,Cordoned,Draining".
func NodeStatus(n api.Node) string {
	s := string(api.HealthUnknown)
	if n.Status != nil && n.Status.Health != "" {
		s = string(n.Status.Health)
	}
	if !n.Schedulable {
		s += ",Cordoned"
	}
	if n.Status != nil && n.Status.Drain != nil && n.Status.Drain.State == api.DrainRunning {
		s += ",Draining"
	}
	return s
}

// Replicas is the table of replicas. When any replica reports its
// containers, READY is its ready containers out of those that run
// ("1/2", init containers apart, as kubectl get pods) and RESTARTS the
// sum of its containers' restarts; without container statuses the table
// is what it always was.
func Replicas(items []api.Replica, wide bool, now time.Time) Table {
	pods := slices.ContainsFunc(items, func(r api.Replica) bool { return r.Status != nil && len(r.Status.Containers) > 0 })
	t := Table{Header: []string{"NAME", "REGION", "NODE", "PHASE", "REVISION", "RESTARTS", "AGE"}}
	if pods {
		t.Header = slices.Insert(t.Header, 1, "READY")
	}
	if wide {
		t.Header = append(t.Header, "RESOURCE", "DESIRED", "ADDRESS", "REPLACES", "REASON")
	}
	for _, r := range items {
		restarts, address, reason := 0, "", r.Reason
		if s := r.Status; s != nil {
			restarts, address = s.Restarts, s.Address
			if s.Reason != "" {
				reason = s.Reason
			}
			if len(s.Containers) > 0 {
				restarts = ContainerRestarts(s.Containers)
			}
		}
		row := []string{
			Cell(r.ID), Cell(r.Region), Cell(r.Node), Cell(string(r.Phase)), fmt.Sprint(r.Revision),
			fmt.Sprint(restarts), Age(now, r.CreatedAt),
		}
		if pods {
			row = slices.Insert(row, 1, ContainersReady(r))
		}
		if wide {
			row = append(row, Cell(r.Resource), Cell(string(r.Desired)), Cell(address), Cell(r.Replaces), Cell(reason))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// ContainersReady is "ready/running" over a replica's containers, its
// init containers apart (they run to completion, never ready); "-" when
// it reports none.
func ContainersReady(r api.Replica) string {
	if r.Status == nil || len(r.Status.Containers) == 0 {
		return "-"
	}
	init := map[string]bool{}
	if c := r.Spec.Compute; c != nil {
		for _, ic := range c.InitContainers {
			init[ic.Name] = true
		}
	}
	ready, total := 0, 0
	for _, c := range r.Status.Containers {
		if init[c.Name] {
			continue
		}
		total++
		if c.Ready {
			ready++
		}
	}
	return fmt.Sprintf("%d/%d", ready, total)
}

// ContainerRestarts is the sum of the containers' restarts, init
// containers' included.
func ContainerRestarts(cs []api.ContainerStatus) int {
	n := 0
	for _, c := range cs {
		n += c.Restarts
	}
	return n
}

// ContainerStatuses is the table of the containers of replicas, each
// replica's in the order it reports them: STATE, READY, RESTARTS, the
// last EXIT code and its REASON, the MESSAGE and when it STARTED.
func ContainerStatuses(items []api.Replica, now time.Time) Table {
	t := Table{Header: []string{"REPLICA", "CONTAINER", "STATE", "READY", "RESTARTS", "EXIT", "REASON", "STARTED", "MESSAGE"}}
	for _, r := range items {
		if r.Status == nil {
			continue
		}
		for _, c := range r.Status.Containers {
			exit := "-"
			if c.ExitCode != nil {
				exit = fmt.Sprint(*c.ExitCode)
			}
			t.Rows = append(t.Rows, []string{Cell(r.ID), Cell(c.Name), Cell(string(c.State)), fmt.Sprint(c.Ready),
				fmt.Sprint(c.Restarts), exit, Cell(c.Reason), Age(now, c.StartedAt), Cell(ContainerMessage(c, now))})
		}
	}
	return t
}

// ContainerMessage is a container's message with, while it waits out its
// back-off, how long until it starts again, counted from its
// nextStartAt at now.
func ContainerMessage(c api.ContainerStatus, now time.Time) string {
	if c.NextStartAt.IsZero() {
		return c.Message
	}
	if left := c.NextStartAt.Sub(now); left > 0 {
		return c.Message + ", next start in " + HumanDuration(left.Round(time.Second))
	}
	return c.Message + ", starting"
}

// Revisions is the table of a resource's revisions; current is marked.
func Revisions(items []api.Revision, current int64, wide bool, now time.Time) Table {
	t := Table{Header: []string{"REVISION", "CURRENT", "CAUSE", "FLAVOR", "IMAGE", "AGE"}}
	if wide {
		t.Header = append(t.Header, "PINNED", "VCPUS", "MEMORY")
	}
	for _, r := range items {
		cur := ""
		if r.Number == current {
			cur = "*"
		}
		row := []string{fmt.Sprint(r.Number), Cell(cur), Cell(r.Cause), Cell(r.Spec.Flavor), Cell(ResourceImage(r.Spec)), Age(now, r.CreatedAt)}
		if wide {
			vcpus, mem := "-", "-"
			if f := r.FlavorSpec; f != nil {
				vcpus, mem = VCPUs(f.VCPUs), MiB(f.MemoryMiB)
			}
			row = append(row, fmt.Sprint(r.Pinned), vcpus, mem)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// Events is the table of events, oldest first.
func Events(items []api.Event, wide bool, now time.Time) Table {
	t := Table{Header: EventHeader(wide)}
	for _, e := range items {
		t.Rows = append(t.Rows, EventRow(e, wide, now))
	}
	return t
}

// EventHeader is the header of Events.
func EventHeader(wide bool) []string {
	h := []string{"LAST SEEN", "TYPE", "REASON", "OBJECT", "REGION", "MESSAGE"}
	if wide {
		h = append(h, "FIELDS")
	}
	return h
}

// EventRow is one row of Events.
func EventRow(e api.Event, wide bool, now time.Time) []string {
	row := []string{Age(now, e.Time), Cell(e.Type), Cell(e.Reason), Cell(e.Object), Cell(e.Region), Cell(e.Message)}
	if wide {
		f := "-"
		if len(e.Fields) > 0 {
			f = Labels(e.Fields)
		}
		row = append(row, f)
	}
	return row
}

// DrainSteps is the table of a drain's steps.
func DrainSteps(steps []api.DrainStep, now time.Time) Table {
	t := Table{Header: []string{"REPLICA", "RESOURCE", "STATE", "TO", "MESSAGE", "AGE"}}
	for _, s := range steps {
		t.Rows = append(t.Rows, []string{Cell(s.Replica), Cell(s.Resource), Cell(s.State), Cell(s.To), Cell(s.Message), Age(now, s.At)})
	}
	return t
}

// Tokens is the table of tokens; EXPIRES is "never", "in 3d" or
// "expired 2h ago".
func Tokens(items []client.Token, now time.Time) Table {
	t := Table{Header: []string{"ID", "NAME", "TENANT", "ROLE", "AGE", "EXPIRES"}}
	for _, tk := range items {
		exp := "never"
		switch {
		case tk.ExpiresAt.IsZero():
		case tk.ExpiresAt.After(now):
			exp = "in " + HumanDuration(tk.ExpiresAt.Sub(now))
		default:
			exp = "expired " + HumanDuration(now.Sub(tk.ExpiresAt)) + " ago"
		}
		t.Rows = append(t.Rows, []string{Cell(tk.ID), Cell(tk.Name), Cell(tk.Tenant), Cell(string(tk.Role)), Age(now, tk.CreatedAt), exp})
	}
	return t
}

// Headroom is a region's headroom: per flavor, how many more replicas
// fit, in all and per zone ("-" in a zone without room; zone "" is
// shown as "(none)").
func Headroom(items []api.FlavorHeadroom) Table {
	var zones []string
	for _, h := range items {
		for z := range h.Zones {
			if !slices.Contains(zones, z) {
				zones = append(zones, z)
			}
		}
	}
	slices.Sort(zones)
	t := Table{Header: []string{"FLAVOR", "FITS"}}
	for _, z := range zones {
		if z == "" {
			z = "(none)"
		}
		t.Header = append(t.Header, strings.ToUpper(z))
	}
	for _, h := range items {
		row := []string{h.Flavor, fmt.Sprint(h.Replicas)}
		for _, z := range zones {
			n := fmt.Sprint(h.Zones[z])
			if h.Zones[z] == 0 {
				n = "-"
			}
			row = append(row, n)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}
