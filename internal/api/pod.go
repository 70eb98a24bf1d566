package api

import (
	"fmt"
	"path"
	"strings"
)

// A Compute replica of kind container is a pod: the main container,
// which the ComputeSpec's own fields describe (image, command, env,
// ports, volumes, files, probes...), and, when the spec lists them, init
// containers that run one after another to completion before the others
// start, and more containers that run beside the main one. They share
// the replica's network namespace (one address, one localhost), its
// volumes (each container mounts those it names, at its own paths), its
// scratch volumes and its Configs and Secrets. A spec without
// initContainers and containers is the one-container replica it always
// was.

// MainContainer is the name of a pod's main container: the one the
// ComputeSpec's own fields describe.
const MainContainer = "main"

// MaxContainers bounds the containers of a pod, init containers apart,
// and MaxInitContainers the init containers.
const (
	MaxContainers     = 16
	MaxInitContainers = 16
	MaxScratchVolumes = 16
)

// Container is one container of a pod beside the main one, or one of its
// init containers.
type Container struct {
	// Name is unique in the pod, a DNS label other than "main"; the
	// status, the logs (stratactl logs -c NAME) and the events name the
	// container by it.
	Name string `json:"name"`
	// Image is an Image resource of the tenant or an OCI reference, as a
	// ComputeSpec's image.
	Image      string            `json:"image"`
	Command    []string          `json:"command,omitempty"`
	Args       []string          `json:"args,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	WorkingDir string            `json:"workingDir,omitempty"`
	// Ports are the ports the container listens on, in the pod's
	// network namespace: no two containers of a pod may list the same.
	Ports []PortSpec `json:"ports,omitempty"`
	// Volumes mount the pod's volumes (a Volume the ComputeSpec mounts,
	// or one of its scratch volumes) at this container's own paths.
	Volumes []VolumeMount `json:"volumes,omitempty"`
	Files   []FileMount   `json:"files,omitempty"`
	EnvFrom []EnvSource   `json:"envFrom,omitempty"`
	// RestartPolicy is what happens when the container exits; default
	// the pod's. An init container's is never or on-failure (default
	// on-failure: it is retried with back-off until it succeeds).
	RestartPolicy RestartPolicy `json:"restartPolicy,omitempty"`
	// Resources is the container's share of the flavor; the main
	// container gets what the others leave.
	Resources       *ContainerResources `json:"resources,omitempty"`
	SecurityContext *SecurityContext    `json:"securityContext,omitempty"`
	// Probes check the container (not init containers).
	Probes
}

// ContainerResources is a container's share of its replica's flavor.
type ContainerResources struct {
	// MilliCPU is the container's CPU in thousandths of a vCPU (0: no
	// limit of its own within the replica's).
	MilliCPU int64 `json:"milliCPU,omitempty"`
	// MemoryMiB is the container's memory limit (0: no limit of its own
	// within the replica's).
	MemoryMiB int64 `json:"memoryMiB,omitempty"`
}

// ScratchVolume is an empty directory made for a replica on its node and
// removed with it (Kubernetes' emptyDir): how a pod's containers share
// files they make, such as an init container's output.
type ScratchVolume struct {
	Name string `json:"name"`
	// Path is where the main container mounts it (empty: it does not);
	// the other containers mount it with volumes[].scratch.
	Path string `json:"path,omitempty"`
}

// containerView is what every container of a pod has, the main one
// included, for the checks and walks that treat them alike.
type containerView struct {
	name    string
	files   []FileMount
	envFrom []EnvSource
}

// podContainers are the views of every container of the pod, in the
// order of ContainerNames.
func (c *ComputeSpec) podContainers() []containerView {
	out := make([]containerView, 0, 1+len(c.InitContainers)+len(c.Containers))
	for _, ic := range c.InitContainers {
		out = append(out, containerView{ic.Name, ic.Files, ic.EnvFrom})
	}
	out = append(out, containerView{MainContainer, c.Files, c.EnvFrom})
	for _, sc := range c.Containers {
		out = append(out, containerView{sc.Name, sc.Files, sc.EnvFrom})
	}
	return out
}

// IsPod reports whether the spec has more than its main container.
func (c *ComputeSpec) IsPod() bool {
	return len(c.InitContainers) > 0 || len(c.Containers) > 0
}

// ContainerNames are the pod's container names in the order they start:
// the init containers, the main container, the others.
func (c *ComputeSpec) ContainerNames() []string {
	names := make([]string, 0, 1+len(c.InitContainers)+len(c.Containers))
	for _, ic := range c.InitContainers {
		names = append(names, ic.Name)
	}
	names = append(names, MainContainer)
	for _, sc := range c.Containers {
		names = append(names, sc.Name)
	}
	return names
}

// AllPorts are the ports the replica declares: the main container's,
// then those of the containers beside it, in order (init containers,
// which run to completion first, serve none). Each is a copy, its
// protocol lowercase and tcp when the spec names none.
func (c *ComputeSpec) AllPorts() []PortSpec {
	n := len(c.Ports)
	for i := range c.Containers {
		n += len(c.Containers[i].Ports)
	}
	out := make([]PortSpec, 0, n)
	add := func(ps []PortSpec) {
		for _, p := range ps {
			p.Protocol = strings.ToLower(p.Protocol)
			if p.Protocol == "" {
				p.Protocol = "tcp"
			}
			out = append(out, p)
		}
	}
	add(c.Ports)
	for i := range c.Containers {
		add(c.Containers[i].Ports)
	}
	return out
}

// HasProbes reports whether any container of the spec has a probe.
func (c *ComputeSpec) HasProbes() bool {
	if !c.Probes.Empty() {
		return true
	}
	for i := range c.Containers {
		if !c.Containers[i].Probes.Empty() {
			return true
		}
	}
	return false
}

// validatePod checks what a pod adds to a ComputeSpec: its scratch
// volumes, its init containers and containers, their names, ports and
// mounts, and the main container's probes.
func (c *ComputeSpec) validatePod() error {
	var p problems
	p.add(c.Probes.Validate(""))
	scratch, err := c.validateScratch()
	p.add(err)
	volumes := map[string]bool{}
	for _, v := range c.Volumes {
		volumes[v.Volume] = true
	}
	if len(c.InitContainers) > MaxInitContainers {
		p.add(Invalid("initContainers", "has %d containers; at most %d", len(c.InitContainers), MaxInitContainers))
	}
	if len(c.Containers) > MaxContainers-1 {
		p.add(Invalid("containers", "has %d containers beside the main one; at most %d", len(c.Containers), MaxContainers-1))
	}
	names := map[string]string{MainContainer: "the main container"}
	ports := map[string]string{}
	for _, port := range c.Ports {
		ports[portKey(port)] = "the main container"
	}
	for i := range c.InitContainers {
		f := fmt.Sprintf("initContainers[%d]", i)
		p.add(c.InitContainers[i].validate(f, true, names, nil, volumes, scratch))
	}
	for i := range c.Containers {
		f := fmt.Sprintf("containers[%d]", i)
		p.add(c.Containers[i].validate(f, false, names, ports, volumes, scratch))
	}
	return p.err()
}

// validateScratch checks the scratch volumes: names unique, paths where
// the main container mounts nothing else. It returns the names.
func (c *ComputeSpec) validateScratch() (map[string]bool, error) {
	var p problems
	if len(c.ScratchVolumes) > MaxScratchVolumes {
		p.add(Invalid("scratchVolumes", "has %d volumes; at most %d", len(c.ScratchVolumes), MaxScratchVolumes))
	}
	scratch := map[string]bool{}
	mainPaths := map[string]bool{}
	for _, v := range c.Volumes {
		mainPaths[path.Clean(v.Path)] = true
	}
	for i, s := range c.ScratchVolumes {
		f := fmt.Sprintf("scratchVolumes[%d]", i)
		if err := ValidateName(f+".name", s.Name); err != nil {
			p.add(err)
		} else if scratch[s.Name] {
			p.add(Invalid(f+".name", "%q is listed twice", s.Name))
		}
		scratch[s.Name] = true
		if s.Path == "" {
			continue
		}
		clean := path.Clean(s.Path)
		switch {
		case !path.IsAbs(s.Path) || clean == "/":
			p.add(Invalid(f+".path", "%q must be an absolute path other than /", s.Path))
		case mainPaths[clean]:
			p.add(Invalid(f+".path", "%q is also where the main container mounts another volume", s.Path))
		default:
			p.add(validText(f+".path", s.Path, MaxPathLen))
		}
		mainPaths[clean] = true
	}
	return scratch, p.err()
}

func portKey(p PortSpec) string {
	proto := strings.ToLower(p.Protocol)
	if proto == "" {
		proto = "tcp"
	}
	return fmt.Sprintf("%d/%s", p.ContainerPort, proto)
}

// validate checks one container whose path is field. names and ports
// hold what earlier containers took (ports nil for init containers,
// which do not run beside the others); volumes and scratch are the pod's.
func (ct *Container) validate(field string, init bool, names, ports map[string]string, volumes, scratch map[string]bool) error {
	var p problems
	if err := ValidateName(field+".name", ct.Name); err != nil {
		p.add(err)
	} else if other, ok := names[ct.Name]; ok {
		p.add(Invalid(field+".name", "%q is also the name of %s", ct.Name, other))
	} else {
		names[ct.Name] = field
	}
	if strings.TrimSpace(ct.Image) == "" {
		p.add(Invalid(field+".image", "is required"))
	} else {
		p.add(validImage(field+".image", ct.Image))
	}
	in := func(err error) { p.in(field, err) }
	in(validateEnv("env", ct.Env))
	if ct.WorkingDir != "" && !path.IsAbs(ct.WorkingDir) {
		p.add(Invalid(field+".workingDir", "%q must be an absolute path", ct.WorkingDir))
	} else {
		in(validText("workingDir", ct.WorkingDir, MaxPathLen))
	}
	in(validateArgv(ct.Command, ct.Args))
	in(validatePorts(ct.Ports))
	for i, port := range ct.Ports {
		if ports == nil {
			p.add(Invalid(fmt.Sprintf("%s.ports[%d]", field, i), "an init container publishes no ports: it runs before the others"))
			break
		}
		if other, ok := ports[portKey(port)]; ok {
			p.add(Invalid(fmt.Sprintf("%s.ports[%d].containerPort", field, i), "%d is also a port of %s: the containers of a pod share one network namespace", port.ContainerPort, other))
		} else {
			ports[portKey(port)] = field
		}
	}
	in(ct.validateMounts(volumes, scratch))
	in(validateFiles(ct.Files))
	in(validateEnvFrom(ct.EnvFrom))
	if init {
		p.add(oneOf(field+".restartPolicy", ct.RestartPolicy, "", RestartOnFailure, RestartNever))
		if !ct.Probes.Empty() {
			p.add(Invalid(field, "an init container has no probes: it runs to completion"))
		}
	} else {
		p.add(oneOf(field+".restartPolicy", ct.RestartPolicy, "", RestartAlways, RestartOnFailure, RestartNever))
		p.add(ct.Probes.Validate(field))
	}
	if r := ct.Resources; r != nil {
		if r.MilliCPU < 0 {
			p.add(Invalid(field+".resources.milliCPU", "must not be negative"))
		}
		if r.MemoryMiB < 0 {
			p.add(Invalid(field+".resources.memoryMiB", "must not be negative"))
		}
	}
	if sc := ct.SecurityContext; sc != nil {
		p.in(field+".securityContext", sc.validate())
	}
	return p.err()
}

// validateMounts checks a container's mounts: each names a volume the
// pod has, exactly one of volume or scratch, at an absolute path other
// than /, each path once.
func (ct *Container) validateMounts(volumes, scratch map[string]bool) error {
	var p problems
	paths := map[string]bool{}
	for i, v := range ct.Volumes {
		f := fmt.Sprintf("volumes[%d]", i)
		switch {
		case (v.Volume == "") == (v.Scratch == ""):
			p.add(Invalid(f, "names exactly one of volume (a Volume the replica mounts) or scratch (one of its scratchVolumes)"))
		case v.Volume != "" && !volumes[v.Volume]:
			p.add(Invalid(f+".volume", "%q is not a volume of the replica: mount it in spec.compute.volumes first", v.Volume))
		case v.Scratch != "" && !scratch[v.Scratch]:
			p.add(Invalid(f+".scratch", "%q is not one of the replica's scratchVolumes", v.Scratch))
		}
		clean := path.Clean(v.Path)
		switch {
		case !path.IsAbs(v.Path) || clean == "/":
			p.add(Invalid(f+".path", "%q must be an absolute path other than /", v.Path))
		case paths[clean]:
			p.add(Invalid(f+".path", "%q is mounted twice", v.Path))
		default:
			p.add(validText(f+".path", v.Path, MaxPathLen))
		}
		paths[clean] = true
	}
	return p.err()
}

// CheckResources checks the containers' resources against the flavor of
// the replica: together they fit in it, and leave the main container
// some of each that they limit. Its errors name the fields under
// spec.compute.
func (c *ComputeSpec) CheckResources(f FlavorSpec) error {
	var cpu, mem int64
	var p problems
	cpuOver, memOver := false, false
	for i, ct := range c.Containers {
		if ct.Resources == nil {
			continue
		}
		cpu += ct.Resources.MilliCPU
		mem += ct.Resources.MemoryMiB
		if !cpuOver && ct.Resources.MilliCPU > 0 && cpu >= f.MilliCPU() {
			cpuOver = true
			p.add(Invalid(fmt.Sprintf("containers[%d].resources.milliCPU", i), "the containers' %d milliCPU leave nothing of the flavor's %d for the main container", cpu, f.MilliCPU()))
		}
		if !memOver && ct.Resources.MemoryMiB > 0 && mem >= f.MemoryMiB {
			memOver = true
			p.add(Invalid(fmt.Sprintf("containers[%d].resources.memoryMiB", i), "the containers' %d MiB leave nothing of the flavor's %d MiB for the main container", mem, f.MemoryMiB))
		}
	}
	for i, ct := range c.InitContainers {
		if r := ct.Resources; r != nil {
			if r.MilliCPU > f.MilliCPU() {
				p.add(Invalid(fmt.Sprintf("initContainers[%d].resources.milliCPU", i), "%d is more than the flavor's %d", r.MilliCPU, f.MilliCPU()))
			}
			if r.MemoryMiB > f.MemoryMiB {
				p.add(Invalid(fmt.Sprintf("initContainers[%d].resources.memoryMiB", i), "%d MiB is more than the flavor's %d MiB", r.MemoryMiB, f.MemoryMiB))
			}
		}
	}
	return within("spec.compute", p.err())
}

// CheckForKind checks what only one kind of compute has, once the
// flavor's kind is known: pods, scratch volumes and exec probes are for
// containers, guestAgent probes for VMs; a VM's probes dial the guest's
// own address from its node, so they name no host. Its errors name the
// fields under spec.compute.
func (c *ComputeSpec) CheckForKind(kind ProviderKind) error {
	if kind != ProviderVM {
		return c.checkNoGuestAgent()
	}
	var p problems
	for _, f := range []struct {
		name string
		set  bool
	}{{"initContainers", len(c.InitContainers) > 0}, {"containers", len(c.Containers) > 0}, {"scratchVolumes", len(c.ScratchVolumes) > 0}} {
		if f.set {
			p.add(Invalid(f.name, "is for containers: a VM is one guest"))
		}
	}
	for _, k := range ProbeKinds {
		pr := c.Probes.Get(k)
		if pr == nil {
			continue
		}
		field := string(k) + "Probe"
		if pr.Exec != nil {
			p.add(Invalid(field+".exec", "is for containers: a VM's probes run on its node (httpGet, tcpSocket or grpc to the guest)"))
		}
		if pr.HTTPGet != nil && pr.HTTPGet.Host != "" {
			p.add(Invalid(field+".httpGet.host", "a VM's probes dial the guest's own address; host is for containers"))
		}
	}
	return within("spec.compute", p.err())
}

// checkNoGuestAgent refuses guestAgent probes in a container's spec,
// naming each.
func (c *ComputeSpec) checkNoGuestAgent() error {
	var p problems
	check := func(field string, ps *Probes) {
		for _, k := range ProbeKinds {
			if pr := ps.Get(k); pr != nil && pr.GuestAgent != nil {
				p.add(Invalid(joinField(field, string(k)+"Probe.guestAgent"), "is for VMs (the QEMU guest agent); a container's probes may use exec"))
			}
		}
	}
	check("", &c.Probes)
	for i := range c.Containers {
		check(fmt.Sprintf("containers[%d]", i), &c.Containers[i].Probes)
	}
	return within("spec.compute", p.err())
}
