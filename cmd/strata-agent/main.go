// Command strata-agent is Strata's node agent on its own: the same
// command, flags and configuration as `strata agent`, in a binary that
// links only the agent and the providers it hosts (containerd, haproxy,
// fake; libvirt is its own plugin binary), not the global and region
// tiers nor etcd's server. A smaller binary is fewer pages resident on
// every node. The packages install it and the strata-agent unit runs it.
package main

import (
	"github.com/spf13/cobra"

	"github.com/stratahq/strata/cmd/internal/tier"
)

func main() { tier.Main("strata-agent", newRoot()) }

func newRoot() *cobra.Command {
	root := tier.NewAgentCmd("strata-agent", tier.AgentLong+`

It is the binary of the agent alone; `+"`strata agent`"+` runs the same command
(same flags, same configuration). It reads a YAML file (--config),
STRATA_* environment variables and flags, in rising precedence.`)
	root.Example = `  strata-agent --config /etc/strata/agent.yaml
  strata-agent --node n1 --region 10.0.0.1:9091 --data-dir /var/lib/strata/agent`
	root.SilenceUsage, root.SilenceErrors = true, true
	root.AddCommand(tier.NewVersionCmd("strata-agent"))
	return root
}
