package libvirt

import (
	"context"
	"fmt"
	"time"

	"libvirt.org/go/libvirt"

	"github.com/stratahq/strata/internal/api"
)

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
	c, err := p.conn.connect()
	if err != nil {
		return fmt.Errorf("libvirt: delete %s: %w", a.ID, err)
	}
	if err := p.deleteDomain(ctx, c, a.ID, grace); err != nil {
		return fmt.Errorf("libvirt: delete %s: %w", a.ID, err)
	}
	_, isVolume, err := p.volumes.record(a.ID)
	if err != nil {
		return fmt.Errorf("libvirt: delete %s: %w", a.ID, err)
	}
	if isVolume || a.Kind == api.KindVolume {
		if err := p.volumes.delete(c, a.ID); err != nil {
			return fmt.Errorf("libvirt: delete %s: %w", a.ID, err)
		}
	}
	p.phases.forget(a.ID)
	p.hub.kick(a.ID)
	return nil
}

// deleteDomain destroys the domain of replica id, then what it leaves
// behind: its root disk, libvirtd's log of it, its config drive and its
// console log.
func (p *Provider) deleteDomain(ctx context.Context, c *libvirt.Connect, id string, grace time.Duration) error {
	ours, err := p.domains.destroy(ctx, c, id, grace)
	if err != nil || !ours {
		return err
	}
	if pool, err := p.pool.ensure(c); err == nil {
		err := p.images.removeRootDisk(pool, id)
		pool.Free()
		if err != nil {
			return err
		}
	} else if !isTestURI(p.cfg.URI) {
		p.log.Warn("storage pool unavailable: root disk left behind", "id", id, "err", err)
	}
	p.console.removeQEMULog(domainName(id))
	if err := p.drives.remove(id); err != nil {
		return err
	}
	return p.console.remove(id)
}
