// Command strata runs Strata's tiers: `strata global`, `strata region`,
// `strata agent`, and `strata dev` (everything in one process, on embedded
// defaults).
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// STRATA_PPROF=127.0.0.1:6060 serves Go's profiler (benchmarks take
	// their profiles this way).
	if addr := os.Getenv("STRATA_PPROF"); addr != "" {
		go func() {
			mux := http.NewServeMux()
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
			fmt.Fprintln(os.Stderr, "strata: pprof:", http.ListenAndServe(addr, mux))
		}()
	}
	if err := newRoot().ExecuteContext(ctx); err != nil {
		if !errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "strata:", err)
		}
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "strata",
		Short: "Strata: one global API, many independent regions, agents that run containers, VMs and load balancers",
		Long: `Strata is a hierarchical multi-region resource orchestrator.

  strata global   the global tier: REST/gRPC API and the master controller
  strata region   one region: its API, controller, scheduler and node monitor
  strata agent    a node agent driving containerd, libvirt and HAProxy
  strata dev      everything on one machine, on embedded defaults
  strata certs    a CA and the certificates of global, region and node identities
  strata secrets  the keys of Secrets' encryption at rest: keygen, reencrypt

Every tier reads a YAML file (--config), STRATA_* environment variables
(STRATA_ETCD_ENDPOINTS=...) and flags, in rising precedence.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCmd(), newGlobalCmd(), newRegionCmd(), newAgentCmd(), newDevCmd(), newCertsCmd(), newSecretsCmd(), newSimAgentsCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "strata", version.String())
		},
	}
}
