package libvirt

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"libvirt.org/go/libvirt"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// Apply implements provider.Provider. A Compute replica is a domain that
// Apply defines and starts; applying it again changes nothing while it
// runs. A higher generation that renders the same domain is only
// recorded; one that changes it (image, flavor, volumes) redefines the
// domain and restarts it. A stopped domain is started again, counting a
// restart. A Volume replica is a pool volume.
func (p *Provider) Apply(ctx context.Context, a *api.Assignment) (api.AssignmentStatus, error) {
	if a == nil || a.ID == "" {
		return api.AssignmentStatus{}, api.Invalid("id", "is required")
	}
	if a.Provider != "" && a.Provider != api.ProviderVM {
		return api.AssignmentStatus{}, fmt.Errorf("libvirt: provider kind %q: %w", a.Provider, provider.ErrUnsupported)
	}
	unlock := p.replicas.lock(a.ID)
	defer unlock()
	c, err := p.connect()
	if err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("libvirt: apply %s: %w", a.ID, err)
	}
	var st api.AssignmentStatus
	switch a.Kind {
	case api.KindVolume:
		st, err = p.applyVolume(c, a)
	case api.KindCompute, "":
		st, err = p.applyDomain(ctx, c, a)
	default:
		return api.AssignmentStatus{}, fmt.Errorf("libvirt: kind %q: %w", a.Kind, provider.ErrUnsupported)
	}
	if err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("libvirt: apply %s: %w", a.ID, err)
	}
	return st, nil
}

func (p *Provider) applyDomain(ctx context.Context, c *libvirt.Connect, a *api.Assignment) (api.AssignmentStatus, error) {
	// The image's files are checked first: even the KVM probe boots the
	// kernel.
	img, err := p.imageFiles(c, a.Image)
	if errors.Is(err, ErrBadSpec) {
		return p.rejected(a, err), nil
	}
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	accel, err := p.domainType(ctx, img.Kernel)
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	spec, err := p.resolve(ctx, c, a, img, accel.Type)
	if errors.Is(err, ErrBadSpec) {
		return p.rejected(a, err), nil
	}
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	meta, err := p.metaOf(a, spec)
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	dom, err := c.LookupDomainByName(domainName(a.ID))
	if hasCode(err, libvirt.ERR_NO_DOMAIN) {
		return p.define(c, spec, meta)
	}
	if err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("look up domain: %w", err)
	}
	defer dom.Free()
	have, ok := p.readMeta(dom)
	if !ok {
		return p.rejected(a, fmt.Errorf("domain %s exists but is not this node's replica (node %q)", domainName(a.ID), have.Node)), nil
	}
	if a.Generation < have.Generation {
		return p.domainStatus(dom, have) // a stale Apply
	}
	return p.converge(c, dom, a, spec, meta, have)
}

// metaOf is what the agent records on the domain of a: its generation
// and the digest of its definition, which tells a changed domain from a
// retry.
func (p *Provider) metaOf(a *api.Assignment, spec domainSpec) (replicaMeta, error) {
	bare, err := spec.render(nil)
	if err != nil {
		return replicaMeta{}, err
	}
	meta := replicaMeta{
		ID:         a.ID,
		Node:       p.node,
		Kind:       api.KindCompute,
		Generation: a.Generation,
		// The drive's content is no part of the XML: a changed Config
		// restarts the domain all the same.
		Spec:      digest(bare + spec.Run.digest),
		RunsToEnd: spec.Run.exit,
	}
	if a.Network != nil {
		meta.Address = a.Network.Address
	}
	if a.Image != nil {
		meta.ReadyMarker = a.Image.ReadyMarker
	}
	return meta, nil
}

