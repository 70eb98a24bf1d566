package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/cli/client"
	"github.com/stratahq/strata/cli/manifest"
	"github.com/stratahq/strata/cli/printers"
	"github.com/stratahq/strata/internal/api"
)

// describeCommands is the describe command: one object in detail, with
// what relates to it.
type describeCommands struct{ *App }

// describeEvents is how many of an object's latest events describe shows.
const describeEvents = 20

func (a describeCommands) describeCommand() *cobra.Command {
	var (
		typ  objType
		name string
	)
	return a.command(&cobra.Command{
		Use:   "describe TYPE NAME",
		Short: "Show one object in detail, with what relates to it",
		Long: `Show one object in detail:

  resource NAME       spec (a pod's containers with their probes), status per
                      region, replicas with nodes and phases (and their
                      containers' states, when reported), the DNS names of a
                      container resource on a region network with the ready
                      replicas they answer, revisions, recent events
  node REGION/NODE    capacity and allocation, conditions, cordon, drain
                      progress, the replicas on it (of your tenant), recent events
  flavor NAME         size, and the resources that use it
  region NAME         registration, health, nodes

TYPE NAME may also be written TYPE/NAME. -o json|yaml prints the same
gathered as one document.`,
		Example: `  stratactl describe resource web
  stratactl describe node dev-1/dev-1-a
  stratactl describe res/web -o yaml`,
		Args: args(cobra.RangeArgs(1, 2)),
	}, action{
		check: func(_ *cobra.Command, argv []string) error {
			var err error
			typ, name, err = describeTarget(argv)
			return err
		},
		show: func(ctx context.Context, c *client.Client, _ []string) (view, error) {
			switch typ {
			case typeResources:
				return a.describeResource(ctx, c, name)
			case typeNodes:
				return a.describeNode(ctx, c, name)
			case typeFlavors:
				return a.describeFlavor(ctx, c, name)
			case typeRegions:
				return a.describeRegion(ctx, c, name)
			}
			return view{}, usageErrorf("describe takes resources, nodes, flavors or regions, not %s (try `stratactl get %s`)", typ, typ)
		},
	})
}

// describeTarget reads TYPE NAME or TYPE/NAME.
func describeTarget(argv []string) (objType, string, error) {
	typArg, name := argv[0], ""
	if len(argv) == 2 {
		name = argv[1]
	} else if t, n, ok := strings.Cut(argv[0], "/"); ok {
		typArg, name = t, n
	}
	if name == "" {
		return "", "", usageErrorf("describe needs TYPE NAME")
	}
	typ, err := parseType(typArg)
	return typ, name, err
}

// resourceDescription is everything describe resource gathers.
type resourceDescription struct {
	Resource  api.Resource   `json:"resource"`
	Replicas  []api.Replica  `json:"replicas"`
	Revisions []api.Revision `json:"revisions"`
	Events    []api.Event    `json:"events"`
	// Names are a container resource's names on the region network
	// (namesOf); absent for other resources.
	Names   *resourceNames `json:"names,omitempty"`
	Missing missing        `json:"missing,omitempty"`
}

// missing says which parts of a description could not be read, and why:
// the rest is still worth showing (events need an operator's token, a
// region may not answer).
type missing map[string]string

func (m *missing) add(part string, err error) {
	if *m == nil {
		*m = missing{}
	}
	(*m)[part] = err.Error()
}

func (a describeCommands) describeResource(ctx context.Context, c *client.Client, name string) (view, error) {
	r, err := c.Resources.Get(ctx, name)
	if err != nil {
		return view{}, err
	}
	d := resourceDescription{Resource: r}
	var warnings []string
	if reps, err := c.Resources.Replicas(ctx, name); err != nil {
		d.Missing.add("replicas", err)
	} else {
		d.Replicas, warnings = reps.Items, unreachable(reps.Unreachable)
		d.Names = namesOf(r, d.Replicas)
	}
	if d.Revisions, err = c.Resources.Revisions(ctx, name); err != nil {
		d.Missing.add("revisions", err)
	}
	evs, err := c.Events.List(ctx, client.EventQuery{Object: "resource/" + r.Tenant + "/" + r.Name, Limit: describeEvents})
	if err != nil {
		d.Missing.add("events", err)
	}
	d.Events = evs.Items
	return view{
		text:     func(w io.Writer, now time.Time) error { return writeResource(w, d, now) },
		data:     d,
		warnings: warnings,
	}, nil
}

// fields is a block of "Key: value" lines, values aligned; keys starting
// with spaces are nested under the key before them.
type fields [][2]string

