package controller

import (
	"maps"
	"reflect"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// defaultStatusHold is how long the master may hold back a status write
// that only reports progress within a phase (Options.StatusHold).
const defaultStatusHold = time.Second

// holds coalesces a resource's status writes that report progress only:
// a region's replicas becoming ready one pass after another, a reason
// that names what the resource waits for. The first such change is held
// for the hold's time, and what the shares say then is written once;
// anything newer meanwhile supersedes it unwritten. A change of stage
// (phase, the generation or revision the master acts on once it acted on
// one, the rollout, a failover, the resource itself) is written at once
// and drops what was held: the phase a client waits for is never late.
// Passes run one at a time, so the map needs no lock.
type holds struct {
	hold time.Duration
	// mark has key looked at again once its hold has passed.
	mark  func(key string)
	since map[string]time.Time // key → when its held change was first seen
	clock func() time.Time
}

func newHolds(hold time.Duration, mark func(string)) *holds {
	return &holds{hold: hold, mark: mark, since: map[string]time.Time{}, clock: time.Now}
}

// reset forgets what was held (a new mastership: the first look at a
// resource starts its hold afresh).
func (h *holds) reset() { clear(h.since) }

// held reports whether the write of next over stored waits. nil next
// (nothing to write) or a change of stage releases the key.
func (h *holds) held(key string, stored, next *api.ResourceStatus) bool {
	if h.hold <= 0 || next == nil || !progressOnly(stored, next) {
		delete(h.since, key)
		return false
	}
	now := h.clock()
	since, ok := h.since[key]
	if !ok {
		h.since[key] = now
		time.AfterFunc(h.hold, func() { h.mark(key) })
		return true
	}
	if now.Sub(since) < h.hold {
		return true
	}
	delete(h.since, key)
	return false
}

// forget drops a resource gone from the store.
func (h *holds) forget(key string) { delete(h.since, key) }

// progressOnly reports whether next says no more than how far stored's
// stage got: the same resource, phase and desired replicas, the same
// rollout and failovers (which the master's next decisions read back
// from the status), and the generation and revision stored names (or the
// first the master observes: the API's status of a new resource names
// none). Counts, reasons, the regions' shares, backends and a Job's runs
// may differ.
func progressOnly(stored, next *api.ResourceStatus) bool {
	switch {
	case stored == nil, stored.UID != next.UID, stored.Phase != next.Phase, stored.Replicas != next.Replicas:
		return false
	case !sameObserved(stored.ObservedGeneration, next.ObservedGeneration), !sameObserved(stored.Revision, next.Revision):
		return false
	}
	return reflect.DeepEqual(stored.Rollout, next.Rollout) && maps.Equal(stored.Conditions, next.Conditions) &&
		maps.Equal(failovers(stored), failovers(next))
}

// sameObserved: the master observes the same number, or its first one.
func sameObserved(stored, next int64) bool { return stored == next || stored == 0 }

// failovers maps each region that stands in for another to that one.
func failovers(st *api.ResourceStatus) map[string]string {
	var out map[string]string
	for name, sh := range st.Regions {
		if sh.FailoverFrom != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[name] = sh.FailoverFrom
		}
	}
	return out
}
