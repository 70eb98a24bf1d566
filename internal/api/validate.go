package api

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits that keep one object from hurting a tier.
const (
	MaxNameLen         = 63
	MaxReplicas        = 10000
	MaxLabels          = 64
	MaxEnv             = 256
	MaxRevisionHistory = 100
	// DefaultRevisionHistory is kept when a resource does not say.
	DefaultRevisionHistory = 10
	// MaxPathLen bounds the paths and URLs a spec names (PATH_MAX).
	MaxPathLen = 4096
	// MaxCmdlineLen bounds a VM's kernel command line parts (x86's
	// COMMAND_LINE_SIZE).
	MaxCmdlineLen = 2048
	// MaxCheckPathLen bounds a health check's path.
	MaxCheckPathLen = 1024
	// MaxEnvNameLen bounds an environment variable's name.
	MaxEnvNameLen = 256
)

var (
	nameRE     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	labelKeyRE = regexp.MustCompile(`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	labelValRE = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`)
	envKeyRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// ValidateName checks a DNS-label name: lower case letters, digits and
// dashes, at most 63 characters.
func ValidateName(field, name string) error {
	switch {
	case name == "":
		return Invalid(field, "is required")
	case len(name) > MaxNameLen:
		return Invalid(field, "%q is longer than %d characters", name, MaxNameLen)
	case !nameRE.MatchString(name):
		return Invalid(field, "%q must be lower case letters, digits and '-', starting and ending with a letter or digit", name)
	}
	return nil
}

// ValidateLabels checks label keys and values.
func ValidateLabels(field string, labels map[string]string) error {
	if len(labels) > MaxLabels {
		return Invalid(field, "has %d labels; at most %d", len(labels), MaxLabels)
	}
	var p problems
	for _, k := range sortedKeys(labels) {
		v := labels[k]
		if len(k) > 253 || !labelKeyRE.MatchString(k) {
			p.add(Invalid(field, "bad label key %q: at most 253 letters, digits, '-', '_', '.', with an optional DNS prefix and '/'", k))
			continue
		}
		if len(v) > 63 || !labelValRE.MatchString(v) {
			p.add(Invalid(field+"."+k, "bad label value %q: at most 63 letters, digits, '-', '_' or '.'", v))
		}
	}
	return p.err()
}

func oneOf[T ~string](field string, v T, allowed ...T) error {
	if slices.Contains(allowed, v) {
		return nil
	}
	as := make([]string, len(allowed))
	for i, a := range allowed {
		as[i] = fmt.Sprintf("%q", a)
	}
	return Invalid(field, "%q is not one of %s", v, strings.Join(as, ", "))
}

// Validate checks a flavor.
func (f *Flavor) Validate() error {
	var p problems
	p.add(ValidateName("name", f.Name))
	p.add(oneOf("kind", f.Kind, ProviderKinds...))
	p.in("spec", f.Spec.validate(f.Kind))
	return p.err()
}

func (s *FlavorSpec) validate(kind ProviderKind) error {
	var p problems
	switch {
	case math.IsNaN(s.VCPUs) || s.VCPUs <= 0:
		p.add(Invalid("vcpus", "must be greater than 0"))
	case s.VCPUs > 1024:
		p.add(Invalid("vcpus", "%g is more than 1024", s.VCPUs))
	case kind == ProviderVM && s.VCPUs != math.Trunc(s.VCPUs):
		p.add(Invalid("vcpus", "a VM needs a whole number of vCPUs, not %g", s.VCPUs))
	}
	switch {
	case s.MemoryMiB <= 0:
		p.add(Invalid("memoryMiB", "must be greater than 0"))
	case s.MemoryMiB > 4<<20:
		p.add(Invalid("memoryMiB", "%d is more than 4 TiB", s.MemoryMiB))
	}
	if s.DiskMiB < 0 {
		p.add(Invalid("diskMiB", "must not be negative"))
	}
	return p.err()
}

// Validate checks a resource as a user sent it. Server-set fields are not
// checked; the API overwrites them.
func (r *Resource) Validate() error {
	// Every check runs, so that the client hears of every mistake at
	// once; replicas first, as their errors name the field the client
	// wrote ("replicas", not "spec.replicas").
	var p problems
	p.add(ValidateReplicas(r.Kind, r.Replicas))
	p.add(ValidateName("name", r.Name))
	if r.Tenant != "" {
		p.add(ValidateName("tenant", r.Tenant))
	}
	kindErr := oneOf("kind", r.Kind, ResourceKinds...)
	p.add(kindErr)
	p.add(ValidateLabels("labels", r.Labels))
	if kindErr == nil {
		// The spec's sections depend on the kind: without one, every
		// section would be reported for nothing.
		p.in("spec", r.Spec.validate(r.Kind))
	}
	p.in("schedule", r.Schedule.validate())
	p.add(validateOverrides(r.Overrides))
	if f := r.Failover; f != nil {
		p.in("failover", f.validate())
	}
	p.in("rollout", r.Rollout.validate(r.Replicas))
	if r.MaxRevisionHistory < 0 || r.MaxRevisionHistory > MaxRevisionHistory {
		p.add(Invalid("maxRevisionHistory", "must be between 0 and %d", MaxRevisionHistory))
	}
	return p.err()
}

// validateOverrides checks the per-region overrides: registered-looking
// region names, a flavor name, an image, an environment.
func validateOverrides(overrides map[string]SpecOverride) error {
	var p problems
	for _, region := range sortedKeys(overrides) {
		if err := ValidateName("overrides", region); err != nil {
			p.add(err)
			continue
		}
		o := overrides[region]
		if o.Flavor != "" {
			p.add(ValidateName("overrides."+region+".flavor", o.Flavor))
		}
		if o.Image != "" {
			p.add(validImage("overrides."+region+".image", o.Image))
		}
		p.add(validateEnv("overrides."+region+".env", o.Env))
	}
	return p.err()
}

func (f *FailoverPolicy) validate() error {
	var p problems
	if f.After.Duration < 0 {
		p.add(Invalid("after", "must not be negative"))
	}
	for i, name := range f.ToRegions {
		p.add(ValidateName(fmt.Sprintf("toRegions[%d]", i), name))
	}
	return p.err()
}

// validate checks a rollout policy for a resource of replicas.
func (ro RolloutPolicy) validate(replicas int) error {
	var p problems
	if ro.MaxUnavailable < 0 {
		p.add(Invalid("maxUnavailable", "must not be negative"))
	}
	if ro.MaxSurge < 0 {
		p.add(Invalid("maxSurge", "must not be negative"))
	}
	switch {
	case ro.MinHealthy < 0:
		p.add(Invalid("minHealthy", "must not be negative"))
	case ro.MinHealthy > replicas && replicas > 0:
		p.add(Invalid("minHealthy", "%d is more than the %d replicas", ro.MinHealthy, replicas))
	}
	return p.err()
}

// Default fills in what a resource leaves out. It runs before Validate.
func (r *Resource) Default() {
	orDefault(&r.Tenant, "default")
	orDefault(&r.MaxRevisionHistory, DefaultRevisionHistory)
	if j := r.Spec.Job; j != nil {
		j.Default()
		if c := r.Spec.Compute; c != nil {
			orDefault(&c.RestartPolicy, RestartNever)
		}
	}
	if c := r.Spec.Compute; c != nil {
		c.defaults()
	}
	if v := r.Spec.Volume; v != nil {
		v.defaults()
	}
	if lb := r.Spec.Loadbalancer; lb != nil {
		lb.defaults()
	}
	for i := range r.Schedule.Regions {
		orDefault(&r.Schedule.Regions[i].Weight, 1)
	}
}

// orDefault sets *field to def when the user left it out (zero).
func orDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

func (c *ComputeSpec) defaults() {
	orDefault(&c.RestartPolicy, RestartAlways)
	for i := range c.Ports {
		orDefault(&c.Ports[i].Protocol, "tcp")
	}
}

func (v *VolumeSpec) defaults() {
	orDefault(&v.Provider, ProviderContainer)
	if v.Provider == ProviderVM {
		orDefault(&v.Format, VolumeQcow2)
	}
	orDefault(&v.Format, VolumeDir)
}

func (lb *LoadbalancerSpec) defaults() {
	orDefault(&lb.Algorithm, "roundrobin")
	for i := range lb.Listeners {
		l := &lb.Listeners[i]
		orDefault(&l.Protocol, "tcp")
		orDefault(&l.TargetPort, l.Port)
	}
	if hc := lb.HealthCheck; hc != nil {
		orDefault(&hc.Type, "tcp")
		orDefault(&hc.Interval, D(2*time.Second))
		orDefault(&hc.Rise, 2)
		orDefault(&hc.Fall, 2)
	}
}

// DefaultReplicas is the replica count of a kind when the user says none.
func DefaultReplicas(k ResourceKind) int {
	if k == KindImage {
		return 0
	}
	return 1
}

// ValidateReplicas checks a replica count against the limits of kind
// (none for "").
func ValidateReplicas(kind ResourceKind, n int) error {
	switch {
	case n < 0:
		return Invalid("replicas", "must not be negative (got %d)", n)
	case n > MaxReplicas:
		return Invalid("replicas", "%d is more than %d", n, MaxReplicas)
	case kind == KindVolume && n > 1:
		return Invalid("replicas", "a Volume lives on one node: replicas must be 0 or 1, not %d", n)
	case kind == KindJob && n > 1:
		return Invalid("replicas", "a Job runs in one region (its attempts are job.parallelism): replicas must be 0 or 1, not %d", n)
	case kind == KindImage && n != 0:
		return Invalid("replicas", "an Image has no replicas (agents fetch it when needed): omit it or set 0")
	}
	return nil
}

func (s *ResourceSpec) validate(kind ResourceKind) error {
	sections := map[ResourceKind]bool{
		KindCompute:      s.Compute != nil,
		KindVolume:       s.Volume != nil,
		KindImage:        s.Image != nil,
		KindLoadbalancer: s.Loadbalancer != nil,
		KindJob:          s.Job != nil,
	}
	field := map[ResourceKind]string{
		KindCompute: "compute", KindVolume: "volume", KindImage: "image", KindLoadbalancer: "loadbalancer", KindJob: "job",
	}
	if kind == KindJob {
		// A Job's attempts run its compute section.
		sections[KindCompute] = false
	}
	for _, k := range ResourceKinds {
		if k != kind && sections[k] {
			return Invalid(field[k], "is set but the resource's kind is %s", kind)
		}
	}
	if !sections[kind] {
		return Invalid(field[kind], "is required for kind %s", kind)
	}
	if s.Flavor != "" {
		if err := ValidateName("flavor", s.Flavor); err != nil {
			return err
		}
	}
	switch kind {
	case KindCompute:
		if s.Flavor == "" {
			return Invalid("flavor", "is required for kind Compute")
		}
		return within("compute", s.Compute.validate())
	case KindVolume:
		return within("volume", s.Volume.validate())
	case KindImage:
		return within("image", s.Image.validate())
	case KindLoadbalancer:
		return within("loadbalancer", s.Loadbalancer.validate())
	case KindJob:
		return s.validateJob()
	}
	return nil
}

func (c *ComputeSpec) validate() error {
	var p problems
	if strings.TrimSpace(c.Image) == "" {
		p.add(Invalid("image", "is required"))
	} else {
		p.add(validImage("image", c.Image))
	}
	p.add(validateEnv("env", c.Env))
	if c.WorkingDir != "" && !path.IsAbs(c.WorkingDir) {
		p.add(Invalid("workingDir", "%q must be an absolute path", c.WorkingDir))
	} else {
		p.add(validText("workingDir", c.WorkingDir, MaxPathLen))
	}
	p.add(validateArgv(c.Command, c.Args))
	p.add(validText("kernelArgs", c.KernelArgs, MaxCmdlineLen))
	p.add(validatePorts(c.Ports))
	p.add(validateMounts(c.Volumes))
	if c.Network != "" {
		p.add(ValidateName("network", c.Network))
	}
	p.add(oneOf("restartPolicy", c.RestartPolicy, "", RestartAlways, RestartOnFailure, RestartNever))
	p.add(c.validateConfigRefs())
	if c.StopGracePeriod.Duration < 0 {
		p.add(Invalid("stopGracePeriod", "must not be negative"))
	}
	if sc := c.SecurityContext; sc != nil {
		p.add(within("securityContext", sc.validate()))
	}
	p.add(c.validatePod())
	return p.err()
}

func (sc *SecurityContext) validate() error {
	var p problems
	for _, id := range []struct {
		field string
		v     *int64
	}{{"runAsUser", sc.RunAsUser}, {"runAsGroup", sc.RunAsGroup}} {
		if id.v != nil && (*id.v < 0 || *id.v > MaxUserID) {
			p.add(Invalid(id.field, "%d is not an id (0-%d)", *id.v, MaxUserID))
		}
	}
	if sc.RunAsNonRoot && sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		p.add(Invalid("runAsUser", "0 is root, which runAsNonRoot refuses"))
	}
	return p.err()
}