func (f *fields) add(k, v string) { *f = append(*f, [2]string{k, v}) }

// addIf adds a field only when it has a value.
func (f *fields) addIf(k, v string) {
	if v != "" {
		f.add(k, v)
	}
}

func (f fields) write(w io.Writer) error {
	// Headings take part in the alignment too (a line without a tab would
	// end tabwriter's column block); their padding is trimmed after.
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	for _, kv := range f {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		if line == "" {
			continue
		}
		if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// section prints a titled table, or why it is missing or empty.
func section(w io.Writer, title string, t printers.Table, missing, empty string) {
	fmt.Fprintf(w, "%s:\n", title)
	switch {
	case missing != "":
		fmt.Fprintf(w, "  <unavailable: %s>\n", missing)
	case len(t.Rows) == 0:
		fmt.Fprintf(w, "  <%s>\n", empty)
	default:
		fmt.Fprint(w, indent(t.String(), "  "))
	}
}

// when is a time with how long ago it was.
func when(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339), printers.HumanDuration(now.Sub(t)))
}

func writeResource(w io.Writer, d resourceDescription, now time.Time) error {
	r := d.Resource
	var f fields
	f.add("Name", r.Name)
	f.add("Kind", string(r.Kind))
	f.add("Tenant", r.Tenant)
	f.addIf("UID", r.UID)
	f.add("Labels", printers.Labels(r.Labels))
	f.addIf("Created", when(r.CreatedAt, now))
	f.addIf("Updated", when(r.UpdatedAt, now))
	f.add("Revision", fmt.Sprintf("%d (generation %d)", r.Revision, r.Generation))
	if r.DeletionRequestedAt != nil {
		f.add("Deletion", "requested "+when(*r.DeletionRequestedAt, now))
	}
	statusFields(&f, r, now)
	specFields(&f, r.Spec)
	scheduleFields(&f, r)
	if err := f.write(w); err != nil {
		return err
	}
	if s := r.Status; s != nil && len(s.Regions) > 0 {
		section(w, "Regions", regionsTable(s), "", "")
	}
	if s := r.Status; s != nil && len(s.Backends) > 0 {
		section(w, "Backends", backendsTable(s), "", "")
	}
	jobSection(w, r, now)
	section(w, "Replicas", printers.Replicas(d.Replicas, false, now), d.Missing["replicas"], "none")
	if cs := printers.ContainerStatuses(d.Replicas, now); len(cs.Rows) > 0 {
		section(w, "Containers", cs, "", "")
	}
	namesSection(w, d.Names)
	section(w, "Revisions", printers.Revisions(d.Revisions, r.Revision, false, now), d.Missing["revisions"], "none")
	section(w, "Events", printers.Events(d.Events, false, now), d.Missing["events"], "none")
	return nil
}

func statusFields(f *fields, r api.Resource, now time.Time) {
	s := r.Status
	if s == nil {
		f.add("Replicas", fmt.Sprintf("%d desired", r.Replicas))
		f.add("Status", "pending (no status reported yet)")
		return
	}
	f.add("Replicas", fmt.Sprintf("%d desired, %d ready, %d updated", r.Replicas, s.Ready, s.Updated))
	status := string(s.Phase)
	if !s.Since.IsZero() {
		status += " for " + printers.HumanDuration(now.Sub(s.Since))
	}
	f.add("Status", status)
	f.addIf("Reason", s.Reason)
	if ro := s.Rollout; ro != nil {
		f.add("Rollout", rolloutLine(ro))
	}
	f.addIf("Split", s.Split)
	if rs := s.Reserve; rs != nil {
		verdict := "short"
		if rs.Holds {
			verdict = "holds"
		}
		f.add("Reserve", fmt.Sprintf("%s %s: %s", r.Schedule.Reserve, verdict, rs.Message))
	}
	if a := r.Autoscale; a != nil {
		f.add("Autoscale", autoscaleLine(a, s.Autoscale, now))
	}
	for _, k := range slices.Sorted(maps.Keys(s.Conditions)) {
		f.add("Condition "+k, s.Conditions[k])
	}
}

// autoscaleLine is an autoscaled resource's bounds and the master's last
// reading: "1 to 3; desired 3 (requests 41/s per replica of 20/s), scaled 2m ago".
func autoscaleLine(p *api.AutoscalePolicy, st *api.AutoscaleStatus, now time.Time) string {
	line := fmt.Sprintf("%d to %d", p.MinReplicas, p.MaxReplicas)
	if st == nil {
		return line + "; no reading yet"
	}
	line += fmt.Sprintf("; desired %d", st.Desired)
	if len(st.Metrics) > 0 {
		line += " (" + strings.Join(st.Metrics, ", ") + ")"
	}
	if !st.LastScaleAt.IsZero() {
		line += ", scaled " + printers.HumanDuration(now.Sub(st.LastScaleAt)) + " ago"
	}
	if st.Message != "" {
		line += ": " + st.Message
	}
	return line
}

