package libvirt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"libvirt.org/go/libvirt"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// domains owns the domains of Compute replicas: defining one from its
// spec, starting it, redefining it when the spec changes, stopping and
// undefining it, and the replica's record in the domain's metadata,
// which is all that is known of it after a restart. It is given the
// spec, resolved (apply.go), and the connection, by the Provider.
type domains struct {
	node    string
	log     *slog.Logger
	console *console
	drives  *drives
	ready   *readiness
	phases  *phases
	// kick tells the watches to look at a replica.
	kick func(id string)
}

// apply makes a's domain run spec: defined and started when there is
// none, else converged to it (converge).
func (d *domains) apply(c *libvirt.Connect, a *api.Assignment, spec domainSpec) (api.AssignmentStatus, error) {
	meta, err := d.metaOf(a, spec)
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	dom, err := c.LookupDomainByName(domainName(a.ID))
	if hasCode(err, libvirt.ERR_NO_DOMAIN) {
		return d.define(c, spec, meta)
	}
	if err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("look up domain: %w", err)
	}
	defer dom.Free()
	have, ok := d.readMeta(dom)
	if !ok {
		return d.phases.rejected(a, fmt.Errorf("domain %s exists but is not this node's replica (node %q)", domainName(a.ID), have.Node)), nil
	}
	if a.Generation < have.Generation {
		return d.status(dom, have) // a stale Apply
	}
	return d.converge(c, dom, a, spec, meta, have)
}

// metaOf is what the agent records on the domain of a: its generation
// and the digest of its definition, which tells a changed domain from a
// retry.
func (d *domains) metaOf(a *api.Assignment, spec domainSpec) (replicaMeta, error) {
	bare, err := spec.render(nil)
	if err != nil {
		return replicaMeta{}, err
	}
	meta := replicaMeta{
		ID:         a.ID,
		Node:       d.node,
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
func (d *domains) converge(c *libvirt.Connect, dom *libvirt.Domain, a *api.Assignment, spec domainSpec, meta, have replicaMeta) (api.AssignmentStatus, error) {
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
			if err := d.writeMeta(dom, have, true); err != nil {
				return api.AssignmentStatus{}, err
			}
			d.kick(a.ID)
		}
		return d.status(dom, have)
	}
	if sameSpec {
		// Stopped (shut down by the guest, crashed, failed to start):
		// this Apply is the retry.
		have.Generation = a.Generation
		have.Restarts++
		return d.start(dom, spec, have)
	}
	// The domain changes: redefine it and start it afresh.
	d.log.Info("redefining domain", "id", a.ID, "generation", a.Generation)
	if active {
		if err := dom.Destroy(); err != nil && !hasCode(err, libvirt.ERR_OPERATION_INVALID) {
			return api.AssignmentStatus{}, fmt.Errorf("stop domain for its new definition: %w", err)
		}
	}
	meta.Restarts = have.Restarts
	if !active {
		meta.Restarts++ // it had stopped: this is also the retry
	}
	return d.define(c, spec, meta)
}

// define defines the domain anew and starts it.
func (d *domains) define(c *libvirt.Connect, spec domainSpec, meta replicaMeta) (api.AssignmentStatus, error) {
	x, err := spec.render(&meta)
	if err != nil {
		return api.AssignmentStatus{}, err
	}
	dom, err := c.DomainDefineXML(x)
	if err != nil {
		if callFailed(err) {
			return api.AssignmentStatus{}, fmt.Errorf("define domain: %w", err)
		}
		return d.phases.rejected(&api.Assignment{ID: meta.ID, Generation: meta.Generation}, fmt.Errorf("define domain: %s", message(err))), nil
	}
	defer dom.Free()
	return d.start(dom, spec, meta)
}

// start starts a defined domain, recording meta with the start time. A
// start that fails for the replica's own reasons is recorded in the metadata
// and reported as the phase error.
func (d *domains) start(dom *libvirt.Domain, spec domainSpec, meta replicaMeta) (api.AssignmentStatus, error) {
	meta.Started, meta.Error = time.Now().UTC(), ""
	d.console.mark(spec, meta)
	if err := d.writeMeta(dom, meta, false); err != nil {
		return api.AssignmentStatus{}, err
	}
	if err := d.drives.write(spec); err != nil {
		return api.AssignmentStatus{}, err
	}
	if err := dom.Create(); err != nil {
		if callFailed(err) {
			return api.AssignmentStatus{}, fmt.Errorf("start domain: %w", err)
		}
		meta.Error = "failed to start: " + message(err)
		d.log.Warn("domain did not start", "id", meta.ID, "err", meta.Error)
		if err := d.writeMeta(dom, meta, false); err != nil {
			d.log.Warn("record start failure", "id", meta.ID, "err", err)
		}
	}
	d.kick(meta.ID)
	return d.status(dom, meta)
}

