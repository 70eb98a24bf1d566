// Package fake is an in-memory provider for tests and benchmarks: it
// serves every kind, makes replicas ready after a configurable latency,
// and fails on demand (at random, or through the label LabelFail).
//
// It is cheap enough for a benchmark to run a thousand agents with a Fake
// each in one process: replicas live in one mutex-protected map, and no
// goroutine exists per replica except while an Apply or Delete sleeps its
// latency.
package fake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
	"github.com/stratahq/strata/internal/version"
	"github.com/stratahq/strata/providers/provider"
)

// LabelFail on an assignment makes its replica fail on purpose, for tests
// of error and restart paths: FailApply fails the Apply (phase error),
// FailExit makes the replica ready, then exit with code 1 shortly after,
// FailUnready keeps it running but never ready (a readiness probe that
// fails: phase provision, its container running and not ready).
const (
	LabelFail = "strata.io/fake-fail"
	// EnvFail in a compute spec's environment does what LabelFail does,
	// but as part of the spec: a new revision can fail while the one
	// before it did not (rollout tests).
	EnvFail   = "STRATA_FAKE_FAIL"
	FailApply = "apply"
	FailExit  = "exit"
	// FailUnready: running, never ready (rollout and drain tests of
	// readiness gates).
	FailUnready = "unready"
	// EnvExitCode in a compute spec's environment sets the code a
	// FailExit replica exits with (default 1); with 0 it is a process
	// that ran to completion (Job tests).
	EnvExitCode = "STRATA_FAKE_EXIT_CODE"
)

// Config is the fake's behaviour; its zero value is an instant, reliable
// provider of every kind. Factory reads it from the agent's config with
// the keys applyLatency, applyJitter, deleteLatency, failureRate, kinds,
// seed and healthFile.
type Config struct {
	// ApplyLatency is how long an Apply that changes something takes, at
	// least.
	ApplyLatency time.Duration
	// ApplyJitter spreads Apply latencies over [ApplyLatency,
	// ApplyLatency+ApplyJitter), as a real runtime's starts spread: each
	// replica's is fixed by its ID (ApplyLatencyOf), so that a benchmark
	// can subtract exactly what the provider took.
	ApplyJitter time.Duration
	// DeleteLatency is how long deleting an existing replica takes.
	DeleteLatency time.Duration
	// FailureRate is the probability (0..1) that an Apply leaves its
	// replica in phase error.
	FailureRate float64
	// Kinds are the kinds served; empty means container, vm and
	// loadbalancer.
	Kinds []api.ProviderKind
	// Seed seeds the random failures, so that a run can be replayed.
	Seed int64
	// HealthFile, when set, injects health conditions into a fake running
	// inside another process (an agent under test), as SetHealth does
	// in-process: every Health call reads the file, a JSON array of
	// api.Condition, and reports it. While the file does not exist Health
	// reports the default Ready condition. A file that cannot be read or
	// decoded makes Health fail (the agent reports provider/<name> in
	// Error), so writers should replace it atomically (write, rename).
	// SetHealth, when used, takes precedence.
	HealthFile string
}

// Validate reports a config that makes no sense, wrapping api.ErrInvalid.
func (c Config) Validate() error {
	switch {
	case c.ApplyLatency < 0:
		return api.Invalid("applyLatency", "must not be negative")
	case c.ApplyJitter < 0:
		return api.Invalid("applyJitter", "must not be negative")
	case c.DeleteLatency < 0:
		return api.Invalid("deleteLatency", "must not be negative")
	case c.FailureRate < 0 || c.FailureRate > 1:
		return api.Invalid("failureRate", "must be between 0 and 1, not %v", c.FailureRate)
	}
	for i, k := range c.Kinds {
		if !slices.Contains(api.ProviderKinds, k) {
			return api.Invalid(fmt.Sprintf("kinds[%d]", i), "unknown kind %q (want one of %v)", k, api.ProviderKinds)
		}
	}
	return nil
}