// converge brings the existing domain dom (its record have) to
// assignment a (spec and meta): a running domain of the same definition
// or generation is left running, a stopped one of the same definition is
// started again (the retry), and a changed one is redefined and started
// afresh.
func (p *Provider) converge(c *libvirt.Connect, dom *libvirt.Domain, a *api.Assignment, spec domainSpec, meta, have replicaMeta) (api.AssignmentStatus, error) {
	active, err := dom.IsActive()
	if err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("domain state: %w", err)
	}
	sameSpec := have.Spec == meta.Spec
	// A running domain is never restarted for its own generation, even if
	// it would render differently now (a new domain type after a restart
	// of the agent, say).
	if active && (sameSpec || a.Generation == have.Generation) {
		if a.Generation > have.Generation {
			have.Generation = a.Generation
			if err := p.writeMeta(dom, have, true); err != nil {
				return api.AssignmentStatus{}, err
			}
			p.kick(a.ID)
		}
		return p.domainStatus(dom, have)
	}
	if sameSpec {
		// Stopped (shut down by the guest, crashed, failed to start):
		// this Apply is the retry.
		have.Generation = a.Generation
		have.Restarts++
		return p.start(dom, spec, have)
	}
	// The domain changes: redefine it and start it afresh.
	p.log.Info("redefining domain", "id", a.ID, "generation", a.Generation)
	if active {
		if err := dom.Destroy(); err != nil && !hasCode(err, libvirt.ERR_OPERATION_INVALID) {
			return api.AssignmentStatus{}, fmt.Errorf("stop domain for its new definition: %w", err)
		}
	}
	meta.Restarts = have.Restarts
	if !active {
		meta.Restarts++ // it had stopped: this is also the retry
	}
	return p.define(c, spec, meta)
}

// imageFiles returns the image with its kernel, initrd and disk resolved
// to real files of Config.ImageDirs, never in the storage pool (other
// replicas' disks and volumes), the data or the console directory. A
// refusal says only which file, whatever the cause (which host files
// exist is none of a tenant's business); the log says why.
func (p *Provider) imageFiles(c *libvirt.Connect, img *api.ImageSpec) (api.ImageSpec, error) {
	if img == nil || (img.Kernel == "" && img.Disk == "") {
		return api.ImageSpec{}, badSpec("the image has neither a kernel nor a disk to boot")
	}
	out := *img
	dirs := p.dirs
	if pool, err := p.poolPath(c); err != nil {
		return api.ImageSpec{}, err
	} else if pool != "" {
		dirs = dirs.Deny(pool)
	}
	for _, f := range []struct {
		field string
		path  *string
	}{{"kernel", &out.Kernel}, {"initrd", &out.Initrd}, {"disk", &out.Disk}} {
		if *f.path == "" {
			continue
		}
		real, err := dirs.Resolve(*f.path)
		if err != nil {
			p.log.Warn("image file refused", "field", f.field, "path", *f.path, "err", err)
			return api.ImageSpec{}, badSpec("image %s %s", f.field, errImageRefused)
		}
		*f.path = real
	}
	return out, nil
}

// errImageRefused is all a tenant learns of an image file it may not
// have.
var errImageRefused = errors.New("not allowed or not found")

// resolve turns an assignment into a domain spec: volumes looked up in
// the pool, the root disk's overlay created, the bridge ensured. img is
// the assignment's image with its files resolved (imageFiles).
func (p *Provider) resolve(ctx context.Context, c *libvirt.Connect, a *api.Assignment, img api.ImageSpec, domainType string) (domainSpec, error) {
	cmdline := ""
	if img.Kernel != "" {
		var err error
		if cmdline, err = kernelCmdline(a); err != nil {
			return domainSpec{}, err
		}
	}
	spec := domainSpec{
		ID:        a.ID,
		Type:      domainType,
		VCPUs:     vcpus(a.Flavor),
		MemoryMiB: memoryMiB(a.Flavor),
		Kernel:    img.Kernel,
		Initrd:    img.Initrd,
		Cmdline:   cmdline,
		Console:   p.consolePath(a.ID),
	}
	if err := p.resolveDisks(c, a, &spec); err != nil {
		return domainSpec{}, err
	}
	if err := p.resolveDrive(ctx, a, &spec); err != nil {
		return domainSpec{}, err
	}
	if a.Network != nil {
		if err := p.useBridge(ctx, a.Network); err != nil {
			return domainSpec{}, err
		}
		spec.Bridge, spec.MTU = a.Network.Bridge, a.Network.MTU
	}
	return spec, nil
}

