package region_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/region/state"
	"github.com/stratahq/strata/testkit/etcdtest"
	"github.com/stratahq/strata/testkit/redistest"
	"github.com/stratahq/strata/testkit/testenv/scrape"
)

// TestFiveThousandReplicaCreateLosesNoEvent creates one resource of 5,000
// replicas in a region whose event stream is a real Redis, with agents of
// the fake provider: the controller emits every replica's Scheduled event
// after one commit, the API every replica's ReplicaReady as the agents
// report. Every one of them is in the stream, alone or counted in a
// summary event of the resource, and strata_events_dropped_total stays 0.
func TestFiveThousandReplicaCreateLosesNoEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis, etcd and 10 agents")
	}
	const (
		replicas = 5000
		agents   = 10
	)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rds := redistest.Start(t)
	endpoints := etcdtest.Embedded(t)
	st := state.New(store.New(etcdtest.Client(t, endpoints), "/strata/region/"))
	cfg := simRegionConfig(endpoints)
	cfg.Redis.Addr = rds.Addr()
	cfg.Network.NodeMask = 22 // 1,022 addresses a node
	sim := startSimRegion(t, ctx, cfg, st, agents)

	sim.apply(t, ctx, "big", replicas)
	eventually(t, ctx, "5,000 replicas ready", func() error {
		it, err := st.Shares.Get(ctx, "t/big")
		if err != nil {
			return err
		}
		if s := it.Value; s.Phase != api.PhaseReady || s.Ready != replicas {
			return fmt.Errorf("share %s, %d/%d ready", s.Phase, s.Ready, s.Replicas)
		}
		return nil
	})

	// The last summary follows the last report within the coalescing
	// window (5 s).
	stream := events.NewRedis(rds.Client(t), "strata:region:r1:events", 0)
	var written int
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	eventually(t, sctx, "every replica's events in the stream", func() error {
		evs, err := stream.Range(sctx, events.Query{Tenant: "t"})
		if err != nil {
			return err
		}
		written = len(evs)
		counts := map[string]int{}
		for _, ev := range evs {
			n := 1
			if c, ok := ev.Fields["count"]; ok {
				if n, err = strconv.Atoi(c); err != nil || ev.Object != "resource/t/big" {
					return fmt.Errorf("summary %+v; want a count of resource/t/big's replicas", ev)
				}
			}
			counts[ev.Reason] += n
		}
		if counts["Scheduled"] != replicas || counts["ReplicaReady"] != replicas {
			return fmt.Errorf("in the stream, summaries counted: %v; want %d Scheduled and %d ReplicaReady", counts, replicas, replicas)
		}
		return nil
	})
	t.Logf("%d events in the stream for %d replicas", written, replicas)

	for _, why := range []string{events.DropBufferFull, events.DropAppendFailed, events.DropInvalid} {
		sample := fmt.Sprintf(`strata_events_dropped_total{reason=%q,tier="region"}`, why)
		if v, err := scrape.Sample(ctx, nil, "http://"+sim.srv.HTTPAddr()+"/metrics", sample); err != nil || v != 0 {
			t.Errorf("%s = %v, %v; want 0", sample, v, err)
		}
	}
}