func rolloutLine(ro *api.RolloutStatus) string {
	line := fmt.Sprintf("revision %d", ro.Revision)
	if ro.FromRevision != 0 {
		line += fmt.Sprintf(" from %d", ro.FromRevision)
	}
	line += ": " + ro.State
	if ro.Region != "" {
		line += " in " + ro.Region
	}
	if ro.Message != "" {
		line += ": " + ro.Message
	}
	return line
}

func regionsTable(s *api.ResourceStatus) printers.Table {
	t := printers.Table{Header: []string{"REGION", "STATUS", "READY", "UPDATED", "REVISION", "REASON"}}
	for _, name := range slices.Sorted(maps.Keys(s.Regions)) {
		sh := s.Regions[name]
		status := string(sh.Phase)
		if sh.FailoverFrom != "" {
			status += " (for " + sh.FailoverFrom + ")"
		}
		t.Rows = append(t.Rows, []string{name, printers.Cell(status), fmt.Sprintf("%d/%d", sh.Ready, sh.Replicas),
			fmt.Sprint(sh.Updated), fmt.Sprint(sh.Revision), printers.Cell(sh.Reason)})
	}
	return t
}

func backendsTable(s *api.ResourceStatus) printers.Table {
	t := printers.Table{Header: []string{"REPLICA", "ADDRESS", "HEALTH"}}
	for _, b := range s.Backends {
		addr := b.Address
		if b.Port != 0 {
			addr = fmt.Sprintf("%s:%d", b.Address, b.Port)
		}
		t.Rows = append(t.Rows, []string{printers.Cell(b.Replica), addr, printers.Cell(b.Health)})
	}
	return t
}

func specFields(f *fields, s api.ResourceSpec) {
	f.add("Spec", "")
	f.addIf("  Flavor", s.Flavor)
	switch {
	case s.Compute != nil:
		computeFields(f, s.Compute)
	case s.Volume != nil:
		f.add("  Size", printers.MiB(s.Volume.SizeMiB))
		f.addIf("  Format", string(s.Volume.Format))
		f.addIf("  Provider", string(s.Volume.Provider))
	case s.Image != nil:
		i := s.Image
		f.addIf("  Ref", i.Ref)
		f.addIf("  Archive", i.Archive)
		f.addIf("  Kernel", i.Kernel)
		f.addIf("  Initrd", i.Initrd)
		f.addIf("  Cmdline", i.Cmdline)
		f.addIf("  Disk", i.Disk)
	case s.Loadbalancer != nil:
		loadbalancerFields(f, s.Loadbalancer)
	}
	if s.Job != nil {
		jobFields(f, s.Job)
	}
}

func computeFields(f *fields, c *api.ComputeSpec) {
	if c.IsPod() || len(c.ScratchVolumes) > 0 {
		podFields(f, c)
		return
	}
	f.add("  Image", c.Image)
	f.addIf("  Command", shellJoin(c.Command))
	f.addIf("  Args", shellJoin(c.Args))
	f.addIf("  Env", pairs(c.Env))
	f.addIf("  Working dir", c.WorkingDir)
	f.addIf("  Ports", portsLine(c.Ports))
	f.addIf("  Volumes", mountsLine(c.Volumes, nil))
	f.addIf("  Network", c.Network)
	f.addIf("  Restart", string(c.RestartPolicy))
	if c.StopGracePeriod.Duration != 0 {
		f.add("  Stop grace", c.StopGracePeriod.String())
	}
	f.addIf("  Kernel args", c.KernelArgs)
	f.addIf("  Run as", runAs(c.SecurityContext))
	probeFields(f, "  ", &c.Probes)
}

// probeFields adds a container's probes, one line each.
func probeFields(f *fields, indent string, ps *api.Probes) {
	for _, k := range api.ProbeKinds {
		if p := ps.Get(k); p != nil {
			f.add(indent+probeTitle(k), probeLine(*p))
		}
	}
}

