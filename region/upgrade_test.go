package region_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/internal/transport/transporttest"
	"github.com/stratahq/strata/region"
	"github.com/stratahq/strata/region/state"
	"github.com/stratahq/strata/testkit/etcdtest"
)

// TestNetworkUpgradedToNodeBlocks starts a region on the data of a
// version before node blocks: its default network recorded without a
// node mask or backend. The region fills them in from its configuration
// and changes nothing else; a subnet too small for the configured node
// mask stops the region with a message naming the setting. A network
// recorded with node blocks (by an earlier start) changes not at all. In
// both, the settings of the configuration that are not applied are
// named in a warning.
func TestNetworkUpgradedToNodeBlocks(t *testing.T) {
	cases := []struct {
		name    string
		subnet  string
		blocks  bool   // recorded with node blocks
		wantErr string // "" the region starts
		warn    string // the settings not applied
	}{
		{"a /16 gets /24 blocks", "10.88.0.0/16", false, "",
			`differ="network.subnet 10.99.0.0/16 (recorded 10.88.0.0/16), network.gateway 10.99.0.1 (recorded 10.88.0.1), network.bridge other0 (recorded strata0), network.reserved [] (recorded [10.88.0.2])"`},
		{"a /25 is smaller than a block", "10.88.0.0/25", false, "network.nodeMask", ""},
		{"a network with blocks stays as it is", "10.88.0.0/16", true, "",
			`differ="network.subnet 10.99.0.0/16 (recorded 10.88.0.0/16), network.gateway 10.99.0.1 (recorded 10.88.0.1), network.bridge other0 (recorded strata0), network.reserved [] (recorded [10.88.0.2]), network.nodeMask 24 (recorded 26), network.backend host-gw (recorded vxlan), network.vni 7 (recorded 1)"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			endpoints := etcdtest.Embedded(t)
			st := state.New(store.New(etcdtest.Client(t, endpoints), "/strata/region/"))
			gw := netip.MustParsePrefix(c.subnet).Addr().Next()
			old := &api.Network{Name: "default", Subnet: c.subnet, Gateway: gw.String(), Bridge: "strata0", Reserved: []string{gw.Next().String()}, Default: true,
				CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
			if c.blocks {
				old.NodeMask, old.Backend, old.VNI = 26, api.BackendVXLAN, 1
			}
			if _, err := st.Networks.Put(ctx, "default", old); err != nil {
				t.Fatal(err)
			}

			cfg := config.DefaultRegion()
			cfg.Name, cfg.ID = "r1", "r1-1"
			cfg.Listen.HTTP, cfg.Listen.GRPC = "127.0.0.1:0", "127.0.0.1:0"
			cfg.Etcd.Endpoints = endpoints
			cfg.Log.Level = "warn"
			cfg.API.Token = "upgrade-test-region-token"
			cfg.TLS = transporttest.NewPKI(t).TLS(t, pki.Region("r1"))
			// The configured network differs from the recorded one: only
			// the node mask, backend and VNI are taken from it.
			cfg.Network.Subnet, cfg.Network.Gateway, cfg.Network.Bridge = "10.99.0.0/16", "10.99.0.1", "other0"
			cfg.Network.Backend, cfg.Network.VNI = api.BackendHostGW, 7
			var logs logBuffer
			srv, err := region.New(region.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			if err != nil {
				t.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- srv.Run(runCtx) }()
			defer func() {
				stop()
				<-done
			}()

			if c.wantErr != "" {
				select {
				case err := <-done:
					done <- err
					if err == nil || !strings.Contains(err.Error(), c.wantErr) {
						t.Fatalf("Run: got %v; want an error naming %s", err, c.wantErr)
					}
				case <-ctx.Done():
					t.Fatal("the region kept running with a network its node mask does not fit")
				}
				return
			}
			// The network is upgraded once the caches are synced, before
			// the region runs for leadership.
			want := *old
			if !c.blocks {
				want.NodeMask, want.Backend, want.VNI = 24, api.BackendHostGW, 7
			}
			var got *api.Network
			for !api.SameJSON(got, &want) {
				select {
				case err := <-done:
					done <- err
					t.Fatalf("Run: %v", err)
				case <-ctx.Done():
					t.Fatalf("network after the upgrade: got %+v; want %+v", got, want)
				case <-time.After(20 * time.Millisecond):
				}
				it, err := st.Networks.Get(ctx, "default")
				if err != nil {
					t.Fatal(err)
				}
				got = it.Value
			}
			// What is not applied is said, once the network is in place.
			for !strings.Contains(logs.String(), c.warn) {
				select {
				case <-ctx.Done():
					t.Fatalf("log: got\n%s\nwant a warning with %s", logs.String(), c.warn)
				case <-time.After(20 * time.Millisecond):
				}
			}
		})
	}
}

// logBuffer is a log destination that a test reads while the server
// writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
