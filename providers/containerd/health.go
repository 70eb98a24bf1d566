package containerd

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/api"
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
	cs := []api.Condition{p.criCondition(ctx), p.network.condition(), p.volumes.condition(), p.sup.condition(p.name)}
	p.conditions.stamp(cs, time.Now())
	return cs, nil
}

// conditionMarks owns when each condition took its current status.
type conditionMarks struct {
	mu    sync.Mutex
	marks map[string]healthMark
}

// stamp sets the Since of every condition of cs: now for one whose
// status changed (or is new), else when it last changed.
func (cm *conditionMarks) stamp(cs []api.Condition, now time.Time) {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	if cm.marks == nil {
		cm.marks = map[string]healthMark{}
	}
	for i := range cs {
		m, ok := cm.marks[cs[i].Type]
		if !ok || m.status != cs[i].Status {
			m = healthMark{status: cs[i].Status, since: now}
			cm.marks[cs[i].Type] = m
		}
		cs[i].Since = m.since
	}
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