func portsLine(ps []api.PortSpec) string {
	var ports []string
	for _, p := range ps {
		// A pod's other containers' ports are not defaulted as the
		// main container's are.
		port := fmt.Sprintf("%d/%s", p.ContainerPort, cmp.Or(p.Protocol, "tcp"))
		if p.HostPort != 0 {
			port += fmt.Sprintf(" on host %d", p.HostPort)
		}
		if p.Name != "" {
			port = p.Name + " " + port
		}
		ports = append(ports, port)
	}
	return strings.Join(ports, ", ")
}

// mountsLine is a container's mounts: "data at /data (read-only),
// shared (scratch) at /shared"; scratch adds the main container's
// scratch volumes, which mount at their own path.
func mountsLine(vs []api.VolumeMount, scratch []api.ScratchVolume) string {
	var out []string
	for _, v := range vs {
		m := v.Volume + " at " + v.Path
		if v.Scratch != "" {
			m = v.Scratch + " (scratch) at " + v.Path
		}
		if v.ReadOnly {
			m += " (read-only)"
		}
		out = append(out, m)
	}
	for _, s := range scratch {
		if s.Path != "" {
			out = append(out, s.Name+" (scratch) at "+s.Path)
		}
	}
	return strings.Join(out, ", ")
}

// podFields is the spec of a pod: what its containers share, then each container in the order they
// start (init containers marked, the main one named "main") with its
// image, command, ports, mounts, resources and probes.
func podFields(f *fields, c *api.ComputeSpec) {
	f.addIf("  Network", c.Network)
	f.addIf("  Restart", string(c.RestartPolicy))
	if c.StopGracePeriod.Duration != 0 {
		f.add("  Stop grace", c.StopGracePeriod.String())
	}
	f.addIf("  Kernel args", c.KernelArgs)
	var scratch []string
	for _, s := range c.ScratchVolumes {
		scratch = append(scratch, s.Name)
	}
	f.addIf("  Scratch volumes", strings.Join(scratch, ", "))
	f.add("  Containers", "")
	for i := range c.InitContainers {
		containerFields(f, c.InitContainers[i].Name+" (init)", &c.InitContainers[i], nil)
	}
	containerFields(f, api.MainContainer, &api.Container{
		Image: c.Image, Command: c.Command, Args: c.Args, Env: c.Env, WorkingDir: c.WorkingDir,
		Ports: c.Ports, Volumes: c.Volumes, SecurityContext: c.SecurityContext, Probes: c.Probes,
	}, c.ScratchVolumes)
	for i := range c.Containers {
		containerFields(f, c.Containers[i].Name, &c.Containers[i], nil)
	}
}

func containerFields(f *fields, title string, ct *api.Container, scratch []api.ScratchVolume) {
	const in = "      "
	f.add("    "+title, "")
	f.add(in+"Image", ct.Image)
	f.addIf(in+"Command", shellJoin(ct.Command))
	f.addIf(in+"Args", shellJoin(ct.Args))
	f.addIf(in+"Env", pairs(ct.Env))
	f.addIf(in+"Working dir", ct.WorkingDir)
	f.addIf(in+"Ports", portsLine(ct.Ports))
	f.addIf(in+"Mounts", mountsLine(ct.Volumes, scratch))
	f.addIf(in+"Resources", resourcesLine(ct.Resources))
	f.addIf(in+"Restart", string(ct.RestartPolicy))
	f.addIf(in+"Run as", runAs(ct.SecurityContext))
	probeFields(f, in, &ct.Probes)
}

func probeTitle(k api.ProbeKind) string {
	switch k {
	case api.ProbeStartup:
		return "Startup"
	case api.ProbeReadiness:
		return "Readiness"
	}
	return "Liveness"
}

// resourcesLine is a container's share of the flavor: "cpu 0.1, memory
// 64Mi".
func resourcesLine(r *api.ContainerResources) string {
	if r == nil {
		return ""
	}
	var parts []string
	if r.MilliCPU > 0 {
		parts = append(parts, "cpu "+printers.CPU(r.MilliCPU))
	}
	if r.MemoryMiB > 0 {
		parts = append(parts, "memory "+printers.MiB(r.MemoryMiB))
	}
	return strings.Join(parts, ", ")
}

