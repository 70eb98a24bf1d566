package containerd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/contrib/seccomp"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// maxLabelValue bounds the reasons stored in labels (containerd allows
// 4 KiB per label).
const maxLabelValue = 1024

// cfsPeriod is the CPU quota period, in microseconds.
const cfsPeriod = 100000

// Apply implements provider.Provider. A container at the assignment's
// generation is left alone (a stopped one is restarted: Apply of a
// replica in error is a retry); a new generation with the same spec only
// relabels; a changed spec replaces the container, never its volumes.
// Apply returns once the task runs (phase ready) or the replica failed
// (phase error, with the reason).
func (p *Provider) Apply(ctx context.Context, a *api.Assignment) (api.AssignmentStatus, error) {
	if a == nil || a.ID == "" {
		return api.AssignmentStatus{}, api.Invalid("id", "is required")
	}
	if err := validIdentifier(a.ID); err != nil {
		return api.AssignmentStatus{}, api.Invalid("id", "%v", err)
	}
	if a.Provider != "" && a.Provider != api.ProviderContainer {
		return api.AssignmentStatus{}, fmt.Errorf("containerd: kind %q: %w", a.Provider, provider.ErrUnsupported)
	}
	ctx = p.nsCtx(ctx)
	unlock, err := p.replicaLocks.lock(ctx, a.ID)
	if err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("containerd: apply %s: %w", a.ID, err)
	}
	defer unlock()
	switch a.Kind {
	case api.KindVolume:
		return p.applyVolume(ctx, a)
	case api.KindCompute, "":
		st, err := p.applyCompute(ctx, a)
		if err != nil {
			return api.AssignmentStatus{}, fmt.Errorf("containerd: apply %s: %w", a.ID, err)
		}
		p.notify(st)
		return st, nil
	default:
		return api.AssignmentStatus{}, fmt.Errorf("containerd: resource kind %q: %w", a.Kind, provider.ErrUnsupported)
	}
}

func (p *Provider) applyCompute(ctx context.Context, a *api.Assignment) (api.AssignmentStatus, error) {
	hash, err := specHash(a, configDataOf(ctx))
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	c, err := p.container(ctx, a.ID)
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	restarts := 0
	if c != nil {
		l := c.Labels
		if l[LabelKind] != string(api.KindCompute) {
			return api.AssignmentStatus{}, api.Invalid("id", "%s is a %s replica on this node, not a Compute one", a.ID, l[LabelKind])
		}
		gen := labelInt(l, LabelGeneration)
		if a.Generation < gen {
			// A newer generation was applied already: this one is stale.
			return p.Status(ctx, a.ID)
		}
		if l[labelSpec] == hash && l[labelError] == "" {
			return p.keepCompute(ctx, *c, a)
		}
		if l[labelSpec] == hash {
			// A retry of a replica that failed to be created counts as
			// a restart, as a retry of a stopped one does.
			restarts = int(labelInt(l, labelRestarts)) + 1
		}
		p.log.Info("replacing container", "id", a.ID, "generation", a.Generation, "spec changed", l[labelSpec] != hash)
		if err := p.removeCompute(ctx, a.ID, graceOf(a, l)); err != nil {
			return api.AssignmentStatus{}, err
		}
	}
	return p.createCompute(ctx, a, hash, restarts)
}

// keepCompute handles an Apply whose container has the right spec:
// relabel for a new generation, start a task that is not running.
func (p *Provider) keepCompute(ctx context.Context, c containers.Container, a *api.Assignment) (api.AssignmentStatus, error) {
	if want := mutableLabels(a); !sameLabels(c.Labels, want) {
		for k := range c.Labels {
			if _, keep := want[k]; !keep && strings.HasPrefix(k, labelUserPrefix) {
				want[k] = "" // containerd drops labels set to ""
			}
		}
		if err := p.setLabels(ctx, c.ID, want); err != nil {
			return api.AssignmentStatus{}, err
		}
	}
	t, err := p.task(ctx, a.ID)
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	switch {
	case t != nil && t.status == tasktypes.Status_RUNNING:
	case t != nil && t.status == tasktypes.Status_CREATED:
		if err := p.startCreated(ctx, a.ID); err != nil {
			return api.AssignmentStatus{}, err
		}
	default:
		// Stopped, or no task at all: the retry the agent asks for.
		if err := p.restartTask(ctx, a.ID, "apply"); err != nil {
			return api.AssignmentStatus{}, err
		}
	}
	return p.Status(ctx, a.ID)
}