// ApplyLatencyOf is how long an Apply of the replica id takes: ApplyLatency
// plus a share of ApplyJitter that depends on id only.
func (c Config) ApplyLatencyOf(id string) time.Duration {
	if c.ApplyJitter <= 0 {
		return c.ApplyLatency
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	return c.ApplyLatency + time.Duration(h.Sum64()%uint64(c.ApplyJitter))
}

// Option tunes a Fake.
type Option func(*Fake)

// WithName names the provider (default "fake"); its health condition is
// provider/<name>.
func WithName(name string) Option { return func(f *Fake) { f.name = name } }

// WithNode sets the node reported in statuses.
func WithNode(node string) Option { return func(f *Fake) { f.node = node } }

// WithLogger sets the logger (default: discard).
func WithLogger(log *slog.Logger) Option {
	return func(f *Fake) {
		if log != nil {
			f.log = log
		}
	}
}

// WithExitDelay sets how long a FailExit replica stays ready before it
// exits (default 100ms).
func WithExitDelay(d time.Duration) Option { return func(f *Fake) { f.exitDelay = d } }

// WithLogInterval sets how often a following Logs writes a line (default
// 1s).
func WithLogInterval(d time.Duration) Option { return func(f *Fake) { f.logInterval = d } }

// Fake is an in-memory provider. It implements provider.Provider, Logger,
// Watcher and Meter.
type Fake struct {
	name        string
	node        string
	cfg         Config
	log         *slog.Logger
	exitDelay   time.Duration
	logInterval time.Duration
	started     time.Time

	applies atomic.Int64
	deletes atomic.Int64

	mu       sync.Mutex
	replicas map[string]*replica
	health   []api.Condition // nil: the default Ready condition
	rng      *rand.Rand
	watchers *provider.Watchers
}

var (
	_ provider.Provider = (*Fake)(nil)
	_ provider.Logger   = (*Fake)(nil)
	_ provider.Watcher  = (*Fake)(nil)
	_ provider.Meter    = (*Fake)(nil)
	_ provider.Factory  = Factory
)

type replica struct {
	kind       api.ResourceKind
	generation int64
	created    time.Time
	status     api.AssignmentStatus
	// exit is the pending exit of a FailExit replica; exitSeq tells a
	// stale timer (the replica was applied again since) from the current.
	exit    *time.Timer
	exitSeq uint64
	// exitCode is the code a FailExit replica exits with.
	exitCode int32
	// usage is what SetUsage said it uses (nil: not measured).
	usage *api.Usage
}

// New returns a Fake holding no replicas. cfg is used as given (see
// Config.Validate).
func New(cfg Config, opts ...Option) *Fake {
	if len(cfg.Kinds) == 0 {
		cfg.Kinds = slices.Clone(api.ProviderKinds)
	} else {
		cfg.Kinds = slices.Clone(cfg.Kinds)
	}
	f := &Fake{
		name:        "fake",
		cfg:         cfg,
		log:         slog.New(slog.DiscardHandler),
		exitDelay:   100 * time.Millisecond,
		logInterval: time.Second,
		started:     time.Now(),
		replicas:    map[string]*replica{},
		rng:         rand.New(rand.NewPCG(uint64(cfg.Seed), 0)),
		watchers:    provider.NewWatchers(provider.DefaultWatchBuffer),
	}
	for _, o := range opts {
		o(f)
	}
	return f
}

// Factory makes a Fake from the agent's config (see Config for the keys).
func Factory(_ context.Context, o provider.Options) (provider.Provider, error) {
	var cfg Config
	if err := provider.Decode(o.Config, &cfg); err != nil {
		return nil, fmt.Errorf("fake: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("fake: %w", err)
	}
	opts := []Option{WithNode(o.Node), WithLogger(o.Logger)}
	if o.Name != "" {
		opts = append(opts, WithName(o.Name))
	}
	return New(cfg, opts...), nil
}

// Applies counts Apply calls, including those that changed nothing.
func (f *Fake) Applies() int64 { return f.applies.Load() }

// Deletes counts Delete calls, including those of absent replicas.
func (f *Fake) Deletes() int64 { return f.deletes.Load() }

// Len is the number of replicas held.
func (f *Fake) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.replicas)
}

// SetHealth makes Health report cs (to inject Warning or Error); nil
// restores the default Ready condition.
func (f *Fake) SetHealth(cs []api.Condition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.health = slices.Clone(cs)
}

