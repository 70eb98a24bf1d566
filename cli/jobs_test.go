package cli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

const jobDoc = `kind: Job
name: backup
labels: {app: backup}
spec:
  flavor: small
  compute: {image: busybox, command: [sh, -c, "echo dump; exit 0"]}
  job: {completions: 3, parallelism: 2, backoffLimit: 1, schedule: "0 3 * * *", concurrencyPolicy: Forbid}
`

// TestJobs applies a Job manifest, lists it with `stratactl jobs` and
// shows its attempts with `stratactl jobs NAME`, then deletes it.
func TestJobs(t *testing.T) {
	e := newEnv(t)
	e.must(flavorDoc, "apply", "-f", "-")
	if got := e.must(jobDoc, "apply", "-f", "-"); got != "job/backup created\n" {
		t.Fatalf("apply: got %q", got)
	}
	code := func(n int32) *int32 { return &n }
	started := now.Add(-2 * time.Minute)
	e.srv.Mu.Lock()
	r := e.srv.Resources["default/backup"]
	r.Status.Job = &api.JobStatus{
		Phase: api.JobFailed, Reason: api.ReasonBackoffLimitExceeded, Failed: 2, Succeeded: 1,
		NextRunAt: now.Add(time.Hour),
		Runs: []api.JobRun{{Number: 4, Phase: api.JobFailed, Reason: api.ReasonBackoffLimitExceeded, Failed: 2, Succeeded: 1, StartedAt: started, Attempts: []api.JobAttempt{
			{ID: "backup-aaaa1111", Node: "n1", Phase: api.AttemptSucceeded, ExitCode: code(0), StartedAt: started, FinishedAt: started.Add(5 * time.Second)},
			{ID: "backup-bbbb2222", Node: "n2", Phase: api.AttemptFailed, Reason: "exited with code 1", ExitCode: code(1), StartedAt: started, FinishedAt: started.Add(7 * time.Second), Removed: true},
		}}},
	}
	e.srv.Resources["default/backup"] = r
	e.srv.Mu.Unlock()

	list := e.must("", "jobs")
	for _, want := range []string{"NAME", "COMPLETIONS", "backup", "Failed (BackoffLimitExceeded)", "1/3", "0 3 * * *", "in 60m"} {
		if !strings.Contains(list, want) {
			t.Errorf("jobs: no %q in\n%s", want, list)
		}
	}
	one := e.must("", "jobs", "backup")
	for _, want := range []string{"ATTEMPT", "backup-aaaa1111", "n1", "Succeeded", "backup-bbbb2222", "exited with code 1", "removed", "5s"} {
		if !strings.Contains(one, want) {
			t.Errorf("jobs backup: no %q in\n%s", want, one)
		}
	}
	if lines := strings.Split(strings.TrimSpace(one), "\n"); len(lines) != 3 {
		t.Errorf("jobs backup: got %d lines; want a header and 2 attempts:\n%s", len(lines), one)
	}
	if out := e.must("", "jobs", "backup", "-o", "json"); !strings.Contains(out, `"exitCode": 1`) {
		t.Errorf("jobs backup -o json: no exit code in\n%s", out)
	}
	if got := e.must("", "get", "resources", "--kind", "Job"); !strings.Contains(got, "backup") || !strings.Contains(got, "Job") {
		t.Errorf("get resources --kind Job: got\n%s", got)
	}
	desc := e.must("", "describe", "resource", "backup")
	for _, want := range []string{"Kind:              Job", `Job:             completions 3, parallelism 2, backoff limit 1, schedule "0 3 * * *" (Forbid, keeps 3 runs), ttl 1h0m0s`, "Attempts:", "backup-bbbb2222"} {
		if !strings.Contains(desc, want) {
			t.Errorf("describe: no %q in\n%s", want, desc)
		}
	}
	e.must(webDoc, "apply", "-f", "-")
	if r := e.run("", "jobs", "web"); r.code != 2 || !strings.Contains(r.stderr, "web is a Compute, not a Job") {
		t.Errorf("jobs web: got exit %d, stderr %q; want 2, not a Job", r.code, r.stderr)
	}
	if got := e.must(jobDoc, "delete", "-f", "-"); !strings.Contains(got, "job/backup") {
		t.Errorf("delete: got %q", got)
	}
}
