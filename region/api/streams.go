package api

import (
	"context"
	"sync"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/proto/apiproto"
	"github.com/stratahq/strata/region/state"
)

// agentStreams owns the streams that carry the region's desired state down
// to its agents: each node's assignments (watchAssignments, routed by the
// assignment hub) and the region's network with the node's policy view
// (watchNetwork, network.go).
type agentStreams struct {
	core
	tune tuning
	hub  *assignmentHub
}

// following is how many nodes have an assignment stream open here.
func (s *agentStreams) following() int { return s.hub.nodes() }

// watchAssignments streams one node's assignments: a snapshot in one
// message (the agent deletes whatever it lacks, so it must never be
// split), then changes.
func (s *agentStreams) watchAssignments(ctx context.Context, node string, send func(*agentv1.AssignmentBatch) error) error {
	if err := waitSynced(ctx, s.caches.Assignments.Synced()); err != nil {
		return err
	}
	w := newWatch[api.Assignment](s.tune.watchBuffer)
	leave := s.hub.join(node, w)
	defer leave()

	snap := &agentv1.AssignmentBatch{Snapshot: true}
	// Through the node index: a copy of the whole cache per connecting
	// agent is a region's worth of garbage each time its agents
	// reconnect together. keep rechecks the node under the cache's lock.
	onNode := func(it store.Item[api.Assignment]) bool { return it.Value.Node == node }
	for _, it := range s.caches.Assignments.ByIndex(state.AssignmentsByNode, node, "", "", 0, onNode) {
		snap.Upserts = append(snap.Upserts, apiproto.AssignmentToPB(it.Value))
	}
	if err := send(snap); err != nil {
		return err
	}
	return pump(ctx, w, s.tune.assignWindow, s.tune.maxBatch, func(changes []store.Change[api.Assignment]) error {
		msg := &agentv1.AssignmentBatch{}
		for _, c := range changes {
			if c.New != nil {
				msg.Upserts = append(msg.Upserts, apiproto.AssignmentToPB(c.New.Value))
			} else {
				msg.Removed = append(msg.Removed, c.Name)
			}
		}
		return send(msg)
	})
}

// assignmentHub routes assignment changes to the watches of the nodes they
// concern, so that each cache batch is sorted once rather than filtered by
// every agent's stream. It is subscribed to the feed while it has watches.
type assignmentHub struct {
	feed *state.Feed[api.Assignment]

	// subMu guards the subscription. It is never held with mu, and
	// publish (called under the feed's lock) takes only mu, so Subscribe
	// and unsubscribe cannot deadlock with publish.
	subMu       sync.Mutex
	watches     int
	unsubscribe func()

	mu     sync.RWMutex
	byNode map[string]map[*watch[api.Assignment]]struct{}
}

func newAssignmentHub(feed *state.Feed[api.Assignment]) *assignmentHub {
	return &assignmentHub{feed: feed, byNode: make(map[string]map[*watch[api.Assignment]]struct{})}
}

// join adds w as a watch of node; call leave when the stream ends.
func (h *assignmentHub) join(node string, w *watch[api.Assignment]) (leave func()) {
	h.subMu.Lock()
	if h.watches == 0 {
		h.unsubscribe = h.feed.Subscribe(h.publish)
	}
	h.watches++
	h.subMu.Unlock()

	h.mu.Lock()
	if h.byNode[node] == nil {
		h.byNode[node] = make(map[*watch[api.Assignment]]struct{})
	}
	h.byNode[node][w] = struct{}{}
	h.mu.Unlock()

	return func() {
		h.mu.Lock()
		delete(h.byNode[node], w)
		if len(h.byNode[node]) == 0 {
			delete(h.byNode, node)
		}
		h.mu.Unlock()

		h.subMu.Lock()
		h.watches--
		if h.watches == 0 {
			h.unsubscribe()
			h.unsubscribe = nil
		}
		h.subMu.Unlock()
	}
}

// nodes is how many nodes have an assignment stream open here.
func (h *assignmentHub) nodes() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.byNode)
}

// publish is the feed subscriber. An assignment whose node changes is a
// removal for the node it left.
func (h *assignmentHub) publish(changes []store.Change[api.Assignment]) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if len(h.byNode) == 0 {
		return
	}
	perNode := make(map[string][]store.Change[api.Assignment])
	for _, c := range changes {
		from, to := nodeOf(c.Old), nodeOf(c.New)
		if to != "" && h.byNode[to] != nil {
			perNode[to] = append(perNode[to], c)
		}
		if from != "" && from != to && h.byNode[from] != nil {
			perNode[from] = append(perNode[from], store.Change[api.Assignment]{Name: c.Name, Old: c.Old})
		}
	}
	for node, cs := range perNode {
		for w := range h.byNode[node] {
			w.offer(cs)
		}
	}
}

func nodeOf(it *store.Item[api.Assignment]) string {
	if it == nil {
		return ""
	}
	return it.Value.Node
}
