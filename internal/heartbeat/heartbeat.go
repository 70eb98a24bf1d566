// Package heartbeat records liveness: the last beat of every agent (per
// region) and of every region (in the global tier).
//
// Liveness lives here and never in etcd: beats arrive every few seconds from
// every node, so the data is hot and high-rate, and losing it costs at most
// one monitor interval (nodes beat again and reappear). etcd would turn
// every beat into a raft write for state nobody needs to be durable.
//
// A region API calls Record (or RecordBatch) for each beat it receives; the
// node monitor calls Times every pass to find nodes that went quiet; the
// global tier's region monitor, watching a few regions, reads List.
package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Beat is the last heartbeat of one sender.
type Beat struct {
	// ID is the node name (or, in the global tier, the region name).
	ID string
	// At is when the beat was received, by the receiving server's clock,
	// so senders with skewed clocks cannot make themselves look alive.
	// Stores keep it to the microsecond, in UTC. A zero At is set by the store's
	// clock on Record.
	At time.Time
	// Seq is the sender's sequence number, for diagnostics (a reset shows
	// an agent restart); ordering uses At, not Seq, for that reason.
	Seq uint64
	// Metrics are numbers the sender reports, e.g. cpu_used, mem_used_mib,
	// replicas. Nil when there are none or when they expired (Redis TTL).
	Metrics map[string]float64
	// Attrs are short strings the sender reports that are not numbers,
	// e.g. a region's current leader. They expire with Metrics.
	Attrs map[string]string
}

// Store keeps the latest beat per ID.
//
// Record is idempotent and "latest At wins": with several API replicas
// writing, a beat that arrives late (older At) never overwrites a newer
// one. A beat with the same At as the stored one replaces it, so
// re-recording a beat is harmless.
//
// List and Stale return beats oldest first (ties by ID), the order a
// monitor wants to act in.
type Store interface {
	// Record stores b unless a newer beat for b.ID is already stored.
	Record(ctx context.Context, b Beat) error
	// RecordBatch records many beats in one round trip. It is not atomic
	// across beats: on error some may have been recorded.
	RecordBatch(ctx context.Context, beats []Beat) error
	// Get returns the last beat of id, or ErrNotFound.
	Get(ctx context.Context, id string) (Beat, error)
	// List returns every known ID with its last beat.
	List(ctx context.Context) ([]Beat, error)
	// Times returns every known ID with the time of its last beat, and
	// nothing else of it: what a monitor checks every pass, without
	// reading each beat's metrics (one sorted-set read in Redis, not
	// one hash per ID).
	Times(ctx context.Context) (map[string]time.Time, error)
	// Stale returns the IDs whose last beat is strictly before olderThan.
	Stale(ctx context.Context, olderThan time.Time) ([]Beat, error)
	// Forget removes id (the node was deleted). Forgetting an unknown id
	// is not an error. A beat still in flight may bring id back; callers
	// that delete nodes should keep filtering by their own node list.
	Forget(ctx context.Context, id string) error
}

var (
	// ErrNotFound means no beat is stored for the ID.
	ErrNotFound = errors.New("heartbeat: not found")
	// ErrInvalidBeat means a beat cannot be stored (e.g. empty ID).
	ErrInvalidBeat = errors.New("heartbeat: invalid beat")
)

// DefaultTTL is how long Redis keeps a beat's Seq and Metrics after the
// last beat; see WithTTL.
const DefaultTTL = 10 * time.Minute

// Option configures a store.
type Option func(*config)

type config struct {
	ttl    time.Duration
	logger *slog.Logger
	now    func() time.Time
}

func newConfig(opts []Option) config {
	c := config{ttl: DefaultTTL, logger: slog.New(slog.DiscardHandler), now: time.Now}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithTTL sets how long Redis keeps Seq and Metrics of an ID that stopped
// beating. The ID itself and its last At stay until Forget, so Stale keeps
// reporting a dead node; only its metrics go. Memory ignores it: it holds
// dev-sized data and has nothing to reclaim.
func WithTTL(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.ttl = d
		}
	}
}

// WithLogger sets the logger; the default discards.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithClock sets the clock used for beats recorded with a zero At.
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now != nil {
			c.now = now
		}
	}
}

// normalize validates b and brings At to the precision every store keeps,
// so Memory and Redis answer identically.
func normalize(b Beat, now func() time.Time) (Beat, error) {
	if b.ID == "" {
		return Beat{}, fmt.Errorf("%w: empty id", ErrInvalidBeat)
	}
	if b.At.IsZero() {
		b.At = now()
	}
	// Truncate also drops the monotonic clock reading; UTC because that is
	// what comes back from Redis.
	b.At = b.At.Truncate(time.Microsecond).UTC()
	return b, nil
}