// probeLine is a probe as kubectl describe prints it: its handler, then
// its timing with the defaults filled in ("http-get http://:8080/ready
// delay=0s timeout=1s period=10s #success=1 #failure=3").
func probeLine(p api.Probe) string {
	p = p.WithDefaults()
	var handler string
	switch {
	case p.HTTPGet != nil:
		h := p.HTTPGet
		handler = fmt.Sprintf("http-get %s://%s:%d%s", h.Scheme, h.Host, h.Port, h.Path)
	case p.TCPSocket != nil:
		handler = fmt.Sprintf("tcp-socket :%d", p.TCPSocket.Port)
	case p.GRPC != nil:
		handler = fmt.Sprintf("grpc :%d", p.GRPC.Port)
		if p.GRPC.Service != "" {
			handler += " " + p.GRPC.Service
		}
	case p.Exec != nil:
		handler = "exec [" + strings.Join(p.Exec.Command, " ") + "]"
	case p.GuestAgent != nil:
		handler = "guest-agent ping"
	}
	return fmt.Sprintf("%s delay=%ds timeout=%ds period=%ds #success=%d #failure=%d", handler,
		p.InitialDelaySeconds, *p.TimeoutSeconds, *p.PeriodSeconds, *p.SuccessThreshold, *p.FailureThreshold)
}

// runAs is a container's securityContext in a few words: "uid 1000,
// gid 100, non-root".
func runAs(sc *api.SecurityContext) string {
	if sc == nil {
		return ""
	}
	var parts []string
	if sc.RunAsUser != nil {
		parts = append(parts, fmt.Sprintf("uid %d", *sc.RunAsUser))
	}
	if sc.RunAsGroup != nil {
		parts = append(parts, fmt.Sprintf("gid %d", *sc.RunAsGroup))
	}
	if sc.RunAsNonRoot {
		parts = append(parts, "non-root")
	}
	return strings.Join(parts, ", ")
}

func loadbalancerFields(f *fields, lb *api.LoadbalancerSpec) {
	var ls []string
	for _, l := range lb.Listeners {
		s := fmt.Sprintf("%d/%s -> %d", l.Port, l.Protocol, l.TargetPort)
		if l.Address != "" {
			s = l.Address + ":" + s
		}
		if l.Name != "" {
			s = l.Name + " " + s
		}
		ls = append(ls, s)
	}
	f.add("  Listeners", strings.Join(ls, ", "))
	f.add("  Selector", printers.Labels(lb.Selector))
	f.addIf("  Algorithm", lb.Algorithm)
	if hc := lb.HealthCheck; hc != nil {
		check := hc.Type
		if hc.Path != "" {
			check += " " + hc.Path
		}
		check += fmt.Sprintf(" every %s, rise %d, fall %d", hc.Interval, hc.Rise, hc.Fall)
		if hc.Timeout.Duration != 0 {
			check += ", timeout " + hc.Timeout.String()
		}
		f.add("  Health check", check)
	}
}

func scheduleFields(f *fields, r api.Resource) {
	s := r.Schedule
	f.add("Schedule", "")
	var regions []string
	for _, t := range s.Regions {
		regions = append(regions, fmt.Sprintf("%s (weight %d)", t.Name, max(t.Weight, 1)))
	}
	if len(regions) == 0 {
		regions = []string{"any"}
	}
	f.add("  Regions", strings.Join(regions, ", "))
	if s.SpreadRegions > 0 {
		f.add("  Spread over", fmt.Sprintf("%d regions", s.SpreadRegions))
	}
	f.addIf("  Zones", strings.Join(s.Zones, ", "))
	f.addIf("  Node selector", pairs(s.NodeSelector))
	f.addIf("  Anti-affinity", s.AntiAffinity)
	f.addIf("  Strategy", s.Strategy)
	f.addIf("  Reserve", s.Reserve)
	for _, region := range slices.Sorted(maps.Keys(r.Overrides)) {
		f.add("Override "+region, printers.Cell(overrideLine(r.Overrides[region])))
	}
	if fo := r.Failover; fo != nil && fo.Enabled {
		f.add("Failover", failoverLine(fo))
	}
	f.addIf("Rollout policy", rolloutPolicy(r.Rollout))
	if r.MaxRevisionHistory != 0 {
		f.add("Revision history", fmt.Sprintf("%d kept", r.MaxRevisionHistory))
	}
}

func overrideLine(o api.SpecOverride) string {
	var parts []string
	if o.Flavor != "" {
		parts = append(parts, "flavor "+o.Flavor)
	}
	if o.Image != "" {
		parts = append(parts, "image "+o.Image)
	}
	if len(o.Env) > 0 {
		parts = append(parts, "env "+pairs(o.Env))
	}
	return strings.Join(parts, ", ")
}

func failoverLine(fo *api.FailoverPolicy) string {
	line := "enabled"
	if fo.After.Duration != 0 {
		line += " after " + fo.After.String()
	}
	if len(fo.ToRegions) > 0 {
		line += " to " + strings.Join(fo.ToRegions, ", ")
	}
	if fo.FailBack {
		line += ", failing back"
	}
	return line
}