// readHealthFile returns the conditions in path, or nil, nil when it does
// not exist. An empty array is an empty, non-nil list: no conditions.
func readHealthFile(path string) ([]api.Condition, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fake: health file: %w", err)
	}
	cs := []api.Condition{}
	if err := json.Unmarshal(b, &cs); err != nil {
		return nil, fmt.Errorf("fake: health file %s: %w", path, err)
	}
	return cs, nil
}

// Info implements provider.Provider. The fake simulates every spec, so
// it advertises every feature: a pod is one simulated replica, and its
// probes pass (FailUnready makes them fail).
func (f *Fake) Info(context.Context) (provider.Info, error) {
	return provider.Info{Name: f.name, Version: version.String(), Kinds: slices.Clone(f.cfg.Kinds),
		Features: []string{provider.FeaturePods, provider.FeatureInitContainers, provider.FeatureProbes}}, nil
}

// Health implements provider.Provider: the conditions SetHealth injected,
// else those of Config.HealthFile when it exists, else Ready.
func (f *Fake) Health(context.Context) ([]api.Condition, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.health != nil {
		return slices.Clone(f.health), nil
	}
	if f.cfg.HealthFile != "" {
		cs, err := readHealthFile(f.cfg.HealthFile)
		if err != nil || cs != nil {
			return cs, err
		}
	}
	return []api.Condition{{
		Type:   provider.ConditionType(f.name),
		Status: api.ConditionReady,
		Since:  f.started,
	}}, nil
}

