package api

import (
	"time"

	"github.com/stratahq/strata/internal/cron"
)

// KindJob is run-to-completion work: replicas (attempts) that run the
// compute spec once each and are not restarted when they exit. See
// JobSpec and docs/api.md.
const KindJob ResourceKind = "Job"

// Limits of a Job. An attempt is a replica: a run holds at most
// Completions + BackoffLimit + Parallelism of them in its status.
const (
	MaxJobCompletions  = 1000
	MaxJobParallelism  = 1000
	MaxJobBackoffLimit = 100
	MaxJobHistory      = 50
	// DefaultJobBackoffLimit is how many failed attempts a run retries
	// when the spec does not say (Kubernetes' default).
	DefaultJobBackoffLimit = 6
	// DefaultJobHistory is how many finished runs a scheduled job keeps.
	DefaultJobHistory = 3
	// DefaultJobTTL is how long the containers of finished attempts (and
	// so their logs) are kept.
	DefaultJobTTL = time.Hour
)

// ConcurrencyPolicy says what a scheduled job does when a run is due
// while the previous one is still running.
type ConcurrencyPolicy string

const (
	// ConcurrencyAllow starts the new run beside the running one.
	ConcurrencyAllow ConcurrencyPolicy = "Allow"
	// ConcurrencyForbid skips the new run.
	ConcurrencyForbid ConcurrencyPolicy = "Forbid"
	// ConcurrencyReplace stops the running run (it fails with reason
	// Replaced) and starts the new one.
	ConcurrencyReplace ConcurrencyPolicy = "Replace"
)

