package state

import (
	"reflect"
	"runtime"
	"sync"
	"weak"

	"github.com/stratahq/strata/internal/api"
)

// revisionKey names one revision of one resource.
type revisionKey struct {
	uid string
	rev int64
}

// shared hands out one copy of a value that many decoded objects repeat:
// the replicas of one revision of a resource each decode the same spec,
// and a region holding 20,000 replicas of 2,000 resources needs 2,000
// copies, not 20,000.
//
// A shared value is read by every holder at once, so nobody may change
// it: the caches' values are read-only already (see store.Cache), and a
// component that derives a changed spec copies it first (the controller's
// job attempts do). The table holds its values weakly: a value is dropped
// once no cached object refers to it any more.
type shared[V any] struct {
	mu sync.Mutex
	m  map[revisionKey]weak.Pointer[V]
}

// share returns the copy held for k when it equals v, else records v as
// k's copy and returns it. Equality is checked, not assumed: two objects
// that name one revision but differ (a stale or a hand-written record)
// each keep their own.
func (s *shared[V]) share(k revisionKey, v *V) *V {
	s.mu.Lock()
	defer s.mu.Unlock()
	if held := s.m[k].Value(); held != nil {
		if held == v || reflect.DeepEqual(held, v) {
			return held
		}
	}
	if s.m == nil {
		s.m = make(map[revisionKey]weak.Pointer[V])
	}
	s.m[k] = weak.Make(v)
	runtime.AddCleanup(v, s.forget, k)
	return v
}

// forget drops k's entry once the copy it names is gone (a later copy
// recorded for k keeps it).
func (s *shared[V]) forget(k revisionKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.m[k]; ok && w.Value() == nil {
		delete(s.m, k)
	}
}

// len returns the number of entries held.
func (s *shared[V]) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// computeSpecs are the compute specs of the region's replicas and
// placements, one per revision of a resource (see compactAssignment),
// and images their resolved images.
var (
	computeSpecs shared[api.ComputeSpec]
	images       shared[api.ImageSpec]
)

// flavors are the flavors the region's placements carry, one per
// version of a flavor (its name and resource version for revisionKey).
var flavors shared[api.Flavor]
