package e2e

import (
	"bytes"
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
)

// regionStopBound is how long a region replica may take to exit after
// SIGTERM (docs/operations.md, "Stopping"): it resigns, flushes the
// heartbeats it holds, ends its streams and lets the calls in flight
// finish, all of which takes well under a second here; the rest is a
// loaded machine's slack.
const regionStopBound = 2 * time.Second

// TestRegionStopsPromptly stops a region replica that holds what a
// production one holds: agents with their assignment, network and
// heartbeat streams open (beating every 5 s, so a heartbeat stream waits
// long for its next beat) and a global tier's share watch. It exits
// within regionStopBound of SIGTERM, logs that it stops and how long it
// took, and the share watch ends with Unavailable (a client retries it on
// another replica) rather than being cut.
func TestRegionStopsPromptly(t *testing.T) {
	lv := liveness{heartbeat: 5 * time.Second, suspect: 15 * time.Second, down: 30 * time.Second, probe: time.Second}
	c := startRegion(t, lv)
	c.startAgents(agentOpts{}, "n-a", "n-b")
	c.apply("web", 2)
	c.waitReady("web", 2)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	shares, err := c.rs.WatchShares(ctx, &regionv1.WatchSharesRequest{})
	if err != nil {
		t.Fatalf("WatchShares: %v", err)
	}
	if _, err := shares.Recv(); err != nil {
		t.Fatalf("WatchShares: first message: %v", err)
	}
	watchEnded := make(chan error, 1)
	go func() {
		for {
			if _, err := shares.Recv(); err != nil {
				watchEnded <- err
				return
			}
		}
	}()

	sent := time.Now()
	c.proc.Signal(syscall.SIGTERM)
	framework.Eventually(t, 30*time.Second, "the region replica exits", func() error {
		if !c.proc.Exited() {
			return context.DeadlineExceeded
		}
		return nil
	})
	took := time.Since(sent) // to within Eventually's poll
	t.Logf("the region replica exited %s after SIGTERM", took.Round(time.Millisecond))
	if took > regionStopBound {
		t.Errorf("the region replica exited %s after SIGTERM; want within %s", took.Round(time.Millisecond), regionStopBound)
	}
	log := c.proc.Log()
	for _, msg := range []string{"region stopping", "region stopped"} {
		if !bytes.Contains(log, []byte(msg)) {
			t.Errorf("the region's log says nothing of %q", msg)
		}
	}
	select {
	case err := <-watchEnded:
		if !errors.Is(err, api.ErrUnavailable) {
			t.Errorf("the share watch ended with %v; want Unavailable", err)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the share watch did not end within 5s of the region's exit")
	}
}