func rolloutPolicy(ro api.RolloutPolicy) string {
	var policy []string
	for _, p := range []struct {
		name string
		v    int
	}{{"max unavailable", ro.MaxUnavailable}, {"max surge", ro.MaxSurge}, {"min healthy", ro.MinHealthy}} {
		if p.v != 0 {
			policy = append(policy, fmt.Sprintf("%s %d", p.name, p.v))
		}
	}
	if ro.AutoRevert {
		policy = append(policy, "auto-revert")
	}
	if ro.Paused {
		policy = append(policy, "paused")
	}
	return strings.Join(policy, ", ")
}

// nodeDescription is everything describe node gathers.
type nodeDescription struct {
	Node     api.Node      `json:"node"`
	Replicas []api.Replica `json:"replicas"`
	Events   []api.Event   `json:"events"`
	Missing  missing       `json:"missing,omitempty"`
}

func (a describeCommands) describeNode(ctx context.Context, c *client.Client, arg string) (view, error) {
	region, name, err := a.resolveNode(ctx, c, arg)
	if err != nil {
		return view{}, err
	}
	n, err := c.Nodes.Get(ctx, region, name)
	if err != nil {
		return view{}, err
	}
	d := nodeDescription{Node: n}
	if d.Replicas, err = replicasOnNode(ctx, c, region, name); err != nil {
		d.Missing.add("replicas", err)
	}
	evs, err := c.Events.List(ctx, client.EventQuery{Region: region, Object: "node/" + name, Limit: describeEvents})
	if err != nil {
		d.Missing.add("events", err)
	}
	d.Events = evs.Items
	return view{
		text: func(w io.Writer, now time.Time) error { return writeNode(w, d, now) },
		data: d,
	}, nil
}

// replicasOnNode finds the replicas of the caller's tenant on a node. The
// global API lists replicas per resource only, so it asks for the
// replicas of every resource that may run in the node's region, a few at
// a time.
func replicasOnNode(ctx context.Context, c *client.Client, region, node string) ([]api.Replica, error) {
	resources, err := c.Resources.List(ctx, client.ResourceQuery{})
	if err != nil {
		return nil, err
	}
	var (
		mu    sync.Mutex
		out   []api.Replica
		first error
		wg    sync.WaitGroup
		slots = make(chan struct{}, 8)
	)
	for _, r := range resources {
		if !mayRunIn(r, region) {
			continue
		}
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			l, err := c.Resources.Replicas(ctx, r.Name)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil && !client.IsNotFound(err) { // deleted meanwhile
					first = err
				}
				return
			}
			for _, rep := range l.Items {
				if rep.Region == region && rep.Node == node {
					out = append(out, rep)
				}
			}
		})
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b api.Replica) int { return strings.Compare(a.ID, b.ID) })
	return out, first
}

// mayRunIn reports whether r may have replicas in region.
func mayRunIn(r api.Resource, region string) bool {
	if r.Kind == api.KindImage {
		return false
	}
	if r.Status != nil {
		if _, ok := r.Status.Regions[region]; ok {
			return true
		}
	}
	if len(r.Schedule.Regions) == 0 {
		return true
	}
	return slices.ContainsFunc(r.Schedule.Regions, func(t api.RegionTarget) bool { return t.Name == region })
}

func writeNode(w io.Writer, d nodeDescription, now time.Time) error {
	n := d.Node
	var f fields
	f.add("Name", n.Name)
	f.add("Region", n.Region)
	f.addIf("Zone", n.Zone)
	f.add("Labels", printers.Labels(n.Labels))
	f.addIf("Address", n.Address)
	f.addIf("Providers", providersLine(n.Providers))
	f.addIf("Agent", n.AgentVersion)
	f.addIf("Registered", when(n.RegisteredAt, now))
	s := n.Status
	if s != nil {
		f.add("Health", healthLine(s, now))
		if !s.LastHeartbeat.IsZero() {
			f.add("Heartbeat", printers.HumanDuration(now.Sub(s.LastHeartbeat))+" ago")
		}
	}
	f.add("Schedulable", schedulableLine(n, now))
	var auto []string
	if n.EnableAutoCordon {
		auto = append(auto, "cordon after "+n.AutoCordonInterval.String())
	}
	if n.EnableAutoDrain {
		auto = append(auto, "drain after "+n.AutoDrainInterval.String())
	}
	f.addIf("Automatic", strings.Join(auto, ", "))
	if err := f.write(w); err != nil {
		return err
	}

	section(w, "Capacity", capacityTable(n), "", "")
	condT := printers.Table{Header: []string{"TYPE", "STATUS", "REASON", "MESSAGE", "SINCE"}}
	if s != nil {
		for _, c := range s.Conditions {
			condT.Rows = append(condT.Rows, []string{printers.Cell(c.Type), printers.Cell(string(c.Status)),
				printers.Cell(c.Reason), printers.Cell(c.Message), printers.Age(now, c.Since)})
		}
	}
	section(w, "Conditions", condT, "", "none reported")
	if s != nil && s.Drain != nil {
		if err := writeDrain(w, s.Drain, now); err != nil {
			return err
		}
	}
	repT := printers.Table{Header: []string{"NAME", "RESOURCE", "PHASE", "REVISION", "AGE"}}
	for _, r := range d.Replicas {
		repT.Rows = append(repT.Rows, []string{r.ID, printers.Cell(r.Resource), printers.Cell(string(r.Phase)), fmt.Sprint(r.Revision), printers.Age(now, r.CreatedAt)})
	}
	section(w, "Replicas", repT, d.Missing["replicas"], "none")
	section(w, "Events", printers.Events(d.Events, false, now), d.Missing["events"], "none")
	return nil
}