// resolveDisks adds to spec the disks of a: the root disk's overlay of
// the image's disk, then its volumes, all from the pool.
func (p *Provider) resolveDisks(c *libvirt.Connect, a *api.Assignment, spec *domainSpec) error {
	img := a.Image
	if img.Disk == "" && len(a.Volumes) == 0 {
		return nil
	}
	pool, err := p.ensurePool(c)
	if err != nil {
		return err
	}
	defer pool.Free()
	if img.Disk != "" {
		path, err := p.ensureOverlay(pool, a.ID, img.Disk, a.Flavor.DiskMiB)
		if err != nil {
			return err
		}
		spec.Disks = append(spec.Disks, disk{Path: path, Format: "qcow2", Target: diskTarget(0)})
	}
	// vda is the root disk's, with or without one, so that a volume keeps
	// its name whatever the image.
	for i, v := range a.Volumes {
		d, err := p.attachment(pool, v, diskTarget(i+1))
		if err != nil {
			return err
		}
		spec.Disks = append(spec.Disks, d)
	}
	return nil
}

// attachment resolves a volume a VM mounts to its file in the pool.
func (p *Provider) attachment(pool *libvirt.StoragePool, v api.VolumeAttachment, target string) (disk, error) {
	if v.VolumeID == "" {
		return disk{}, badSpec("volume %q has no volume id", v.Name)
	}
	vol, err := pool.LookupStorageVolByName(v.VolumeID)
	if hasCode(err, libvirt.ERR_NO_STORAGE_VOL) {
		return disk{}, badSpec("volume %s (%s) is not in pool %s yet", v.Name, v.VolumeID, p.cfg.Pool)
	}
	if err != nil {
		return disk{}, fmt.Errorf("volume %s: %w", v.VolumeID, err)
	}
	defer vol.Free()
	path, err := vol.GetPath()
	if err != nil {
		return disk{}, fmt.Errorf("volume %s: %w", v.VolumeID, err)
	}
	// The volume's own format wins over what the attachment says.
	format, err := volumeFormat(vol)
	if err != nil || format == "" {
		format = string(v.Format)
	}
	if format != string(api.VolumeQcow2) {
		format = string(api.VolumeRaw)
	}
	return disk{Path: path, Format: format, Target: target, ReadOnly: v.ReadOnly}, nil
}

// define defines the domain anew and starts it.
func (p *Provider) define(c *libvirt.Connect, spec domainSpec, meta replicaMeta) (api.AssignmentStatus, error) {
	x, err := spec.render(&meta)
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	dom, err := c.DomainDefineXML(x)
	if err != nil {
		if callFailed(err) {
			return api.AssignmentStatus{}, fmt.Errorf("define domain: %w", err)
		}
		return p.rejected(&api.Assignment{ID: meta.ID, Generation: meta.Generation}, fmt.Errorf("define domain: %s", message(err))), nil
	}
	defer dom.Free()
	return p.start(dom, spec, meta)
}

// start starts a defined domain, recording meta with the start time. A
// start that fails for the replica's own reasons is recorded in the metadata
// and reported as the phase error.
func (p *Provider) start(dom *libvirt.Domain, spec domainSpec, meta replicaMeta) (api.AssignmentStatus, error) {
	meta.Started, meta.Error = time.Now().UTC(), ""
	p.consoleMark(spec, meta)
	if err := p.writeMeta(dom, meta, false); err != nil {
		return api.AssignmentStatus{}, err
	}
	if err := p.writeRun(spec); err != nil {
		return api.AssignmentStatus{}, err
	}
	if err := dom.Create(); err != nil {
		if callFailed(err) {
			return api.AssignmentStatus{}, fmt.Errorf("start domain: %w", err)
		}
		meta.Error = "failed to start: " + message(err)
		p.log.Warn("domain did not start", "id", meta.ID, "err", meta.Error)
		if err := p.writeMeta(dom, meta, false); err != nil {
			p.log.Warn("record start failure", "id", meta.ID, "err", err)
		}
	}
	p.kick(meta.ID)
	return p.domainStatus(dom, meta)
}

