package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/flush"
	"github.com/stratahq/strata/internal/store"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/proto/apiproto"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	"github.com/stratahq/strata/region/state"
)

// watch carries one stream's changes from a cache's goroutine, which must
// never block, to the stream's goroutine. A stream that falls a whole
// buffer behind is closed (the receiver reconnects and gets a fresh
// snapshot) rather than slowing the cache or growing without bound.
//
// The queue grows with what is pending, not with the buffer: a region
// holds a watch per agent and stream, nearly all of them empty, and a
// channel of buffer batches would reserve the whole buffer for each.
type watch[T any] struct {
	mu       sync.Mutex
	queue    [][]store.Change[T] // batches offered and not yet taken
	limit    int                 // the buffer: batches queue may hold
	ready    chan struct{}       // holds a token while queue may be non-empty
	overflow chan struct{}       // closed once the buffer was full
	once     sync.Once
}

func newWatch[T any](buffer int) *watch[T] {
	return &watch[T]{limit: buffer, ready: make(chan struct{}, 1), overflow: make(chan struct{})}
}

// offer queues changes without blocking.
func (w *watch[T]) offer(changes []store.Change[T]) {
	w.mu.Lock()
	full := len(w.queue) >= w.limit
	if !full {
		w.queue = append(w.queue, changes)
	}
	w.mu.Unlock()
	if full {
		w.once.Do(func() { close(w.overflow) })
		return
	}
	select {
	case w.ready <- struct{}{}:
	default: // a token is there already
	}
}

// take returns the oldest batch queued, if any.
func (w *watch[T]) take() ([]store.Change[T], bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 {
		return nil, false
	}
	changes := w.queue[0]
	w.queue[0] = nil
	w.queue = w.queue[1:]
	if len(w.queue) == 0 {
		w.queue = nil // give the backing array back
	} else {
		select {
		case w.ready <- struct{}{}: // more to take: wake the reader again
		default:
		}
	}
	return changes, true
}

// pending returns the number of batches queued.
func (w *watch[T]) pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}

// pump coalesces a watch's changes by name (first Old, last New) and
// hands them to send: at once when the last send is a window ago or more
// (an idle stream adds no delay), else when the window since the last
// send has passed, or as soon as max are pending; until ctx is done or
// the watch overflowed. Changes that created and deleted an object
// before a send are not sent: the receiver never saw it.
func pump[T any](ctx context.Context, w *watch[T], window time.Duration, max int, send func([]store.Change[T]) error) error {
	p := pumper[T]{win: flush.Window{D: window}, max: max, send: send}
	defer p.stopTimer()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.overflow:
			return fmt.Errorf("watcher fell %d change batches behind; too slow, reconnect: %w", w.limit, api.ErrUnavailable)
		case <-w.ready:
			p.co.drain(w, max)
			if err := p.step(); err != nil {
				return err
			}
		case <-p.due:
			if err := p.flush(); err != nil {
				return err
			}
		}
	}
}

// pumper is pump's state: the pending changes and the window's timer.
type pumper[T any] struct {
	co    coalesced[T]
	win   flush.Window
	max   int
	send  func([]store.Change[T]) error
	timer *time.Timer
	due   <-chan time.Time // nil while no send is scheduled
}

// step sends the pending changes when they fill a message or the window
// lets them go at once, and otherwise schedules a send at the window's
// end.
func (p *pumper[T]) step() error {
	n := len(p.co.batch)
	switch {
	case n >= p.max:
		return p.flush()
	case n == 0 || p.due != nil:
		return nil
	}
	wait := p.win.Wait(time.Now())
	if wait <= 0 {
		return p.flush()
	}
	p.timer = time.NewTimer(wait)
	p.due = p.timer.C
	return nil
}

func (p *pumper[T]) stopTimer() {
	if p.timer != nil {
		p.timer.Stop()
	}
	p.due = nil
}

// flush sends the pending changes, max to a message.
func (p *pumper[T]) flush() error {
	p.stopTimer()
	defer func() { p.win.Flushed(time.Now()) }()
	for chunk := range slices.Chunk(p.co.take(), p.max) {
		if err := p.send(chunk); err != nil {
			return err
		}
	}
	return nil
}

// coalesced holds the changes of one window, one per name: the first
// Old, the last New.
type coalesced[T any] struct {
	batch   []store.Change[T]
	pending map[string]int // name -> index in batch
}

func (c *coalesced[T]) add(changes []store.Change[T]) {
	if c.pending == nil {
		c.pending = make(map[string]int)
	}
	for _, ch := range changes {
		if i, ok := c.pending[ch.Name]; ok {
			c.batch[i].New = ch.New
			continue
		}
		c.pending[ch.Name] = len(c.batch)
		c.batch = append(c.batch, ch)
	}
}

// drain adds the changes queued in w, up to max pending (at least one
// batch when there is one), so that what arrived together is sent
// together.
func (c *coalesced[T]) drain(w *watch[T], max int) {
	for first := true; first || len(c.batch) < max; first = false {
		changes, ok := w.take()
		if !ok {
			return
		}
		c.add(changes)
	}
}

// take returns the window's changes and starts a new window. An object
// created and deleted within the window is left out: the receiver never
// saw it.
//
// A map keeps the room it grew to when cleared: a region holds one per
// agent stream, so one that grew past a few names (a node's replicas
// created at once) is dropped rather than kept for the stream's life.
func (c *coalesced[T]) take() []store.Change[T] {
	out := slices.DeleteFunc(c.batch, func(ch store.Change[T]) bool { return ch.Old == nil && ch.New == nil })
	c.batch = nil
	if len(c.pending) > keptPending {
		c.pending = nil
	} else {
		clear(c.pending)
	}
	return out
}

