package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	"github.com/stratahq/strata/region/state"
)

func testShare(tenant, name string, ready int) state.Share {
	return state.Share{
		Tenant: tenant, Name: name, UID: "uid-" + name,
		RegionShare: api.RegionShare{Phase: api.PhaseProvision, Replicas: 2, Ready: ready},
	}
}

// shareSummary renders a WatchShares message as "snapshot? tenant/name:ready|removed ...".
func shareSummary(m *regionv1.WatchSharesResponse) string {
	s := ""
	if m.GetSnapshot() {
		s = "snapshot"
	}
	for _, ev := range m.GetEvents() {
		if ev.GetRemoved() {
			s += fmt.Sprintf(" %s/%s:removed(%s)", ev.GetTenant(), ev.GetName(), ev.GetUid())
		} else {
			s += fmt.Sprintf(" %s/%s:%d", ev.GetTenant(), ev.GetName(), ev.GetShare().GetReady())
		}
	}
	return s
}

func TestWatchShares(t *testing.T) {
	e := newEnv(t)
	a := testShare("acme", "a", 1)
	if _, err := e.st.Shares.Put(e.ctx(), "acme/a", &a); err != nil {
		t.Fatal(err)
	}
	if err := e.caches.Shares.WaitForRev(e.ctx(), e.rev()); err != nil {
		t.Fatal(err)
	}
	stream, err := e.region.WatchShares(e.ctx(), &regionv1.WatchSharesRequest{})
	if err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		name  string
		write func() error
		want  string
	}{
		{"snapshot", func() error { return nil }, "snapshot acme/a:1"},
		{"a new share", func() error {
			b := testShare("acme", "b", 0)
			_, err := e.st.Shares.Put(e.ctx(), "acme/b", &b)
			return err
		}, " acme/b:0"},
		{"a changed share", func() error {
			b := testShare("acme", "b", 2)
			_, err := e.st.Shares.Put(e.ctx(), "acme/b", &b)
			return err
		}, " acme/b:2"},
		{"a removed share", func() error {
			_, err := e.st.Shares.Delete(e.ctx(), "acme/a", 0)
			return err
		}, " acme/a:removed(uid-a)"},
	}
	for _, step := range steps {
		if err := step.write(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		msg, err := stream.Recv()
		if err != nil {
			t.Fatalf("%s: Recv: %v", step.name, err)
		}
		if got := shareSummary(msg); got != step.want {
			t.Errorf("%s: got %q; want %q", step.name, got, step.want)
		}
	}
}

// TestPump drives the coalescing loop directly, so that timing cannot make
// it flaky.
func TestPump(t *testing.T) {
	item := func(v int) *store.Item[int] { return &store.Item[int]{Value: &v} }
	tests := []struct {
		name    string
		changes []store.Change[int]
		max     int
		want    []string // one string per send: name:old->new
	}{
		{"updates of one object coalesce to first old, last new",
			[]store.Change[int]{{Name: "a", Old: item(0), New: item(1)}, {Name: "a", Old: item(1), New: item(2)}, {Name: "a", Old: item(2), New: item(3)}},
			10, []string{"a:0->3"}},
		{"created and deleted within the window is not sent",
			[]store.Change[int]{{Name: "a", New: item(1)}, {Name: "b", New: item(5)}, {Name: "a", Old: item(1)}},
			10, []string{"b:nil->5"}},
		{"max splits a batch",
			[]store.Change[int]{{Name: "a", New: item(1)}, {Name: "b", New: item(2)}, {Name: "c", New: item(3)}},
			2, []string{"a:nil->1 b:nil->2", "c:nil->3"}},
	}
	render := func(it *store.Item[int]) string {
		if it == nil {
			return "nil"
		}
		return fmt.Sprint(*it.Value)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWatch[int](len(tt.changes))
			for _, c := range tt.changes {
				w.offer([]store.Change[int]{c})
			}
			ctx, cancel := context.WithCancel(t.Context())
			var got []string
			err := pump(ctx, w, 50*time.Millisecond, tt.max, func(cs []store.Change[int]) error {
				s := ""
				for i, c := range cs {
					if i > 0 {
						s += " "
					}
					s += c.Name + ":" + render(c.Old) + "->" + render(c.New)
				}
				got = append(got, s)
				if w.pending() == 0 {
					cancel() // everything offered was sent
				}
				return nil
			})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got pump error %v; want context.Canceled", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got sends %q; want %q", got, tt.want)
			}
		})
	}
}

