package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	globalstate "github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/store"
	regionstate "github.com/stratahq/strata/region/state"
)

// b2Steps times B2's creates through the tiers from outside them: a watch
// of each tier's etcd notes when each write of a B2 resource is seen
// committed, so that B2's row says where create → ready goes, step by
// step, and a change can be aimed at the slow step. The watches see a
// commit a little after it happened (on a loaded machine, a few ms); a
// step's figure is the difference of two such sightings.
type b2Steps struct {
	mu      sync.Mutex
	at      map[string]map[string]time.Time // resource → step → first seen
	fake    map[string]time.Duration        // resource → its replica's fake start time
	replica map[string]string               // assignment id → resource
	stop    func()
}

// The steps of one create, in order; each is first seen at the step's
// time (b2Step* from the etcd watches, the rest from the poller).
const (
	b2Scheduled  = "scheduled"
	b2Posted     = "posted"
	b2Placed     = "placed"
	b2Assigned   = "assigned"
	b2Reported   = "reported"
	b2Shared     = "shared"
	b2GlobalDone = "global"
	b2Seen       = "seen"
)

// b2StepNames names the step that ends at each of the steps above.
var b2StepNames = []struct{ from, to, what string }{
	{b2Scheduled, b2Posted, "POST answered"},
	{b2Posted, b2Placed, "master → placement written by the region"},
	{b2Placed, b2Assigned, "region controller → assignment"},
	{b2Assigned, b2Reported, "agent (watch, start less the fake's time, report) → status in the region"},
	{b2Reported, b2Shared, "region controller → share"},
	{b2Shared, b2GlobalDone, "share to the master → status in the global tier"},
	{b2GlobalDone, b2Seen, "poller sees ready"},
}

// watchB2Steps starts watching both tiers' etcd clusters for writes of
// resources named prefix*.
func (c *cluster) watchB2Steps(ctx context.Context, prefix string) (*b2Steps, error) {
	s := &b2Steps{at: map[string]map[string]time.Time{}, fake: map[string]time.Duration{}, replica: map[string]string{}}
	stop, err := c.watchEtcd(ctx, func(_ string, resp clientv3.WatchResponse, now time.Time) {
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypePut {
				s.saw(prefix, string(ev.Kv.Key), ev.Kv.Value, now)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	s.stop = stop
	return s, nil
}

// saw notes the write of key (value) seen at now, if it is a step of a
// resource named prefix*.
func (s *b2Steps) saw(prefix, key string, value []byte, now time.Time) {
	kind, name := stepKey(key)
	v := stepFields(kind, value)
	s.mu.Lock()
	defer s.mu.Unlock()
	step := ""
	switch kind {
	case "placements":
		step = b2Placed
	case "assignments":
		s.replica[name] = v.Resource
		name, step = v.Resource, b2Assigned
	case "astatus":
		name, step = s.replica[name], ready(v.Phase, b2Reported)
	case "shares":
		step = ready(v.Phase, b2Shared)
	case "status":
		step = ready(v.Phase, b2GlobalDone)
	}
	if step != "" && strings.HasPrefix(name, prefix) {
		s.noteLocked(name, step, now)
	}
}

// stepFields decodes what saw needs of a write, with the codec its tier
// stores it with.
func stepFields(kind string, value []byte) (v struct{ Resource, Phase string }) {
	switch kind {
	case "assignments":
		v.Resource = decodeWith(b2Region.Assignments.Codec(), value).Resource
	case "astatus":
		v.Phase = string(decodeWith(b2Region.Statuses.Codec(), value).Phase)
	case "shares":
		v.Phase = string(decodeWith(b2Region.Shares.Codec(), value).Phase)
	case "status":
		v.Phase = string(decodeWith(b2Global.Statuses.Codec(), value).Phase)
	}
	return v
}

// The tiers' collections, for their codecs.
var (
	b2Region = regionstate.New(nil)
	b2Global = globalstate.New(nil)
)

// decodeWith decodes b, or gives the zero value.
func decodeWith[T any](c store.Codec[T], b []byte) T {
	var v T
	_ = c.Unmarshal(b, &v)
	return v
}

func ready(phase, step string) string {
	if phase == "ready" {
		return step
	}
	return ""
}

// stepKey is the collection and the object name (the tenant left out) of
// a tier's etcd key: /strata/region/shares/default/lat-0-1 is shares,
// lat-0-1.
func stepKey(key string) (kind, name string) {
	parts := strings.Split(strings.Trim(key, "/"), "/")
	if len(parts) < 4 {
		return "", ""
	}
	return parts[2], parts[len(parts)-1]
}

func (s *b2Steps) noteLocked(name, step string, at time.Time) {
	m := s.at[name]
	if m == nil {
		m = map[string]time.Time{}
		s.at[name] = m
	}
	if _, ok := m[step]; !ok {
		m[step] = at
	}
}

// sample notes the poller's times of a create and its replica's fake
// start time.
func (s *b2Steps) sample(name string, scheduled, posted, seen time.Time, fake time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noteLocked(name, b2Scheduled, scheduled)
	s.noteLocked(name, b2Posted, posted)
	s.noteLocked(name, b2Seen, seen)
	s.fake[name] = fake
}

// summary is each step's p50 / p99 over the creates every step of which
// was seen.
func (s *b2Steps) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	steps := make([]latencies, len(b2StepNames))
	complete := 0
	for name, m := range s.at {
		if !hasAll(m) {
			continue
		}
		complete++
		for i, st := range b2StepNames {
			d := m[st.to].Sub(m[st.from])
			if st.to == b2Reported {
				d -= s.fake[name]
			}
			steps[i].record(max(d, 0), nil)
		}
	}
	if complete == 0 {
		return "no create was seen through every step"
	}
	parts := make([]string, len(steps))
	for i := range steps {
		parts[i] = fmt.Sprintf("%s %s / %s", b2StepNames[i].what, ms(steps[i].p(50)), ms(steps[i].p(99)))
	}
	return fmt.Sprintf("steps (p50 / p99 of %d creates, from watches of both tiers' etcd): %s", complete, strings.Join(parts, "; "))
}

func hasAll(m map[string]time.Time) bool {
	for _, st := range b2StepNames {
		if _, ok := m[st.to]; !ok {
			return false
		}
	}
	_, ok := m[b2Scheduled]
	return ok
}