// validateArgv checks a command and its arguments. They may hold
// newlines and tabs (a shell script); a NUL ends a C string, so the
// process would run something else than asked, and terminal escapes and
// bidirectional overrides make what an operator reads differ from what
// runs.
func validateArgv(command, args []string) error {
	var p problems
	for _, list := range []struct {
		field string
		argv  []string
	}{{"command", command}, {"args", args}} {
		for i, a := range list.argv {
			p.add(validScript(fmt.Sprintf("%s[%d]", list.field, i), a))
		}
	}
	return p.err()
}

// validScript refuses the control characters of hasControl but newline
// and tab, which scripts and values hold.
func validScript(field, s string) error {
	bad := strings.IndexFunc(s, func(r rune) bool { return r != '\n' && r != '\t' && isControl(r) })
	if bad < 0 {
		return nil
	}
	if s[bad] == 0 {
		return Invalid(field, "has a NUL character")
	}
	r, _ := utf8.DecodeRuneInString(s[bad:])
	return Invalid(field, "has the control character %U at byte %d (only newline and tab are allowed)", r, bad)
}

// validatePorts checks a container's ports, each listed once.
func validatePorts(ports []PortSpec) error {
	seen := map[string]bool{}
	for i, p := range ports {
		f := fmt.Sprintf("ports[%d]", i)
		if p.ContainerPort < 1 || p.ContainerPort > 65535 {
			return Invalid(f+".containerPort", "%d is not a port (1-65535)", p.ContainerPort)
		}
		if p.HostPort < 0 || p.HostPort > 65535 {
			return Invalid(f+".hostPort", "%d is not a port (1-65535)", p.HostPort)
		}
		if err := oneOf(f+".protocol", p.Protocol, "", "tcp", "udp"); err != nil {
			return err
		}
		key := fmt.Sprintf("%d/%s", p.ContainerPort, p.Protocol)
		if seen[key] {
			return Invalid(f, "port %s is listed twice", key)
		}
		seen[key] = true
	}
	return nil
}