func providersLine(ps []api.NodeProvider) string {
	var provs []string
	for _, p := range ps {
		kinds := make([]string, len(p.Kinds))
		for i, k := range p.Kinds {
			kinds[i] = string(k)
		}
		s := fmt.Sprintf("%s (%s)", p.Name, strings.Join(kinds, ", "))
		if p.Version != "" {
			s += " " + p.Version
		}
		provs = append(provs, s)
	}
	return strings.Join(provs, "; ")
}

func healthLine(s *api.NodeStatus, now time.Time) string {
	health := string(s.Health)
	if !s.Since.IsZero() {
		health += " for " + printers.HumanDuration(now.Sub(s.Since))
	}
	if s.Reason != "" {
		health += ": " + s.Reason
	}
	return health
}

func schedulableLine(n api.Node, now time.Time) string {
	if n.Schedulable {
		return "yes"
	}
	line := "no, cordoned"
	if n.CordonedBy != "" {
		line += " by " + n.CordonedBy
	}
	if !n.CordonedAt.IsZero() {
		line += " " + printers.HumanDuration(now.Sub(n.CordonedAt)) + " ago"
	}
	if n.CordonReason != "" {
		line += ": " + n.CordonReason
	}
	return line
}

func capacityTable(n api.Node) printers.Table {
	var alloc api.Capacity
	if n.Status != nil {
		alloc = n.Status.Allocated
	}
	t := printers.Table{Header: []string{"RESOURCE", "CAPACITY", "ALLOCATED", "USED"}}
	t.Rows = append(t.Rows,
		[]string{"cpu", printers.CPU(n.Capacity.MilliCPU), printers.CPU(alloc.MilliCPU), printers.Percent(alloc.MilliCPU, n.Capacity.MilliCPU)},
		[]string{"memory", printers.MiB(n.Capacity.MemoryMiB), printers.MiB(alloc.MemoryMiB), printers.Percent(alloc.MemoryMiB, n.Capacity.MemoryMiB)},
	)
	if n.Capacity.DiskMiB > 0 {
		t.Rows = append(t.Rows, []string{"disk", printers.MiB(n.Capacity.DiskMiB), printers.MiB(alloc.DiskMiB), printers.Percent(alloc.DiskMiB, n.Capacity.DiskMiB)})
	}
	return t
}

func writeDrain(w io.Writer, ds *api.DrainStatus, now time.Time) error {
	fmt.Fprintln(w, "Drain:")
	var df fields
	df.add("  State", ds.State)
	df.add("  Progress", fmt.Sprintf("moved %d/%d, remaining %d, failed %d", ds.Moved, ds.Total, ds.Remaining, ds.Failed))
	df.addIf("  Started", when(ds.StartedAt, now))
	if !ds.Deadline.IsZero() {
		df.add("  Deadline", ds.Deadline.UTC().Format(time.RFC3339))
	}
	df.addIf("  Finished", when(ds.FinishedAt, now))
	df.addIf("  Reason", ds.Reason)
	df.addIf("  Message", ds.Message)
	if err := df.write(w); err != nil {
		return err
	}
	if len(ds.Steps) > 0 {
		fmt.Fprintln(w, "  Steps:")
		fmt.Fprint(w, indent(printers.DrainSteps(ds.Steps, now).String(), "    "))
	}
	return nil
}

