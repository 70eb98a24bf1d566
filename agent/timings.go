package agent

import (
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"

	"github.com/stratahq/strata/internal/backoff"
)

// timings are the agent's delays. They are fields rather than constants
// so that tests in this package can shorten them.
type timings struct {
	// registerMin/Max bound the jittered backoff of Register and of the
	// assignment stream.
	registerMin, registerMax time.Duration
	// retryMin/Max bound the per-assignment backoff of failed provider
	// calls.
	retryMin, retryMax time.Duration
	// heartbeat is used when the region does not say.
	heartbeat time.Duration
	// flushDelay coalesces status reports; flushBatch caps one report.
	flushDelay time.Duration
	flushBatch int
	// reportMax caps the backoff of failed status reports.
	reportMax time.Duration
	// fastPoll is the first poll delay after an Apply returned provision.
	fastPoll time.Duration
	// orphanSettle is how long the assignment stream must be quiet after
	// a snapshot before its orphans are deleted: a snapshot too large for
	// one message may continue in the next batches, and deleting a
	// replica that the next batch names would kill a healthy container.
	// Batches that keep coming extend the wait up to orphanSettleMax
	// after the snapshot, so that a busy stream still deletes orphans.
	orphanSettle, orphanSettleMax time.Duration
	// warnEvery rate-limits repeated warnings (heartbeat failures).
	warnEvery time.Duration
	// shutdownFlush bounds the last status flush.
	shutdownFlush time.Duration
	// regionCall bounds one unary call to the region, and one heartbeat
	// on the heartbeat stream.
	regionCall time.Duration
	// unaryBeats is how long the agent beats with unary calls after its
	// region answered that it has no heartbeat stream.
	unaryBeats time.Duration
	// providerCall bounds Info, Health, Status and List; applyCall bounds
	// Apply; Delete gets its grace period on top of applyCall.
	providerCall, applyCall time.Duration
	// meterEvery is how often the agent reads what its replicas use
	// (providers that meter them); meterCall bounds one read.
	meterEvery, meterCall time.Duration
	// listThreshold: above this many replicas a poller calls List once
	// instead of Status per replica.
	listThreshold int
}

// regionBackoff is the jittered backoff of calls to the region (Register,
// the assignment stream, polls), so that agents that lost their region
// together do not come back in lockstep.
func (t *timings) regionBackoff() backoff.Backoff {
	return backoff.Backoff{Min: t.registerMin, Max: t.registerMax, Jitter: backoff.Half}
}

// regionConnect paces the connection's own reconnects within the
// bounds regionBackoff paces the calls with. A call made while the
// connection waits out its backoff fails at once, so gRPC's default
// (1 s after a failed attempt, growing 1.6 times up to 2 minutes) would
// hold an agent whose handshake failed once (a balancer still sending
// it to a region replica just lost) a second or more behind the
// surviving replica, and one whose region was down for minutes up to
// 2 minutes behind the region's return.
func (t *timings) regionConnect() grpc.ConnectParams {
	return grpc.ConnectParams{
		Backoff:           grpcbackoff.Config{BaseDelay: t.registerMin, Multiplier: 1.6, Jitter: 0.2, MaxDelay: t.registerMax},
		MinConnectTimeout: 20 * time.Second, // gRPC's default
	}
}

func defaultTimings() timings {
	return timings{
		registerMin:     200 * time.Millisecond,
		registerMax:     5 * time.Second,
		retryMin:        time.Second,
		retryMax:        time.Minute,
		heartbeat:       2 * time.Second,
		flushDelay:      10 * time.Millisecond,
		flushBatch:      500,
		reportMax:       5 * time.Second,
		fastPoll:        200 * time.Millisecond,
		orphanSettle:    time.Second,
		orphanSettleMax: 10 * time.Second,
		warnEvery:       30 * time.Second,
		shutdownFlush:   2 * time.Second,
		regionCall:      10 * time.Second,
		unaryBeats:      10 * time.Minute,
		providerCall:    30 * time.Second,
		applyCall:       10 * time.Minute,
		listThreshold:   16,
		meterEvery:      2 * time.Second,
		meterCall:       5 * time.Second,
	}
}
