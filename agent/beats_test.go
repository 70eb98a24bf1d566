package agent

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/transport"
	"github.com/stratahq/strata/internal/transport/transporttest"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
)

// wantBeats waits for at least n beats and checks that their sequence
// numbers have no gap: no beat was lost.
func wantBeats(t *testing.T, region *fakeRegion, n int) {
	t.Helper()
	eventually(t, waitLong, fmt.Sprintf("%d heartbeats", n), func() error {
		if got := len(region.beats()); got < n {
			return fmt.Errorf("heartbeats: got %d; want >= %d", got, n)
		}
		return nil
	})
	beats := region.beats()
	for i := 1; i < len(beats); i++ {
		if beats[i].GetSeq() != beats[i-1].GetSeq()+1 {
			t.Errorf("heartbeat seq: got %d after %d; want +1 (a beat lost)", beats[i].GetSeq(), beats[i-1].GetSeq())
		}
	}
}

func TestHeartbeatsOnOneStream(t *testing.T) {
	region := newFakeRegion(t)
	startAgent(t, region.endpoint(), withProviders(one(newMemProvider("mem"))))
	wantBeats(t, region, 5)
	if streams, streamed, unary := region.beatCounts(); streams != 1 || unary != 0 || streamed < 5 {
		t.Errorf("got %d streams, %d beats on them, %d unary beats; want 1 stream carrying every beat", streams, streamed, unary)
	}
	// The region's answers come on the stream too: asked to, the node
	// registers again, and keeps beating on the same stream.
	region.configure(func(r *fakeRegion) { r.reregister = true })
	eventually(t, waitLong, "registered again", func() error {
		if n := len(region.registered()); n != 2 {
			return fmt.Errorf("registrations: got %d; want 2", n)
		}
		return nil
	})
	wantBeats(t, region, len(region.beats())+3)
	if streams, _, unary := region.beatCounts(); streams != 1 || unary != 0 {
		t.Errorf("got %d streams and %d unary beats; want 1 stream and none", streams, unary)
	}
}

// TestHeartbeatsFallBackToUnary runs the agent against a region that
// predates the heartbeat stream: every beat, the first too, goes as a
// Heartbeat call.
func TestHeartbeatsFallBackToUnary(t *testing.T) {
	region := newFakeRegion(t, func(r *fakeRegion) { r.unaryBeats = true })
	startAgent(t, region.endpoint(), withProviders(one(newMemProvider("mem"))))
	wantBeats(t, region, 5)
	if beats := region.beats(); beats[0].GetSeq() != 1 {
		t.Errorf("first beat delivered: got seq %d; want 1", beats[0].GetSeq())
	}
	if streams, streamed, unary := region.beatCounts(); streams != 0 || streamed != 0 || unary < 5 {
		t.Errorf("got %d streams, %d beats on them, %d unary beats; want every beat unary", streams, streamed, unary)
	}
}

// TestBrokenHeartbeatStreamReopens breaks the heartbeat stream from the
// region's side, twice: the agent opens another each time, and the beat
// that met the broken stream is delivered on the new one.
func TestBrokenHeartbeatStreamReopens(t *testing.T) {
	region := newFakeRegion(t)
	startAgent(t, region.endpoint(), withProviders(one(newMemProvider("mem"))))
	wantBeats(t, region, 3)
	for i := 2; i <= 3; i++ {
		region.breakBeatStreams()
		eventually(t, waitLong, "a new heartbeat stream", func() error {
			if streams, _, _ := region.beatCounts(); streams != i {
				return fmt.Errorf("heartbeat streams: got %d; want %d", streams, i)
			}
			return nil
		})
		wantBeats(t, region, len(region.beats())+3)
	}
	if _, _, unary := region.beatCounts(); unary != 0 {
		t.Errorf("unary beats: got %d; want 0 (the region has the stream)", unary)
	}
}

// TestHeartbeatStreamAfterRegionUpgrade checks that an agent that fell
// back to unary beats tries the stream again once unaryFor has passed:
// its region may have been upgraded meanwhile.
func TestHeartbeatStreamAfterRegionUpgrade(t *testing.T) {
	region := newFakeRegion(t, func(r *fakeRegion) { r.unaryBeats = true })
	cc := transporttest.Dial(t, region.endpoint(), transport.Insecure(), transport.AnyServer())
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	b := &beatStream{client: agentv1.NewAgentServiceClient(cc), timeout: waitLong, unaryFor: time.Minute, clock: clock}
	defer b.close()
	// A beat may fail while the connection comes back after the
	// region's restart; a failed beat reaches no handler.
	beat := func(seq uint64) {
		t.Helper()
		eventually(t, waitLong, fmt.Sprintf("beat %d", seq), func() error {
			_, err := b.beat(t.Context(), &agentv1.HeartbeatRequest{Node: "node-1", Seq: seq})
			return err
		})
	}
	beat(1)
	beat(2)
	if streams, streamed, unary := region.beatCounts(); streams != 0 || streamed != 0 || unary != 2 {
		t.Fatalf("old region: got %d streams, %d streamed and %d unary beats; want 2 unary", streams, streamed, unary)
	}

	// The region is upgraded; the agent keeps calling until unaryFor has
	// passed, then beats on a stream.
	region.stop()
	region.configure(func(r *fakeRegion) { r.unaryBeats = false })
	region.start(t)
	beat(3)
	if _, streamed, unary := region.beatCounts(); streamed != 0 || unary != 3 {
		t.Fatalf("within unaryFor: got %d streamed and %d unary beats; want 3 unary", streamed, unary)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	beat(4)
	beat(5)
	if streams, streamed, unary := region.beatCounts(); streams != 1 || streamed != 2 || unary != 3 {
		t.Errorf("after unaryFor: got %d streams, %d streamed and %d unary beats; want 1 stream carrying 2", streams, streamed, unary)
	}
}

// TestSilentHeartbeatStreamGivenUp checks that a beat the region does not
// answer fails once the call bound has passed, and that the next beat
// goes on a new stream.
func TestSilentHeartbeatStreamGivenUp(t *testing.T) {
	gate := make(chan struct{})
	region := newFakeRegion(t, func(r *fakeRegion) { r.beatGate = gate })
	cc := transporttest.Dial(t, region.endpoint(), transport.Insecure(), transport.AnyServer())
	b := &beatStream{client: agentv1.NewAgentServiceClient(cc), timeout: 100 * time.Millisecond, unaryFor: time.Minute, clock: time.Now}
	defer b.close()
	if _, err := b.beat(t.Context(), &agentv1.HeartbeatRequest{Node: "node-1", Seq: 1}); !errors.Is(err, errBeatTimeout) {
		t.Fatalf("unanswered beat: got %v; want %v", err, errBeatTimeout)
	}
	if b.stream != nil {
		t.Errorf("got the silent stream kept; want it closed")
	}
	region.configure(func(r *fakeRegion) { r.beatGate = nil })
	close(gate)
	b.timeout = waitLong
	if _, err := b.beat(t.Context(), &agentv1.HeartbeatRequest{Node: "node-1", Seq: 2}); err != nil {
		t.Fatalf("beat after the region answers again: %v", err)
	}
	if streams, streamed, unary := region.beatCounts(); streams != 2 || unary != 0 || streamed < 1 {
		t.Errorf("got %d streams, %d streamed and %d unary beats; want 2 streams", streams, streamed, unary)
	}
}