// rejected is the status of an assignment the provider cannot run.
func (p *Provider) rejected(a *api.Assignment, err error) api.AssignmentStatus {
	p.log.Warn("assignment rejected", "id", a.ID, "err", err)
	st := api.AssignmentStatus{ID: a.ID, Node: p.node, ObservedGeneration: a.Generation, UpdatedAt: time.Now()}
	return p.observe(st, api.PhaseError, err.Error())
}

// ---- metadata ----

// readMeta reads the replica metadata of dom; ok is false when it has
// none or belongs to another node.
func (p *Provider) readMeta(dom *libvirt.Domain) (replicaMeta, bool) {
	s, err := dom.GetMetadata(libvirt.DOMAIN_METADATA_ELEMENT, metadataNS, libvirt.DOMAIN_AFFECT_CURRENT)
	if err != nil {
		return replicaMeta{}, false
	}
	m, err := parseMeta(s)
	if err != nil {
		p.log.Warn("unreadable domain metadata", "err", err)
		return replicaMeta{}, false
	}
	return m, m.Node == p.node && m.ID != ""
}

// writeMeta stores meta in dom's persistent definition and, when live is
// set and the domain runs, in its live one (which is what reads see).
func (p *Provider) writeMeta(dom *libvirt.Domain, meta replicaMeta, live bool) error {
	x, err := meta.marshal(false)
	if err != nil {
		return err
	}
	flags := libvirt.DOMAIN_AFFECT_CONFIG
	if live {
		if active, err := dom.IsActive(); err == nil && active {
			flags |= libvirt.DOMAIN_AFFECT_LIVE
		}
	}
	if err := dom.SetMetadata(libvirt.DOMAIN_METADATA_ELEMENT, x, metadataKey, metadataNS, flags); err != nil {
		return fmt.Errorf("write domain metadata: %w", err)
	}
	return nil
}

// ---- status ----

// Status implements provider.Provider.
func (p *Provider) Status(_ context.Context, id string) (api.AssignmentStatus, error) {
	c, err := p.connect()
	if err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("libvirt: status %s: %w", id, err)
	}
	st, err := p.status(c, id)
	if err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("libvirt: status %s: %w", id, err)
	}
	return st, nil
}

func (p *Provider) status(c *libvirt.Connect, id string) (api.AssignmentStatus, error) {
	dom, err := c.LookupDomainByName(domainName(id))
	switch {
	case err == nil:
		defer dom.Free()
		if meta, ok := p.readMeta(dom); ok {
			st, err := p.domainStatus(dom, meta)
			if !errors.Is(err, provider.ErrNotFound) {
				return st, err
			}
			// Undefined since the lookup: a Delete ran meanwhile.
		}
	case !hasCode(err, libvirt.ERR_NO_DOMAIN):
		return api.AssignmentStatus{}, err
	}
	rec, ok, err := p.readVolumeRecord(id)
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	if ok {
		return p.volumeStatus(c, rec), nil
	}
	return api.AssignmentStatus{}, fmt.Errorf("replica %q: %w", id, provider.ErrNotFound)
}

