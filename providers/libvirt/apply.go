package libvirt

import (
	"context"
	"errors"
	"fmt"

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
	c, err := p.conn.connect()
	if err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("libvirt: apply %s: %w", a.ID, err)
	}
	var st api.AssignmentStatus
	switch a.Kind {
	case api.KindVolume:
		st, err = p.volumes.apply(c, a)
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

// ApplyConfig is Apply with the data of the Configs and Secrets a's spec
// names: files and variables go to the guest through its config drive.
// A pull secret cannot: a VM pulls no image.
func (p *Provider) ApplyConfig(ctx context.Context, a *api.Assignment, d *provider.ConfigData) (api.AssignmentStatus, error) {
	return p.Apply(context.WithValue(ctx, configDataKey{}, d), a)
}

// applyDomain resolves a Compute replica's spec from every service (its
// image's files, the domain type, its disks, drive and bridge), then has
// the domains make it run.
func (p *Provider) applyDomain(ctx context.Context, c *libvirt.Connect, a *api.Assignment) (api.AssignmentStatus, error) {
	// The image's files are checked first: even the KVM probe boots the
	// kernel.
	img, err := p.images.files(c, a.Image)
	if errors.Is(err, ErrBadSpec) {
		return p.phases.rejected(a, err), nil
	}
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	accel, err := p.accel.domainType(ctx, img.Kernel)
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	spec, err := p.resolve(ctx, c, a, img, accel.Type)
	if errors.Is(err, ErrBadSpec) {
		return p.phases.rejected(a, err), nil
	}
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	return p.domains.apply(c, a, spec)
}

// resolve turns an assignment into a domain spec: volumes looked up in
// the pool, the root disk's overlay created, the bridge ensured. img is
// the assignment's image with its files resolved (images.files).
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
		Console:   p.console.path(a.ID),
	}
	if c := a.Spec.Compute; c != nil {
		spec.GuestAgent = c.Probes.Uses(func(pr *api.Probe) bool { return pr.GuestAgent != nil })
	}
	if err := p.resolveDisks(c, a, &spec); err != nil {
		return domainSpec{}, err
	}
	if err := p.drives.resolve(ctx, a, &spec); err != nil {
		return domainSpec{}, err
	}
	if a.Network != nil {
		if err := p.network.use(ctx, a.Network); err != nil {
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
	pool, err := p.pool.ensure(c)
	if err != nil {
		return err
	}
	defer pool.Free()
	if img.Disk != "" {
		path, err := p.images.rootDisk(pool, a.ID, img.Disk, a.Flavor.DiskMiB)
		if err != nil {
			return err
		}
		spec.Disks = append(spec.Disks, disk{Path: path, Format: "qcow2", Target: diskTarget(0)})
	}
	// vda is the root disk's, with or without one, so that a volume keeps
	// its name whatever the image.
	for i, v := range a.Volumes {
		d, err := p.pool.attachment(pool, v, diskTarget(i+1))
		if err != nil {
			return err
		}
		spec.Disks = append(spec.Disks, d)
	}
	return nil
}