// ---- metadata ----

// readMeta reads the replica metadata of dom; ok is false when it has
// none or belongs to another node.
func (d *domains) readMeta(dom *libvirt.Domain) (replicaMeta, bool) {
	s, err := dom.GetMetadata(libvirt.DOMAIN_METADATA_ELEMENT, metadataNS, libvirt.DOMAIN_AFFECT_CURRENT)
	if err != nil {
		return replicaMeta{}, false
	}
	m, err := parseMeta(s)
	if err != nil {
		d.log.Warn("unreadable domain metadata", "err", err)
		return replicaMeta{}, false
	}
	return m, m.Node == d.node && m.ID != ""
}

// writeMeta stores meta in dom's persistent definition and, when live is
// set and the domain runs, in its live one (which is what reads see).
func (d *domains) writeMeta(dom *libvirt.Domain, meta replicaMeta, live bool) error {
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

// ---- reading ----

// lookup is the status of replica id's domain; found is false when it
// has none (or another node's).
func (d *domains) lookup(c *libvirt.Connect, id string) (st api.AssignmentStatus, found bool, err error) {
	dom, err := c.LookupDomainByName(domainName(id))
	switch {
	case err == nil:
		defer dom.Free()
		if meta, ok := d.readMeta(dom); ok {
			st, err := d.status(dom, meta)
			if !errors.Is(err, provider.ErrNotFound) {
				return st, true, err
			}
			// Undefined since the lookup: a Delete ran meanwhile.
		}
	case !hasCode(err, libvirt.ERR_NO_DOMAIN):
		return api.AssignmentStatus{}, false, err
	}
	return api.AssignmentStatus{}, false, nil
}

// list is this node's strata- domains, by their metadata.
func (d *domains) list(c *libvirt.Connect) ([]provider.Listed, error) {
	doms, err := c.ListAllDomains(0)
	if err != nil {
		return nil, fmt.Errorf("list domains: %w", err)
	}
	var out []provider.Listed
	for i := range doms {
		dom := &doms[i]
		name, err := dom.GetName()
		if _, ours := idFromDomainName(name); err == nil && ours {
			if meta, ok := d.readMeta(dom); ok {
				// A domain undefined since it was listed is left out.
				if st, err := d.status(dom, meta); err == nil {
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
	return out, nil
}

// ---- removal ----

// destroy stops the domain of replica id (gracefully for up to grace)
// and undefines it; ours is false when the domain is another node's
// replica on a shared libvirtd, which is left alone with what it owns.
// A domain gone already is ours: what it left behind may not be gone.
func (d *domains) destroy(ctx context.Context, c *libvirt.Connect, id string, grace time.Duration) (ours bool, err error) {
	dom, err := c.LookupDomainByName(domainName(id))
	switch {
	case hasCode(err, libvirt.ERR_NO_DOMAIN):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("look up domain: %w", err)
	}
	defer dom.Free()
	if meta, ok := d.readMeta(dom); !ok && meta.Node != "" {
		return false, nil
	}
	if err := d.stop(ctx, dom, id, grace); err != nil {
		return false, err
	}
	if err := undefine(dom); err != nil {
		return false, err
	}
	return true, nil
}

// stop shuts the domain down, gracefully for up to grace.
func (d *domains) stop(ctx context.Context, dom *libvirt.Domain, id string, grace time.Duration) error {
	active, err := dom.IsActive()
	if err != nil || !active {
		return nil
	}
	if grace > 0 {
		if err := dom.Shutdown(); err != nil {
			d.log.Debug("graceful shutdown refused", "id", id, "err", err)
		} else if d.waitStopped(ctx, dom, grace) {
			return nil
		}
		d.log.Info("domain did not shut down in time: destroying it", "id", id, "grace", grace)
	}
	if err := dom.Destroy(); err != nil && !hasCode(err, libvirt.ERR_OPERATION_INVALID, libvirt.ERR_NO_DOMAIN) {
		return fmt.Errorf("destroy domain: %w", err)
	}
	return nil
}

// waitStopped polls until the domain is off, grace passes or ctx ends.
func (d *domains) waitStopped(ctx context.Context, dom *libvirt.Domain, grace time.Duration) bool {
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