// validateMounts checks a container's volume mounts, each path once.
func validateMounts(mounts []VolumeMount) error {
	paths := map[string]bool{}
	for i, v := range mounts {
		f := fmt.Sprintf("volumes[%d]", i)
		if v.Scratch != "" {
			return Invalid(f+".scratch", "the main container mounts a scratch volume by its scratchVolumes[].path; scratch is for the other containers")
		}
		if err := ValidateName(f+".volume", v.Volume); err != nil {
			return err
		}
		if !path.IsAbs(v.Path) || path.Clean(v.Path) == "/" {
			return Invalid(f+".path", "%q must be an absolute path other than /", v.Path)
		}
		if err := validText(f+".path", v.Path, MaxPathLen); err != nil {
			return err
		}
		if paths[path.Clean(v.Path)] {
			return Invalid(f+".path", "%q is mounted twice", v.Path)
		}
		paths[path.Clean(v.Path)] = true
	}
	return nil
}

func validateEnv(field string, env map[string]string) error {
	if len(env) > MaxEnv {
		return Invalid(field, "has %d variables; at most %d", len(env), MaxEnv)
	}
	var p problems
	for _, k := range sortedKeys(env) {
		if len(k) > MaxEnvNameLen || !envKeyRE.MatchString(k) {
			p.add(Invalid(field, "bad variable name %q: at most %d letters, digits and '_', not starting with a digit", k, MaxEnvNameLen))
			continue
		}
		p.add(validScript(field+"."+k, env[k]))
	}
	return p.err()
}