// TestPumpSlowConsumer checks that a watcher that stops reading is closed
// with Unavailable instead of blocking the cache.
func TestPumpSlowConsumer(t *testing.T) {
	w := newWatch[int](2)
	sending, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- pump(t.Context(), w, time.Millisecond, 10, func([]store.Change[int]) error {
			select {
			case sending <- struct{}{}:
			default:
			}
			<-release // a receiver that does not read
			return nil
		})
	}()
	one := 1
	w.offer([]store.Change[int]{{Name: "a", New: &store.Item[int]{Value: &one}}})
	select {
	case <-sending:
	case <-time.After(waitFor):
		t.Fatal("pump never sent")
	}
	// The pump is stuck in send: the buffer fills, then overflows. offer
	// must return at once all the same.
	start := time.Now()
	for range 3 {
		w.offer([]store.Change[int]{{Name: "b", New: &store.Item[int]{Value: &one}}})
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("got offers blocking for %s; want them not to block", d)
	}
	close(release)
	select {
	case err := <-done:
		if !errors.Is(err, api.ErrUnavailable) {
			t.Errorf("got pump error %v; want ErrUnavailable", err)
		}
	case <-time.After(waitFor):
		t.Fatal("pump did not give up on a slow consumer")
	}
}

// assignmentSummary renders a batch as "snapshot? +id ... -id ...".
func assignmentSummary(b *agentv1.AssignmentBatch) string {
	s := ""
	if b.GetSnapshot() {
		s = "snapshot"
	}
	for _, a := range b.GetUpserts() {
		s += fmt.Sprintf(" +%s@%s", a.GetId(), a.GetNode())
	}
	for _, id := range b.GetRemoved() {
		s += " -" + id
	}
	return s
}

