package region_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratahq/strata/agent"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/internal/transport"
	"github.com/stratahq/strata/internal/transport/transporttest"
	"github.com/stratahq/strata/proto/apiproto"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
	"github.com/stratahq/strata/providers/fake"
	"github.com/stratahq/strata/providers/provider"
	"github.com/stratahq/strata/region"
	"github.com/stratahq/strata/region/state"
	"github.com/stratahq/strata/testkit/etcdtest"
)

// TestTenThousandReplicasOnStockEtcd runs one region (API, controller,
// monitor: the `strata region` server) on a real etcd server process with
// stock --max-txn-ops, and agents with the fake provider in this process,
// each with its own node, heartbeats and assignment stream over the
// region's gRPC API (as `strata sim-agents` runs them). One resource of
// 10,000 replicas, given the way the global tier gives it
// (ApplyPlacements), is placed with an address each and becomes ready,
// is scaled to 0 and is deleted, leaving nothing behind.
func TestTenThousandReplicasOnStockEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd server and 25 agents")
	}
	const (
		replicas = 10000
		agents   = 25
	)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	etcd := etcdtest.StartProcess(t)
	kv := etcdtest.Client(t, etcd.Endpoints())
	st := state.New(store.New(kv, "/strata/region/"))
	cfg := simRegionConfig(etcd.Endpoints())
	// 400 replicas a node: blocks of /22 (1,022 addresses), 64 of them.
	cfg.Network.NodeMask = 22
	sim := startSimRegion(t, ctx, cfg, st, agents)
	apply := func(n int) { sim.apply(t, ctx, "big", n) }
	// counts reads what the region stored of the resource.
	counts := func() (share *state.Share, assignments, statuses, ports int, err error) {
		if it, err := st.Shares.Get(ctx, "t/big"); err == nil {
			share = it.Value
		}
		for _, c := range []struct {
			prefix string
			n      *int
		}{{"assignments/", &assignments}, {"astatus/", &statuses}, {"ports/", &ports}} {
			resp, err := kv.Get(ctx, st.Store.Prefix()+c.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				return nil, 0, 0, 0, err
			}
			*c.n = int(resp.Count)
		}
		return share, assignments, statuses, ports, nil
	}

	start := time.Now()
	apply(replicas)
	eventually(t, ctx, "10,000 replicas ready", func() error {
		s, a, _, p, err := counts()
		if err != nil {
			return err
		}
		if s == nil || s.Phase != api.PhaseReady || s.Ready != replicas || a != replicas || p != replicas {
			return fmt.Errorf("share %+v; %d assignments, %d addresses", s, a, p)
		}
		return nil
	})
	t.Logf("10,000 replicas placed and ready in %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	apply(0)
	eventually(t, ctx, "scaled to 0", func() error {
		s, a, stn, p, err := counts()
		if err != nil {
			return err
		}
		if s == nil || s.Phase != api.PhaseReady || s.Replicas != 0 || a+stn+p != 0 {
			return fmt.Errorf("share %+v; %d assignments, %d statuses, %d addresses left", s, a, stn, p)
		}
		return nil
	})
	t.Logf("scaled to 0 in %s", time.Since(start).Round(time.Millisecond))

	apply(replicas)
	eventually(t, ctx, "10,000 replicas back", func() error {
		s, _, _, _, err := counts()
		if err != nil {
			return err
		}
		if s == nil || s.Phase != api.PhaseReady || s.Ready != replicas {
			return fmt.Errorf("share %+v", s)
		}
		return nil
	})
	start = time.Now()
	resp, err := sim.rs.RemovePlacements(ctx, &regionv1.RemovePlacementsRequest{
		Placements: []*regionv1.PlacementRef{{Tenant: "t", Name: "big", Uid: "uid-big"}}, Epoch: 1,
	})
	if err != nil || len(resp.GetResults()) != 1 || !resp.GetResults()[0].GetApplied() {
		t.Fatalf("RemovePlacements: %v, %v", resp.GetResults(), err)
	}
	eventually(t, ctx, "deleted", func() error {
		s, a, stn, p, err := counts()
		if err != nil {
			return err
		}
		_, perr := st.Placements.Get(ctx, "t/big")
		if s != nil || perr == nil || a+stn+p != 0 {
			return fmt.Errorf("share %+v, placement %v; %d assignments, %d statuses, %d addresses left", s, perr, a, stn, p)
		}
		return nil
	})
	t.Logf("10,000 replicas deleted in %s", time.Since(start).Round(time.Millisecond))
}

// simRegion is one region (the `strata region` server: API, controller,
// monitor) with agents of the fake provider in this process, each with
// its own node, heartbeats and assignment stream over the region's gRPC
// API, as `strata sim-agents` runs them.
type simRegion struct {
	srv *region.Server
	rs  regionv1.RegionServiceClient
	gen int64
}

