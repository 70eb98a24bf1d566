package api

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/proto/apiproto"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

func TestReportStatus(t *testing.T) {
	e := newEnv(t)
	e.putAssignments(testAssignment("a1", "acme", "web", "n1"))
	status := func(phase api.Phase, reason string) []*resourcev1.AssignmentStatus {
		return []*resourcev1.AssignmentStatus{apiproto.AssignmentStatusToPB(&api.AssignmentStatus{
			ID: "a1", ObservedGeneration: 1, Phase: phase, Reason: reason, ProviderID: "ctr-1",
		})}
	}
	unknown := []*resourcev1.AssignmentStatus{{Id: "nope", Phase: string(api.PhaseReady)}}

	steps := []struct {
		name      string
		node      string
		statuses  []*resourcev1.AssignmentStatus
		wantWrite bool
		wantPhase api.Phase // stored afterwards; "" none
		wantEvent string    // reason of an event about replica/a1, checked at the end
	}{
		{"another node's report is dropped", "n2", status(api.PhaseReady, ""), false, "", ""},
		{"a report of an unknown replica is dropped", "n1", unknown, false, "", ""},
		{"the node's report is written", "n1", status(api.PhaseProvision, ""), true, api.PhaseProvision, ""},
		{"the same report again is not", "n1", status(api.PhaseProvision, ""), false, api.PhaseProvision, ""},
		{"ready is written with an event", "n1", status(api.PhaseReady, ""), true, api.PhaseReady, "ReplicaReady"},
		{"a failure is written with an event", "n1", status(api.PhaseError, "OOMKilled"), true, api.PhaseError, "ReplicaFailed"},
	}
	for _, step := range steps {
		before := e.rev()
		if _, err := e.agent.ReportStatus(e.ctx(), &agentv1.ReportStatusRequest{Node: step.node, Statuses: step.statuses}); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if wrote := e.rev() != before; wrote != step.wantWrite {
			t.Errorf("%s: got an etcd write %v; want %v", step.name, wrote, step.wantWrite)
		}
		it, err := e.st.Statuses.Get(e.ctx(), "a1")
		switch {
		case step.wantPhase == "" && !errors.Is(err, store.ErrNotFound):
			t.Errorf("%s: got status %+v, %v; want none stored", step.name, it.Value, err)
		case step.wantPhase != "" && (err != nil || it.Value.Phase != step.wantPhase || it.Value.Node != "n1" || it.Value.UpdatedAt.IsZero()):
			t.Errorf("%s: got status %+v, %v; want phase %s on n1 with updatedAt", step.name, it.Value, err, step.wantPhase)
		}
	}
	if ev := e.waitEvent("ReplicaFailed", "replica/a1"); ev.Type != "Warning" || ev.Fields["reason"] != "OOMKilled" {
		t.Errorf("got event %+v; want a Warning with reason OOMKilled", ev)
	}
	e.waitEvent("ReplicaReady", "replica/a1")
	if _, err := e.agent.ReportStatus(e.ctx(), &agentv1.ReportStatusRequest{Statuses: unknown}); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("got %v for a report without node; want ErrInvalid", err)
	}
}

