package controller

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/api"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
)

// heldRegion is a region's client whose first ApplyPlacements call waits
// for release; it records every call and whether two calls in flight at
// once ever held the same resource.
type heldRegion struct {
	regionv1.RegionServiceClient // nil: only ApplyPlacements is called

	mu       sync.Mutex
	calls    [][]string       // keys of each call, in the order they came
	replicas map[string][]int // replicas of each key, in the order sent
	flying   map[string]bool
	overlap  []string
	first    chan struct{} // closed when the first call arrived
	release  chan struct{}
}

func newHeldRegion() *heldRegion {
	return &heldRegion{replicas: map[string][]int{}, flying: map[string]bool{}, first: make(chan struct{}), release: make(chan struct{})}
}

func (h *heldRegion) Client(context.Context, string) (regionv1.RegionServiceClient, error) {
	return h, nil
}

func (h *heldRegion) Forget(string) {}

func (h *heldRegion) ApplyPlacements(ctx context.Context, in *regionv1.ApplyPlacementsRequest, _ ...grpc.CallOption) (*regionv1.ApplyPlacementsResponse, error) {
	h.mu.Lock()
	n := len(h.calls)
	var keys []string
	resp := &regionv1.ApplyPlacementsResponse{}
	for _, p := range in.GetPlacements() {
		key := p.GetResource().GetTenant() + "/" + p.GetResource().GetName()
		keys = append(keys, key)
		if h.flying[key] {
			h.overlap = append(h.overlap, key)
		}
		h.flying[key] = true
		h.replicas[key] = append(h.replicas[key], int(p.GetResource().GetReplicas()))
		resp.Results = append(resp.Results, &regionv1.PlacementResult{Key: key, Applied: true})
	}
	h.calls = append(h.calls, keys)
	h.mu.Unlock()
	if n == 0 {
		close(h.first)
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	h.mu.Lock()
	for _, k := range keys {
		delete(h.flying, k)
	}
	h.mu.Unlock()
	return resp, nil
}

// TestLinkSendsAResourceInOneCallAtATime: the master keeps several calls
// to a region in flight, but a resource whose placement is in one of them
// waits for its answer before its newer placement goes, so that the
// region gets a resource's placements in the order the master made them.
func TestLinkSendsAResourceInOneCallAtATime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	region := newHeldRegion()
	c := &Controller{
		o:              Options{Regions: region, SendBatch: 256, SendInFlight: 2},
		log:            slog.New(slog.DiscardHandler),
		firstPropagate: make(chan struct{}),
	}
	l := newLink(c, "r1", 7)
	placement := func(name string, replicas int) *api.Placement {
		return &api.Placement{Region: "r1", Resource: api.Resource{Tenant: "t", Name: name, UID: "uid-" + name, Replicas: replicas}}
	}

	l.queuePlacement("t/x", placement("x", 1))
	firstDone := make(chan error, 1)
	go func() {
		_, err := l.sendBatch(ctx)
		firstDone <- err
	}()
	select {
	case <-region.first:
	case <-ctx.Done():
		t.Fatal("the first call never reached the region")
	}

	// While x's first placement is in flight, it changes and y comes.
	l.queuePlacement("t/x", placement("x", 2))
	l.queuePlacement("t/y", placement("y", 1))
	if sent, err := l.sendBatch(ctx); !sent || err != nil {
		t.Fatalf("second call: sent %v, %v; want sent", sent, err)
	}
	close(region.release)
	if err := <-firstDone; err != nil {
		t.Fatalf("first call: %v", err)
	}
	for {
		sent, err := l.sendBatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !sent {
			break
		}
	}

	region.mu.Lock()
	defer region.mu.Unlock()
	if len(region.overlap) > 0 {
		t.Errorf("resources in two calls in flight at once: %v", region.overlap)
	}
	if got := region.calls; len(got) != 3 || !slices.Equal(got[0], []string{"t/x"}) || !slices.Equal(got[1], []string{"t/y"}) || !slices.Equal(got[2], []string{"t/x"}) {
		t.Errorf("calls: got %v; want [t/x] [t/y] [t/x]", got)
	}
	if got := fmt.Sprint(region.replicas["t/x"]); got != "[1 2]" {
		t.Errorf("replicas of t/x in the order sent: got %s; want [1 2]", got)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) != 0 || len(l.flying) != 0 {
		t.Errorf("after the calls: %d pending, %d in flight; want none", len(l.pending), len(l.flying))
	}
}

// TestLinkWatchDelayStartsAfreshAfterASyncedStream: the share stream's
// reconnect delay grows while the region keeps failing, and a stream that
// delivered its snapshot starts it from the first delay again, however
// many streams were lost before (one per region leader failover).
func TestLinkWatchDelayStartsAfreshAfterASyncedStream(t *testing.T) {
	bo := linkBackoff
	var failing []time.Duration
	for range 4 {
		failing = append(failing, watchDelay(&bo, false))
	}
	if want := []time.Duration{linkBackoff.Delay(1), linkBackoff.Delay(2), linkBackoff.Delay(3), linkBackoff.Delay(4)}; !slices.Equal(failing, want) {
		t.Fatalf("delays while failing = %v; want %v", failing, want)
	}
	if failing[3] <= failing[0] {
		t.Fatalf("delays while failing do not grow: %v", failing)
	}
	for loss := range 3 {
		if got := watchDelay(&bo, true); got != linkBackoff.Delay(1) {
			t.Errorf("loss %d: delay after a synced stream = %s; want the first, %s", loss+1, got, linkBackoff.Delay(1))
		}
		// A failed attempt after it doubles it again.
		if got := watchDelay(&bo, false); got != linkBackoff.Delay(2) {
			t.Errorf("loss %d: delay after a synced stream and a failed attempt = %s; want %s", loss+1, got, linkBackoff.Delay(2))
		}
	}
}