func (v *VolumeSpec) validate() error {
	if v.SizeMiB <= 0 {
		return Invalid("sizeMiB", "must be greater than 0")
	}
	if err := oneOf("format", v.Format, "", VolumeDir, VolumeQcow2, VolumeRaw); err != nil {
		return err
	}
	if err := oneOf("provider", v.Provider, "", ProviderContainer, ProviderVM); err != nil {
		return err
	}
	if v.Provider == ProviderContainer && v.Format != "" && v.Format != VolumeDir {
		return Invalid("format", "a container volume is a directory (format \"dir\"), not %q", v.Format)
	}
	if v.Provider == ProviderVM && v.Format == VolumeDir {
		return Invalid("format", "a VM volume is a disk: \"qcow2\" or \"raw\"")
	}
	return nil
}

func (i *ImageSpec) validate() error {
	if err := i.validateSources(); err != nil {
		return err
	}
	for _, f := range []struct{ field, v string }{{"kernel", i.Kernel}, {"initrd", i.Initrd}, {"disk", i.Disk}} {
		if f.v == "" {
			continue
		}
		if err := validHostPath(f.field, f.v); err != nil {
			return err
		}
	}
	if i.Ref != "" {
		if err := validImage("ref", i.Ref); err != nil {
			return err
		}
	}
	if err := validText("cmdline", i.Cmdline, MaxCmdlineLen); err != nil {
		return err
	}
	return validText("readyMarker", i.ReadyMarker, 256)
}

