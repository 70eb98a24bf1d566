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
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/proto/apiproto"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

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
