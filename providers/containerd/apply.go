package containerd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
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
	unlock, err := p.replicas.lock(ctx, a.ID)
	if err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("containerd: apply %s: %w", a.ID, err)
	}
	defer unlock()
	switch a.Kind {
	case api.KindVolume:
		return p.volumes.apply(ctx, a)
	case api.KindCompute, "":
		st, err := p.applyCompute(ctx, a)
		if err != nil {
			return api.AssignmentStatus{}, fmt.Errorf("containerd: apply %s: %w", a.ID, err)
		}
		p.sup.notify(st)
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
	c, err := p.tasks.container(ctx, a.ID)
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
		whole, err := p.tasks.membersPresent(ctx, *c)
		if err != nil {
			return api.AssignmentStatus{}, err
		}
		if l[labelSpec] == hash && l[labelError] == "" && whole {
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
	if err := p.relabel(ctx, c, a); err != nil {
		return api.AssignmentStatus{}, err
	}
	if err := p.network.refreshResolv(a); err != nil {
		// The container keeps the resolver it has; the next Apply retries.
		p.log.Warn("rewrite resolv.conf", "id", a.ID, "err", err)
	}
	if initPending(c) {
		// The supervisor starts the main container once they are done.
		return p.Status(ctx, a.ID)
	}
	t, err := p.tasks.task(ctx, a.ID)
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	switch {
	case t != nil && t.status == tasktypes.Status_RUNNING:
		// Its probes may have changed with the labels.
		if rec, err := p.tasks.container(ctx, a.ID); err == nil && rec != nil {
			p.probes.track(*rec, a.ID, api.MainContainer)
		}
	case t != nil && t.status == tasktypes.Status_CREATED:
		if err := p.tasks.startCreated(ctx, a.ID); err != nil {
			return api.AssignmentStatus{}, err
		}
	default:
		// Stopped, or no task at all: the retry the agent asks for.
		if err := p.sup.restartNow(ctx, a.ID, "apply"); err != nil {
			return api.AssignmentStatus{}, err
		}
	}
	return p.Status(ctx, a.ID)
}

// relabel sets the labels of a's generation on its container c, if they
// changed.
func (p *Provider) relabel(ctx context.Context, c containers.Container, a *api.Assignment) error {
	want := mutableLabels(a)
	if sameLabels(c.Labels, want) {
		return nil
	}
	for k := range c.Labels {
		if _, keep := want[k]; !keep && strings.HasPrefix(k, labelUserPrefix) {
			want[k] = "" // containerd drops labels set to ""
		}
	}
	return p.tasks.setLabels(ctx, c.ID, want)
}

// mutableLabels are the labels an Apply may change without a new
// container: generation, restart policy, stop grace period and the
// assignment's own labels.
func mutableLabels(a *api.Assignment) map[string]string {
	l := map[string]string{
		LabelGeneration: strconv.FormatInt(a.Generation, 10),
		labelRestart:    string(restartPolicy(a)),
		labelGrace:      graceOf(a, nil).String(),
		// "" for none: no label, and none on a container made before
		// probes.
		labelProbes: probesLabel(a),
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
// changing it recreates nothing. So is the resolver (Network.DNS): it is
// the node's (its DNS server's), not the tenant's spec, and a kept
// container's resolv.conf is rewritten in place (refreshResolv); leaving
// it out also keeps the digests of containers made before it.
func specHash(a *api.Assignment, d *provider.ConfigData) (string, error) {
	var c api.ComputeSpec
	if a.Spec.Compute != nil {
		c = *a.Spec.Compute
	}
	configs, err := configDigest(d)
	if err != nil {
		return "", err
	}
	pod, err := podDigest(c)
	if err != nil {
		return "", fmt.Errorf("spec digest: %w", err)
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
		Pod             string               `json:",omitempty"`
	}{a.Image, c.Image, c.Command, c.Args, c.Env, c.WorkingDir, c.Ports, a.Volumes, a.Flavor.VCPUs, a.Flavor.MemoryMiB, withoutDNS(a.Network), configs, c.SecurityContext, pod})
	if err != nil {
		return "", fmt.Errorf("spec digest: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

// withoutDNS is a copy of n without its resolver (nil stays nil).
func withoutDNS(n *api.NetworkAttachment) *api.NetworkAttachment {
	if n == nil {
		return nil
	}
	c := *n
	c.DNS = nil
	return &c
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
	nsPath, err := p.network.setup(ctx, a)
	if err != nil {
		return fail("network", err)
	}
	created := false
	defer func() {
		if !created {
			if err := p.network.teardown(context.WithoutCancel(ctx), a.ID); err != nil {
				p.log.Warn("clean up network", "id", a.ID, "err", err)
			}
		}
	}()
	files, err := p.network.writeNetworkFiles(a)
	if err != nil {
		return fail("hosts and resolv.conf files", err)
	}
	cs := containerSpec{
		a: a, image: img, labels: labels, rootfs: client.WithNewSnapshot(a.ID, img),
		netns: nsPath, usernsPath: p.network.usernsPath(a.ID),
		mounts: append(mounts, networkMounts(a, files)...), filesDir: p.configs.containerDir(a.ID, api.MainContainer),
	}
	specOpts, err := p.tasks.specOpts(ctx, cs)
	if err != nil {
		return fail("spec", err)
	}
	labels[labelStarted] = time.Now().UTC().Format(time.RFC3339Nano)
	if r := p.tasks.userns; r != nil {
		cs.rootfs = p.images.remappedSnapshot(a.ID, img, *r)
		labels[labelUserns] = r.String()
	}
	ctr, err := p.tasks.create(ctx, cs, specOpts)
	if err != nil {
		if errdefs.IsAlreadyExists(err) {
			return api.AssignmentStatus{}, fmt.Errorf("create container: %w", err)
		}
		if errors.Is(err, errUser) {
			// The user the replica would run as is refused: the
			// reason says why, in the spec's terms.
			return p.createFailed(ctx, a.ID, labels, err.Error())
		}
		if isNotFound(err) {
			// The image's snapshots went behind the provider's back:
			// the retry unpacks it again.
			p.images.forgetUnpacked(img)
		}
		return fail("create container", err)
	}
	created = true
	return p.start(ctx, ctr, cs)
}

// start starts the task of the main container c just created, and the
// other containers of its pod, if any; it returns the replica's status.
func (p *Provider) start(ctx context.Context, c client.Container, cs containerSpec) (api.AssignmentStatus, error) {
	a := cs.a
	if len(initsOf(a)) > 0 {
		return p.startInitPod(ctx, c, cs)
	}
	if len(sidecarsOf(a)) > 0 {
		return p.startPod(ctx, c, cs)
	}
	st, err := p.startFirst(ctx, c)
	if err == nil {
		p.log.Info("container started", "id", a.ID, "generation", a.Generation, "image", cs.image.Name())
	}
	return st, err
}

// startFirst starts the first task of container c, just created, and
// returns the replica's status.
func (p *Provider) startFirst(ctx context.Context, c client.Container) (api.AssignmentStatus, error) {
	t, err := p.tasks.startNew(ctx, c)
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
	p.probes.track(rec, c.ID(), api.MainContainer)
	return p.tasks.status(rec, &taskInfo{pid: t.Pid(), status: tasktypes.Status_RUNNING}), nil
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
		if v != "" || k != labelProbes {
			labels[k] = v
		}
	}
	if a.Flavor.MemoryMiB > 0 {
		labels[labelMemoryMiB] = strconv.FormatInt(a.Flavor.MemoryMiB, 10)
	}
	if a.Network != nil && a.Network.Address != "" {
		labels[labelAddress] = a.Network.Address
	}
	if sc := sidecarsOf(a); len(sc) > 0 {
		names := make([]string, len(sc))
		for i, ct := range sc {
			names[i] = ct.Name
		}
		labels[labelMembers] = strings.Join(names, ",")
	}
	initLabels(a, labels)
	return labels
}

// prepare gets a's image, checks its host ports and gets the mounts of
// its volumes; what names the step that failed.
func (p *Provider) prepare(ctx context.Context, a *api.Assignment) (img client.Image, mounts []specs.Mount, what string, err error) {
	src, err := sourceOf(a)
	if err != nil {
		return nil, nil, "image", err
	}
	if img, err = p.images.ensure(ctx, src, p.provisioning(a)); err != nil {
		return nil, nil, "image", err
	}
	if err := p.network.checkHostPorts(a); err != nil {
		return nil, nil, "ports", err
	}
	if mounts, err = p.volumes.mounts(a); err != nil {
		return nil, nil, "volumes", err
	}
	// The pod's other containers write theirs when they are created
	// (createMember); none of an earlier pod's stays.
	if err := p.configs.remove(a.ID); err != nil {
		return nil, nil, "configs and secrets", err
	}
	var files []specs.Mount
	if d := configDataOf(ctx); d != nil {
		files, err = p.configs.mounts(a.ID, api.MainContainer, d.Files)
	}
	if err != nil {
		return nil, nil, "configs and secrets", err
	}
	scratch, err := p.makeScratch(a)
	if err != nil {
		return nil, nil, "scratch volumes", err
	}
	return img, append(append(mounts, files...), scratch...), "", nil
}

// provisioning reports a's progress while it is being provisioned (an
// image pull): a provision status whose reason says how far it is.
func (p *Provider) provisioning(a *api.Assignment) func(string) {
	since := time.Now()
	return func(reason string) {
		p.sup.notify(api.AssignmentStatus{
			ID: a.ID, Node: p.node, ObservedGeneration: a.Generation, Phase: api.PhaseProvision,
			Reason: reason, ProviderID: p.tasks.providerID(a.ID), Since: since, UpdatedAt: time.Now(),
		})
	}
}

// createFailed records a replica that could not be created as a
// container holding only its labels and the reason.
func (p *Provider) createFailed(ctx context.Context, id string, labels map[string]string, reason string) (api.AssignmentStatus, error) {
	p.log.Warn("replica failed", "id", id, "reason", reason)
	if err := p.tasks.recordFailure(ctx, id, labels, reason); err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("record failure (%s): %w", reason, err)
	}
	return p.Status(ctx, id)
}

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

var _ provider.ConfigApplier = (*Provider)(nil)

// ApplyConfig is Apply with the data of the Configs and Secrets a's spec
// names: each container's files (the main one's, and those of the pod's
// init containers and sidecars) are written under the replica's state
// directory (configs/<id>/<container>/<n>/<key>, owned by root, 0444 for
// a Config's, 0400 for a Secret's) and bind-mounted read-only into that
// container, its variables set, and the image pulled with its registry
// credentials. The data rides on the
// call's context down to the steps that use it; nothing of it is logged
// or put in a status.
func (p *Provider) ApplyConfig(ctx context.Context, a *api.Assignment, d *provider.ConfigData) (api.AssignmentStatus, error) {
	return p.Apply(context.WithValue(ctx, configDataKey{}, d), a)
}
