package api

import (
	"errors"
	"fmt"
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