// setLabels adds or changes labels of container id, leaving the others.
func (p *Provider) setLabels(ctx context.Context, id string, labels map[string]string) error {
	c, err := p.client.LoadContainer(ctx, id)
	if err != nil {
		return err
	}
	_, err = c.SetLabels(ctx, labels)
	return err
}

// mutableLabels are the labels an Apply may change without a new
// container: generation, restart policy, stop grace period and the
// assignment's own labels.
func mutableLabels(a *api.Assignment) map[string]string {
	l := map[string]string{
		LabelGeneration: strconv.FormatInt(a.Generation, 10),
		labelRestart:    string(restartPolicy(a)),
		labelGrace:      graceOf(a, nil).String(),
	}
	for k, v := range a.Labels {
		l[labelUserPrefix+k] = v
	}
	return l
}

// sameLabels reports whether have holds want's labels, and no user
// label want lacks.
func sameLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok && strings.HasPrefix(k, labelUserPrefix) {
			return false
		}
	}
	return true
}

func restartPolicy(a *api.Assignment) api.RestartPolicy {
	if c := a.Spec.Compute; c != nil && c.RestartPolicy != "" {
		return c.RestartPolicy
	}
	return api.RestartAlways
}

// graceOf is the stop grace period: the spec's, else the one a
// container was labelled with, else the default.
func graceOf(a *api.Assignment, labels map[string]string) time.Duration {
	if a != nil && a.Spec.Compute != nil && a.Spec.Compute.StopGracePeriod.Duration > 0 {
		return a.Spec.Compute.StopGracePeriod.Duration
	}
	if d, err := time.ParseDuration(labels[labelGrace]); err == nil && d > 0 {
		return d
	}
	return DefaultStopGracePeriod
}

