package api

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/heartbeat"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/proto/apiproto"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

func TestRegister(t *testing.T) {
	e := newEnv(t)
	relabeled := testNode("n1")
	relabeled.Labels = map[string]string{"zone": "b"}
	wrongRegion := testNode("n2")
	wrongRegion.Region = "r2"
	noCapacity := testNode("n3")
	noCapacity.Capacity = nil

	steps := []struct {
		name        string
		do          func() (*resourcev1.Node, error)
		wantErr     error
		wantWrite   bool
		wantSched   bool
		wantReason  string
		wantZoneTag string
		registers   bool
	}{
		{"a new node is schedulable", func() (*resourcev1.Node, error) { return e.registerErr(testNode("n1")) },
			nil, true, true, "", "a", true},
		{"registering again refreshes registeredAt", func() (*resourcev1.Node, error) { return e.registerErr(testNode("n1")) },
			nil, true, true, "", "a", true},
		{"an operator cordons it", func() (*resourcev1.Node, error) {
			return e.region.CordonNode(e.ctx(), &regionv1.CordonNodeRequest{Name: "n1", Reason: "disk swap"})
		}, nil, true, false, "disk swap", "a", false},
		{"re-registering with new labels keeps the cordon", func() (*resourcev1.Node, error) { return e.registerErr(relabeled) },
			nil, true, false, "disk swap", "b", true},
		{"a node of another region is refused", func() (*resourcev1.Node, error) { return e.registerErr(wrongRegion) },
			api.ErrInvalid, false, false, "", "", false},
		{"an invalid node is refused", func() (*resourcev1.Node, error) { return e.registerErr(noCapacity) },
			api.ErrInvalid, false, false, "", "", false},
	}
	var registered time.Time
	for _, step := range steps {
		before := e.rev()
		n, err := step.do()
		// Every registration is evidence of life: registeredAt moves on.
		if at := n.GetRegisteredAt().AsTime(); err == nil && step.registers && !at.After(registered) {
			t.Errorf("%s: registeredAt %v; want it later than the previous registration's %v", step.name, at, registered)
		}
		if err == nil {
			registered = n.GetRegisteredAt().AsTime()
		}
		wantErr(t, step.name, err, step.wantErr)
		if wrote := e.rev() != before; wrote != step.wantWrite {
			t.Errorf("%s: got an etcd write %v; want %v", step.name, wrote, step.wantWrite)
		}
		if err != nil {
			continue
		}
		if n.GetSchedulable() != step.wantSched || n.GetCordonReason() != step.wantReason || n.GetLabels()["zone"] != step.wantZoneTag {
			t.Errorf("%s: got schedulable %v, cordon reason %q, zone label %q; want %v, %q, %q", step.name,
				n.GetSchedulable(), n.GetCordonReason(), n.GetLabels()["zone"], step.wantSched, step.wantReason, step.wantZoneTag)
		}
	}

	st, err := e.st.NodeStatus.Get(e.ctx(), "n1")
	if err != nil || st.Value.Health != api.HealthUp || st.Value.Since.IsZero() {
		t.Errorf("got node status %+v, %v; want Up with a since", st.Value, err)
	}
	eventually(t, func() error {
		if _, err := e.beats.Get(e.ctx(), "n1"); err != nil {
			return fmt.Errorf("heartbeat of n1: %w", err)
		}
		return nil
	})
	e.waitEvent("NodeRegistered", "node/n1")
	if n := e.countEvents("NodeRegistered", "node/n1"); n != 1 {
		t.Errorf("got %d NodeRegistered events; want 1 (re-registrations are not new nodes)", n)
	}
}

func (e *testEnv) registerErr(n *resourcev1.Node) (*resourcev1.Node, error) {
	resp, err := e.agent.Register(e.ctx(), &agentv1.RegisterRequest{Node: n})
	return resp.GetNode(), err
}

