package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/stratahq/strata/agent"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/transport"
	"github.com/stratahq/strata/providers/fake"
	"github.com/stratahq/strata/providers/provider"
)

// newSimAgentsCmd runs many agents with the fake provider in one process,
// each with its own node, heartbeats and assignment stream: the load
// generator of the scale benchmarks. Hidden: it is not for operators.
//
// Two shapes: with --tls-dir every agent dials the region on its own
// connection with its own node certificate (<tls-dir>/<node>.pem and
// <node>-key.pem, the CA in ca.pem), as real agents do; with --insecure
// they share one plaintext connection, as a multiplexing proxy would (one
// node certificate cannot carry it: it acts for one node), against a
// region in insecure mode on loopback: the light shape that shows the
// core's own costs.
func newSimAgentsCmd() *cobra.Command {
	var (
		count    int
		region   string
		prefix   string
		logLevel string
		zones    int
		insec    bool
		tlsDir   string
		mixed    bool
		rate     int
		fakeCfg  fake.Config
	)
	cmd := &cobra.Command{
		Use:    "sim-agents",
		Short:  "Run many simulated agents (fake provider) in one process, for benchmarks",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if count < 1 {
				return fmt.Errorf("--count must be at least 1")
			}
			if insec == (tlsDir != "") {
				return fmt.Errorf("exactly one of --insecure (one shared plaintext connection to a region in insecure mode on loopback) and --tls-dir (a connection and a node certificate per agent) is required")
			}
			if err := fakeCfg.Validate(); err != nil {
				return err
			}
			log := config.Log{Level: logLevel, Format: "text"}.Logger(os.Stderr)
			var shared grpc.ClientConnInterface
			if insec {
				// One connection carries every agent's streams, as a
				// multiplexing proxy would.
				cc, err := transport.Dial(region, transport.Insecure(), transport.AnyServer())
				if err != nil {
					return err
				}
				defer cc.Close()
				shared = cc
			}
			var wg sync.WaitGroup
			errs := make(chan error, count)
			next, stop := pace(cmd.Context(), rate)
			defer stop()
			for i := range count {
				if i > 0 && !next() {
					break
				}
				cfg := config.DefaultAgent()
				cfg.Node.Name = fmt.Sprintf("%s-%04d", prefix, i)
				cfg.Node.Zone = fmt.Sprintf("z%d", i%max(zones, 1))
				cfg.Node.MilliCPU, cfg.Node.MemoryMiB, cfg.Node.DiskMiB = simNodeSize(i, mixed)
				cfg.Region.Endpoint = region
				cfg.DataDir = os.TempDir()
				cfg.Providers = []config.Provider{{Name: "fake"}}
				cfg.Insecure = insec
				if tlsDir != "" {
					cfg.TLS = config.TLS{CA: filepath.Join(tlsDir, "ca.pem"), Cert: filepath.Join(tlsDir, cfg.Node.Name+".pem"), Key: filepath.Join(tlsDir, cfg.Node.Name+"-key.pem")}
				}
				a, err := agent.New(agent.Options{
					Config:             cfg,
					Providers:          map[string]provider.Provider{"fake": fake.New(fakeCfg)},
					RegionConn:         shared,
					DisableNodeService: true,
					Logger:             log,
				})
				if err != nil {
					return err
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := a.Run(cmd.Context()); err != nil {
						errs <- err
					}
				}()
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%d simulated agents running against %s\n", count, region)
			wg.Wait()
			close(errs)
			return <-errs
		},
	}
	f := cmd.Flags()
	f.IntVar(&count, "count", 1000, "number of agents")
	f.StringVar(&region, "region", "127.0.0.1:9091", "the region's gRPC address")
	f.BoolVar(&insec, "insecure", false, "share one plaintext connection to a region in insecure mode")
	f.StringVar(&tlsDir, "tls-dir", "", "directory of ca.pem and each agent's <node>.pem and <node>-key.pem: one mutual-TLS connection per agent")
	f.IntVar(&rate, "start-rate", 0, "agents started per second, as a fleet comes up over time (0: all at once)")
	f.BoolVar(&mixed, "mixed-sizes", false, "nodes of mixed sizes (4, 16 and 64 cores) instead of all 64 cores")
	f.DurationVar(&fakeCfg.ApplyLatency, "apply-latency", 0, "the fake provider's least Apply latency")
	f.DurationVar(&fakeCfg.ApplyJitter, "apply-jitter", 0, "the fake provider's Apply latencies spread over [apply-latency, apply-latency+apply-jitter)")
	f.StringVar(&prefix, "prefix", "sim", "node name prefix")
	f.IntVar(&zones, "zones", 3, "availability zones to spread the nodes over")
	f.StringVar(&logLevel, "log-level", "warn", "debug, info, warn or error")
	return cmd
}

// simNodeSize is node i's capacity (milli-CPU, memory MiB, disk MiB):
// 64 cores each, or with mixed a cycle of small, medium and large nodes
// as a real fleet has.
func simNodeSize(i int, mixed bool) (milliCPU, memoryMiB, diskMiB int64) {
	if !mixed {
		return 64000, 256000, 1000000
	}
	switch i % 3 {
	case 0:
		return 4000, 16000, 100000
	case 1:
		return 16000, 64000, 400000
	default:
		return 64000, 256000, 1000000
	}
}

// pace returns what waits for the next agent's start, rate agents a
// second (0: no wait), false once ctx is done, and what stops it.
func pace(ctx context.Context, rate int) (next func() bool, stop func()) {
	if rate <= 0 {
		return func() bool { return ctx.Err() == nil }, func() {}
	}
	t := time.NewTicker(time.Second / time.Duration(rate))
	return func() bool {
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}, t.Stop
}