// specHash digests what a container is made of; what only labels
// carry (generation, restart policy, grace period) is left out, so that
// changing it recreates nothing.
func specHash(a *api.Assignment, d *provider.ConfigData) (string, error) {
	var c api.ComputeSpec
	if a.Spec.Compute != nil {
		c = *a.Spec.Compute
	}
	configs, err := configDigest(d)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(struct {
		Image      *api.ImageSpec
		Compute    string
		Command    []string
		Args       []string
		Env        map[string]string
		WorkingDir string
		Ports      []api.PortSpec
		Volumes    []api.VolumeAttachment
		VCPUs      float64
		MemoryMiB  int64
		Network    *api.NetworkAttachment
		// Fields added later are left out when empty, so that an
		// upgrade replaces no container made before them.
		Configs         string               `json:",omitempty"`
		SecurityContext *api.SecurityContext `json:",omitempty"`
	}{a.Image, c.Image, c.Command, c.Args, c.Env, c.WorkingDir, c.Ports, a.Volumes, a.Flavor.VCPUs, a.Flavor.MemoryMiB, a.Network, configs, c.SecurityContext})
	if err != nil {
		return "", fmt.Errorf("spec digest: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

// createCompute creates the container and starts its task. A failure of
// the replica itself (image, volume, network, a command that does not
// start) leaves a container labelled with the error, so that Status and
// List report it; a failure to talk to containerd is returned.
func (p *Provider) createCompute(ctx context.Context, a *api.Assignment, hash string, restarts int) (api.AssignmentStatus, error) {
	labels := computeLabels(a, hash, restarts)
	fail := func(what string, cause error) (api.AssignmentStatus, error) {
		if ctx.Err() != nil || isUnavailable(cause) {
			return api.AssignmentStatus{}, fmt.Errorf("%s: %w", what, cause)
		}
		return p.createFailed(ctx, a.ID, labels, what+": "+cause.Error())
	}
	img, mounts, what, err := p.prepare(ctx, a)
	if err != nil {
		return fail(what, err)
	}
	nsPath, err := p.setupNetwork(ctx, a)
	if err != nil {
		return fail("network", err)
	}
	created := false
	defer func() {
		if !created {
			if err := p.teardownNetwork(context.WithoutCancel(ctx), a.ID); err != nil {
				p.log.Warn("clean up network", "id", a.ID, "err", err)
			}
		}
	}()
	hosts, err := p.writeHosts(a)
	if err != nil {
		return fail("hosts file", err)
	}
	specOpts, err := p.specOpts(ctx, a, img, nsPath, append(mounts, networkMounts(a, hosts)...))
	if err != nil {
		return fail("spec", err)
	}
	labels[labelStarted] = time.Now().UTC().Format(time.RFC3339Nano)
	rootfs := client.WithNewSnapshot(a.ID, img)
	if p.userns != nil {
		rootfs = p.withRemappedSnapshot(a.ID, img, *p.userns)
		labels[labelUserns] = p.userns.String()
	}
	ctr, err := p.client.NewContainer(ctx, a.ID,
		client.WithImage(img),
		client.WithSnapshotter(p.cfg.Snapshotter),
		rootfs,
		client.WithRuntime(p.cfg.Runtime, nil),
		client.WithContainerLabels(labels),
		client.WithNewSpec(specOpts...),
	)
	if err != nil {
		if errdefs.IsAlreadyExists(err) {
			return api.AssignmentStatus{}, fmt.Errorf("create container: %w", err)
		}
		// The snapshot may exist without its container.
		p.removeSnapshot(ctx, a.ID)
		if errors.Is(err, errUser) {
			// The user the replica would run as is refused: the
			// reason says why, in the spec's terms.
			return p.createFailed(ctx, a.ID, labels, err.Error())
		}
		if isNotFound(err) {
			// The image's snapshots went behind the provider's back:
			// the retry unpacks it again.
			p.forgetUnpacked(img)
		}
		return fail("create container", err)
	}
	created = true
	st, err := p.startFirst(ctx, ctr)
	if err == nil {
		p.log.Info("container started", "id", a.ID, "generation", a.Generation, "image", img.Name())
	}
	return st, err
}

// startFirst starts the first task of container c, just created, and
// returns the replica's status.
func (p *Provider) startFirst(ctx context.Context, c client.Container) (api.AssignmentStatus, error) {
	t, err := p.startNew(ctx, c)
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	if t == nil {
		return p.Status(ctx, c.ID())
	}
	// The container is as created and its task as started: neither
	// needs reading back. A task that has exited already is reported by
	// the supervisor, which its exit event wakes, as one that exits just
	// after a read would be.
	rec, err := c.Info(ctx, client.WithoutRefreshedMetadata)
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	return p.computeStatus(rec, &taskInfo{pid: t.Pid(), status: tasktypes.Status_RUNNING}), nil
}

// computeLabels are the labels of a's container: what the agent finds
// it by and what its status is made of.
func computeLabels(a *api.Assignment, hash string, restarts int) map[string]string {
	labels := map[string]string{
		LabelAssignment: a.ID,
		LabelKind:       string(api.KindCompute),
		labelSpec:       hash,
		labelRestarts:   strconv.Itoa(restarts),
	}
	for k, v := range mutableLabels(a) {
		labels[k] = v
	}
	if a.Flavor.MemoryMiB > 0 {
		labels[labelMemoryMiB] = strconv.FormatInt(a.Flavor.MemoryMiB, 10)
	}
	if a.Network != nil && a.Network.Address != "" {
		labels[labelAddress] = a.Network.Address
	}
	return labels
}

// prepare gets a's image, checks its host ports and gets the mounts of
// its volumes; what names the step that failed.
func (p *Provider) prepare(ctx context.Context, a *api.Assignment) (img client.Image, mounts []specs.Mount, what string, err error) {
	src, err := sourceOf(a)
	if err != nil {
		return nil, nil, "image", err
	}
	if img, err = p.ensureImage(ctx, src, p.provisioning(a)); err != nil {
		return nil, nil, "image", err
	}
	if err := p.checkHostPorts(a); err != nil {
		return nil, nil, "ports", err
	}
	if mounts, err = p.volumeMounts(a); err != nil {
		return nil, nil, "volumes", err
	}
	files, err := p.configMounts(a.ID, configDataOf(ctx))
	if err != nil {
		return nil, nil, "configs and secrets", err
	}
	return img, append(mounts, files...), "", nil
}

// provisioning reports a's progress while it is being provisioned (an
// image pull): a provision status whose reason says how far it is.
func (p *Provider) provisioning(a *api.Assignment) func(string) {
	since := time.Now()
	return func(reason string) {
		p.notify(api.AssignmentStatus{
			ID: a.ID, Node: p.node, ObservedGeneration: a.Generation, Phase: api.PhaseProvision,
			Reason: reason, ProviderID: p.providerID(a.ID), Since: since, UpdatedAt: time.Now(),
		})
	}
}

// networkMounts are the files a container's network needs: its hosts
// file and, with an address of its own, the node's resolv.conf.
func networkMounts(a *api.Assignment, hosts string) []specs.Mount {
	mounts := []specs.Mount{{Destination: "/etc/hosts", Type: "bind", Source: hosts, Options: []string{"rbind", "ro"}}}
	if a.Network != nil && a.Network.Address != "" {
		mounts = append(mounts, specs.Mount{Destination: "/etc/resolv.conf", Type: "bind", Source: "/etc/resolv.conf", Options: []string{"rbind", "ro"}})
	}
	return mounts
}

// startNew starts the task of a container just created and returns it;
// nil without error when it did not start. A command that cannot run is
// the replica's failure, not the call's: the container stays, with the
// reason.
func (p *Provider) startNew(ctx context.Context, c client.Container) (client.Task, error) {
	t, err := p.runTask(ctx, c)
	if err == nil {
		return t, nil
	}
	if ctx.Err() != nil || isUnavailable(err) {
		return nil, err
	}
	reason := "start: " + err.Error()
	if _, lerr := c.SetLabels(ctx, map[string]string{labelError: truncate(reason)}); lerr != nil {
		return nil, errors.Join(err, lerr)
	}
	return nil, nil
}

// createFailed records a replica that could not be created as a
// container holding only its labels and the reason.
func (p *Provider) createFailed(ctx context.Context, id string, labels map[string]string, reason string) (api.AssignmentStatus, error) {
	p.log.Warn("replica failed", "id", id, "reason", reason)
	l := make(map[string]string, len(labels)+1)
	for k, v := range labels {
		l[k] = v
	}
	l[labelError] = truncate(reason)
	if _, err := p.client.NewContainer(ctx, id,
		client.WithRuntime(p.cfg.Runtime, nil),
		client.WithContainerLabels(l),
		client.WithNewSpec(),
	); err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("record failure (%s): %w", reason, err)
	}
	return p.Status(ctx, id)
}

// startTask creates and starts the task of container id, its output
// appended to the replica's log file.
func (p *Provider) startTask(ctx context.Context, id string) error {
	c, err := p.client.LoadContainer(ctx, id)
	if err != nil {
		return err
	}
	_, err = p.runTask(ctx, c)
	return err
}

// runTask creates and starts the task of container c.
func (p *Provider) runTask(ctx context.Context, c client.Container) (client.Task, error) {
	id := c.ID()
	t, err := c.NewTask(ctx, p.taskIO(id))
	if err != nil {
		return nil, fmt.Errorf("create task: %w", err)
	}
	if err := t.Start(ctx); err != nil {
		if _, derr := t.Delete(context.WithoutCancel(ctx), client.WithProcessKill); derr != nil && !isNotFound(derr) {
			p.log.Warn("delete task that did not start", "id", id, "err", derr)
		}
		return nil, fmt.Errorf("start task: %w", err)
	}
	return t, nil
}

// startCreated starts a task left created (an Apply interrupted between
// creating and starting it).
func (p *Provider) startCreated(ctx context.Context, id string) error {
	c, err := p.client.LoadContainer(ctx, id)
	if err != nil {
		return err
	}
	t, err := c.Task(ctx, nil)
	if err != nil {
		return err
	}
	return t.Start(ctx)
}

// specOpts builds the OCI spec: the image's config, then the replica's
// user, command, environment, working directory, hostname, resources,
// mounts and network namespace; last, the check of its user.
func (p *Provider) specOpts(ctx context.Context, a *api.Assignment, img client.Image, nsPath string, mounts []specs.Mount) ([]oci.SpecOpts, error) {
	var c api.ComputeSpec
	if a.Spec.Compute != nil {
		c = *a.Spec.Compute
	}
	opts := []oci.SpecOpts{
		oci.WithImageConfig(img),
		withUser(c.SecurityContext),
		oci.WithHostname(hostname(a.ID)),
		oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: nsPath}),
		oci.WithMounts(mounts),
	}
	if len(c.Command) > 0 || len(c.Args) > 0 {
		// Command replaces the image's entrypoint, Args its cmd, as in
		// Kubernetes.
		argv := append(slices.Clone(c.Command), c.Args...)
		if len(c.Command) == 0 {
			ic, err := img.Spec(ctx)
			if err != nil {
				return nil, fmt.Errorf("image config: %w", err)
			}
			argv = append(slices.Clone(ic.Config.Entrypoint), c.Args...)
		}
		if len(argv) == 0 {
			return nil, errors.New("no command: the image has no entrypoint and the spec no command")
		}
		opts = append(opts, oci.WithProcessArgs(argv...))
	}
	if vars := envOf(ctx, c); len(vars) > 0 {
		env := make([]string, 0, len(vars))
		for _, k := range keys(vars) {
			env = append(env, k+"="+vars[k])
		}
		opts = append(opts, oci.WithEnv(env))
	}
	if c.WorkingDir != "" {
		opts = append(opts, oci.WithProcessCwd(c.WorkingDir))
	}
	if m := a.Flavor.MemoryMiB; m > 0 {
		limit := uint64(m) << 20
		// Swap counts against the limit: a replica over its memory is
		// OOM-killed, not slowed down by swapping.
		opts = append(opts, oci.WithMemoryLimit(limit), withMemorySwap(int64(limit)))
	}
	if v := a.Flavor.VCPUs; v > 0 {
		opts = append(opts, oci.WithCPUCFS(int64(v*cfsPeriod), cfsPeriod))
	}
	opts = append(opts, p.sandboxOpts()...)
	pol := userPolicy{refuseRoot: p.cfg.RefuseRoot, userns: p.userns}
	if pol.userns != nil {
		opts = append(opts, p.withUserns(a.ID, *pol.userns))
	}
	return append(opts, checkUser(c.SecurityContext, pol), p.withConfigOwner(a.ID, pol)), nil
}

