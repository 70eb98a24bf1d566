package probe

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/version"
)

// Manager runs the probes of the containers it is given. Its methods are
// safe for concurrent use; Updates must be read, or workers wait (a
// worker never drops a change).
type Manager struct {
	log       *slog.Logger
	exec      Execer
	agent     GuestAgent
	unit      time.Duration
	userAgent string
	keepAlive bool
	created   time.Time
	updates   chan Update

	// probed counts the checks made, for tests and benchmarks.
	probed atomic.Int64

	mu         sync.Mutex
	closed     bool
	containers map[key]*container
	wg         sync.WaitGroup
}

type key struct{ replica, container string }

// container is one Added container: its workers and the state they
// share, which mu of the Manager guards.
type container struct {
	key    key
	probes api.Probes // defaulted
	host   string
	cancel context.CancelFunc
	// workers, one per probe, in the order of api.ProbeKinds.
	workers []*worker

	// gen counts Resets: a check that began before one is of the
	// container's previous run, and is dropped.
	gen       uint64
	start     time.Time
	started   bool
	startedCh chan struct{} // closed when started turns true
	results   [len(api.ProbeKinds)]Result
}

// Option configures a Manager.
type Option func(*Manager)

// WithLogger logs checks that could not be made (an exec that did not
// run); the default discards.
func WithLogger(l *slog.Logger) Option { return func(m *Manager) { m.log = l } }

// WithExecer runs exec probes. Without one, Add refuses exec probes.
func WithExecer(e Execer) Option { return func(m *Manager) { m.exec = e } }

// WithGuestAgent runs guestAgent probes through g (VMs).
func WithGuestAgent(g GuestAgent) Option { return func(m *Manager) { m.agent = g } }

// WithTimeUnit makes one of a probe's seconds (initialDelaySeconds,
// periodSeconds, timeoutSeconds) last d: tests run sub-second periods
// that the API does not let a user write. The default is time.Second.
func WithTimeUnit(d time.Duration) Option { return func(m *Manager) { m.unit = d } }

// WithHTTPKeepAlive keeps an httpGet probe's connection open from one
// check to the next, where the server allows. It is not Kubernetes'
// semantics (the kubelet opens a new connection per check, which also
// checks that the server still accepts connections) and is off by
// default; it is for nodes where connection set-up is what probing
// costs (on loopback, the kernel's work for both ends of the handshake
// is charged to the agent).
func WithHTTPKeepAlive() Option { return func(m *Manager) { m.keepAlive = true } }

// WithUpdateBuffer sets how many updates wait unread before workers do
// (default 256).
func WithUpdateBuffer(n int) Option { return func(m *Manager) { m.updates = make(chan Update, n) } }

// NewManager returns a Manager with no containers.
func NewManager(opts ...Option) *Manager {
	m := &Manager{
		log:        slog.New(slog.DiscardHandler),
		unit:       time.Second,
		userAgent:  "strata-probe/" + version.String(),
		created:    time.Now(),
		containers: map[key]*container{},
	}
	for _, o := range opts {
		o(m)
	}
	if m.updates == nil {
		m.updates = make(chan Update, 256)
	}
	return m
}

// Updates is the channel of result changes. It is closed by Close.
func (m *Manager) Updates() <-chan Update { return m.updates }

// Add starts probing a container that has just started. probes are
// defaulted and validated (an invalid one is an api.ErrInvalid naming
// the field). An Add of a container already added with the same probes
// and host changes nothing, so that a reconciler may repeat it; with
// other probes, it replaces them and starts over. The Dialer is not
// compared: a container whose network changed (a new sandbox) is
// Removed and Added again. A container without probes is recorded
// (Ready is true) and runs no worker.
func (m *Manager) Add(replica, name string, probes api.Probes, target Target) error {
	probes = probes.WithDefaults()
	if err := probes.Validate(""); err != nil {
		return err
	}
	c := &container{key: key{replica, name}, probes: probes, host: target.Host}
	if err := m.buildWorkers(c, target); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if old, ok := m.containers[c.key]; ok {
		if old.host == c.host && reflect.DeepEqual(old.probes, c.probes) {
			return nil
		}
		old.cancel()
	}
	now := time.Now()
	c.start = now
	c.started = probes.StartupProbe == nil
	c.startedCh = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	m.containers[c.key] = c
	for _, w := range c.workers {
		m.wg.Add(1)
		go w.run(ctx, w.initialDelay+m.jitter(now, w.period))
	}
	return nil
}

