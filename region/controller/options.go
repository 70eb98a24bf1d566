package controller

import (
	"log/slog"
	"time"

	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/metrics"
	"github.com/stratahq/strata/region/state"
)

// Emitter records events; it must not block.
type Emitter interface {
	Emit(ev events.Event)
}

// Options configure a Controller.
type Options struct {
	Region string
	State  *state.State
	Caches *state.Caches
	Events Emitter
	// ProvisionTimeout bounds created/provision → ready of one replica.
	ProvisionTimeout time.Duration
	// DestroyTimeout bounds destroy → destroyed; past it the record is
	// removed (the agent, if it ever returns, removes the orphan).
	DestroyTimeout time.Duration
	// RetryBackoff is the first delay before replacing a failed replica
	// again; it doubles up to MaxBackoff.
	RetryBackoff time.Duration
	MaxBackoff   time.Duration
	// Resync re-examines every resource this often: a safety net. A
	// resource is looked at when something it depends on changes, and
	// every time-based decision (a deadline, a back-off, a job's schedule,
	// a drain's deadline) marks it for the moment the decision would
	// change (view.changesAt).
	Resync time.Duration
	// Metrics and SchedulerMetrics may be nil.
	Metrics          *metrics.Controller
	SchedulerMetrics *metrics.Scheduler
	// Logger is the region's (it names the region); the controller adds
	// component=controller.
	Logger *slog.Logger
	Clock  func() time.Time

	// afterFunc schedules the coalesced full mark node events ask for
	// (time.AfterFunc; tests hold it) and wallClock reads the time it
	// coalesces on (time.Now).
	afterFunc func(d time.Duration, f func())
	wallClock func() time.Time
	// passed, when set, is told each pass's keys (tests count them).
	passed func(keys []string)
}
