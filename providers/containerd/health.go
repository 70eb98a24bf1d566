package containerd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// healthCall bounds the containerd call Health makes.
const healthCall = 5 * time.Second

// Free space below either threshold turns CSI to Warning.
const (
	minFreeFraction = 0.05
	minFreeBytes    = 1 << 30
)

// healthMark remembers when a condition took its current status, so
// that Since means "since it is so", not "since asked".
type healthMark struct {
	status api.ConditionStatus
	since  time.Time
}

// Health implements provider.Provider with the conditions CRI
// (containerd answers), CNI (the plugins are there), CSI (volumes can be
// written, with room) and provider/<name> (the supervisor follows
// containerd's events).
func (p *Provider) Health(ctx context.Context) ([]api.Condition, error) {
	cs := []api.Condition{p.criCondition(ctx), p.cniCondition(), p.csiCondition(), p.selfCondition()}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for i := range cs {
		m, ok := p.health[cs[i].Type]
		if !ok || m.status != cs[i].Status {
			m = healthMark{status: cs[i].Status, since: now}
			p.health[cs[i].Type] = m
		}
		cs[i].Since = m.since
	}
	return cs, nil
}

func (p *Provider) criCondition(ctx context.Context) api.Condition {
	ctx, cancel := context.WithTimeout(p.nsCtx(ctx), healthCall)
	defer cancel()
	v, err := p.client.Version(ctx)
	if err != nil {
		return api.Condition{Type: api.ConditionCRI, Status: api.ConditionError, Reason: "ContainerdUnreachable",
			Message: fmt.Sprintf("containerd at %s: %v", p.cfg.Address, err)}
	}
	return api.Condition{Type: api.ConditionCRI, Status: api.ConditionReady, Reason: "ContainerdReady",
		Message: fmt.Sprintf("containerd %s at %s, namespace %s, snapshotter %s", v.Version, p.cfg.Address, p.cfg.Namespace, p.cfg.Snapshotter)}
}

// cniCondition checks the plugins the generated conflists use: bridge,
// static and loopback are needed by every replica (Error when missing),
// portmap only by host ports and iptables by the bridge's masquerading
// (Warning).
func (p *Provider) cniCondition() api.Condition {
	var missing, optional []string
	for _, name := range []string{"bridge", "static", "loopback"} {
		if !isExecutable(filepath.Join(p.cfg.CNIBinDir, name)) {
			missing = append(missing, name)
		}
	}
	if !isExecutable(filepath.Join(p.cfg.CNIBinDir, "portmap")) {
		optional = append(optional, "portmap (host ports)")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		optional = append(optional, "iptables (masquerading, host ports)")
	}
	switch {
	case len(missing) > 0:
		return api.Condition{Type: api.ConditionCNI, Status: api.ConditionError, Reason: "PluginsMissing",
			Message: fmt.Sprintf("CNI plugins missing in %s: %s (install containernetworking-plugins)", p.cfg.CNIBinDir, strings.Join(missing, ", "))}
	case len(optional) > 0:
		return api.Condition{Type: api.ConditionCNI, Status: api.ConditionWarning, Reason: "PluginsMissing",
			Message: "missing: " + strings.Join(optional, ", ")}
	}
	return api.Condition{Type: api.ConditionCNI, Status: api.ConditionReady, Reason: "PluginsPresent",
		Message: fmt.Sprintf("bridge, static, loopback and portmap in %s (cniVersion %s)", p.cfg.CNIBinDir, cniVersion)}
}

func (p *Provider) csiCondition() api.Condition {
	root := p.cfg.VolumeRoot
	f, err := os.CreateTemp(root, ".health-*")
	if err != nil {
		return api.Condition{Type: api.ConditionCSI, Status: api.ConditionError, Reason: "VolumeRootNotWritable",
			Message: fmt.Sprintf("volume root %s: %v", root, err)}
	}
	f.Close()
	os.Remove(f.Name())
	mode := p.quotaMode()
	free, total, err := statfsFree(root)
	if err != nil {
		return api.Condition{Type: api.ConditionCSI, Status: api.ConditionWarning, Reason: "FreeSpaceUnknown",
			Message: fmt.Sprintf("volume root %s: %v; %s", root, err, mode)}
	}
	msg := fmt.Sprintf("volume root %s: %s free of %s; %s", root, mib(free), mib(total), mode)
	if lowSpace(free, total) {
		return api.Condition{Type: api.ConditionCSI, Status: api.ConditionWarning, Reason: "LowSpace", Message: msg}
	}
	return api.Condition{Type: api.ConditionCSI, Status: api.ConditionReady, Reason: "VolumesWritable", Message: msg}
}

func (p *Provider) selfCondition() api.Condition {
	p.mu.Lock()
	up := p.eventsUp
	p.mu.Unlock()
	c := api.Condition{Type: provider.ConditionType(p.name), Status: api.ConditionReady, Reason: "Supervising",
		Message: "following containerd task events in namespace " + p.cfg.Namespace}
	if !up {
		c.Status, c.Reason = api.ConditionWarning, "EventsDown"
		c.Message = "not subscribed to containerd events: exits are seen by polls only, restarts wait for the subscription"
	}
	return c
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// lowSpace says whether a filesystem with free of total bytes is short
// of room for volumes: under minFreeFraction or minFreeBytes.
func lowSpace(free, total uint64) bool {
	return total > 0 && (float64(free) < minFreeFraction*float64(total) || free < minFreeBytes)
}

func mib(b uint64) string { return fmt.Sprintf("%d MiB", b>>20) }
