package agent

import (
	"fmt"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

// attempt is a Job's attempt: a compute replica that runs to completion.
func attempt(id string, gen int64) *api.Assignment {
	a := running(id, gen)
	a.Spec.Compute.RestartPolicy = api.RestartNever
	a.Spec.Job = &api.JobSpec{Completions: 1, Parallelism: 1}
	return a
}

// TestExitedAttemptNeverAppliedAgain checks that an agent never runs a
// Job's exited attempt a second time: not when it adopts it after a
// restart, not when the region sends the same assignment again (a new
// stream), not when the provider loses it. A Compute replica in error at
// the same generation is applied again (TestRestartReappliesWhatChanged).
func TestExitedAttemptNeverAppliedAgain(t *testing.T) {
	region := newFakeRegion(t)
	region.set(attempt("a", 1))
	p := newMemProvider("mem")
	p.hold("a", 1, api.PhaseError)
	code := int32(0)
	p.mu.Lock()
	st := &p.replicas["a"].st
	st.ExitCode, st.ObservedGeneration, st.Reason = &code, 1, "exited with code 0"
	p.mu.Unlock()

	ta := startAgent(t, region.endpoint(), withProviders(one(p)))
	ta.waitReady(t)
	eventually(t, waitLong, "exited attempt reported", func() error {
		st, ok := region.status("a")
		if !ok || st.GetPhase() != string(api.PhaseError) || st.ExitCode == nil || *st.ExitCode != 0 {
			return fmt.Errorf("status %v", st)
		}
		return nil
	})
	// The same assignment again, as after a reconnect.
	region.closeStreams()
	before := region.reportedIDs()["a"]
	eventually(t, waitLong, "reported again after the new stream", func() error {
		if n := region.reportedIDs()["a"]; n <= before {
			return fmt.Errorf("reported %d times", n)
		}
		return nil
	})
	// Lost by the provider: the poller finds it gone, and leaves it.
	polls := p.count("status")
	p.lose("a")
	eventually(t, waitLong, "the loss seen by the poller", func() error {
		if n := p.count("status"); n <= polls+1 {
			return fmt.Errorf("%d status calls since", n-polls)
		}
		return nil
	})
	if got := p.count("apply"); got != 0 {
		t.Errorf("apply calls: got %d; want 0 (an exited attempt never runs again)", got)
	}
}