// jitter spreads the first checks of the containers Added in the
// Manager's first period (an agent that restarts and recovers every
// replica of its node at once) over that period, as the kubelet does;
// a container that starts later is checked as soon as its initial delay
// allows, so that its readiness is seen at once.
func (m *Manager) jitter(now time.Time, period time.Duration) time.Duration {
	if now.Sub(m.created) >= period {
		return 0
	}
	return rand.N(period)
}

// buildWorkers makes c's workers and their probers.
func (m *Manager) buildWorkers(c *container, target Target) error {
	for i, kind := range api.ProbeKinds {
		p := c.probes.Get(kind)
		if p == nil {
			continue
		}
		pr, err := m.newProber(c.key, p, target)
		if err != nil {
			return fmt.Errorf("%sProbe: %w", kind, err)
		}
		c.workers = append(c.workers, &worker{
			m:                m,
			c:                c,
			kind:             kind,
			idx:              i,
			prober:           pr,
			initialDelay:     time.Duration(p.InitialDelaySeconds) * m.unit,
			period:           time.Duration(*p.PeriodSeconds) * m.unit,
			timeout:          time.Duration(*p.TimeoutSeconds) * m.unit,
			successThreshold: *p.SuccessThreshold,
			failureThreshold: *p.FailureThreshold,
			resetCh:          make(chan struct{}, 1),
		})
	}
	return nil
}

// Remove stops probing a container (it was deleted or stopped for
// good). Its workers end at once, an unfinished check cancelled.
func (m *Manager) Remove(replica, name string) {
	m.mu.Lock()
	c, ok := m.containers[key{replica, name}]
	if ok {
		delete(m.containers, c.key)
	}
	m.mu.Unlock()
	if ok {
		c.cancel()
	}
}

// RemoveReplica removes every container of a replica.
func (m *Manager) RemoveReplica(replica string) {
	m.mu.Lock()
	var gone []*container
	for k, c := range m.containers {
		if k.replica == replica {
			gone = append(gone, c)
			delete(m.containers, k)
		}
	}
	m.mu.Unlock()
	for _, c := range gone {
		c.cancel()
	}
}

// Reset starts a container's probes over, for a container that was
// restarted: the results are unknown again (each probe that had one
// reports the change), the startup probe gates the others again, and the
// initial delays count from now. A check under way when Reset is called
// is dropped.
func (m *Manager) Reset(replica, name string) {
	m.mu.Lock()
	c, ok := m.containers[key{replica, name}]
	if ok {
		c.gen++
		c.start = time.Now()
		c.results = [len(api.ProbeKinds)]Result{}
		if c.started && c.probes.StartupProbe != nil {
			c.started = false
			c.startedCh = make(chan struct{})
		}
	}
	m.mu.Unlock()
	if !ok {
		return
	}
	for _, w := range c.workers {
		select {
		case w.resetCh <- struct{}{}:
		default: // a reset is already pending: one does
		}
	}
}

// Ready reports whether a container is ready: it was Added, its startup
// probe (if any) has passed, and its readiness probe (if any) passes.
func (m *Manager) Ready(replica, name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.containers[key{replica, name}]
	if !ok || !c.started {
		return false
	}
	return c.probes.ReadinessProbe == nil || c.results[readinessIdx] == Success
}

// Started reports whether a container's startup probe has passed (true
// for an Added container without one).
func (m *Manager) Started(replica, name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.containers[key{replica, name}]
	return ok && c.started
}

// Close stops every worker, waits for them to end, and closes Updates.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	for k, c := range m.containers {
		c.cancel()
		delete(m.containers, k)
	}
	m.mu.Unlock()
	m.wg.Wait()
	close(m.updates)
}

// readinessIdx is the readiness probe's place in container.results.
var readinessIdx = slices.Index(api.ProbeKinds[:], api.ProbeReadiness)