// sandboxOpts confine a replica (see Config): Docker's default
// capabilities without CAP_NET_RAW (no raw sockets: no spoofed packets
// on the region network) plus the operator's additions, a seccomp
// profile (after the capabilities: containerd's default profile allows
// some calls only with some capabilities), no_new_privileges, a pids
// limit. A user namespace is the node's choice (Config.UserNamespace,
// see userns.go).
func (p *Provider) sandboxOpts() []oci.SpecOpts {
	opts := []oci.SpecOpts{oci.WithDroppedCapabilities([]string{"CAP_NET_RAW"})}
	if len(p.cfg.AddCapabilities) > 0 {
		opts = append(opts, oci.WithAddedCapabilities(p.cfg.AddCapabilities))
	}
	switch p.cfg.Seccomp {
	case SeccompUnconfined:
	case SeccompDefault:
		opts = append(opts, seccomp.WithDefaultProfile())
		if !kernelHasX32() {
			opts = append(opts, withoutSeccompArch(specs.ArchX32))
		}
	default:
		opts = append(opts, seccomp.WithProfile(p.cfg.Seccomp))
	}
	if !p.cfg.AllowNewPrivileges {
		opts = append(opts, oci.WithNoNewPrivileges)
	}
	if p.cfg.PidsLimit > 0 {
		opts = append(opts, oci.WithPidsLimit(p.cfg.PidsLimit))
	}
	return opts
}