// keptPending is the most names a window may have had for its map to be
// kept for the next (one group of a Go map).
const keptPending = 8

// watchShares streams the region's shares: one snapshot, then changes.
func (s *Server) watchShares(ctx context.Context, send func(*regionv1.WatchSharesResponse) error) error {
	if err := waitSynced(ctx, s.caches.Shares.Synced()); err != nil {
		return err
	}
	// Subscribe before the snapshot: a change after the snapshot is then
	// sent, and one before it at worst twice.
	w := newWatch[state.Share](s.tune.watchBuffer)
	unsubscribe := s.caches.ShareFeed.Subscribe(w.offer)
	defer unsubscribe()

	items := s.caches.Shares.List()
	snap := &regionv1.WatchSharesResponse{Snapshot: true, Events: make([]*regionv1.ShareEvent, 0, len(items))}
	for _, it := range items {
		snap.Events = append(snap.Events, state.ShareToPB(it.Value))
	}
	if err := send(snap); err != nil {
		return err
	}
	return pump(ctx, w, s.tune.shareWindow, s.tune.maxBatch, func(changes []store.Change[state.Share]) error {
		msg := &regionv1.WatchSharesResponse{Events: make([]*regionv1.ShareEvent, 0, len(changes))}
		for _, c := range changes {
			if c.New != nil {
				msg.Events = append(msg.Events, state.ShareToPB(c.New.Value))
				continue
			}
			tenant, name, _ := strings.Cut(c.Name, "/")
			msg.Events = append(msg.Events, &regionv1.ShareEvent{Tenant: tenant, Name: name, Uid: c.Old.Value.UID, Removed: true})
		}
		return send(msg)
	})
}

// watchAssignments streams one node's assignments: a snapshot in one
// message (the agent deletes whatever it lacks, so it must never be
// split), then changes.
func (s *Server) watchAssignments(ctx context.Context, node string, send func(*agentv1.AssignmentBatch) error) error {
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

// watchNetwork streams the region's default network and every node's
// place on it: a snapshot in one message (the agent removes what it
// lacks), then the nodes whose place changed (registered, deleted,
// re-addressed). Changes that do not touch a node's network (cordons,
// registrations that change nothing of it) are not sent.
//
// The same stream carries what node's host needs to isolate tenants and
// enforce network policies (policyView): the snapshot holds it whole,
// then its changes follow.
func (s *Server) watchNetwork(ctx context.Context, node string, send func(*agentv1.NetworkBatch) error) error {
	for _, synced := range []<-chan struct{}{s.caches.Nodes.Synced(), s.caches.Networks.Synced(), s.caches.Assignments.Synced(), s.caches.Policies.Synced()} {
		if err := waitSynced(ctx, synced); err != nil {
			return err
		}
	}
	nw, ok := s.caches.DefaultNetwork()
	if !ok {
		return fmt.Errorf("the region has no default network: %w", api.ErrUnavailable)
	}
	w := newWatch[api.Node](s.tune.watchBuffer)
	unsubscribe := s.caches.NodeFeed.Subscribe(func(changes []store.Change[api.Node]) {
		var moved []store.Change[api.Node]
		for _, c := range changes {
			if c.Old == nil || c.New == nil || !api.SameJSON(c.Old.Value.Network, c.New.Value.Network) {
				moved = append(moved, c)
			}
		}
		if len(moved) > 0 {
			w.offer(moved)
		}
	})
	defer unsubscribe()

	items := s.caches.Nodes.List()
	snap := &agentv1.NetworkBatch{Snapshot: true, Network: regionNetworkToPB(nw), Upserts: make([]*agentv1.NetworkPeer, 0, len(items))}
	for _, it := range items {
		snap.Upserts = append(snap.Upserts, networkPeer(it.Value))
	}
	view := s.policyViewOf(node)
	view.fill(snap)
	if err := send(snap); err != nil {
		return err
	}
	// Two loops share the stream: one sends at a time.
	var sendMu sync.Mutex
	locked := func(b *agentv1.NetworkBatch) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return send(b)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	policyErr := make(chan error, 1)
	go func() {
		policyErr <- s.followPolicies(ctx, node, view, s.tune.netWindow, locked)
		cancel()
	}()
	err := pump(ctx, w, s.tune.netWindow, s.tune.maxBatch, func(changes []store.Change[api.Node]) error {
		msg := &agentv1.NetworkBatch{}
		for _, c := range changes {
			if c.New != nil {
				msg.Upserts = append(msg.Upserts, networkPeer(c.New.Value))
			} else {
				msg.Removed = append(msg.Removed, c.Name)
			}
		}
		return locked(msg)
	})
	cancel()
	if perr := <-policyErr; perr != nil && !errors.Is(perr, context.Canceled) {
		return perr
	}
	return err
}

func networkPeer(n *api.Node) *agentv1.NetworkPeer {
	return &agentv1.NetworkPeer{Node: n.Name, Network: apiproto.NodeNetworkToPB(n.Network)}
}

func regionNetworkToPB(n *api.Network) *agentv1.RegionNetwork {
	return &agentv1.RegionNetwork{Name: n.Name, Subnet: n.Subnet, NodeMask: int32(n.NodeMask), Backend: n.Backend, Vni: int32(n.VNI), Bridge: n.Bridge}
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

// FollowingNodes is how many nodes follow their assignments through this
// replica (an open WatchAssignments stream): after a replica's loss, its
// agents are back once the survivors' counts add up again.
func (s *Server) FollowingNodes() int { return s.hub.nodes() }

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