// validateSources checks where the image comes from: a reference, an
// archive (with the reference inside it), a kernel (and initrd) or a disk.
func (i *ImageSpec) validateSources() error {
	if i.Ref == "" && i.Archive == "" && i.Kernel == "" && i.Disk == "" {
		return Invalid("", "needs one of ref (OCI reference), archive (OCI archive file or URL), kernel (direct boot) or disk (qcow2)")
	}
	if i.Archive != "" && i.Ref == "" {
		return Invalid("ref", "is required with archive: it names the image inside the archive")
	}
	if i.Initrd != "" && i.Kernel == "" {
		return Invalid("kernel", "is required with initrd")
	}
	if i.Archive != "" {
		return validArchive("archive", i.Archive)
	}
	return nil
}

func (lb *LoadbalancerSpec) validate() error {
	if err := validateListeners(lb.Listeners); err != nil {
		return err
	}
	if len(lb.Selector) == 0 {
		return Invalid("selector", "is required: the labels of the compute resources to balance over")
	}
	if err := ValidateLabels("selector", lb.Selector); err != nil {
		return err
	}
	if err := oneOf("algorithm", lb.Algorithm, "", "roundrobin", "leastconn", "source"); err != nil {
		return err
	}
	if hc := lb.HealthCheck; hc != nil {
		return within("healthCheck", hc.validate())
	}
	return nil
}