// flavorDescription is what describe flavor gathers.
type flavorDescription struct {
	Flavor  manifest.FlavorDocument `json:"flavor"`
	UsedBy  []string                `json:"usedBy"`
	Missing missing                 `json:"missing,omitempty"`
}

func (a describeCommands) describeFlavor(ctx context.Context, c *client.Client, name string) (view, error) {
	fl, err := c.Flavors.Get(ctx, name)
	if err != nil {
		return view{}, err
	}
	d := flavorDescription{Flavor: manifest.FromFlavor(fl), UsedBy: []string{}}
	resources, err := c.Resources.List(ctx, client.ResourceQuery{})
	if err != nil {
		d.Missing.add("usedBy", err)
	}
	for _, r := range resources {
		uses := r.Spec.Flavor == name
		for _, o := range r.Overrides {
			uses = uses || o.Flavor == name
		}
		if uses {
			d.UsedBy = append(d.UsedBy, strings.ToLower(string(r.Kind))+"/"+r.Name)
		}
	}
	return view{
		text: func(w io.Writer, now time.Time) error {
			var f fields
			f.add("Name", fl.Name)
			f.add("Provider", string(fl.Kind))
			f.add("VCPUs", printers.VCPUs(fl.Spec.VCPUs))
			f.add("Memory", printers.MiB(fl.Spec.MemoryMiB))
			if fl.Spec.DiskMiB > 0 {
				f.add("Disk", printers.MiB(fl.Spec.DiskMiB))
			}
			f.addIf("Created", when(fl.CreatedAt, now))
			f.addIf("Updated", when(fl.UpdatedAt, now))
			switch {
			case d.Missing["usedBy"] != "":
				f.add("Used by", "<unavailable: "+d.Missing["usedBy"]+">")
			case len(d.UsedBy) == 0:
				f.add("Used by", "<none> (in your tenant)")
			default:
				f.add("Used by", strings.Join(d.UsedBy, ", "))
			}
			return f.write(w)
		},
		data: d,
	}, nil
}

// regionDescription is what describe region gathers.
type regionDescription struct {
	Region  manifest.RegionDocument `json:"region"`
	Nodes   []api.Node              `json:"nodes"`
	Missing missing                 `json:"missing,omitempty"`
}

func (a describeCommands) describeRegion(ctx context.Context, c *client.Client, name string) (view, error) {
	r, err := c.Regions.Get(ctx, name)
	if err != nil {
		return view{}, err
	}
	d := regionDescription{Region: manifest.FromRegion(r)}
	nodes, err := c.Nodes.List(ctx, name, "")
	if err != nil {
		d.Missing.add("nodes", err)
	}
	d.Nodes = nodes.Items
	return view{
		text: func(w io.Writer, now time.Time) error {
			var f fields
			f.add("Name", r.Name)
			f.add("Endpoint", r.Endpoint)
			f.addIf("Console", r.ConsoleURL)
			f.addIf("Zones", strings.Join(r.Zones, ", "))
			f.add("Labels", printers.Labels(r.Labels))
			f.addIf("Registered", when(r.RegisteredAt, now))
			if s := r.Status; s != nil {
				health := string(s.Health)
				if !s.Since.IsZero() {
					health += " for " + printers.HumanDuration(now.Sub(s.Since))
				}
				if s.Reason != "" {
					health += ": " + s.Reason
				}
				f.add("Health", health)
				if !s.LastHeartbeat.IsZero() {
					f.add("Heartbeat", printers.HumanDuration(now.Sub(s.LastHeartbeat))+" ago")
				}
				f.addIf("Leader", s.Leader)
				f.add("Nodes", fmt.Sprintf("%d up of %d", s.NodesUp, s.Nodes))
				f.add("Resources", fmt.Sprint(s.Resources))
				f.add("Replicas", fmt.Sprintf("%d ready of %d", s.Ready, s.Replicas))
			}
			if err := f.write(w); err != nil {
				return err
			}
			if s := r.Status; s != nil {
				section(w, "Headroom (more replicas that fit, by flavor and zone)", printers.Headroom(s.Headroom), "", "not reported yet")
			}
			section(w, "Nodes", printers.Nodes(d.Nodes, false, now), d.Missing["nodes"], "none")
			return nil
		},
		data: d,
	}, nil
}

// shellJoin prints a command line, quoting the words that need it.
func shellJoin(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if w == "" || strings.ContainsAny(w, " \t\n'\"\\$`|&;<>()*?[]{}#~") {
			w = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
		out[i] = w
	}
	return strings.Join(out, " ")
}

// pairs prints a map as k=v pairs, sorted; "" when empty.
func pairs(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	return printers.Labels(m)
}