// Apply implements provider.Provider. An Apply of a generation the
// replica already has changes nothing and returns at once, unless the
// replica is in phase error: then it is a retry, as for a real provider
// restarting a failed container, and counts a restart.
func (f *Fake) Apply(ctx context.Context, a *api.Assignment) (api.AssignmentStatus, error) {
	f.applies.Add(1)
	if a == nil || a.ID == "" {
		return api.AssignmentStatus{}, api.Invalid("id", "is required")
	}
	if a.Provider != "" && !slices.Contains(f.cfg.Kinds, a.Provider) {
		return api.AssignmentStatus{}, fmt.Errorf("fake: kind %q: %w", a.Provider, provider.ErrUnsupported)
	}
	f.mu.Lock()
	if r, ok := f.replicas[a.ID]; ok && a.Generation <= r.generation && r.status.Phase != api.PhaseError {
		st := r.status.Clone()
		f.mu.Unlock()
		return st, nil
	}
	f.mu.Unlock()

	if err := backoff.Sleep(ctx, f.cfg.ApplyLatencyOf(a.ID)); err != nil {
		return api.AssignmentStatus{}, fmt.Errorf("fake: apply %s: %w", a.ID, err)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applyLocked(a, time.Now()), nil
}

// applyLocked applies a at now, after the apply latency.
func (f *Fake) applyLocked(a *api.Assignment, now time.Time) api.AssignmentStatus {
	r, existed := f.replicas[a.ID]
	if existed && a.Generation < r.generation {
		// A newer generation was applied while this one slept.
		return r.status.Clone()
	}
	if !existed {
		r = &replica{created: now}
		f.replicas[a.ID] = r
	}
	prev := r.status
	r.kind, r.generation = a.Kind, a.Generation
	r.stopExit()

	fail := failureOf(a)
	st := f.applied(a, fail, now)
	if existed && prev.Phase == api.PhaseError && prev.ObservedGeneration == a.Generation {
		st.Restarts = prev.Restarts + 1
	} else {
		st.Restarts = prev.Restarts
	}
	if existed && prev.Phase == st.Phase {
		st.Since = prev.Since
	}
	r.status = st
	if st.Phase == api.PhaseReady && fail == FailExit {
		r.exitCode = exitCodeOf(a)
		r.exitSeq++
		id, seq := a.ID, r.exitSeq
		r.exit = time.AfterFunc(f.exitDelay, func() { f.exited(id, r, seq) })
	}
	if !existed || prev.Phase != st.Phase || prev.ObservedGeneration != st.ObservedGeneration {
		f.notify(st)
	}
	return st.Clone()
}

// failureOf is the failure a replica asks for (LabelFail, or EnvFail of
// a compute spec), "" for none.
func failureOf(a *api.Assignment) string {
	if c := a.Spec.Compute; c != nil && c.Env[EnvFail] != "" {
		return c.Env[EnvFail]
	}
	return a.Labels[LabelFail]
}

// exitCodeOf is the code a FailExit replica of a exits with.
func exitCodeOf(a *api.Assignment) int32 {
	if c := a.Spec.Compute; c != nil {
		if v, err := strconv.ParseInt(c.Env[EnvExitCode], 10, 32); err == nil {
			return int32(v)
		}
	}
	return 1
}

// applied is the status of a fresh apply of a at now: ready, unless it
// fails on purpose (fail) or by the configured failure rate.
func (f *Fake) applied(a *api.Assignment, fail string, now time.Time) api.AssignmentStatus {
	st := api.AssignmentStatus{
		ID:                 a.ID,
		Node:               f.node,
		ObservedGeneration: a.Generation,
		Phase:              api.PhaseReady,
		ProviderID:         "fake-" + a.ID,
		UpdatedAt:          now,
		Since:              now,
	}
	if a.Network != nil {
		st.Address = a.Network.Address
	}
	if a.Provider == api.ProviderLoadbalancer || a.Kind == api.KindLoadbalancer {
		st.Backends = backends(a.Endpoints)
	}
	switch {
	case fail == FailApply:
		st.Phase, st.Reason = api.PhaseError, "fake: apply failed on purpose ("+LabelFail+"="+FailApply+")"
	case fail == FailUnready:
		st.Phase, st.Reason = api.PhaseProvision, "fake: running, not ready on purpose ("+EnvFail+"="+FailUnready+")"
		st.Containers = []api.ContainerStatus{{Name: api.MainContainer, State: api.ContainerRunning, StartedAt: now,
			Message: "fake: readiness probe failing on purpose"}}
	case f.cfg.FailureRate > 0 && f.rng.Float64() < f.cfg.FailureRate:
		st.Phase, st.Reason = api.PhaseError, fmt.Sprintf("fake: injected failure (failureRate %v)", f.cfg.FailureRate)
	}
	return st
}

// exited turns a FailExit replica to phase error, as a process exiting
// with code 1 would.
func (f *Fake) exited(id string, r *replica, seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.replicas[id] != r || r.exitSeq != seq {
		return
	}
	r.exit = nil
	f.log.Info("fake replica exited", "id", id)
	f.failLocked(r, r.exitCode, fmt.Sprintf("fake: process exited with code %d (%s=%s)", r.exitCode, LabelFail, FailExit))
}

// Kill stops replica id as if its process had been killed behind the
// provider's back (what `kill -9` or `virsh destroy` do to real ones):
// phase error with exit code 137, pushed to watchers. It reports whether
// the fake held the replica.
func (f *Fake) Kill(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.replicas[id]
	if !ok {
		return false
	}
	r.stopExit()
	f.log.Info("fake replica killed", "id", id)
	f.failLocked(r, 137, "fake: killed (exit code 137)")
	return true
}

// SetUsage makes Usage report u for replica id, until it is set again or
// the replica is deleted. It reports whether the fake held the replica
// (usage of one it does not hold is not kept).
func (f *Fake) SetUsage(id string, u api.Usage) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.replicas[id]
	if ok {
		r.usage = &u
	}
	return ok
}

// Usage implements provider.Meter: what SetUsage set, for the replicas
// held that it was set for.
func (f *Fake) Usage(context.Context) (map[string]api.Usage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]api.Usage{}
	for id, r := range f.replicas {
		if r.usage != nil {
			out[id] = *r.usage
		}
	}
	return out, nil
}

// failLocked puts r in phase error as an exit with code would; f.mu is
// held.
func (f *Fake) failLocked(r *replica, code int32, reason string) {
	now := time.Now()
	r.status.Phase = api.PhaseError
	r.status.Reason = reason
	r.status.ExitCode = &code
	r.status.Since, r.status.UpdatedAt = now, now
	f.notify(r.status)
}

func (r *replica) stopExit() {
	if r.exit != nil {
		r.exit.Stop()
		r.exit = nil
	}
	r.exitSeq++
}