func withMemorySwap(limit int64) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Linux == nil || s.Linux.Resources == nil || s.Linux.Resources.Memory == nil {
			return nil
		}
		if _, err := os.Stat("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"); err != nil {
			if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
				// cgroup v1 without swap accounting rejects a swap limit.
				return nil
			}
		}
		s.Linux.Resources.Memory.Swap = &limit
		return nil
	}
}

// checkHostPorts refuses host ports outside Config.HostPorts, the node's
// own ports and, unless allowed, privileged ones: a published port is a
// DNAT rule that takes the port from whatever host service has it.
func (p *Provider) checkHostPorts(a *api.Assignment) error {
	for _, pm := range portMappings(a) {
		if err := p.ports.Check(pm.HostPort); err != nil {
			return fmt.Errorf("hostPort %d: %w", pm.HostPort, err)
		}
	}
	return nil
}

// hostname is the replica id, cut to the kernel's limit.
func hostname(id string) string {
	if len(id) > 64 {
		return id[:64]
	}
	return id
}

// volumeMounts bind-mounts the replica's volumes, which must be on this
// node already.
func (p *Provider) volumeMounts(a *api.Assignment) ([]specs.Mount, error) {
	var out []specs.Mount
	for _, v := range a.Volumes {
		if v.VolumeID == "" || v.Path == "" {
			return nil, fmt.Errorf("volume %q: needs a volume id and a path", v.Name)
		}
		if err := validIdentifier(v.VolumeID); err != nil {
			return nil, fmt.Errorf("volume %q: %w", v.Name, err)
		}
		dir := p.volumeDir(v.VolumeID)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("volume %q (%s) is not on this node", v.Name, v.VolumeID)
		}
		mode := "rw"
		if v.ReadOnly {
			mode = "ro"
		}
		out = append(out, specs.Mount{Destination: v.Path, Type: "bind", Source: dir, Options: []string{"rbind", mode}})
	}
	return out, nil
}