// domainStatus maps the domain's state to a phase: running is ready;
// shut off and crashed are errors whose reason is libvirt's reason.
//
// A domain undefined after dom was looked up (a Delete racing a Status or
// a watcher's look) is ErrNotFound, not a replica in error: reporting it
// as "domain state: Domain not found" would tell a watcher that a replica
// being deleted failed, just before telling it that it is gone.
func (p *Provider) domainStatus(dom *libvirt.Domain, meta replicaMeta) (api.AssignmentStatus, error) {
	st := api.AssignmentStatus{
		ID:                 meta.ID,
		Node:               p.node,
		ObservedGeneration: meta.Generation,
		Address:            meta.Address,
		Restarts:           meta.Restarts,
		UpdatedAt:          time.Now(),
	}
	if uuid, err := dom.GetUUIDString(); err == nil {
		st.ProviderID = uuid
	}
	state, reason, err := dom.GetState()
	if hasCode(err, libvirt.ERR_NO_DOMAIN) {
		return api.AssignmentStatus{}, fmt.Errorf("replica %q: domain undefined: %w", meta.ID, provider.ErrNotFound)
	}
	if err != nil {
		return p.observe(st, api.PhaseError, "domain state: "+message(err)), nil
	}
	switch state {
	case libvirt.DOMAIN_RUNNING, libvirt.DOMAIN_BLOCKED:
		if !p.guestUp(meta) {
			return p.observe(st, api.PhaseProvision, "booting: waiting for the guest to print "+strconv.Quote(meta.ReadyMarker)), nil
		}
		st.Phase, st.Since = api.PhaseReady, meta.Started
		p.forget(meta.ID)
		return st, nil
	case libvirt.DOMAIN_PAUSED:
		if libvirt.DomainPausedReason(reason) == libvirt.DOMAIN_PAUSED_STARTING_UP {
			return p.observe(st, api.PhaseProvision, "starting"), nil
		}
		return p.observe(st, api.PhaseError, "paused: "+pausedReason(libvirt.DomainPausedReason(reason))), nil
	case libvirt.DOMAIN_SHUTDOWN:
		return p.shuttingDown(st, meta), nil
	case libvirt.DOMAIN_SHUTOFF:
		why := shutoffReason(libvirt.DomainShutoffReason(reason))
		if meta.Error != "" {
			why = meta.Error
		}
		if code, ok := p.exited(meta); ok {
			st.ExitCode = &code
			why = fmt.Sprintf("exited with code %d", code)
		}
		return p.observe(st, api.PhaseError, why), nil
	case libvirt.DOMAIN_CRASHED:
		return p.observe(st, api.PhaseError, "crashed"), nil
	case libvirt.DOMAIN_PMSUSPENDED:
		return p.observe(st, api.PhaseError, "suspended by the guest"), nil
	default:
		return p.observe(st, api.PhaseProvision, "no state yet"), nil
	}
}

