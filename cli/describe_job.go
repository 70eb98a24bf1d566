package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/stratahq/strata/cli/printers"
	"github.com/stratahq/strata/internal/api"
)

// jobFields describes a Job's job section on one line.
func jobFields(f *fields, j *api.JobSpec) {
	parts := []string{
		fmt.Sprintf("completions %d", j.Completions),
		fmt.Sprintf("parallelism %d", j.Parallelism),
		fmt.Sprintf("backoff limit %d", j.Backoff()),
	}
	if d := j.ActiveDeadline.Duration; d > 0 {
		parts = append(parts, "deadline "+d.String())
	}
	if j.Schedule != "" {
		parts = append(parts, fmt.Sprintf("schedule %q (%s, keeps %d runs)", j.Schedule, j.ConcurrencyPolicy, j.HistoryLimit))
	}
	if d := j.TTL.Duration; d > 0 {
		parts = append(parts, "ttl "+d.String())
	}
	f.add("  Job", strings.Join(parts, ", "))
}

// jobSection writes a Job's runs and attempts.
func jobSection(w io.Writer, r api.Resource, now time.Time) {
	if r.Status == nil || r.Status.Job == nil {
		return
	}
	section(w, "Attempts", printers.JobAttempts(r, now), "", "none")
}