func (p *Provider) hostsPath(id string) string {
	return filepath.Join(p.cfg.StateDir, "hosts", id)
}

// writeHosts writes the replica's /etc/hosts: localhost and its own name.
func (p *Provider) writeHosts(a *api.Assignment) (string, error) {
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	if a.Network != nil && a.Network.Address != "" {
		fmt.Fprintf(&b, "%s\t%s\n", a.Network.Address, hostname(a.ID))
	} else {
		fmt.Fprintf(&b, "127.0.1.1\t%s\n", hostname(a.ID))
	}
	path := p.hostsPath(a.ID)
	if err := writeFileAtomic(path, []byte(b.String())); err != nil {
		return "", err
	}
	if err := os.Chmod(path, 0o644); err != nil {
		return "", err
	}
	return path, nil
}

func (p *Provider) logPath(id string) string { return filepath.Join(p.cfg.LogRoot, id+".log") }

// isUnavailable reports containerd being unreachable: a failed call, not
// a failed replica.
func isUnavailable(err error) bool {
	if errdefs.IsUnavailable(err) {
		return true
	}
	var s interface{ GRPCStatus() *grpcstatus.Status }
	if errors.As(err, &s) {
		return s.GRPCStatus().Code() == codes.Unavailable
	}
	return false
}

func truncate(s string) string {
	if len(s) <= maxLabelValue {
		return s
	}
	return s[:maxLabelValue-3] + "..."
}