// Delete implements provider.Provider. grace is ignored: a fake replica
// stops at once.
func (f *Fake) Delete(ctx context.Context, a *api.Assignment, _ time.Duration) error {
	f.deletes.Add(1)
	if a == nil || a.ID == "" {
		return api.Invalid("id", "is required")
	}
	f.mu.Lock()
	_, ok := f.replicas[a.ID]
	f.mu.Unlock()
	if !ok {
		return nil
	}
	if err := backoff.Sleep(ctx, f.cfg.DeleteLatency); err != nil {
		return fmt.Errorf("fake: delete %s: %w", a.ID, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.replicas[a.ID]
	if !ok {
		return nil
	}
	r.stopExit()
	delete(f.replicas, a.ID)
	now := time.Now()
	st := r.status
	st.Phase, st.Reason, st.Since, st.UpdatedAt = api.PhaseDestroyed, "", now, now
	f.notify(st)
	return nil
}

// Status implements provider.Provider.
func (f *Fake) Status(_ context.Context, id string) (api.AssignmentStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.replicas[id]
	if !ok {
		return api.AssignmentStatus{}, fmt.Errorf("fake: replica %q: %w", id, provider.ErrNotFound)
	}
	return r.status.Clone(), nil
}

// List implements provider.Provider, sorted by id.
func (f *Fake) List(context.Context) ([]provider.Listed, error) {
	f.mu.Lock()
	out := make([]provider.Listed, 0, len(f.replicas))
	for id, r := range f.replicas {
		out = append(out, provider.Listed{ID: id, Kind: r.kind, Generation: r.generation, Status: r.status.Clone()})
	}
	f.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Logs implements provider.Logger: a few lines about the replica, then,
// when following, one line per log interval until ctx is done or the
// replica is deleted.
func (f *Fake) Logs(ctx context.Context, id string, opts provider.LogOptions, w io.Writer) error {
	lines, err := f.logLines(id)
	if err != nil {
		return err
	}
	if err := provider.SingleContainerLogs(id, opts); err != nil {
		return err
	}
	if opts.TailLines > 0 && len(lines) > opts.TailLines {
		lines = lines[len(lines)-opts.TailLines:]
	}
	for _, l := range lines {
		if _, err := io.WriteString(w, l); err != nil {
			return fmt.Errorf("fake: logs %s: %w", id, err)
		}
	}
	if !opts.Follow {
		return nil
	}
	tick := time.NewTicker(f.logInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-tick.C:
			st, err := f.Status(ctx, id)
			if err != nil {
				return nil // deleted: its output ends
			}
			line := fmt.Sprintf("%s fake: replica %s is %s\n", now.UTC().Format(time.RFC3339), id, st.Phase)
			if _, err := io.WriteString(w, line); err != nil {
				return fmt.Errorf("fake: logs %s: %w", id, err)
			}
		}
	}
}

func (f *Fake) logLines(id string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.replicas[id]
	if !ok {
		return nil, fmt.Errorf("fake: replica %q: %w", id, provider.ErrNotFound)
	}
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	lines := []string{
		fmt.Sprintf("%s fake: replica %s created (%s)\n", ts(r.created), id, r.kind),
		fmt.Sprintf("%s fake: replica %s applied generation %d as %s\n", ts(r.status.UpdatedAt), id, r.generation, r.status.ProviderID),
		fmt.Sprintf("%s fake: replica %s is %s\n", ts(r.status.Since), id, r.status.Phase),
	}
	if r.status.Reason != "" {
		lines = append(lines, fmt.Sprintf("%s fake: replica %s: %s\n", ts(r.status.Since), id, r.status.Reason))
	}
	return lines, nil
}

// Watch implements provider.Watcher: every change of phase or generation
// (an exit, a kill, a deletion) is sent. A watcher that falls
// provider.DefaultWatchBuffer changes behind is closed instead of
// blocking the fake.
func (f *Fake) Watch(ctx context.Context) (<-chan api.AssignmentStatus, error) {
	return f.watchers.Watch(ctx)
}

// notify sends st to every watcher; f.mu is held, so that watchers see
// changes in the order they happened.
func (f *Fake) notify(st api.AssignmentStatus) { f.watchers.Send(st) }

func backends(eps []api.Endpoint) []api.BackendStatus {
	if len(eps) == 0 {
		return nil
	}
	out := make([]api.BackendStatus, len(eps))
	for i, e := range eps {
		out[i] = api.BackendStatus{Replica: e.Replica, Address: e.Address, Port: e.Port, Health: "up"}
	}
	return out
}