func TestHeartbeat(t *testing.T) {
	e := newEnv(t)
	e.register(testNode("n1"))
	cond := func(status api.ConditionStatus, reason, msg string) []*resourcev1.Condition {
		return apiproto.ConditionsToPB([]api.Condition{{Type: api.ConditionCRI, Status: status, Reason: reason, Message: msg}})
	}
	var seq uint64
	beat := func(node string, conds []*resourcev1.Condition) *agentv1.HeartbeatResponse {
		t.Helper()
		seq++
		resp, err := e.agent.Heartbeat(e.ctx(), &agentv1.HeartbeatRequest{Node: node, Seq: seq, Conditions: conds, Metrics: map[string]float64{"cpu_used": 0.5}})
		if err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
		return resp
	}

	steps := []struct {
		name       string
		beats      int
		conds      []*resourcev1.Condition
		wantWrites int64
		wantStatus api.ConditionStatus
		wantEvents int // ConditionChanged events so far
	}{
		{"the first report of a condition is written", 1, cond(api.ConditionReady, "", "ok"), 1, api.ConditionReady, 1},
		{"steady beats write nothing, whatever the message", 20, cond(api.ConditionReady, "", "still ok"), 0, api.ConditionReady, 1},
		{"a changed condition is written once", 5, cond(api.ConditionError, "SocketGone", "no containerd"), 1, api.ConditionError, 2},
		{"a changed reason is a change", 5, cond(api.ConditionError, "Timeout", "slow"), 1, api.ConditionError, 3},
	}
	var since time.Time
	for _, step := range steps {
		before := e.rev()
		for range step.beats {
			if resp := beat("n1", step.conds); resp.GetReregister() || resp.GetHeartbeatIntervalMs() != config.DefaultLiveness().HeartbeatInterval.Milliseconds() {
				t.Fatalf("%s: got response %v; want no reregister and interval %d ms", step.name, resp, config.DefaultLiveness().HeartbeatInterval.Milliseconds())
			}
		}
		last := seq
		// The batcher has flushed the last beat: its etcd writes, if it
		// made any, are done too.
		eventually(t, func() error {
			b, err := e.beats.Get(e.ctx(), "n1")
			if err != nil || b.Seq != last {
				return fmt.Errorf("got beat %+v, %v; want seq %d", b, err, last)
			}
			return nil
		})
		if got := e.rev() - before; got != step.wantWrites {
			t.Errorf("%s: got %d etcd writes; want %d", step.name, got, step.wantWrites)
		}
		st, err := e.st.NodeStatus.Get(e.ctx(), "n1")
		if err != nil {
			t.Fatal(err)
		}
		c, ok := st.Value.Condition(api.ConditionCRI)
		if !ok || c.Status != step.wantStatus || c.Since.IsZero() {
			t.Errorf("%s: got condition %+v, %v; want %s with a since", step.name, c, ok, step.wantStatus)
		}
		if step.wantWrites == 0 && !c.Since.Equal(since) {
			t.Errorf("%s: got since %v; want it kept at %v", step.name, c.Since, since)
		}
		since = c.Since
		eventually(t, func() error {
			if n := e.countEvents("ConditionChanged", "node/n1"); n != step.wantEvents {
				return fmt.Errorf("%s: got %d ConditionChanged events; want %d", step.name, n, step.wantEvents)
			}
			return nil
		})
	}
	if ev := e.waitEvent("ConditionChanged", "node/n1"); ev.Type != "Warning" || ev.Fields["reason"] != "Timeout" {
		t.Errorf("got last event %+v; want a Warning with reason Timeout", ev)
	}

	if resp := beat("ghost", nil); !resp.GetReregister() {
		t.Errorf("got %v for an unknown node; want reregister", resp)
	}
}

