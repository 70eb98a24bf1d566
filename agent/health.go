package agent

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// health owns the node's conditions: the latest the providers' Health
// calls returned, refreshed every status interval, and the data plane's.
// Heartbeats and the Status probe carry them; they do not ask for them.
type health struct {
	provs    *providerSet
	interval time.Duration
	t        *timings
	clock    func() time.Time

	mu         sync.Mutex
	conditions []api.Condition
	// netCond is the data plane's condition (nil: no data plane).
	netCond *api.Condition
}

// current is the latest conditions.
func (h *health) current() []api.Condition {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conditions
}

// run refreshes the providers' conditions every status interval:
// heartbeats carry the latest, they do not ask for it.
func (h *health) run(ctx context.Context) {
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.refresh(ctx)
		}
	}
}

// refresh asks every provider for its conditions. A failed Health
// call is itself a condition, provider/<name> in Error.
func (h *health) refresh(ctx context.Context) {
	var conds []api.Condition
	for _, e := range h.provs.list {
		hctx, cancel := context.WithTimeout(ctx, h.t.providerCall)
		cs, err := e.p.Health(hctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			conds = append(conds, api.Condition{
				Type:    "provider/" + e.name,
				Status:  api.ConditionError,
				Reason:  "HealthFailed",
				Message: err.Error(),
			})
			continue
		}
		conds = append(conds, cs...)
	}
	now := h.clock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.netCond != nil {
		conds = append(conds, *h.netCond)
	}
	h.conditions = mergeConditions(h.conditions, conds, now)
}

// mergeConditions keeps one condition per type (the worst, when two
// providers report the same type), in type order, and keeps Since from
// prev while a condition's status is unchanged.
func mergeConditions(prev, next []api.Condition, now time.Time) []api.Condition {
	byType := map[string]api.Condition{}
	for _, c := range next {
		if cur, ok := byType[c.Type]; ok && severity(cur.Status) >= severity(c.Status) {
			continue
		}
		byType[c.Type] = c
	}
	out := make([]api.Condition, 0, len(byType))
	for _, c := range byType {
		since := now
		if i := slices.IndexFunc(prev, func(p api.Condition) bool { return p.Type == c.Type }); i >= 0 && prev[i].Status == c.Status {
			since = prev[i].Since
		} else if !c.Since.IsZero() {
			since = c.Since
		}
		c.Since = since
		out = append(out, c)
	}
	slices.SortFunc(out, func(x, y api.Condition) int {
		switch {
		case x.Type < y.Type:
			return -1
		case x.Type > y.Type:
			return 1
		}
		return 0
	})
	return out
}

func severity(s api.ConditionStatus) int {
	switch s {
	case api.ConditionError:
		return 2
	case api.ConditionWarning:
		return 1
	}
	return 0
}

// setNetCondition records the data plane's state as the Network condition,
// at once (the next health refresh keeps it).
func (h *health) setNetCondition(err error) {
	c := api.Condition{Type: api.ConditionNetwork, Status: api.ConditionReady, Message: "host programmed for the region network"}
	if err != nil {
		c.Status, c.Reason, c.Message = api.ConditionError, "DataPlaneFailed", err.Error()
	}
	now := h.clock()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.netCond = &c
	h.conditions = mergeConditions(h.conditions, replaceCondition(h.conditions, c), now)
}

// replaceCondition returns cs with the condition of c's type replaced by c.
func replaceCondition(cs []api.Condition, c api.Condition) []api.Condition {
	out := make([]api.Condition, 0, len(cs)+1)
	for _, x := range cs {
		if x.Type != c.Type {
			out = append(out, x)
		}
	}
	return append(out, c)
}
