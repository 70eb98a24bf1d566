package apiproto

import (
	"github.com/stratahq/strata/internal/api"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// ---- Job ----

func jobSpecToPB(j *api.JobSpec) *resourcev1.JobSpec {
	if j == nil {
		return nil
	}
	var backoff *int32
	if j.BackoffLimit != nil {
		n := int32ToPB(*j.BackoffLimit)
		backoff = &n
	}
	return &resourcev1.JobSpec{
		Completions:       int32ToPB(j.Completions),
		Parallelism:       int32ToPB(j.Parallelism),
		BackoffLimit:      backoff,
		ActiveDeadline:    durationToPB(j.ActiveDeadline),
		Schedule:          j.Schedule,
		ConcurrencyPolicy: string(j.ConcurrencyPolicy),
		HistoryLimit:      int32ToPB(j.HistoryLimit),
		Ttl:               durationToPB(j.TTL),
	}
}

func jobSpecFromPB(p *resourcev1.JobSpec) api.JobSpec {
	var backoff *int
	if p != nil && p.BackoffLimit != nil {
		n := int(*p.BackoffLimit)
		backoff = &n
	}
	return api.JobSpec{
		Completions:       int(p.GetCompletions()),
		Parallelism:       int(p.GetParallelism()),
		BackoffLimit:      backoff,
		ActiveDeadline:    durationFromPB(p.GetActiveDeadline()),
		Schedule:          p.GetSchedule(),
		ConcurrencyPolicy: api.ConcurrencyPolicy(p.GetConcurrencyPolicy()),
		HistoryLimit:      int(p.GetHistoryLimit()),
		TTL:               durationFromPB(p.GetTtl()),
	}
}

// JobStatusToPB converts a JobStatus; nil gives nil.
func JobStatusToPB(s *api.JobStatus) *resourcev1.JobStatus {
	if s == nil {
		return nil
	}
	return &resourcev1.JobStatus{
		Phase:          string(s.Phase),
		Reason:         s.Reason,
		Active:         int32ToPB(s.Active),
		Succeeded:      int32ToPB(s.Succeeded),
		Failed:         int32ToPB(s.Failed),
		Runs:           sliceToPB(s.Runs, jobRunToPB),
		LastScheduleAt: timeToPB(s.LastScheduleAt),
		NextRunAt:      timeToPB(s.NextRunAt),
	}
}

// JobStatusFromPB converts a JobStatus.
func JobStatusFromPB(p *resourcev1.JobStatus) api.JobStatus {
	return api.JobStatus{
		Phase:          api.JobPhase(p.GetPhase()),
		Reason:         p.GetReason(),
		Active:         int(p.GetActive()),
		Succeeded:      int(p.GetSucceeded()),
		Failed:         int(p.GetFailed()),
		Runs:           sliceFromPB(p.GetRuns(), jobRunFromPB),
		LastScheduleAt: timeFromPB(p.GetLastScheduleAt()),
		NextRunAt:      timeFromPB(p.GetNextRunAt()),
	}
}

func jobRunToPB(r *api.JobRun) *resourcev1.JobRun {
	if r == nil {
		return nil
	}
	return &resourcev1.JobRun{
		Number:     r.Number,
		Phase:      string(r.Phase),
		Reason:     r.Reason,
		Active:     int32ToPB(r.Active),
		Succeeded:  int32ToPB(r.Succeeded),
		Failed:     int32ToPB(r.Failed),
		StartedAt:  timeToPB(r.StartedAt),
		FinishedAt: timeToPB(r.FinishedAt),
		Attempts:   sliceToPB(r.Attempts, jobAttemptToPB),
	}
}

func jobRunFromPB(p *resourcev1.JobRun) api.JobRun {
	return api.JobRun{
		Number:     p.GetNumber(),
		Phase:      api.JobPhase(p.GetPhase()),
		Reason:     p.GetReason(),
		Active:     int(p.GetActive()),
		Succeeded:  int(p.GetSucceeded()),
		Failed:     int(p.GetFailed()),
		StartedAt:  timeFromPB(p.GetStartedAt()),
		FinishedAt: timeFromPB(p.GetFinishedAt()),
		Attempts:   sliceFromPB(p.GetAttempts(), jobAttemptFromPB),
	}
}

func jobAttemptToPB(a *api.JobAttempt) *resourcev1.JobAttempt {
	if a == nil {
		return nil
	}
	return &resourcev1.JobAttempt{
		Id:         a.ID,
		Node:       a.Node,
		Phase:      string(a.Phase),
		Reason:     a.Reason,
		ExitCode:   int32PtrCopy(a.ExitCode),
		StartedAt:  timeToPB(a.StartedAt),
		FinishedAt: timeToPB(a.FinishedAt),
		Removed:    a.Removed,
	}
}

func jobAttemptFromPB(p *resourcev1.JobAttempt) api.JobAttempt {
	if p == nil {
		return api.JobAttempt{} // p.ExitCode has no getter that keeps nil
	}
	return api.JobAttempt{
		ID:         p.GetId(),
		Node:       p.GetNode(),
		Phase:      api.AttemptPhase(p.GetPhase()),
		Reason:     p.GetReason(),
		ExitCode:   int32PtrCopy(p.ExitCode),
		StartedAt:  timeFromPB(p.GetStartedAt()),
		FinishedAt: timeFromPB(p.GetFinishedAt()),
		Removed:    p.GetRemoved(),
	}
}
