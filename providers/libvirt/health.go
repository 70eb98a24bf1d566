package libvirt

import (
	"context"
	"fmt"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// Health implements provider.Provider: provider/<name> says whether
// libvirtd answers, the pool is active and which domain type VMs run
// with; CNI says whether the bridges VMs are attached to are up.
func (p *Provider) Health(context.Context) ([]api.Condition, error) {
	cond := api.Condition{Type: provider.ConditionType(p.name), Status: api.ConditionReady}
	c, err := p.conn.connect()
	if err != nil {
		cond.Status, cond.Reason, cond.Message = api.ConditionError, "LibvirtdUnreachable", err.Error()
		return []api.Condition{cond}, nil
	}
	// Ensured, not only looked up: a pool gone or stopped (a libvirtd
	// restarted without autostart) comes back, and only what could not be
	// mended is reported.
	pool, err := p.pool.ensure(c)
	if err != nil {
		cond.Status, cond.Reason, cond.Message = api.ConditionError, "PoolUnavailable", err.Error()
		return []api.Condition{cond}, nil
	}
	pool.Free()
	switch v, ok := p.accel.current(); {
	case !ok:
		cond.Message = "deciding the domain type (trying KVM)"
	case v.fellBack:
		cond.Status, cond.Reason = api.ConditionWarning, "KVMUnusable"
		cond.Message = "KVM unusable, running VMs under TCG: " + v.Reason
	default:
		cond.Message = fmt.Sprintf("domain type %s: %s", v.Type, v.Reason)
	}
	conds := []api.Condition{cond}
	if cni, ok := p.network.condition(); ok {
		conds = append(conds, cni)
	}
	return conds, nil
}
