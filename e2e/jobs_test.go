package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
)

var jobsNet = hostNet{Name: "e2e-j0", Subnet: "10.239.0.0/24", Gateway: "10.239.0.1", Bridge: "e2e-j0", NodeMask: 26}

// hostJob is a Job of the busybox image with the flavor "small".
func hostJob(name, command string, job map[string]any) map[string]any {
	return map[string]any{
		"name": name, "kind": "Job", "labels": map[string]string{"app": name},
		"spec": map[string]any{
			"flavor":  "small",
			"compute": map[string]any{"image": "busybox", "command": []string{"sh", "-c", command}, "stopGracePeriod": "1s"},
			"job":     job,
		},
	}
}

// waitJob waits until the job's newest run is in phase, and returns the
// resource.
func (c *hostCluster) waitJob(name string, phase api.JobPhase, timeout time.Duration) *api.Resource {
	c.t.Helper()
	return waitJob(c.t, c.global, name, phase, timeout)
}

// waitJob waits until the newest run of job name, read from the global
// API g, is in phase, and returns the resource.
func waitJob(t *testing.T, g *framework.Client, name string, phase api.JobPhase, timeout time.Duration) *api.Resource {
	t.Helper()
	var r *api.Resource
	framework.Eventually(t, timeout, fmt.Sprintf("job %s %s", name, phase), func() error {
		var err error
		if r, err = resourceStatus(g, name); err != nil {
			return err
		}
		j := r.Status.Job
		if j == nil {
			return fmt.Errorf("no job status yet (phase %s: %s)", r.Status.Phase, r.Status.Reason)
		}
		if j.Phase != phase {
			return fmt.Errorf("job %s (%s): %d active, %d succeeded, %d failed", j.Phase, j.Reason, j.Active, j.Succeeded, j.Failed)
		}
		return nil
	})
	return r
}

// TestJobs runs Jobs on real containerd through every tier (global and
// region on their own etcd, an agent with the containerd provider): a job
// of 3 completions, 2 at a time, whose attempts exit 0 succeeds with 3
// successes; a job whose attempts exit 1 with backoffLimit 1 fails after
// 2 attempts, each with exit code 1, and their output stays readable
// after the job ended; a job with a TTL of 2s has its container removed
// after it, and its attempt's record (exit code) kept.
func TestJobs(t *testing.T) {
	c := startHostCluster(t, hostClusterOpts{region: "e2e-j", network: jobsNet, agents: 1})
	c.flavor("small", 0.25, 64)
	c.image()
	c.create(hostJob("ok", "echo attempt $HOSTNAME; sleep 1; exit 0", map[string]any{"completions": 3, "parallelism": 2}))
	c.create(hostJob("fails", "echo failing; exit 1", map[string]any{"backoffLimit": 1}))
	c.create(hostJob("brief", "echo short-lived", map[string]any{"ttl": "2s"}))

	ok := c.waitJob("ok", api.JobSucceeded, 2*time.Minute)
	j := ok.Status.Job
	if ok.Status.Phase != api.PhaseReady || j.Succeeded != 3 || j.Failed != 0 || j.Active != 0 {
		t.Errorf("ok: got phase %s, job %+v; want ready, 3 succeeded, none failed or active", ok.Status.Phase, j)
	}
	run := j.Runs[0]
	if len(run.Attempts) != 3 {
		t.Fatalf("ok: got %d attempts; want 3", len(run.Attempts))
	}
	// At most 2 ran at once: the third started after the first two
	// exited... or at least after one of them did.
	first := run.Attempts[:2]
	third := run.Attempts[2]
	if !third.StartedAt.After(first[0].FinishedAt) && !third.StartedAt.After(first[1].FinishedAt) {
		t.Errorf("ok: the third attempt started at %s, before either of the first two finished (%s, %s): more than parallelism 2 at once",
			third.StartedAt, first[0].FinishedAt, first[1].FinishedAt)
	}
	for _, a := range run.Attempts {
		if a.Phase != api.AttemptSucceeded || a.ExitCode == nil || *a.ExitCode != 0 || a.Node == "" || a.FinishedAt.IsZero() {
			t.Errorf("ok: attempt %+v; want succeeded with exit code 0 on a node, with its finish time", a)
		}
	}

	failed := c.waitJob("fails", api.JobFailed, 2*time.Minute)
	j = failed.Status.Job
	if failed.Status.Phase != api.PhaseError || j.Reason != api.ReasonBackoffLimitExceeded || j.Failed != 2 || j.Succeeded != 0 {
		t.Errorf("fails: got phase %s, job %+v; want error, BackoffLimitExceeded, 2 failed", failed.Status.Phase, j)
	}
	if n := len(j.Runs[0].Attempts); n != 2 {
		t.Fatalf("fails: got %d attempts; want 2 (backoffLimit 1)", n)
	}
	for _, a := range j.Runs[0].Attempts {
		if a.ExitCode == nil || *a.ExitCode != 1 || a.Reason != "exited with code 1" {
			t.Errorf("fails: attempt %+v; want exit code 1", a)
		}
		// The output of a finished attempt stays readable (its TTL, 1h by
		// default, has not passed).
		c.waitLogs("fails", a.ID, 30*time.Second, "failing")
	}
	for _, a := range run.Attempts {
		c.waitLogs("ok", a.ID, 30*time.Second, "attempt ")
	}
	// Finished means finished: no attempt is restarted or added later.
	reps, err := c.replicas("fails")
	if err != nil {
		t.Fatal(err)
	}
	for _, rep := range reps {
		if rep.Status != nil && rep.Status.Restarts != 0 {
			t.Errorf("fails: replica %s restarted %d times; a Job's attempt never is", rep.ID, rep.Status.Restarts)
		}
	}
	// Kept for their logs, the exited attempts take no CPU or memory.
	framework.Eventually(t, 30*time.Second, "exits recorded on the attempts", func() error {
		reps, err := c.replicas("ok")
		if err != nil {
			return err
		}
		for _, rep := range reps {
			if rep.ExitedAt.IsZero() {
				return fmt.Errorf("replica %s: no exitedAt", rep.ID)
			}
		}
		return nil
	})
	// Past its TTL a finished attempt's container goes; its record stays.
	framework.Eventually(t, time.Minute, "brief's attempt removed after its TTL", func() error {
		r, err := c.status("brief")
		if err != nil {
			return err
		}
		j := r.Status.Job
		if j == nil || j.Phase != api.JobSucceeded || len(j.Runs) != 1 || len(j.Runs[0].Attempts) != 1 {
			return fmt.Errorf("job %+v", j)
		}
		if a := j.Runs[0].Attempts[0]; !a.Removed || a.ExitCode == nil || *a.ExitCode != 0 {
			return fmt.Errorf("attempt %+v; want removed, exit code 0 kept", a)
		}
		reps, err := c.replicas("brief")
		if err != nil {
			return err
		}
		if len(reps) != 0 {
			return fmt.Errorf("%d replicas left", len(reps))
		}
		return nil
	})
	if _, err := c.logs("brief", ""); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("logs of brief after its TTL: got %v; want a 404", err)
	}
	var list struct{ Items []api.Resource }
	c.global.Must(t, http.MethodGet, "/v1/resources?kind=Job", nil, http.StatusOK, &list)
	var names []string
	for _, r := range list.Items {
		names = append(names, r.Name)
	}
	if got := strings.Join(names, ","); got != "brief,fails,ok" {
		t.Errorf("kind=Job: got %s; want brief,fails,ok", got)
	}
}