// TestReportStatusCoalesces checks that concurrent reports of many agents
// share transactions, and that every report is committed when its call
// returns.
func TestReportStatusCoalesces(t *testing.T) {
	e := newEnv(t)
	const agents, rounds = 50, 5
	var as []api.Assignment
	for i := range agents {
		as = append(as, testAssignment(fmt.Sprintf("a%02d", i), "acme", "web", fmt.Sprintf("n%02d", i)))
	}
	e.putAssignments(as...)

	before := e.rev()
	var wg sync.WaitGroup
	for i := range agents {
		wg.Go(func() {
			for r := range rounds {
				st := api.AssignmentStatus{ID: fmt.Sprintf("a%02d", i), Phase: api.PhaseReady, Restarts: r}
				if _, err := e.agent.ReportStatus(e.ctx(), &agentv1.ReportStatusRequest{
					Node: fmt.Sprintf("n%02d", i), Statuses: []*resourcev1.AssignmentStatus{apiproto.AssignmentStatusToPB(&st)},
				}); err != nil {
					t.Error(err)
					return
				}
				// Committed on return: etcd has it.
				it, err := e.st.Statuses.Get(e.ctx(), st.ID)
				if err != nil || it.Value.Restarts != r {
					t.Errorf("%s round %d: got stored %+v, %v; want restarts %d", st.ID, r, it.Value, err, r)
					return
				}
			}
		})
	}
	wg.Wait()
	txns, reports := e.rev()-before, int64(agents*rounds)
	if txns > reports/5 {
		t.Errorf("got %d transactions for %d reports; want at most %d", txns, reports, reports/5)
	}
	t.Logf("%d reports in %d transactions", reports, txns)
}

// TestReportOfARemovedReplicaLeavesNoStatus: the controller removes an
// assignment (and its status) after an agent's report passed the check
// against the cache but before the status writer wrote it. The status
// must not come back: nothing would ever remove it again. A report for an
// assignment removed and created again under the same id is dropped too.
func TestReportOfARemovedReplicaLeavesNoStatus(t *testing.T) {
	for _, recreate := range []bool{false, true} {
		t.Run(fmt.Sprintf("recreated=%v", recreate), func(t *testing.T) {
			// A long window holds the queued report while the assignment
			// goes: a report right after a batch waits for the rest of
			// the window, so a first report opens one.
			e := newEnv(t, func(_ *Options, tune *tuning) { tune.statusWindow = time.Second })
			e.putAssignments(testAssignment("a1", "acme", "web", "n1"), testAssignment("a2", "acme", "web", "n1"))
			report := func(id string) *resourcev1.AssignmentStatus {
				return apiproto.AssignmentStatusToPB(&api.AssignmentStatus{ID: id, ObservedGeneration: 1, Phase: api.PhaseDestroyed})
			}
			opening := apiproto.AssignmentStatusToPB(&api.AssignmentStatus{ID: "a2", ObservedGeneration: 1, Phase: api.PhaseProvision})
			if _, err := e.agent.ReportStatus(e.ctx(), &agentv1.ReportStatusRequest{Node: "n1", Statuses: []*resourcev1.AssignmentStatus{opening}}); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := e.agent.ReportStatus(e.ctx(), &agentv1.ReportStatusRequest{Node: "n1", Statuses: []*resourcev1.AssignmentStatus{report("a1"), report("a2")}})
				done <- err
			}()
			eventually(t, func() error {
				e.srv.statuses.queue.mu.Lock()
				defer e.srv.statuses.queue.mu.Unlock()
				if len(e.srv.statuses.queue.writes) == 0 {
					return errors.New("report not queued yet")
				}
				return nil
			})
			// The controller's removal: assignment and status in one go.
			txn := e.st.Store.Txn()
			e.st.Assignments.TxnDelete(txn, "a1", 0)
			e.st.Statuses.TxnDelete(txn, "a1", 0)
			if _, err := txn.Commit(e.ctx()); err != nil {
				t.Fatal(err)
			}
			if recreate {
				e.putAssignments(testAssignment("a1", "acme", "web", "n1"))
			}
			if err := <-done; err != nil {
				t.Fatalf("report: got %v; want nil (a status of a removed replica is dropped, not an error)", err)
			}
			if it, err := e.st.Statuses.Get(e.ctx(), "a1"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("status of removed a1: got %+v, %v; want none", it.Value, err)
			}
			if it, err := e.st.Statuses.Get(e.ctx(), "a2"); err != nil || it.Value.Phase != api.PhaseDestroyed {
				t.Errorf("status of a2, reported with it: got %+v, %v; want destroyed", it.Value, err)
			}
		})
	}
}