// validateListeners checks a load balancer's listeners: at least one,
// each on its own port.
func validateListeners(listeners []Listener) error {
	if len(listeners) == 0 {
		return Invalid("listeners", "needs at least one listener")
	}
	ports := map[int]bool{}
	for i, l := range listeners {
		f := fmt.Sprintf("listeners[%d]", i)
		if l.Port < 1 || l.Port > 65535 {
			return Invalid(f+".port", "%d is not a port (1-65535)", l.Port)
		}
		if ports[l.Port] {
			return Invalid(f+".port", "port %d is used by two listeners", l.Port)
		}
		ports[l.Port] = true
		if l.TargetPort < 0 || l.TargetPort > 65535 {
			return Invalid(f+".targetPort", "%d is not a port (1-65535)", l.TargetPort)
		}
		if err := oneOf(f+".protocol", l.Protocol, "", "tcp", "http"); err != nil {
			return err
		}
		if _, err := netip.ParseAddr(l.Address); l.Address != "" && err != nil {
			return Invalid(f+".address", "%q is not an IP address", l.Address)
		}
	}
	return nil
}

func (hc *HealthCheck) validate() error {
	if err := oneOf("type", hc.Type, "", "tcp", "http"); err != nil {
		return err
	}
	if hc.Type == "http" && !strings.HasPrefix(hc.Path, "/") {
		return Invalid("path", "an http check needs a path starting with /")
	}
	// The path is a word of HAProxy's configuration: what would split or
	// end it there is refused here, not by the node.
	if err := validText("path", hc.Path, MaxCheckPathLen); err != nil {
		return err
	}
	if strings.ContainsAny(hc.Path, " \"'#\\") {
		return Invalid("path", "%q must not have spaces, quotes, # or backslashes", hc.Path)
	}
	if hc.Interval.Duration != 0 && hc.Interval.Duration < 100*time.Millisecond {
		return Invalid("interval", "%s is shorter than 100ms", hc.Interval)
	}
	if hc.Rise < 0 || hc.Fall < 0 {
		return Invalid("", "rise and fall must not be negative")
	}
	return nil
}

func (s *ScheduleRule) validate() error {
	var p problems
	seen := map[string]bool{}
	for i, r := range s.Regions {
		f := fmt.Sprintf("regions[%d]", i)
		if err := ValidateName(f+".name", r.Name); err != nil {
			p.add(err)
		} else if seen[r.Name] {
			p.add(Invalid(f+".name", "region %q is listed twice", r.Name))
		}
		seen[r.Name] = true
		if r.Weight < 0 {
			p.add(Invalid(f+".weight", "must not be negative"))
		}
	}
	switch {
	case s.SpreadRegions < 0:
		p.add(Invalid("spreadRegions", "must not be negative"))
	case len(s.Regions) > 0 && s.SpreadRegions > len(s.Regions):
		p.add(Invalid("spreadRegions", "%d is more than the %d regions listed", s.SpreadRegions, len(s.Regions)))
	}
	for i, z := range s.Zones {
		p.add(ValidateName(fmt.Sprintf("zones[%d]", i), z))
	}
	p.add(ValidateLabels("nodeSelector", s.NodeSelector))
	p.add(oneOf("antiAffinity", s.AntiAffinity, "", "soft", "hard"))
	p.add(oneOf("strategy", s.Strategy, "", "spread", "binpack"))
	return p.err()
}

// Validate checks a region registration.
func (r *Region) Validate() error {
	if err := ValidateName("name", r.Name); err != nil {
		return err
	}
	if r.Endpoint == "" {
		return Invalid("endpoint", "is required: the region's gRPC address (host:port)")
	}
	if _, _, err := splitHostPort(r.Endpoint); err != nil {
		return Invalid("endpoint", "%q is not host:port", r.Endpoint)
	}
	for i, z := range r.Zones {
		if err := ValidateName(fmt.Sprintf("zones[%d]", i), z); err != nil {
			return err
		}
	}
	return ValidateLabels("labels", r.Labels)
}