// observe sets a phase other than ready, keeping Since while the replica
// stays in it.
func (p *Provider) observe(st api.AssignmentStatus, phase api.Phase, reason string) api.AssignmentStatus {
	st.Phase, st.Reason = phase, reason
	if phase == api.PhaseReady && !st.Since.IsZero() {
		return st
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	prev, ok := p.errorSince[st.ID]
	if !ok || prev.phase != phase || prev.reason != reason {
		prev = phaseSince{phase: phase, reason: reason, since: time.Now()}
		p.errorSince[st.ID] = prev
	}
	st.Since = prev.since
	return st
}

func (p *Provider) forget(id string) {
	p.mu.Lock()
	delete(p.errorSince, id)
	p.mu.Unlock()
}

func shutoffReason(r libvirt.DomainShutoffReason) string {
	switch r {
	case libvirt.DOMAIN_SHUTOFF_SHUTDOWN:
		return "shut down by the guest"
	case libvirt.DOMAIN_SHUTOFF_DESTROYED:
		return "destroyed"
	case libvirt.DOMAIN_SHUTOFF_CRASHED:
		return "crashed"
	case libvirt.DOMAIN_SHUTOFF_MIGRATED:
		return "migrated away"
	case libvirt.DOMAIN_SHUTOFF_SAVED:
		return "saved"
	case libvirt.DOMAIN_SHUTOFF_FAILED:
		return "failed to start"
	case libvirt.DOMAIN_SHUTOFF_FROM_SNAPSHOT:
		return "reverted to a snapshot"
	case libvirt.DOMAIN_SHUTOFF_DAEMON:
		return "stopped while libvirtd was down"
	default:
		return "shut off"
	}
}

func pausedReason(r libvirt.DomainPausedReason) string {
	switch r {
	case libvirt.DOMAIN_PAUSED_USER:
		return "by a user"
	case libvirt.DOMAIN_PAUSED_IOERROR:
		return "disk I/O error"
	case libvirt.DOMAIN_PAUSED_CRASHED:
		return "crashed"
	case libvirt.DOMAIN_PAUSED_WATCHDOG:
		return "watchdog fired"
	case libvirt.DOMAIN_PAUSED_SHUTTING_DOWN:
		return "shutting down"
	default:
		return fmt.Sprintf("reason %d", r)
	}
}

// List implements provider.Provider: this node's strata- domains (by their
// metadata) and Volume replicas, sorted by id.
func (p *Provider) List(context.Context) ([]provider.Listed, error) {
	c, err := p.connect()
	if err != nil {
		return nil, fmt.Errorf("libvirt: list: %w", err)
	}
	doms, err := c.ListAllDomains(0)
	if err != nil {
		return nil, fmt.Errorf("libvirt: list domains: %w", err)
	}
	var out []provider.Listed
	for i := range doms {
		dom := &doms[i]
		name, err := dom.GetName()
		if _, ours := idFromDomainName(name); err == nil && ours {
			if meta, ok := p.readMeta(dom); ok {
				// A domain undefined since it was listed is left out.
				if st, err := p.domainStatus(dom, meta); err == nil {
					out = append(out, provider.Listed{
						ID:         meta.ID,
						Kind:       api.KindCompute,
						Generation: meta.Generation,
						Status:     st,
					})
				}
			}
		}
		dom.Free()
	}
	recs, err := p.volumeRecords()
	if err != nil {
		return nil, fmt.Errorf("libvirt: list: %w", err)
	}
	for _, r := range recs {
		out = append(out, provider.Listed{ID: r.ID, Kind: api.KindVolume, Generation: r.Generation, Status: p.volumeStatus(c, r)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// ---- delete ----

// Delete implements provider.Provider: a graceful shutdown (ACPI power
// button) for up to grace, then a forced one, then the domain is
// undefined with its managed save and NVRAM, and its root disk overlay
// and console log are removed. Volumes it mounts stay; a Volume replica's
// volume is removed.
func (p *Provider) Delete(ctx context.Context, a *api.Assignment, grace time.Duration) error {
	if a == nil || a.ID == "" {
		return api.Invalid("id", "is required")
	}
	unlock := p.replicas.lock(a.ID)
	defer unlock()
	c, err := p.connect()
	if err != nil {
		return fmt.Errorf("libvirt: delete %s: %w", a.ID, err)
	}
	if err := p.deleteDomain(ctx, c, a.ID, grace); err != nil {
		return fmt.Errorf("libvirt: delete %s: %w", a.ID, err)
	}
	_, isVolume, err := p.readVolumeRecord(a.ID)
	if err != nil {
		return fmt.Errorf("libvirt: delete %s: %w", a.ID, err)
	}
	if isVolume || a.Kind == api.KindVolume {
		if err := p.deleteVolumeReplica(c, a.ID); err != nil {
			return fmt.Errorf("libvirt: delete %s: %w", a.ID, err)
		}
	}
	p.forget(a.ID)
	p.kick(a.ID)
	return nil
}

func (p *Provider) deleteDomain(ctx context.Context, c *libvirt.Connect, id string, grace time.Duration) error {
	dom, err := c.LookupDomainByName(domainName(id))
	switch {
	case hasCode(err, libvirt.ERR_NO_DOMAIN):
		// Gone already; what it left behind may not be.
	case err != nil:
		return fmt.Errorf("look up domain: %w", err)
	default:
		defer dom.Free()
		if meta, ok := p.readMeta(dom); !ok && meta.Node != "" {
			return nil // another node's replica on a shared libvirtd
		}
		if err := p.stop(ctx, dom, id, grace); err != nil {
			return err
		}
		if err := undefine(dom); err != nil {
			return err
		}
	}
	if pool, err := p.ensurePool(c); err == nil {
		err := deleteVolume(pool, overlayName(id))
		pool.Free()
		if err != nil {
			return err
		}
	} else if !isTestURI(p.cfg.URI) {
		p.log.Warn("storage pool unavailable: root disk left behind", "id", id, "err", err)
	}
	p.removeQEMULog(domainName(id))
	if err := p.removeRun(id); err != nil {
		return err
	}
	return p.removeConsole(id)
}

// systemQEMULogDir is where the local system libvirtd logs each domain's
// QEMU command line and errors, in a file it never removes.
const systemQEMULogDir = "/var/log/libvirt/qemu"

// removeQEMULog removes libvirtd's log of a domain that is gone, which
// would otherwise stay forever, one per replica. Only the local system
// daemon's directory is known.
func (p *Provider) removeQEMULog(name string) {
	if p.cfg.URI != "qemu:///system" {
		return
	}
	path := filepath.Join(systemQEMULogDir, name+".log")
	matches, _ := filepath.Glob(path + ".*")
	for _, f := range append([]string{path}, matches...) {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			p.log.Debug("remove libvirt's domain log", "path", f, "err", err)
		}
	}
}

// stop shuts the domain down, gracefully for up to grace.
func (p *Provider) stop(ctx context.Context, dom *libvirt.Domain, id string, grace time.Duration) error {
	active, err := dom.IsActive()
	if err != nil || !active {
		return nil
	}
	if grace > 0 {
		if err := dom.Shutdown(); err != nil {
			p.log.Debug("graceful shutdown refused", "id", id, "err", err)
		} else if p.waitStopped(ctx, dom, grace) {
			return nil
		}
		p.log.Info("domain did not shut down in time: destroying it", "id", id, "grace", grace)
	}
	if err := dom.Destroy(); err != nil && !hasCode(err, libvirt.ERR_OPERATION_INVALID, libvirt.ERR_NO_DOMAIN) {
		return fmt.Errorf("destroy domain: %w", err)
	}
	return nil
}

// waitStopped polls until the domain is off, grace passes or ctx ends.
func (p *Provider) waitStopped(ctx context.Context, dom *libvirt.Domain, grace time.Duration) bool {
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if active, err := dom.IsActive(); err != nil || !active {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
}

// undefine removes the definition with everything libvirt keeps for it,
// asking for less where the driver refuses the flags (the test driver
// knows no NVRAM).
func undefine(dom *libvirt.Domain) error {
	all := libvirt.DOMAIN_UNDEFINE_MANAGED_SAVE | libvirt.DOMAIN_UNDEFINE_SNAPSHOTS_METADATA |
		libvirt.DOMAIN_UNDEFINE_NVRAM | libvirt.DOMAIN_UNDEFINE_CHECKPOINTS_METADATA
	err := dom.UndefineFlags(all)
	if hasCode(err, libvirt.ERR_INVALID_ARG, libvirt.ERR_NO_SUPPORT) {
		err = dom.UndefineFlags(libvirt.DOMAIN_UNDEFINE_MANAGED_SAVE | libvirt.DOMAIN_UNDEFINE_SNAPSHOTS_METADATA)
	}
	if err != nil && !hasCode(err, libvirt.ERR_NO_DOMAIN) {
		return fmt.Errorf("undefine domain: %w", err)
	}
	return nil
}

// removeConsole removes the console log and virtlogd's rotations of it.
func (p *Provider) removeConsole(id string) error {
	path := p.consolePath(id)
	matches, _ := filepath.Glob(path + ".*")
	for _, f := range append([]string{path}, matches...) {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove console log: %w", err)
		}
	}
	return nil
}
