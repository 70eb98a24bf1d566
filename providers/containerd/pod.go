package containerd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/stratahq/strata/internal/api"
)

// The containers of a pod: the main container keeps the replica's own
// container and task id, so that a replica made before pods is the
// one-container pod it always was; the others are <id>.<name>, the init
// containers <id>.init-<name>. All of them join the replica's pinned
// network namespace, the pod's sandbox: it outlives every container's
// restarts, so no pause container is needed. A pod member is a
// containerd container of its own (own snapshot, task, log file
// <id>.<name>.log, restart count and back-off) labelled with its
// replica's id (labelPod) and its name (labelContainer), not with
// LabelAssignment: List sees replicas only. The main container lists
// the members (labelMembers), in the spec's order.
const (
	labelPod       = "strata.io/pod"
	labelContainer = "strata.io/container"
	labelMembers   = "strata.io/containers"
)

// sidecarID is the containerd id of the pod container name of replica id.
func sidecarID(id, name string) string { return id + "." + name }

// initID is the containerd id of the init container name of replica id.
func initID(id, name string) string { return id + ".init-" + name }

// ownerOf is the replica and container name of container record c: a
// pod member's labels say them, any other container is its replica's
// main one.
func ownerOf(c containers.Container) (replica, name string) {
	if r := c.Labels[labelPod]; r != "" {
		return r, c.Labels[labelContainer]
	}
	return c.ID, api.MainContainer
}

// supervised reports whether container record c (nil: none) is one the
// supervisor restarts: a replica's, or one of its pod's.
func supervised(c *containers.Container) bool {
	return c != nil && (c.Labels[LabelAssignment] != "" || c.Labels[labelPod] != "")
}

// sidecarsOf are the containers a's spec runs beside the main one.
func sidecarsOf(a *api.Assignment) []api.Container {
	if a.Spec.Compute == nil {
		return nil
	}
	return a.Spec.Compute.Containers
}

