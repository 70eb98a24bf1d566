package events

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
)

// memSeqMax is the largest sequence number within one millisecond; the
// next event moves to the following millisecond, like a logical clock, so
// the sequence keeps its fixed width and IDs sort as strings.
const memSeqMax = 999_999

// tailBatch caps how many events one Tail callback receives.
const tailBatch = 512

// Memory is a Store holding the newest events in a ring buffer, for
// `strata dev` and tests. Its IDs look like Redis stream IDs but are
// zero-padded ("1700000000000-000003"), so they also sort as strings.
type Memory struct {
	cfg config

	mu    sync.Mutex
	ring  []memEntry // fixed length: the capacity
	start int        // index of the oldest entry
	n     int        // entries in use
	last  streamID   // last ID handed out, even if trimmed since
	// wake is closed (and replaced) on every Append, waking every Tail at
	// once without polling.
	wake chan struct{}
}

type memEntry struct {
	id streamID
	ev Event
}

var _ Store = (*Memory)(nil)

// NewMemory returns a ring of capacity events (DefaultCapacity if <= 0).
func NewMemory(capacity int, opts ...Option) *Memory {
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	return &Memory{
		cfg:  newConfig(opts),
		ring: make([]memEntry, capacity),
		wake: make(chan struct{}),
	}
}

func (m *Memory) at(i int) *memEntry { return &m.ring[(m.start+i)%len(m.ring)] }

// nextID mimics Redis: the current millisecond, or the last one if the
// clock went backwards, with a sequence within it.
func (m *Memory) nextID() streamID {
	ms := uint64(max(m.cfg.now().UnixMilli(), 0))
	switch {
	case ms > m.last.ms:
		m.last = streamID{ms: ms}
	case m.last.seq >= memSeqMax:
		m.last = streamID{ms: m.last.ms + 1}
	default:
		m.last.seq++
	}
	return m.last
}

func formatMemID(id streamID) string { return fmt.Sprintf("%013d-%06d", id.ms, id.seq) }

// Append implements Store.
func (m *Memory) Append(ctx context.Context, evs ...Event) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	prepared := make([]Event, len(evs))
	for i, ev := range evs {
		p, err := prepare(ev, m.cfg.now)
		if err != nil {
			return nil, err
		}
		p.Fields = cloneFields(p.Fields)
		prepared[i] = p
	}
	if len(prepared) == 0 {
		return nil, nil
	}
	ids := make([]string, len(prepared))
	m.mu.Lock()
	for i, ev := range prepared {
		id := m.nextID()
		ev.ID = formatMemID(id)
		ids[i] = ev.ID
		if m.n < len(m.ring) {
			*m.at(m.n) = memEntry{id, ev}
			m.n++
		} else {
			// Full: overwrite the oldest.
			m.ring[m.start] = memEntry{id, ev}
			m.start = (m.start + 1) % len(m.ring)
		}
	}
	close(m.wake)
	m.wake = make(chan struct{})
	m.mu.Unlock()
	return ids, nil
}

// firstAfter returns the index of the first entry newer than id. The ring
// is sorted by ID, so this is a binary search.
func (m *Memory) firstAfter(id streamID) int {
	return sort.Search(m.n, func(i int) bool { return m.at(i).id.compare(id) > 0 })
}

// Range implements Store.
func (m *Memory) Range(ctx context.Context, q Query) ([]Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var after streamID
	if q.After != "" {
		var err error
		if after, err = parseID(q.After); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	first := m.firstAfter(after)
	var out []Event
	full := func() bool { return q.Limit > 0 && len(out) >= q.Limit }
	if q.Newest {
		for i := m.n - 1; i >= first && !full(); i-- {
			if e := m.at(i); matches(&e.ev, &q) {
				out = append(out, copyEvent(e.ev))
			}
		}
		slices.Reverse(out)
		return out, nil
	}
	for i := first; i < m.n && !full(); i++ {
		if e := m.at(i); matches(&e.ev, &q) {
			out = append(out, copyEvent(e.ev))
		}
	}
	return out, nil
}

// Tail implements Store. It waits on the wake channel, so an idle Tail
// costs nothing and a new event is delivered at once.
func (m *Memory) Tail(ctx context.Context, after string, fn func([]Event) error) error {
	var cur streamID
	switch after {
	case "":
	case TailNew:
		m.mu.Lock()
		cur = m.last
		m.mu.Unlock()
	default:
		var err error
		if cur, err = parseID(after); err != nil {
			return err
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		m.mu.Lock()
		first := m.firstAfter(cur)
		var batch []Event
		for i := first; i < m.n && len(batch) < tailBatch; i++ {
			batch = append(batch, copyEvent(m.at(i).ev))
		}
		if len(batch) > 0 {
			cur = m.at(first + len(batch) - 1).id
		}
		wake := m.wake
		m.mu.Unlock()

		if len(batch) > 0 {
			// Outside the lock: fn may be slow or call the store.
			if err := fn(batch); err != nil {
				return err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

// copyEvent copies Fields so callers cannot change what the store holds.
func copyEvent(ev Event) Event {
	ev.Fields = cloneFields(ev.Fields)
	return ev
}

func cloneFields(f map[string]string) map[string]string {
	if len(f) == 0 {
		return nil
	}
	return maps.Clone(f)
}
