// Command strata runs Strata's tiers: `strata global`, `strata region`,
// `strata agent`, and `strata dev` (everything in one process, on embedded
// defaults).
package main

import (
	"github.com/spf13/cobra"

	"github.com/stratahq/strata/cmd/internal/tier"
)

func main() { tier.Main("strata", newRoot()) }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "strata",
		Short: "Strata: one global API, many independent regions, agents that run containers, VMs and load balancers",
		Long: `Strata is a hierarchical multi-region resource orchestrator.

  strata global   the global tier: REST/gRPC API and the master controller
  strata region   one region: its API, controller, scheduler and node monitor
  strata agent    a node agent driving containerd, libvirt and HAProxy (also
                  the binary strata-agent, which links only the agent)
  strata dev      everything on one machine, on embedded defaults
  strata certs    a CA and the certificates of global, region and node identities
  strata secrets  the keys of Secrets' encryption at rest: keygen, reencrypt

Every tier reads a YAML file (--config), STRATA_* environment variables
(STRATA_ETCD_ENDPOINTS=...) and flags, in rising precedence.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(tier.NewVersionCmd("strata"), newGlobalCmd(), newRegionCmd(), newAgentCmd(), newDevCmd(), newCertsCmd(), newSecretsCmd(), newSimAgentsCmd())
	return root
}