// simRegionConfig is the configuration of a simRegion on etcd at
// endpoints: insecure (plaintext on loopback), since its agents share one
// connection as strata sim-agents does, which one node certificate (good
// for one node) cannot carry.
func simRegionConfig(endpoints []string) *config.Region {
	cfg := config.DefaultRegion()
	cfg.Name, cfg.ID = "r1", "r1-1"
	cfg.Listen.HTTP, cfg.Listen.GRPC = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Etcd.Endpoints = endpoints
	cfg.Log.Level = "warn"
	cfg.API.Token = "scale-test-region-token"
	cfg.Insecure = true
	return cfg
}

// startSimRegion runs the region of cfg and agents nodes, and waits until
// every node registered (st reads the region's etcd).
func startSimRegion(t *testing.T, ctx context.Context, cfg *config.Region, st *state.State, agents int) *simRegion {
	t.Helper()
	log := cfg.Log.Logger(os.Stderr)
	srv, err := region.New(region.Options{Config: cfg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Run(rctx); err != nil && rctx.Err() == nil {
			t.Errorf("region: %v", err)
		}
	}()
	select {
	case <-srv.Ready():
	case <-ctx.Done():
		t.Fatal("region not ready")
	}

	cc, err := transport.Dial(srv.GRPCAddr(), transport.Insecure(), transport.AnyServer())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	for i := range agents {
		acfg := config.DefaultAgent()
		acfg.Node.Name = fmt.Sprintf("sim-%02d", i)
		acfg.Node.MilliCPU, acfg.Node.MemoryMiB, acfg.Node.DiskMiB = 64000, 256000, 1000000
		acfg.Region.Endpoint = srv.GRPCAddr()
		acfg.DataDir = t.TempDir()
		acfg.Log.Level = "warn"
		a, err := agent.New(agent.Options{
			Config:             acfg,
			Providers:          map[string]provider.Provider{"fake": fake.New(fake.Config{})},
			RegionConn:         cc,
			DisableNodeService: true,
			Logger:             log,
		})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.Run(rctx); err != nil && rctx.Err() == nil {
				t.Errorf("agent %s: %v", acfg.Node.Name, err)
			}
		}()
	}
	eventually(t, ctx, fmt.Sprintf("%d nodes registered", agents), func() error {
		items, _, err := st.Nodes.ListAll(ctx)
		if err != nil {
			return err
		}
		if len(items) != agents {
			return fmt.Errorf("%d nodes", len(items))
		}
		return nil
	})
	return &simRegion{srv: srv, rs: regionv1.NewRegionServiceClient(cc)}
}

// apply gives the region resource t/name of n replicas, the way the
// global tier gives it (ApplyPlacements).
func (r *simRegion) apply(t *testing.T, ctx context.Context, name string, n int) {
	t.Helper()
	r.gen++
	p := api.Placement{
		Region: "r1",
		Resource: api.Resource{
			Name: name, Tenant: "t", UID: "uid-" + name, Kind: api.KindCompute,
			Replicas: n, Revision: 1, Generation: r.gen,
			Spec: api.ResourceSpec{Flavor: "tiny", Compute: &api.ComputeSpec{Image: "busybox"}},
		},
		Flavor: &api.Flavor{Name: "tiny", Kind: api.ProviderContainer, Spec: api.FlavorSpec{VCPUs: 0.1, MemoryMiB: 64}},
		Epoch:  1,
	}
	resp, err := r.rs.ApplyPlacements(ctx, &regionv1.ApplyPlacementsRequest{Placements: []*resourcev1.Placement{apiproto.PlacementToPB(&p)}})
	if err != nil {
		t.Fatalf("ApplyPlacements: %v", err)
	}
	if res := resp.GetResults(); len(res) != 1 || !res[0].GetApplied() {
		t.Fatalf("ApplyPlacements: %v", res)
	}
}

func eventually(t *testing.T, ctx context.Context, what string, cond func() error) {
	t.Helper()
	var err error
	for ctx.Err() == nil {
		if err = cond(); err == nil {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("%s: %v", what, err)
}

// TestStartRefusesTxnLimitAboveEtcd configures etcd.maxTxnOps above the
// server's --max-txn-ops (stock: 128): the region does not start, and
// says which setting to change.
func TestStartRefusesTxnLimitAboveEtcd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := config.DefaultRegion()
	cfg.Name, cfg.ID = "r1", "r1-1"
	cfg.Listen.HTTP, cfg.Listen.GRPC = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Etcd.Endpoints = etcdtest.Embedded(t)
	cfg.Etcd.MaxTxnOps = 129
	cfg.API.Token = "txn-limit-test-region-token"
	cfg.TLS = transporttest.NewPKI(t).TLS(t, pki.Region("r1"))
	srv, err := region.New(region.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Run(ctx)
	for _, want := range []string{"etcd.maxTxnOps", "--max-txn-ops", "129"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Run: got %v; want an error naming %s", err, want)
		}
	}
	t.Logf("Run: %v", err)
	select {
	case <-srv.Ready():
		t.Errorf("the region became ready with a limit etcd refuses")
	default:
	}
}
