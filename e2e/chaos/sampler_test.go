package chaos

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	resourcev1 "github.com/stratahq/strata/proto/resource/v1"

	agentv1 "github.com/stratahq/strata/proto/agent/v1"
)

// world is what two agents run, changing after each question: the
// sampler's agents are asked in turn, and the controller acts between
// two answers.
type world struct {
	steps []map[string][]string // per step, agent to the replicas it runs
	asked int
	// restartAt, when set, is the step from which r1-n2 is a new process.
	restartAt int
}

func (w *world) ask(_ context.Context, agent string) (*agentv1.NodeStatusResponse, error) {
	step := w.steps[min(w.asked, len(w.steps)-1)]
	started := time.Unix(1_700_000_000, 0)
	if agent == "r1-n2" && w.restartAt > 0 && w.asked >= w.restartAt {
		started = started.Add(time.Minute)
	}
	w.asked++
	resp := &agentv1.NodeStatusResponse{Node: agent, StartedAt: timestamppb.New(started)}
	for _, id := range step[agent] {
		resp.Assignments = append(resp.Assignments, &resourcev1.AssignmentStatus{Id: id, Phase: "ready"})
	}
	return resp, nil
}

// A replica stopped on one agent after it answered and its replacement
// started on the next before it answered never ran beside it: a sample
// must not count both. e2e/chaos agent-kill seed 5 reported chaos-e
// running 5 replicas, 3 of them in region r1, though the resource never
// asked more than 4 (at most 2 in r1: the split of 4 over two regions);
// its sample counted the answers of one pass over the agents, asked one
// after the other (the restarted one last), as one instant, and such a
// pass took up to 1.4 s under load while the controller replaced
// replicas in between.
func TestAgentKillSamplerCountsOneInstant(t *testing.T) {
	top := &Topology{Agents: []*Agent{{Name: "r1-n1"}, {Name: "r1-n2"}}}
	// chaos-a asks 2 throughout: x stops on r1-n1 once r1-n1 has
	// answered, z (its replacement) starts on r1-n2 before r1-n2 answers.
	before := map[string][]string{"r1-n1": {"chaos-a-x", "chaos-a-y"}}
	after := map[string][]string{"r1-n1": {"chaos-a-y"}, "r1-n2": {"chaos-a-z"}}
	hist := []Op{{Key: "chaos-a", Kind: opCreate, Count: 2, Start: time.Unix(1_600_000_000, 0), End: time.Unix(1_600_000_000, 0), Outcome: outOK}}

	s := &sampler{top: top, ask: (&world{steps: []map[string][]string{before, after}}).ask}
	sm := s.take(context.Background())
	sm.At = hist[0].End.Add(time.Minute) // the create is long acknowledged
	if got := sm.count()["chaos-a"]; got != 2 {
		t.Errorf("counted %d replicas of chaos-a running at one instant (%v); want 2", got, sm.Running)
	}
	if over := overCounts(hist, []sample{sm}); len(over) != 0 {
		t.Errorf("over-count reported for replicas that ran one after the other: %v", over)
	}
	if len(sm.Seen) != 3 {
		t.Errorf("seen %v; want the 3 replicas either round saw", sm.Seen)
	}

	// Replicas that do run at once are counted, however the answers fall.
	both := map[string][]string{"r1-n1": {"chaos-a-x", "chaos-a-y"}, "r1-n2": {"chaos-a-z"}}
	s = &sampler{top: top, ask: (&world{steps: []map[string][]string{both}}).ask}
	sm = s.take(context.Background())
	sm.At = hist[0].End.Add(time.Minute)
	if over := overCounts(hist, []sample{sm}); len(over) != 1 {
		t.Errorf("3 replicas running at once against 2 asked: over-counts %v; want one", over)
	}

	// An agent that restarted between the two rounds may have stopped
	// and started again what it reports: it counts as unreachable.
	s = &sampler{top: top, ask: (&world{steps: []map[string][]string{both}, restartAt: 3}).ask}
	sm = s.take(context.Background())
	if got := sm.count()["chaos-a"]; got != 2 || len(sm.Unreachable) != 1 || sm.Unreachable[0] != "r1-n2" {
		t.Errorf("restart between rounds: counted %d (unreachable %v); want 2 and r1-n2 unreachable", got, sm.Unreachable)
	}
}