// Validate checks a node registration.
func (n *Node) Validate() error {
	if err := ValidateName("name", n.Name); err != nil {
		return err
	}
	if err := ValidateName("region", n.Region); err != nil {
		return err
	}
	if n.Zone != "" {
		if err := ValidateName("zone", n.Zone); err != nil {
			return err
		}
	}
	if err := ValidateLabels("labels", n.Labels); err != nil {
		return err
	}
	if n.Capacity.MilliCPU <= 0 || n.Capacity.MemoryMiB <= 0 {
		return Invalid("capacity", "milliCPU and memoryMiB must be greater than 0")
	}
	if err := validNodeProviders(n.Providers); err != nil {
		return err
	}
	if n.AutoCordonInterval.Duration < 0 || n.AutoDrainInterval.Duration < 0 {
		return Invalid("autoCordonInterval", "intervals must not be negative")
	}
	if n.Network != nil {
		return n.Network.Validate()
	}
	return nil
}

func validNodeProviders(ps []NodeProvider) error {
	if len(ps) == 0 {
		return Invalid("providers", "a node needs at least one provider")
	}
	for i, p := range ps {
		if p.Name == "" {
			return Invalid(fmt.Sprintf("providers[%d].name", i), "is required")
		}
		for _, k := range p.Kinds {
			if err := oneOf(fmt.Sprintf("providers[%d].kinds", i), k, ProviderKinds...); err != nil {
				return err
			}
		}
	}
	return nil
}

// Validate checks what an agent reports of its host's network (the block
// is the region's and checked where it is assigned).
func (n *NodeNetwork) Validate() error {
	if n.UnderlayIP != "" {
		if a, err := netip.ParseAddr(n.UnderlayIP); err != nil || !a.Is4() {
			return Invalid("network.underlayIP", "%q is not an IPv4 address", n.UnderlayIP)
		}
	}
	if n.VTEPMAC != "" {
		if hw, err := net.ParseMAC(n.VTEPMAC); err != nil || len(hw) != 6 {
			return Invalid("network.vtepMAC", "%q is not a MAC address", n.VTEPMAC)
		}
	}
	if len(n.Bridge) > 15 {
		return Invalid("network.bridge", "%q is longer than 15 characters (a Linux interface name)", n.Bridge)
	}
	if n.MTU != 0 && (n.MTU < 576 || n.MTU > 65535) {
		return Invalid("network.mtu", "%d is not an MTU (576-65535, or 0 for unknown)", n.MTU)
	}
	return nil
}

// Validate checks a drain request.
func (d *DrainRequest) Validate() error {
	if d.Deadline.Duration < 0 {
		return Invalid("deadline", "must not be negative")
	}
	if d.MaxParallel < 0 {
		return Invalid("maxParallel", "must not be negative")
	}
	return nil
}

// Validate checks a network.
func (n *Network) Validate() error {
	if err := ValidateName("name", n.Name); err != nil {
		return err
	}
	pfx, err := netip.ParsePrefix(n.Subnet)
	if err != nil || !pfx.Addr().Is4() {
		return Invalid("subnet", "%q is not an IPv4 CIDR", n.Subnet)
	}
	if pfx.Bits() > 30 {
		return Invalid("subnet", "%q is too small (at most /30)", n.Subnet)
	}
	if pfx.Masked() != pfx {
		return Invalid("subnet", "%q has host bits set (did you mean %s?)", n.Subnet, pfx.Masked())
	}
	gw, err := netip.ParseAddr(n.Gateway)
	if err != nil || !pfx.Contains(gw) {
		return Invalid("gateway", "%q is not an address in %s", n.Gateway, n.Subnet)
	}
	for i, r := range n.Reserved {
		if _, _, err := ParseRange(r); err != nil {
			return Invalid(fmt.Sprintf("reserved[%d]", i), "%v", err)
		}
	}
	if n.Bridge == "" || len(n.Bridge) > 15 {
		return Invalid("bridge", "is required, at most 15 characters (a Linux interface name)")
	}
	return n.validPlan(pfx)
}

