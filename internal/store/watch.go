package store

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// EventType says whether an event wrote or deleted its key.
type EventType int

// Event types. The zero EventType is invalid, so that a forgotten field is
// not mistaken for a put.
const (
	EventPut EventType = iota + 1
	EventDelete
)

func (t EventType) String() string {
	switch t {
	case EventPut:
		return "put"
	case EventDelete:
		return "delete"
	}
	return "unknown"
}

// Event is one change of one key. For a deletion KV carries only the key and
// the deletion's ModRevision. An event carries no previous value: a handler
// that needs one keeps it (the caches hold every object by name), because
// asking etcd for it costs etcd a read of the old revision for every event
// of every watcher and doubles what it sends.
type Event struct {
	Type EventType
	KV   KV
}

// Handler receives a consistent view of a prefix. Reflect calls it from one
// goroutine, never concurrently.
type Handler interface {
	// Replace is called with the full list after the initial list and after
	// every relist (compaction, long disconnect): the handler must treat it as
	// the whole truth and drop anything not in it.
	Replace(items []KV, rev int64)
	// Apply is called with one batch of events in revision order; batches
	// coalesce what arrived together (a watch response) so handlers can do
	// one pass per batch. rev is the revision the view is now current at:
	// the last event's, or, for a batch without events, the revision of an
	// etcd progress notification.
	Apply(events []Event, rev int64)
}

// Reflect lists prefix, calls h.Replace, then watches from the list revision
// onwards and calls h.Apply, until ctx is done; it then returns ctx.Err().
//
// A dropped connection resumes the watch from the last revision delivered,
// so h sees every change exactly once and in order. If that revision was
// compacted meanwhile, the changes in between are gone: Reflect lists again
// and calls h.Replace. Errors are logged and retried with backoff, never
// returned.
//
// h should be quick: the etcd client buffers events while it works, so a
// slow handler costs memory and lag, not correctness.
func (s *Store) Reflect(ctx context.Context, prefix string, h Handler) error {
	return s.reflect(ctx, prefix, h, nil)
}

func (s *Store) event(ev *clientv3.Event) Event {
	e := Event{Type: EventPut, KV: s.kv(ev.Kv)}
	if ev.Type == clientv3.EventTypeDelete {
		e.Type = EventDelete
	}
	return e
}