// JobSpec is the run-to-completion part of a Job; what each attempt runs
// is the spec's compute section, on the spec's flavor.
type JobSpec struct {
	// Completions is how many attempts must exit 0 for a run to succeed
	// (default 1).
	Completions int `json:"completions,omitempty"`
	// Parallelism is how many attempts run at once at most (default 1).
	Parallelism int `json:"parallelism,omitempty"`
	// BackoffLimit is how many failed attempts a run retries; one more
	// failure fails the run (BackoffLimitExceeded). Default 6.
	BackoffLimit *int `json:"backoffLimit,omitempty"`
	// ActiveDeadline bounds a run from its start; past it the run's
	// attempts are stopped and it fails (DeadlineExceeded). 0: none.
	ActiveDeadline Duration `json:"activeDeadline,omitzero"`
	// Schedule, a five-field cron expression in UTC, starts a run each
	// time it fires; without it the job runs once.
	Schedule string `json:"schedule,omitempty"`
	// ConcurrencyPolicy applies to scheduled runs (default Allow).
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`
	// HistoryLimit is how many finished runs a scheduled job keeps in its
	// status, with their attempts' containers (default 3).
	HistoryLimit int `json:"historyLimit,omitempty"`
	// TTL is how long the containers of finished attempts are kept, so
	// that their logs stay readable (default 1h); then they are removed
	// and only their status (exit code, times) remains.
	TTL Duration `json:"ttl,omitzero"`
}

// Backoff returns the backoff limit, defaulted.
func (j *JobSpec) Backoff() int {
	if j.BackoffLimit == nil {
		return DefaultJobBackoffLimit
	}
	return *j.BackoffLimit
}

// Default fills in what a job spec leaves out.
func (j *JobSpec) Default() {
	orDefault(&j.Completions, 1)
	orDefault(&j.Parallelism, 1)
	if j.BackoffLimit == nil {
		n := DefaultJobBackoffLimit
		j.BackoffLimit = &n
	}
	if j.Schedule != "" {
		orDefault(&j.ConcurrencyPolicy, ConcurrencyAllow)
		orDefault(&j.HistoryLimit, DefaultJobHistory)
	}
	orDefault(&j.TTL, D(DefaultJobTTL))
}

func (j *JobSpec) validate() error {
	var p problems
	if j.Completions < 0 || j.Completions > MaxJobCompletions {
		p.add(Invalid("completions", "must be between 1 and %d (got %d)", MaxJobCompletions, j.Completions))
	}
	if j.Parallelism < 0 || j.Parallelism > MaxJobParallelism {
		p.add(Invalid("parallelism", "must be between 1 and %d (got %d)", MaxJobParallelism, j.Parallelism))
	}
	if b := j.BackoffLimit; b != nil && (*b < 0 || *b > MaxJobBackoffLimit) {
		p.add(Invalid("backoffLimit", "must be between 0 and %d (got %d)", MaxJobBackoffLimit, *b))
	}
	if j.ActiveDeadline.Duration < 0 {
		p.add(Invalid("activeDeadline", "must not be negative"))
	}
	if j.TTL.Duration < 0 {
		p.add(Invalid("ttl", "must not be negative"))
	}
	p.add(j.validateSchedule())
	return p.err()
}

// validateSchedule checks the schedule and what applies to scheduled
// jobs only.
func (j *JobSpec) validateSchedule() error {
	var p problems
	if j.Schedule != "" {
		if _, err := cron.Parse(j.Schedule); err != nil {
			p.add(Invalid("schedule", "%s", err.Error()))
		}
	}
	if j.ConcurrencyPolicy != "" {
		if j.Schedule == "" {
			p.add(Invalid("concurrencyPolicy", "applies to scheduled jobs only (set schedule)"))
		} else {
			p.add(oneOf("concurrencyPolicy", j.ConcurrencyPolicy, ConcurrencyAllow, ConcurrencyForbid, ConcurrencyReplace))
		}
	}
	if j.HistoryLimit < 0 || j.HistoryLimit > MaxJobHistory {
		p.add(Invalid("historyLimit", "must be between 0 and %d (got %d)", MaxJobHistory, j.HistoryLimit))
	}
	return p.err()
}

// validateJob checks a Job's spec: a compute section that runs to
// completion, and the job section.
func (s *ResourceSpec) validateJob() error {
	var p problems
	if s.Flavor == "" {
		p.add(Invalid("flavor", "is required for kind Job"))
	}
	if s.Compute == nil {
		p.add(Invalid("compute", "is required for kind Job (what each attempt runs)"))
	} else {
		p.in("compute", s.Compute.validate())
		if rp := s.Compute.RestartPolicy; rp != "" && rp != RestartNever {
			p.add(Invalid("compute.restartPolicy", "a Job's attempts are never restarted in place (a failure is retried as a new attempt): omit it or set %q, not %q", RestartNever, rp))
		}
		if len(s.Compute.Ports) > 0 {
			p.add(Invalid("compute.ports", "a Job's attempts publish no ports"))
		}
	}
	p.in("job", s.Job.validate())
	return p.err()
}

// JobPhase is where a job run stands.
type JobPhase string

const (
	// JobPending: a scheduled job waits for its first run.
	JobPending   JobPhase = "Pending"
	JobRunning   JobPhase = "Running"
	JobSucceeded JobPhase = "Succeeded"
	JobFailed    JobPhase = "Failed"
)

// Reasons a job run fails.
const (
	ReasonBackoffLimitExceeded = "BackoffLimitExceeded"
	ReasonDeadlineExceeded     = "DeadlineExceeded"
	ReasonReplaced             = "Replaced"
)

// AttemptPhase is where one attempt stands.
type AttemptPhase string

const (
	AttemptRunning   AttemptPhase = "Running"
	AttemptSucceeded AttemptPhase = "Succeeded"
	AttemptFailed    AttemptPhase = "Failed"
	// AttemptStopped: the run ended (it succeeded, failed or was
	// replaced) while the attempt ran; it counts neither way.
	AttemptStopped AttemptPhase = "Stopped"
)

// JobStatus is a job's state, written by the region that runs it. Its
// counts and phase are those of the newest run.
type JobStatus struct {
	Phase     JobPhase `json:"phase"`
	Reason    string   `json:"reason,omitempty"`
	Active    int      `json:"active"`
	Succeeded int      `json:"succeeded"`
	Failed    int      `json:"failed"`
	// Runs, newest first: the running ones and at most HistoryLimit
	// finished ones (a job without a schedule has one run).
	Runs []JobRun `json:"runs,omitempty"`
	// LastScheduleAt is when the schedule last fired; NextRunAt when it
	// fires next.
	LastScheduleAt time.Time `json:"lastScheduleAt,omitzero"`
	NextRunAt      time.Time `json:"nextRunAt,omitzero"`
}

// JobRun is one run of a job: attempts until Completions of them exited
// 0, or the run failed.
type JobRun struct {
	Number     int64     `json:"number"`
	Phase      JobPhase  `json:"phase"`
	Reason     string    `json:"reason,omitempty"`
	Active     int       `json:"active"`
	Succeeded  int       `json:"succeeded"`
	Failed     int       `json:"failed"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	// Attempts in the order they started.
	Attempts []JobAttempt `json:"attempts,omitempty"`
}

// Finished reports whether the run has ended.
func (r *JobRun) Finished() bool { return r.Phase == JobSucceeded || r.Phase == JobFailed }

// JobAttempt is one replica of a run.
type JobAttempt struct {
	// ID is the replica's (its logs are read by it).
	ID         string       `json:"id"`
	Node       string       `json:"node,omitempty"`
	Phase      AttemptPhase `json:"phase"`
	Reason     string       `json:"reason,omitempty"`
	ExitCode   *int32       `json:"exitCode,omitempty"`
	StartedAt  time.Time    `json:"startedAt,omitzero"`
	FinishedAt time.Time    `json:"finishedAt,omitzero"`
	// Removed is set once the attempt's container is gone (its TTL
	// passed): its logs can no longer be read.
	Removed bool `json:"removed,omitempty"`
}

// LabelJobRun on a Job's replica names the run it belongs to.
const LabelJobRun = "strata.io/job-run"