// podDigest digests what a's pod adds to its main container ("" when
// nothing, so that the spec digest of a replica without one does not
// change): any change of it replaces the whole pod.
func podDigest(c api.ComputeSpec) (string, error) {
	if !c.IsPod() && len(c.ScratchVolumes) == 0 {
		return "", nil
	}
	b, err := json.Marshal(struct {
		Init    []api.Container
		Others  []api.Container
		Scratch []api.ScratchVolume
	}{c.InitContainers, c.Containers, c.ScratchVolumes})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

// scratchDir is the directory of scratch volume name of replica id.
func (p *Provider) scratchDir(id, name string) string {
	return filepath.Join(p.cfg.StateDir, "scratch", id, name)
}

// makeScratch makes a's scratch volumes, empty and writable by every
// user (the containers' users differ, and may be mapped by a user
// namespace), and returns the main container's mounts of them.
func (p *Provider) makeScratch(a *api.Assignment) ([]specs.Mount, error) {
	if a.Spec.Compute == nil || len(a.Spec.Compute.ScratchVolumes) == 0 {
		return nil, nil
	}
	var out []specs.Mount
	for _, s := range a.Spec.Compute.ScratchVolumes {
		dir := p.scratchDir(a.ID, s.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		// Not under the umask: the world may write, as in an emptyDir.
		if err := os.Chmod(dir, 0o777); err != nil {
			return nil, err
		}
		if s.Path != "" {
			out = append(out, bindMount(s.Path, dir, false))
		}
	}
	return out, nil
}

func bindMount(dst, src string, readOnly bool) specs.Mount {
	mode := "rw"
	if readOnly {
		mode = "ro"
	}
	return specs.Mount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", mode}}
}

// memberMounts are the mounts of pod container ct of a: the replica's
// volumes and scratch volumes it names, at its own paths.
func (p *Provider) memberMounts(a *api.Assignment, ct api.Container) ([]specs.Mount, error) {
	var out []specs.Mount
	for _, v := range ct.Volumes {
		if v.Scratch != "" {
			out = append(out, bindMount(v.Path, p.scratchDir(a.ID, v.Scratch), v.ReadOnly))
			continue
		}
		var att *api.VolumeAttachment
		for i := range a.Volumes {
			if a.Volumes[i].Name == v.Volume {
				att = &a.Volumes[i]
			}
		}
		if att == nil || validIdentifier(att.VolumeID) != nil {
			return nil, fmt.Errorf("volume %q is not one the replica mounts", v.Volume)
		}
		dir := p.volumes.dir(att.VolumeID)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("volume %q (%s) is not on this node", v.Volume, att.VolumeID)
		}
		out = append(out, bindMount(v.Path, dir, v.ReadOnly || att.ReadOnly))
	}
	return out, nil
}

// memberAssignment is a as pod container ct would be alone: its image,
// command, environment, user and restart policy (default the
// replica's), its resources (a limit of its own where it sets one, else
// the replica's flavor), the replica's id, network and volumes.
func memberAssignment(a *api.Assignment, ct api.Container) *api.Assignment {
	m := *a
	c := api.ComputeSpec{
		Image: ct.Image, Command: ct.Command, Args: ct.Args, Env: ct.Env, WorkingDir: ct.WorkingDir,
		SecurityContext: ct.SecurityContext, RestartPolicy: ct.RestartPolicy, Probes: ct.Probes,
	}
	if c.RestartPolicy == "" {
		c.RestartPolicy = restartPolicy(a)
	}
	if a.Spec.Compute != nil {
		c.StopGracePeriod = a.Spec.Compute.StopGracePeriod
	}
	m.Spec.Compute = &c
	if r := ct.Resources; r != nil {
		if r.MemoryMiB > 0 {
			m.Flavor.MemoryMiB = r.MemoryMiB
		}
		if r.MilliCPU > 0 {
			m.Flavor.VCPUs = float64(r.MilliCPU) / 1000
		}
	}
	return &m
}

// memberSource is where pod container ct's image comes from: the
// replica's own (its Image resource) when ct names the same image, else
// the OCI reference ct names.
func memberSource(a *api.Assignment, ct api.Container) (imageSource, error) {
	if (a.Spec.Compute != nil && ct.Image == a.Spec.Compute.Image) || (a.Image != nil && ct.Image == a.Image.Ref) {
		return sourceOf(a)
	}
	return imageSource{ref: ct.Image}, nil
}

// memberLabels are the labels of pod container ct's container.
func memberLabels(a, m *api.Assignment, ct api.Container) map[string]string {
	l := map[string]string{
		labelPod:       a.ID,
		labelContainer: ct.Name,
		LabelKind:      string(api.KindCompute),
		labelRestart:   string(m.Spec.Compute.RestartPolicy),
		labelGrace:     graceOf(a, nil).String(),
		labelRestarts:  "0",
		labelStarted:   time.Now().UTC().Format(time.RFC3339Nano),
	}
	if v := probesLabel(m); v != "" {
		l[labelProbes] = v
	}
	if m.Flavor.MemoryMiB > 0 {
		l[labelMemoryMiB] = fmt.Sprint(m.Flavor.MemoryMiB)
	}
	if a.Network != nil && a.Network.Address != "" {
		l[labelAddress] = a.Network.Address
	}
	return l
}

// startPod starts the task of main, the pod's main container just
// created, then creates and starts its other containers, which join
// main's network namespace and share its hosts file. A container that
// cannot be made fails the replica (the main container is labelled with
// the reason, as one that fails to start): the next Apply replaces the
// whole pod.
func (p *Provider) startPod(ctx context.Context, main client.Container, cs containerSpec) (api.AssignmentStatus, error) {
	a := cs.a
	t, err := p.tasks.startNew(ctx, main)
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	if t != nil {
		if rec, err := main.Info(ctx, client.WithoutRefreshedMetadata); err == nil {
			p.probes.track(rec, a.ID, api.MainContainer)
		}
		for _, ct := range sidecarsOf(a) {
			err := p.createMember(ctx, cs, ct, -1, true)
			if err == nil {
				continue
			}
			if ctx.Err() != nil || isUnavailable(err) {
				return api.AssignmentStatus{}, err
			}
			reason := truncate(fmt.Sprintf("container %s: %v", ct.Name, err))
			p.log.Warn("replica failed", "id", a.ID, "reason", reason)
			if err := p.tasks.setLabels(ctx, a.ID, map[string]string{labelError: reason}); err != nil {
				return api.AssignmentStatus{}, err
			}
			break
		}
	}
	p.log.Info("pod started", "id", a.ID, "generation", a.Generation, "containers", len(sidecarsOf(a))+1)
	return p.Status(ctx, a.ID)
}

// createMember creates pod container ct beside the main container of
// cs, init container number init of the pod (-1: a sidecar), and starts
// its task if start.
func (p *Provider) createMember(ctx context.Context, cs containerSpec, ct api.Container, init int, start bool) error {
	a := cs.a
	m := memberAssignment(a, ct)
	src, err := memberSource(a, ct)
	if err != nil {
		return err
	}
	img, err := p.images.ensure(ctx, src, nil)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	mounts, err := p.memberMounts(a, ct)
	if err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	// Its Configs and Secrets are its own (the Apply's data for it);
	// without, its environment is its spec's.
	d := memberData(configDataOf(ctx), ct.Name)
	if d != nil {
		files, err := p.configs.mounts(a.ID, ct.Name, d.Files)
		if err != nil {
			return fmt.Errorf("configs and secrets: %w", err)
		}
		mounts = append(mounts, files...)
	}
	id := sidecarID(a.ID, ct.Name)
	labels := memberLabels(a, m, ct)
	if init >= 0 {
		id = initID(a.ID, ct.Name)
		labels[labelInitIndex] = strconv.Itoa(init)
	}
	mcs := containerSpec{
		a: m, id: id, image: img, labels: labels, rootfs: client.WithNewSnapshot(id, img),
		netns: cs.netns, usernsPath: cs.usernsPath,
		mounts:   append(mounts, networkMounts(a, networkFilesOf(cs.mounts))...),
		filesDir: p.configs.containerDir(a.ID, ct.Name),
	}
	if r := p.tasks.userns; r != nil {
		mcs.rootfs = p.images.remappedSnapshot(id, img, *r)
		labels[labelUserns] = r.String()
	}
	opts, err := p.tasks.specOpts(context.WithValue(ctx, configDataKey{}, d), mcs)
	if err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	ctr, err := p.tasks.create(ctx, mcs, opts)
	if err != nil {
		return fmt.Errorf("create container: %w", err)
	}
	if !start {
		return nil
	}
	t, err := p.tasks.runTask(ctx, ctr)
	if err != nil {
		return err
	}
	rec, err := ctr.Info(ctx, client.WithoutRefreshedMetadata)
	if err == nil && t != nil {
		p.probes.track(rec, a.ID, ct.Name)
	}
	return err
}

// networkFilesOf are the network files among the main container's
// mounts (the last mount of a path wins, as networkMounts come last), so
// that every container of a pod shares its hosts and resolv.conf.
func networkFilesOf(mounts []specs.Mount) networkFiles {
	var files networkFiles
	for _, m := range mounts {
		switch m.Destination {
		case "/etc/hosts":
			files.hosts = m.Source
		case "/etc/resolv.conf":
			files.resolv = m.Source
		}
	}
	return files
}

// members are the records of replica id's pod containers.
func (tk *taskService) members(ctx context.Context, id string) ([]containers.Container, error) {
	cs, err := tk.client.ContainerService().List(ctx, fmt.Sprintf("labels.%q==%q", labelPod, id))
	if err != nil {
		return nil, fmt.Errorf("containers of pod %s: %w", id, err)
	}
	return cs, nil
}

// membersPresent reports whether every pod container main's labels list
// has its container.
func (tk *taskService) membersPresent(ctx context.Context, main containers.Container) (bool, error) {
	var ids []string
	for _, n := range initNames(main) {
		ids = append(ids, initID(main.ID, n))
	}
	for _, n := range memberNames(main) {
		ids = append(ids, sidecarID(main.ID, n))
	}
	for _, id := range ids {
		c, err := tk.container(ctx, id)
		if err != nil || c == nil {
			return false, err
		}
	}
	// An init container that failed for good fails the pod: an Apply
	// replaces it.
	failed, err := tk.initFailed(ctx, main)
	return !failed, err
}

// memberNames are the names of the pod containers main's labels list.
func memberNames(main containers.Container) []string {
	v := main.Labels[labelMembers]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// removeMembers stops and removes replica id's pod containers and its
// scratch volumes.
func (p *Provider) removeMembers(ctx context.Context, id string, grace time.Duration) error {
	ms, err := p.tasks.members(ctx, id)
	if err != nil {
		return err
	}
	for _, m := range ms {
		p.sup.forget(m.ID)
		c, err := p.client.LoadContainer(ctx, m.ID)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		gone, err := p.tasks.removeContainer(ctx, c, grace)
		if err != nil {
			return fmt.Errorf("container %s: %w", m.ID, err)
		}
		if !gone {
			p.tasks.removeSnapshot(ctx, m.ID)
		}
	}
	return os.RemoveAll(filepath.Join(p.cfg.StateDir, "scratch", id))
}

// lockOwner locks the replica that container id belongs to (its own,
// or its pod's) and returns the replica's id.
func (sv *supervisor) lockOwner(ctx context.Context, id string) (unlock func(), replica string, err error) {
	replica = id
	if c, err := sv.tasks.container(ctx, id); err == nil && c != nil {
		replica, _ = ownerOf(*c)
	}
	unlock, err = sv.replicas.lock(ctx, replica)
	return unlock, replica, err
}

// pushOwner pushes the status of the replica container c belongs to.
func (sv *supervisor) pushOwner(ctx context.Context, c containers.Container, t *taskInfo) {
	replica, name := ownerOf(c)
	if name == api.MainContainer && c.Labels[labelMembers] == "" && c.Labels[labelInits] == "" {
		sv.notify(sv.tasks.status(c, t))
		return
	}
	if st, err := sv.tasks.statusOf(ctx, replica); err == nil {
		sv.notify(st)
	}
}

// withMembers adds the statuses of main's pod containers to st, main's,
// in the spec's order, and gates the replica's phase on them: ready only
// when every container runs and is ready.
func (tk *taskService) withMembers(ctx context.Context, st *api.AssignmentStatus, main containers.Container) {
	names := memberNames(main)
	if len(names) == 0 || main.Labels[labelError] != "" {
		tk.withInits(ctx, st, main)
		return
	}
	if initPending(main) {
		// The sidecars wait for the init containers.
		for _, n := range names {
			st.Containers = append(st.Containers, api.ContainerStatus{Name: n, State: api.ContainerWaiting})
		}
		tk.withInits(ctx, st, main)
		return
	}
	defer tk.withInits(ctx, st, main)
	for _, n := range names {
		id := sidecarID(main.ID, n)
		c, err := tk.container(ctx, id)
		var t *taskInfo
		if err == nil && c != nil {
			t, err = tk.task(ctx, id)
		}
		switch {
		case err != nil:
			st.Containers = append(st.Containers, api.ContainerStatus{Name: n, State: api.ContainerWaiting, Message: err.Error()})
			demote(st, api.PhaseProvision, fmt.Sprintf("container %s: %v", n, err))
		case c == nil:
			st.Containers = append(st.Containers, api.ContainerStatus{Name: n, State: api.ContainerWaiting})
			if tk.replicas.held(main.ID) {
				demote(st, api.PhaseProvision, "container "+n+": starting")
			} else {
				demote(st, api.PhaseError, "container "+n+" is missing")
			}
		default:
			st.Containers = append(st.Containers, tk.memberStatus(st, *c, t, main.ID, n))
		}
	}
}

// memberStatus is pod container name's status, its effect on the
// replica's phase applied to st.
func (tk *taskService) memberStatus(st *api.AssignmentStatus, c containers.Container, t *taskInfo, replica, name string) api.ContainerStatus {
	if reason := c.Labels[labelError]; reason != "" {
		demote(st, api.PhaseError, "container "+name+": "+reason)
		return api.ContainerStatus{Name: name, State: api.ContainerWaiting, Reason: api.ReasonError, Message: reason,
			Restarts: int(labelInt(c.Labels, labelRestarts))}
	}
	// Its own phase, as a replica of one container, then the pod's.
	own := api.AssignmentStatus{Phase: api.PhaseReady, Restarts: int(labelInt(c.Labels, labelRestarts))}
	policy := api.RestartPolicy(c.Labels[labelRestart])
	switch {
	case t == nil && policy != api.RestartNever:
		own.Phase, own.Reason = api.PhaseProvision, "no task; restarting"
	case t == nil:
		own.Phase, own.Reason = api.PhaseError, "no task; restart policy never"
	case t.status == tasktypes.Status_STOPPED:
		reason := exitReason(t.exitStatus, tk.oomKilled(c, t), labelInt(c.Labels, labelMemoryMiB))
		own.Phase, own.Reason = api.PhaseError, reason
		if willRestart(policy, t.exitStatus) {
			own.Phase, own.Reason = api.PhaseProvision, "restarting: "+reason
		}
	case t.status != tasktypes.Status_RUNNING:
		own.Phase, own.Reason = api.PhaseProvision, "task state "+strings.ToLower(t.status.String())
	}
	cs := tk.containerStatus(&own, c, t, replica, name)
	if own.Phase != api.PhaseReady {
		demote(st, own.Phase, "container "+name+": "+own.Reason)
	}
	return cs
}

// demote lowers st's phase to phase (provision or error) with reason,
// unless it is lower already: the first container not ready says why.
func demote(st *api.AssignmentStatus, phase api.Phase, reason string) {
	switch {
	case st.Phase == api.PhaseReady:
	case st.Phase == api.PhaseProvision && phase == api.PhaseError:
	default:
		return
	}
	st.Phase, st.Reason = phase, reason
}
