package agent

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// memProvider is an in-memory provider that counts every call.
type memProvider struct {
	name  string
	kinds []api.ProviderKind

	mu       sync.Mutex
	replicas map[string]*memReplica
	// applyErr fails Apply calls (the call, not the replica).
	applyErr  error
	health    []api.Condition
	healthErr error
	// provisionPolls > 0: Apply answers provision, and the replica is
	// ready after that many Status calls.
	provisionPolls int
	// applyGate, when set, holds every Apply until it is closed.
	applyGate chan struct{}
	// diesAfterApply, when set, is the reason of a replica that dies
	// right after Apply answered ready: Status says error.
	diesAfterApply string
	calls          map[string]int
	applyTimes     []time.Time
	graces         map[string]time.Duration
	closed         bool
}

type memReplica struct {
	kind  api.ResourceKind
	gen   int64
	st    api.AssignmentStatus
	polls int
}

var _ provider.Provider = (*memProvider)(nil)

func newMemProvider(name string, kinds ...api.ProviderKind) *memProvider {
	if len(kinds) == 0 {
		kinds = []api.ProviderKind{api.ProviderContainer}
	}
	return &memProvider{
		name:     name,
		kinds:    kinds,
		replicas: map[string]*memReplica{},
		calls:    map[string]int{},
		graces:   map[string]time.Duration{},
		health:   []api.Condition{{Type: api.ConditionCRI, Status: api.ConditionReady}},
	}
}

func (m *memProvider) count(call string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[call]
}

func (m *memProvider) Info(context.Context) (provider.Info, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["info"]++
	return provider.Info{Name: m.name, Version: "test-1", Kinds: m.kinds}, nil
}

func (m *memProvider) Health(context.Context) ([]api.Condition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["health"]++
	return append([]api.Condition(nil), m.health...), m.healthErr
}

func (m *memProvider) Apply(_ context.Context, a *api.Assignment) (api.AssignmentStatus, error) {
	m.mu.Lock()
	m.calls["apply"]++
	gate := m.applyGate
	m.mu.Unlock()
	if gate != nil {
		<-gate
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.applyTimes = append(m.applyTimes, time.Now())
	if m.applyErr != nil {
		return api.AssignmentStatus{}, m.applyErr
	}
	phase := api.PhaseReady
	if m.provisionPolls > 0 {
		phase = api.PhaseProvision
	}
	r := &memReplica{kind: a.Kind, gen: a.Generation, st: api.AssignmentStatus{ID: a.ID, Phase: phase, ProviderID: "mem-" + a.ID}}
	m.replicas[a.ID] = r
	answer := r.st
	if m.diesAfterApply != "" {
		r.st.Phase, r.st.Reason = api.PhaseError, m.diesAfterApply
	}
	return answer, nil
}

func (m *memProvider) Delete(_ context.Context, a *api.Assignment, grace time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["delete"]++
	m.graces[a.ID] = grace
	delete(m.replicas, a.ID)
	return nil
}

func (m *memProvider) Status(_ context.Context, id string) (api.AssignmentStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["status"]++
	r, ok := m.replicas[id]
	if !ok {
		return api.AssignmentStatus{}, fmt.Errorf("replica %s: %w", id, provider.ErrNotFound)
	}
	if r.st.Phase == api.PhaseProvision {
		r.polls++
		if r.polls >= m.provisionPolls {
			r.st.Phase = api.PhaseReady
		}
	}
	return r.st, nil
}

func (m *memProvider) List(context.Context) ([]provider.Listed, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["list"]++
	out := make([]provider.Listed, 0, len(m.replicas))
	for id, r := range m.replicas {
		out = append(out, provider.Listed{ID: id, Kind: r.kind, Generation: r.gen, Status: r.st})
	}
	return out, nil
}

func (m *memProvider) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// hold puts a replica on the node as if an earlier agent had applied it.
func (m *memProvider) hold(id string, gen int64, phase api.Phase) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.replicas[id] = &memReplica{kind: api.KindCompute, gen: gen, st: api.AssignmentStatus{ID: id, Phase: phase, ProviderID: "mem-" + id}}
}

func (m *memProvider) has(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.replicas[id]
	return ok
}

// setPhase changes a replica behind the agent's back.
func (m *memProvider) setPhase(id string, phase api.Phase, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.replicas[id]; ok {
		r.st.Phase, r.st.Reason = phase, reason
	}
}

func (m *memProvider) lose(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.replicas, id)
}

func (m *memProvider) setApplyErr(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.applyErr = err
}

func (m *memProvider) setHealth(cs []api.Condition, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.health, m.healthErr = cs, err
}

func (m *memProvider) applyGaps() []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var gaps []time.Duration
	for i := 1; i < len(m.applyTimes); i++ {
		gaps = append(gaps, m.applyTimes[i].Sub(m.applyTimes[i-1]))
	}
	return gaps
}

func (m *memProvider) grace(id string) (time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.graces[id]
	return g, ok
}

func (m *memProvider) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// logProvider adds logs, keyed by id, or id.container for a container
// other than the main one; errLogProvider's Logs says it has none, as a
// plugin without logs does over the wire.
type logProvider struct {
	*memProvider
	logs map[string]string
}

func (p *logProvider) Logs(_ context.Context, id string, o provider.LogOptions, w io.Writer) error {
	key := id
	if o.Container != "" {
		key += "." + o.Container
	}
	s, ok := p.logs[key]
	if !ok {
		return fmt.Errorf("logs of %s: %w", key, provider.ErrNotFound)
	}
	_, err := io.WriteString(w, s)
	return err
}

type errLogProvider struct{ *memProvider }

func (p *errLogProvider) Logs(context.Context, string, provider.LogOptions, io.Writer) error {
	return fmt.Errorf("logs: %w", provider.ErrUnsupported)
}

// watchProvider pushes statuses through a channel the test feeds. end
// ends the watches in place; while it is unavailable, Watch fails as the
// client of a plugin that is down does.
type watchProvider struct {
	*memProvider
	events chan api.AssignmentStatus

	wmu         sync.Mutex
	ended       chan struct{} // closed by end
	unavailable bool
	watches     int
}

func newWatchProvider(m *memProvider) *watchProvider {
	return &watchProvider{memProvider: m, events: make(chan api.AssignmentStatus), ended: make(chan struct{})}
}

func (p *watchProvider) Watch(ctx context.Context) (<-chan api.AssignmentStatus, error) {
	p.wmu.Lock()
	if p.unavailable {
		p.wmu.Unlock()
		return nil, fmt.Errorf("watch: plugin down: %w", api.ErrUnavailable)
	}
	p.watches++
	ended := p.ended
	p.wmu.Unlock()
	out := make(chan api.AssignmentStatus)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ended:
				return
			case st := <-p.events:
				select {
				case out <- st:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

// push sends st into the agent's watch.
func (p *watchProvider) push(t *testing.T, st api.AssignmentStatus) {
	t.Helper()
	select {
	case p.events <- st:
	case <-time.After(waitLong):
		t.Fatal("the agent does not consume the provider's watch")
	}
}

// end closes the watches in place; Watch fails from then on while
// unavailable is set.
func (p *watchProvider) end(unavailable bool) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	close(p.ended)
	p.ended = make(chan struct{})
	p.unavailable = unavailable
}

func (p *watchProvider) setUnavailable(u bool) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.unavailable = u
}