// TestHeartbeatStream checks that beats on one stream are recorded as
// Heartbeat calls are, each answered in order with what the call returns.
func TestHeartbeatStream(t *testing.T) {
	e := newEnv(t)
	e.register(testNode("n1"))
	stream, err := e.agent.StreamHeartbeats(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	beat := func(node string, seq uint64) *agentv1.HeartbeatResponse {
		t.Helper()
		conds := apiproto.ConditionsToPB([]api.Condition{{Type: api.ConditionCRI, Status: api.ConditionReady}})
		if err := stream.Send(&agentv1.HeartbeatRequest{Node: node, Seq: seq, Conditions: conds, Metrics: map[string]float64{"replicas": float64(seq)}}); err != nil {
			t.Fatalf("send beat %d: %v", seq, err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("beat %d: %v", seq, err)
		}
		return resp
	}
	before := e.rev()
	const beats = 10
	for seq := uint64(1); seq <= beats; seq++ {
		if resp := beat("n1", seq); resp.GetReregister() || resp.GetHeartbeatIntervalMs() != config.DefaultLiveness().HeartbeatInterval.Milliseconds() {
			t.Fatalf("beat %d: got response %v; want no reregister and interval %d ms", seq, resp, config.DefaultLiveness().HeartbeatInterval.Milliseconds())
		}
	}
	eventually(t, func() error {
		b, err := e.beats.Get(e.ctx(), "n1")
		if err != nil || b.Seq != beats || b.Metrics["replicas"] != beats {
			return fmt.Errorf("got beat %+v, %v; want seq %d", b, err, beats)
		}
		return nil
	})
	if got := e.rev() - before; got != 1 {
		t.Errorf("got %d etcd writes for %d beats of one condition; want 1", got, beats)
	}
	// A node the region does not know is asked to register, on the
	// stream, which carries on.
	if resp := beat("ghost", 1); !resp.GetReregister() {
		t.Errorf("got %v for an unknown node; want reregister", resp)
	}
	if resp := beat("n1", beats+1); resp.GetReregister() {
		t.Errorf("got %v after the unknown node's beat; want no reregister", resp)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("after CloseSend: got %v; want the stream to end cleanly (io.EOF)", err)
	}
}

// TestHeartbeatBatching checks that beats of many agents reach the
// heartbeat store in a few batches, not one call each.
func TestHeartbeatBatching(t *testing.T) {
	e := newEnv(t)
	const nodes, rounds = 100, 3
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() { e.register(testNode(fmt.Sprintf("n%03d", i))) })
	}
	wg.Wait()
	start, before := time.Now(), e.beats.batches.Load()
	for i := range nodes {
		wg.Go(func() {
			for r := range rounds {
				if _, err := e.agent.Heartbeat(e.ctx(), &agentv1.HeartbeatRequest{Node: fmt.Sprintf("n%03d", i), Seq: uint64(r + 1)}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	eventually(t, func() error {
		beats, err := e.beats.List(e.ctx())
		if err != nil {
			return err
		}
		for _, b := range beats {
			if b.Seq != rounds {
				return fmt.Errorf("got beat %s seq %d; want %d", b.ID, b.Seq, rounds)
			}
		}
		return nil
	})
	batches, elapsed := e.beats.batches.Load()-before, time.Since(start)
	// One batch per window, plus the partial windows at both ends.
	if limit := int64(elapsed/defaultTuning().beatWindow) + 2; batches > limit || batches >= nodes*rounds/10 {
		t.Errorf("got %d RecordBatch calls for %d beats in %s; want at most %d", batches, nodes*rounds, elapsed, limit)
	}
	t.Logf("%d beats in %d RecordBatch calls over %s", nodes*rounds, batches, elapsed)
}

func TestCordonDrain(t *testing.T) {
	e := newEnv(t)
	e.register(testNode("n1"))

	var firstDrain *resourcev1.DrainStatus
	steps := []struct {
		name      string
		do        func() (any, error)
		wantErr   error
		errText   string
		wantWrite bool
		wantSched bool // the node after the step
		check     func(v any) error
	}{
		{"cordon", func() (any, error) {
			return e.region.CordonNode(e.ctx(), &regionv1.CordonNodeRequest{Name: "n1", Reason: "kernel"})
		}, nil, "", true, false, func(v any) error {
			if n := v.(*resourcev1.Node); n.GetCordonedBy() != "operator" || n.GetCordonReason() != "kernel" || n.GetCordonedAt() == nil {
				return fmt.Errorf("got cordon %q by %q at %v; want kernel by operator, with a time", n.GetCordonReason(), n.GetCordonedBy(), n.GetCordonedAt())
			}
			return nil
		}},
		{"cordon again writes nothing", func() (any, error) {
			return e.region.CordonNode(e.ctx(), &regionv1.CordonNodeRequest{Name: "n1", Reason: "kernel"})
		}, nil, "", false, false, nil},
		{"uncordon", func() (any, error) { return e.region.UncordonNode(e.ctx(), &regionv1.NodeRef{Name: "n1"}) },
			nil, "", true, true, func(v any) error {
				if n := v.(*resourcev1.Node); n.GetCordonReason() != "" || n.GetCordonedAt() != nil {
					return fmt.Errorf("got cordon reason %q at %v; want both cleared", n.GetCordonReason(), n.GetCordonedAt())
				}
				return nil
			}},
		{"drain cordons and starts a drain", func() (any, error) {
			return e.region.DrainNode(e.ctx(), &regionv1.DrainNodeRequest{Name: "n1", Drain: &resourcev1.DrainRequest{Reason: "retire"}})
		}, nil, "", true, false, func(v any) error {
			d := v.(*resourcev1.DrainStatus)
			firstDrain = d
			deadline := d.GetDeadline().AsTime().Sub(d.GetStartedAt().AsTime())
			if d.GetState() != api.DrainRunning || d.GetMaxParallel() != 1 || deadline != config.DefaultRegionController().DrainDeadline || d.GetReason() != "retire" {
				return fmt.Errorf("got drain %v; want running, 1 at a time, deadline %s, reason retire", d, config.DefaultRegionController().DrainDeadline)
			}
			return nil
		}},
		{"drain again returns the running drain", func() (any, error) {
			return e.region.DrainNode(e.ctx(), &regionv1.DrainNodeRequest{Name: "n1", Drain: &resourcev1.DrainRequest{MaxParallel: 5}})
		}, nil, "", false, false, func(v any) error {
			if d := v.(*resourcev1.DrainStatus); !d.GetStartedAt().AsTime().Equal(firstDrain.GetStartedAt().AsTime()) || d.GetMaxParallel() != 1 {
				return fmt.Errorf("got drain %v; want the first one %v", d, firstDrain)
			}
			return nil
		}},
		{"uncordon during the drain is refused", func() (any, error) { return e.region.UncordonNode(e.ctx(), &regionv1.NodeRef{Name: "n1"}) },
			api.ErrConflict, "being drained", false, false, nil},
		{"get drain", func() (any, error) { return e.region.GetDrain(e.ctx(), &regionv1.NodeRef{Name: "n1"}) },
			nil, "", false, false, func(v any) error {
				if d := v.(*resourcev1.DrainStatus); d.GetState() != api.DrainRunning {
					return fmt.Errorf("got drain state %q; want running", d.GetState())
				}
				return nil
			}},
		{"the controller finishes the drain", func() (any, error) {
			_, err := e.st.Drains.Modify(e.ctx(), "n1", func(d *api.DrainStatus) error {
				d.State, d.FinishedAt = api.DrainSucceeded, time.Now()
				return nil
			})
			if err == nil {
				err = e.caches.Drains.WaitForRev(e.ctx(), e.rev())
			}
			return nil, err
		}, nil, "", true, false, nil},
		{"uncordon after the drain", func() (any, error) { return e.region.UncordonNode(e.ctx(), &regionv1.NodeRef{Name: "n1"}) },
			nil, "", true, true, nil},
		{"a new drain replaces a finished one", func() (any, error) {
			return e.region.DrainNode(e.ctx(), &regionv1.DrainNodeRequest{Name: "n1", Drain: &resourcev1.DrainRequest{MaxParallel: 3}})
		}, nil, "", true, false, func(v any) error {
			if d := v.(*resourcev1.DrainStatus); d.GetState() != api.DrainRunning || d.GetMaxParallel() != 3 ||
				!d.GetStartedAt().AsTime().After(firstDrain.GetStartedAt().AsTime()) {
				return fmt.Errorf("got drain %v; want a new running one, 3 at a time", d)
			}
			return nil
		}},
		{"a negative deadline is invalid", func() (any, error) {
			return e.region.DrainNode(e.ctx(), &regionv1.DrainNodeRequest{Name: "n1", Drain: apiproto.DrainRequestToPB(&api.DrainRequest{Deadline: api.D(-time.Second)})})
		}, api.ErrInvalid, "deadline", false, false, nil},
		{"drain of an unknown node", func() (any, error) {
			return e.region.DrainNode(e.ctx(), &regionv1.DrainNodeRequest{Name: "nope"})
		}, api.ErrNotFound, "nope", false, false, nil},
		{"cordon of an unknown node", func() (any, error) {
			return e.region.CordonNode(e.ctx(), &regionv1.CordonNodeRequest{Name: "nope"})
		}, api.ErrNotFound, "nope", false, false, nil},
		{"drain of a node never drained", func() (any, error) { return e.region.GetDrain(e.ctx(), &regionv1.NodeRef{Name: "nope"}) },
			api.ErrNotFound, "nope", false, false, nil},
	}
	for _, step := range steps {
		before := e.rev()
		v, err := step.do()
		wantErr(t, step.name, err, step.wantErr, step.errText)
		if wrote := e.rev() != before; wrote != step.wantWrite {
			t.Errorf("%s: got an etcd write %v; want %v", step.name, wrote, step.wantWrite)
		}
		if step.check != nil {
			if err := step.check(v); err != nil {
				t.Errorf("%s: %v", step.name, err)
			}
		}
		n, err := e.region.GetNode(e.ctx(), &regionv1.NodeRef{Name: "n1"})
		if err != nil {
			t.Fatal(err)
		}
		if n.GetSchedulable() != step.wantSched {
			t.Errorf("%s: got schedulable %v; want %v", step.name, n.GetSchedulable(), step.wantSched)
		}
	}
	for _, reason := range []string{"Cordoned", "Uncordoned", "DrainStarted"} {
		e.waitEvent(reason, "node/n1")
	}
}

func TestDeleteNode(t *testing.T) {
	e := newEnv(t)
	e.register(testNode("n1"))
	e.register(testNode("n2"))
	eventually(t, func() error {
		_, err := e.beats.Get(e.ctx(), "n1")
		return err
	})

	if _, err := e.region.DeleteNode(e.ctx(), &regionv1.NodeRef{Name: "n1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.region.GetNode(e.ctx(), &regionv1.NodeRef{Name: "n1"}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("got GetNode error %v after delete; want NotFound", err)
	}
	if _, err := e.st.NodeStatus.Get(e.ctx(), "n1"); err == nil {
		t.Error("got the node status still stored; want it deleted")
	}
	if _, err := e.beats.Get(e.ctx(), "n1"); !errors.Is(err, heartbeat.ErrNotFound) {
		t.Errorf("got heartbeat lookup error %v; want it forgotten", err)
	}
	if resp, err := e.agent.Heartbeat(e.ctx(), &agentv1.HeartbeatRequest{Node: "n1"}); err != nil || !resp.GetReregister() {
		t.Errorf("got heartbeat %v, %v from the deleted node; want reregister", resp, err)
	}
	if _, err := e.region.DeleteNode(e.ctx(), &regionv1.NodeRef{Name: "n1"}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("got second delete error %v; want NotFound", err)
	}
	if _, err := e.region.GetNode(e.ctx(), &regionv1.NodeRef{Name: "n2"}); err != nil {
		t.Errorf("got GetNode(n2) error %v; want the other node untouched", err)
	}
}

// TestConditionsChanged checks the heartbeat's quick comparison against
// the merge it stands for, on every small combination of conditions:
// duplicates, missing and new types, changed status or reason, a changed
// message alone (no change).
func TestConditionsChanged(t *testing.T) {
	pool := []api.Condition{
		{Type: "Disk", Status: api.ConditionReady},
		{Type: "Disk", Status: api.ConditionError, Reason: "full"},
		{Type: "Disk", Status: api.ConditionReady, Message: "said otherwise"},
		{Type: "Net", Status: api.ConditionReady},
		{Type: "Net", Status: api.ConditionReady, Reason: "flaky"},
		{Type: "Mem", Status: api.ConditionWarning},
	}
	// Every list of up to 3 conditions from pool, repeats allowed.
	var lists [][]api.Condition
	var build func(cur []api.Condition)
	build = func(cur []api.Condition) {
		lists = append(lists, slices.Clone(cur))
		if len(cur) == 3 {
			return
		}
		for _, c := range pool {
			build(append(cur, c))
		}
	}
	build(nil)
	now := time.Unix(1e9, 0)
	for _, reported := range lists {
		for _, prev := range lists {
			// What the store holds is a merge's result.
			stored, _ := mergeConditions(nil, prev, now)
			_, changed := mergeConditions(stored, reported, now)
			if got, want := conditionsChanged(stored, reported), len(changed) > 0; got != want {
				t.Fatalf("conditionsChanged(%v, %v) = %v; the merge changes %v", stored, reported, got, changed)
			}
		}
	}
	// Beyond the quick comparison's bound it still answers the merge's way.
	long := make([]api.Condition, maxQuickConditions+1)
	for i := range long {
		long[i] = api.Condition{Type: fmt.Sprint("T", i), Status: api.ConditionReady}
	}
	stored, _ := mergeConditions(nil, long, now)
	if conditionsChanged(stored, long) {
		t.Errorf("a long unchanged report counts as changed")
	}
	if !conditionsChanged(stored, long[1:]) {
		t.Errorf("a long report missing a condition counts as unchanged")
	}
}