// validPlan checks the network's plan across hosts: its node blocks and
// the backend between them.
func (n *Network) validPlan(pfx netip.Prefix) error {
	if n.NodeMask < pfx.Bits() || n.NodeMask > 30 {
		return Invalid("nodeMask", "/%d is not a block of %s (from /%d to /30)", n.NodeMask, n.Subnet, pfx.Bits())
	}
	if err := oneOf("backend", n.Backend, NetworkBackends...); err != nil {
		return err
	}
	if n.Backend == BackendVXLAN && (n.VNI < 1 || n.VNI > 1<<24-1) {
		return Invalid("vni", "%d is not a VXLAN network identifier (1-16777215)", n.VNI)
	}
	return nil
}

// ParseRange parses "a.b.c.d" or "a.b.c.d-e.f.g.h".
func ParseRange(s string) (netip.Addr, netip.Addr, error) {
	lo, hi, found := strings.Cut(s, "-")
	a, err := netip.ParseAddr(strings.TrimSpace(lo))
	if err != nil {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("%q is not an address or a range", s)
	}
	if !found {
		return a, a, nil
	}
	b, err := netip.ParseAddr(strings.TrimSpace(hi))
	if err != nil || b.Less(a) {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("%q is not a range low-high", s)
	}
	return a, b, nil
}

// hasControl reports a control character (newline, NUL, escape...): the
// strings a spec hands to a node end up in configuration files, command
// lines and XML, where one would split a line or fail late.
func hasControl(s string) bool { return strings.ContainsFunc(s, isControl) }

// isControl is a C0 or C1 control character, DEL, or a bidirectional
// control (embeddings, overrides, isolates, marks), which make text read
// otherwise than it runs.
func isControl(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// ValidateText refuses control characters (hasControl) and text longer
// than max bytes: for free text a client names things with (a token's
// name, a cordon's reason).
func ValidateText(field, s string, max int) error { return validText(field, s, max) }

// validText refuses control characters and text longer than max bytes.
func validText(field, s string, max int) error {
	switch {
	case hasControl(s):
		return Invalid(field, "%q has control characters (newline, tab, NUL, escapes, bidirectional controls...)", s)
	case len(s) > max:
		return Invalid(field, "is longer than %d bytes", max)
	}
	return nil
}

// validHostPath checks a file a node will look for in its operator's
// directories: an absolute path, or a path relative to those directories
// (busybox.tar: the first of them that holds it), without a .. element
// or control characters. Which directories are allowed only the node
// knows.
func validHostPath(field, p string) error {
	if err := validText(field, p, MaxPathLen); err != nil {
		return err
	}
	if slices.Contains(strings.Split(p, "/"), "..") {
		return Invalid(field, "%q must not have a .. element", p)
	}
	return nil
}

// validArchive checks an image archive: a host path (as validHostPath;
// an absolute one may be written file:///path) or an http(s) URL without
// credentials.
func validArchive(field, s string) error {
	if err := validText(field, s, MaxPathLen); err != nil {
		return err
	}
	scheme, rest, hasScheme := strings.Cut(s, "://")
	if scheme == "file" && !path.IsAbs(rest) {
		return Invalid(field, "%q: a file:// URL names an absolute path (file:///path); a relative name needs no file://", s)
	}
	if !hasScheme || scheme == "file" {
		return validHostPath(field, strings.TrimPrefix(s, "file://"))
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return Invalid(field, "%q is not an absolute path, a file:// or an http(s) URL", s)
	case u.User != nil:
		return Invalid(field, "must not carry credentials (user:password@)")
	case slices.Contains(strings.Split(u.Path, "/"), ".."):
		return Invalid(field, "%s must not have a .. element", scheme+"://"+u.Host+u.Path)
	}
	return nil
}

func splitHostPort(s string) (string, string, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return "", "", fmt.Errorf("missing port")
	}
	return s[:i], s[i+1:], nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
