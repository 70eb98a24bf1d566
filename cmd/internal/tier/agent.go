package tier

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/agent"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/metrics"
	"github.com/stratahq/strata/providers/containerd"
	"github.com/stratahq/strata/providers/fake"
	"github.com/stratahq/strata/providers/haproxy"
	"github.com/stratahq/strata/providers/provider"
)

// AgentLong is what the agent's command explains.
const AgentLong = `Run a node agent. It registers its node with its region, heartbeats,
watches its assignments and makes them real through its providers
(fake, containerd, libvirt, haproxy), and serves NodeService for the
region's probes. Restarting it changes nothing that is already right.`

// NewAgentCmd is the node agent's command, named use: "agent" under
// strata, "strata-agent" as a binary of its own.
func NewAgentCmd(use, long string) *cobra.Command {
	return Command(&cobra.Command{
		Use:   use,
		Short: "Run a node agent",
		Long:  long,
	}, config.DefaultAgent(), []Flag{
		{Name: "node", Key: "node.name", Usage: "the node's name (default: hostname)"},
		{Name: "region", Key: "region.endpoint", Usage: "the region's gRPC address (default 127.0.0.1:9091)"},
		{Name: "listen-grpc", Key: "listen.grpc", Usage: "NodeService address (default 127.0.0.1:9092)"},
		{Name: "listen-metrics", Key: "listen.metrics", Usage: "Prometheus /metrics address, e.g. 127.0.0.1:9093 (default: off)"},
		{Name: "data-dir", Key: "dataDir", Usage: "the agent's state directory (default /var/lib/strata/agent)"},
		LogLevelFlag,
	}, func(cfg *config.Agent) (Runner, error) {
		return agent.New(agent.Options{Config: cfg, Registry: Providers(), Metrics: metrics.New("agent"), Logger: cfg.Log.Logger(os.Stderr)})
	})
}

// Providers are the providers built into the agent; libvirt runs as its
// own plugin binary (it needs cgo).
func Providers() *provider.Registry {
	r := provider.NewRegistry()
	r.Register("containerd", containerd.Factory)
	r.Register("fake", fake.Factory)
	r.Register("haproxy", haproxy.Factory)
	return r
}
