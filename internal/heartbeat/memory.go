package heartbeat

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
	"time"
)

// Memory is a Store in process memory, for `strata dev` and tests.
type Memory struct {
	cfg config

	mu    sync.RWMutex
	beats map[string]Beat
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory(opts ...Option) *Memory {
	return &Memory{cfg: newConfig(opts), beats: make(map[string]Beat)}
}

// Record implements Store.
func (m *Memory) Record(ctx context.Context, b Beat) error {
	return m.RecordBatch(ctx, []Beat{b})
}

// RecordBatch implements Store. Unlike Redis it is atomic, which no caller
// may rely on.
func (m *Memory) RecordBatch(ctx context.Context, beats []Beat) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	norm := make([]Beat, len(beats))
	for i, b := range beats {
		nb, err := normalize(b, m.cfg.now)
		if err != nil {
			return err
		}
		// Copy so the caller may reuse its maps.
		norm[i] = cloneBeat(nb)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range norm {
		if cur, ok := m.beats[b.ID]; ok && cur.At.After(b.At) {
			continue
		}
		m.beats[b.ID] = b
	}
	return nil
}

// Get implements Store.
func (m *Memory) Get(ctx context.Context, id string) (Beat, error) {
	if err := ctx.Err(); err != nil {
		return Beat{}, err
	}
	m.mu.RLock()
	b, ok := m.beats[id]
	m.mu.RUnlock()
	if !ok {
		return Beat{}, ErrNotFound
	}
	return cloneBeat(b), nil
}

// List implements Store.
func (m *Memory) List(ctx context.Context) ([]Beat, error) {
	return m.collect(ctx, func(Beat) bool { return true })
}

// Times implements Store.
func (m *Memory) Times(ctx context.Context) (map[string]time.Time, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[string]time.Time, len(m.beats))
	for id, b := range m.beats {
		out[id] = b.At
	}
	return out, nil
}

// Stale implements Store.
func (m *Memory) Stale(ctx context.Context, olderThan time.Time) ([]Beat, error) {
	return m.collect(ctx, func(b Beat) bool { return b.At.Before(olderThan) })
}

// Forget implements Store.
func (m *Memory) Forget(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.beats, id)
	m.mu.Unlock()
	return nil
}

func (m *Memory) collect(ctx context.Context, keep func(Beat) bool) ([]Beat, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	out := make([]Beat, 0, len(m.beats))
	for _, b := range m.beats {
		if keep(b) {
			out = append(out, cloneBeat(b))
		}
	}
	m.mu.RUnlock()
	sortBeats(out)
	return out, nil
}

// sortBeats orders oldest first, ties by ID: the order of a Redis sorted
// set scored by At.
func sortBeats(bs []Beat) {
	slices.SortFunc(bs, func(a, b Beat) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// cloneBeat copies b's maps, so that neither the caller nor the store
// aliases the other's; empty maps read back as nil, as from Redis.
func cloneBeat(b Beat) Beat {
	b.Metrics = cloneMap(b.Metrics)
	b.Attrs = cloneMap(b.Attrs)
	return b
}

func cloneMap[V any](m map[string]V) map[string]V {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}
