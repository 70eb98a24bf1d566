package printers

import (
	"fmt"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// Jobs is the table of Jobs: the newest run's state, its completions
// (succeeded/wanted), active and failed attempts, and the schedule.
func Jobs(items []api.Resource, now time.Time) Table {
	t := Table{Header: []string{"NAME", "STATUS", "COMPLETIONS", "ACTIVE", "FAILED", "RUN", "SCHEDULE", "NEXT", "AGE"}}
	for _, r := range items {
		spec := r.Spec.Job
		if spec == nil {
			continue
		}
		status, run, next := "pending", "-", "-"
		succeeded, active, failed := 0, 0, 0
		if j := jobOf(r); j != nil {
			status = string(j.Phase)
			if j.Reason != "" {
				status += " (" + j.Reason + ")"
			}
			succeeded, active, failed = j.Succeeded, j.Active, j.Failed
			if len(j.Runs) > 0 {
				run = fmt.Sprint(j.Runs[0].Number)
			}
			if !j.NextRunAt.IsZero() {
				next = "in " + HumanDuration(j.NextRunAt.Sub(now))
			}
		}
		if r.Deleting() {
			status = "deleting"
		}
		schedule := spec.Schedule
		if schedule == "" {
			schedule = "-"
		}
		t.Rows = append(t.Rows, []string{
			Cell(r.Name), Cell(status), fmt.Sprintf("%d/%d", succeeded, spec.Completions),
			fmt.Sprint(active), fmt.Sprint(failed), run, Cell(schedule), next, Age(now, r.CreatedAt),
		})
	}
	return t
}

// JobAttempts is the table of a Job's kept runs and their attempts,
// newest run first.
func JobAttempts(r api.Resource, now time.Time) Table {
	t := Table{Header: []string{"RUN", "ATTEMPT", "NODE", "PHASE", "EXIT", "STARTED", "DURATION", "LOGS", "REASON"}}
	j := jobOf(r)
	if j == nil {
		return t
	}
	for _, run := range j.Runs {
		for _, a := range run.Attempts {
			exit, took, logs := "-", "-", "kept"
			if a.ExitCode != nil {
				exit = fmt.Sprint(*a.ExitCode)
			}
			if !a.FinishedAt.IsZero() && !a.StartedAt.IsZero() {
				took = HumanDuration(a.FinishedAt.Sub(a.StartedAt))
			}
			if a.Removed {
				logs = "removed"
			}
			t.Rows = append(t.Rows, []string{
				fmt.Sprint(run.Number), Cell(a.ID), Cell(a.Node), Cell(string(a.Phase)), exit,
				Age(now, a.StartedAt), took, logs, Cell(a.Reason),
			})
		}
	}
	return t
}

func jobOf(r api.Resource) *api.JobStatus {
	if r.Status == nil {
		return nil
	}
	return r.Status.Job
}
