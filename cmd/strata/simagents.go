package main

import (
	"fmt"
	"os"
	"sync"

	"github.com/spf13/cobra"

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
// Its agents share one connection, as a multiplexing proxy would, which
// one node certificate cannot carry (it acts for one node): it runs
// against a region in insecure mode only (--insecure), on loopback.
func newSimAgentsCmd() *cobra.Command {
	var (
		count    int
		region   string
		prefix   string
		logLevel string
		zones    int
		insec    bool
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
			if !insec {
				return fmt.Errorf("--insecure is required: the simulated agents share one plaintext connection to a region in insecure mode on loopback")
			}
			log := config.Log{Level: logLevel, Format: "text"}.Logger(os.Stderr)
			// One connection carries every agent's streams, as a
			// multiplexing proxy would.
			cc, err := transport.Dial(region, transport.Insecure(), transport.AnyServer())
			if err != nil {
				return err
			}
			defer cc.Close()
			var wg sync.WaitGroup
			errs := make(chan error, count)
			for i := range count {
				cfg := config.DefaultAgent()
				cfg.Node.Name = fmt.Sprintf("%s-%04d", prefix, i)
				cfg.Node.Zone = fmt.Sprintf("z%d", i%max(zones, 1))
				cfg.Node.MilliCPU, cfg.Node.MemoryMiB, cfg.Node.DiskMiB = 64000, 256000, 1000000
				cfg.Region.Endpoint = region
				cfg.DataDir = os.TempDir()
				cfg.Providers = []config.Provider{{Name: "fake"}}
				a, err := agent.New(agent.Options{
					Config:             cfg,
					Providers:          map[string]provider.Provider{"fake": fake.New(fake.Config{})},
					RegionConn:         cc,
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
	f.StringVar(&region, "region", "127.0.0.1:9091", "the region's gRPC address (plaintext, loopback)")
	f.BoolVar(&insec, "insecure", false, "speak plaintext to a region in insecure mode (required)")
	f.StringVar(&prefix, "prefix", "sim", "node name prefix")
	f.IntVar(&zones, "zones", 3, "availability zones to spread the nodes over")
	f.StringVar(&logLevel, "log-level", "warn", "debug, info, warn or error")
	return cmd
}