func TestWatchAssignments(t *testing.T) {
	e := newEnv(t)
	e.putAssignments(testAssignment("a1", "acme", "web", "n1"), testAssignment("a2", "acme", "web", "n2"),
		testAssignment("a0", "acme", "web", "")) // not placed: nobody's

	watch := func(node string) grpc.ServerStreamingClient[agentv1.AssignmentBatch] {
		s, err := e.agent.WatchAssignments(e.ctx(), &agentv1.WatchAssignmentsRequest{Node: node})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	streams := map[string]grpc.ServerStreamingClient[agentv1.AssignmentBatch]{"n1": watch("n1"), "n2": watch("n2")}
	// Both streams are joined once their snapshots arrive (first step).
	defer func() {
		if got := e.srv.FollowingNodes(); got != 2 {
			t.Errorf("FollowingNodes with n1 and n2 watching = %d; want 2", got)
		}
	}()

	steps := []struct {
		name  string
		write func()
		want  map[string]string // the next message of each node's stream; absent: none before the next step's
	}{
		{"snapshots hold only the node's assignments", func() {},
			map[string]string{"n1": "snapshot +a1@n1", "n2": "snapshot +a2@n2"}},
		{"a new assignment goes to its node", func() { e.putAssignments(testAssignment("a3", "acme", "web", "n1")) },
			map[string]string{"n1": " +a3@n1"}},
		{"an update goes to its node only", func() {
			a2 := testAssignment("a2", "acme", "web", "n2")
			a2.Generation = 2
			e.putAssignments(a2)
		}, map[string]string{"n2": " +a2@n2"}},
		{"a move is a removal for the old node and an upsert for the new", func() { e.putAssignments(testAssignment("a1", "acme", "web", "n2")) },
			map[string]string{"n1": " -a1", "n2": " +a1@n2"}},
		{"a deletion is a removal", func() {
			if _, err := e.st.Assignments.Delete(e.ctx(), "a3", 0); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"n1": " -a3"}},
	}
	for _, step := range steps {
		step.write()
		for _, node := range []string{"n1", "n2"} {
			want, ok := step.want[node]
			if !ok {
				continue // checked by the exact content of its next message
			}
			msg, err := streams[node].Recv()
			if err != nil {
				t.Fatalf("%s: %s: Recv: %v", step.name, node, err)
			}
			if got := assignmentSummary(msg); got != want {
				t.Errorf("%s: %s got %q; want %q", step.name, node, got, want)
			}
		}
	}
}

// TestWatchQueue checks the watch's queue: batches come out in the order
// they were offered, nothing is held once they are taken, and the offer
// past the buffer closes overflow without queueing.
func TestWatchQueue(t *testing.T) {
	w := newWatch[int](3)
	if _, ok := w.take(); ok {
		t.Fatal("got a batch from an empty watch; want none")
	}
	for i := range 3 {
		w.offer([]store.Change[int]{{Name: fmt.Sprint(i)}})
	}
	select {
	case <-w.overflow:
		t.Fatal("got overflow with the buffer just full; want none")
	default:
	}
	w.offer([]store.Change[int]{{Name: "past"}})
	select {
	case <-w.overflow:
	default:
		t.Fatal("got no overflow past the buffer; want it closed")
	}
	if got := w.pending(); got != 3 {
		t.Errorf("got %d batches pending; want 3 (the one past the buffer is dropped)", got)
	}
	for i := range 3 {
		select {
		case <-w.ready:
		default:
			t.Fatalf("got no ready token with %d batches pending; want one", w.pending())
		}
		cs, ok := w.take()
		if !ok || len(cs) != 1 || cs[0].Name != fmt.Sprint(i) {
			t.Fatalf("got batch %v, %v; want the one named %d", cs, ok, i)
		}
	}
	if w.queue != nil {
		t.Errorf("got queue %v after taking everything; want nil (its array released)", w.queue)
	}
	select {
	case <-w.ready:
		t.Error("got a ready token with nothing pending; want none")
	default:
	}
}

// TestCoalescedDropsAGrownMap checks that a window's changes come out
// merged by name whatever the window before held, and that a window of
// many names does not leave its grown map to the stream's next ones.
func TestCoalescedDropsAGrownMap(t *testing.T) {
	item := func(gen int64) *store.Item[api.Assignment] {
		return &store.Item[api.Assignment]{Value: &api.Assignment{Generation: gen}}
	}
	for _, n := range []int{keptPending, keptPending + 1, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var c coalesced[api.Assignment]
			var first []store.Change[api.Assignment]
			for i := range n {
				first = append(first, store.Change[api.Assignment]{Name: fmt.Sprint("a", i), New: item(1)})
			}
			c.add(first)
			if got := c.take(); len(got) != n {
				t.Fatalf("first window: got %d changes; want %d", len(got), n)
			}
			if kept := c.pending != nil; kept != (n <= keptPending) {
				t.Errorf("after a window of %d names the map is kept: %v; want %v", n, kept, n <= keptPending)
			}
			c.add([]store.Change[api.Assignment]{{Name: "a0", Old: item(1), New: item(2)}})
			c.add([]store.Change[api.Assignment]{{Name: "a0", Old: item(2), New: item(3)}})
			got := c.take()
			if len(got) != 1 || got[0].Old.Value.Generation != 1 || got[0].New.Value.Generation != 3 {
				t.Errorf("second window: got %d changes (%+v); want one, from generation 1 to 3", len(got), got)
			}
		})
	}
}
