package main

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/agent"
	"github.com/stratahq/strata/global"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/metrics"
	"github.com/stratahq/strata/internal/redisclient"
	"github.com/stratahq/strata/region"
)

// processLogger builds the process's logger and hands it to go-redis too,
// whose logger is one package variable for the whole process: set here,
// once, before any tier builds a Redis client, and never in library code
// (see redisclient.SetLogger). Without it go-redis prints plain
// "redis: …" lines into a JSON log whenever Redis is down.
func processLogger(c config.Log) *slog.Logger {
	log := c.Logger(os.Stderr)
	redisclient.SetLogger(log)
	return log
}

// flagKeys maps each tier's common flags to configuration keys.
var (
	globalFlags = map[string]string{
		"id": "id", "listen-http": "listen.http", "listen-grpc": "listen.grpc",
		"etcd-endpoints": "etcd.endpoints", "redis": "redis.addr", "log-level": "log.level",
	}
	regionFlags = map[string]string{
		"name": "name", "id": "id", "listen-http": "listen.http", "listen-grpc": "listen.grpc",
		"etcd-endpoints": "etcd.endpoints", "redis": "redis.addr", "global": "global.endpoint",
		"log-level": "log.level",
	}
	agentFlags = map[string]string{
		"node": "node.name", "region": "region.endpoint", "listen-grpc": "listen.grpc", "listen-metrics": "listen.metrics",
		"data-dir": "dataDir", "log-level": "log.level",
	}
)

func newGlobalCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "global",
		Short: "Run a replica of the global tier (REST/gRPC API and the master controller)",
		Long: `Run a replica of the global tier. Every replica serves the REST API
(/v1/...) and the gRPC ResourceService; the replicas elect a master through
etcd, and only the master propagates resources to regions.

Several replicas need a shared Redis (redis.*: one server, Sentinel or a
Cluster) so that any of them can take region heartbeats.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := config.DefaultGlobal()
			if err := config.Load(cfg, config.Source{File: file, Flags: cmd.Flags(), FlagKeys: globalFlags}); err != nil {
				return err
			}
			srv, err := global.New(global.Options{Config: cfg, Logger: processLogger(cfg.Log)})
			if err != nil {
				return err
			}
			return srv.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "config", "c", "", "YAML configuration file")
	f.String("id", "", "this replica's identity (default: hostname)")
	f.String("listen-http", "", "REST API address (default 127.0.0.1:8080)")
	f.String("listen-grpc", "", "gRPC address (default 127.0.0.1:9090)")
	f.StringSlice("etcd-endpoints", nil, "etcd client URLs (default http://127.0.0.1:2379)")
	f.String("redis", "", "Redis host:port for region heartbeats, mode single (default: in memory; redis.* in the file for Sentinel, Cluster, TLS, an ACL user)")
	f.String("log-level", "", "debug, info, warn or error")
	return cmd
}

func newRegionCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "region",
		Short: "Run a region (its API, and on the elected leader its controller and node monitor)",
		Long: `Run a region. It serves RegionService (for the global tier), AgentService
(for agents) and an operator REST API; its replicas elect a leader through
the region's own etcd, which runs the controller and the node monitor. A
region keeps working when the global tier is unreachable.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := config.DefaultRegion()
			if err := config.Load(cfg, config.Source{File: file, Flags: cmd.Flags(), FlagKeys: regionFlags}); err != nil {
				return err
			}
			srv, err := region.New(region.Options{Config: cfg, Logger: processLogger(cfg.Log)})
			if err != nil {
				return err
			}
			return srv.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "config", "c", "", "YAML configuration file")
	f.String("name", "", "the region's name (required)")
	f.String("id", "", "this replica's identity (default: hostname)")
	f.String("listen-http", "", "operator REST address (default 127.0.0.1:8081)")
	f.String("listen-grpc", "", "gRPC address for the global tier and agents (default 127.0.0.1:9091)")
	f.StringSlice("etcd-endpoints", nil, "the region's etcd client URLs")
	f.String("redis", "", "Redis host:port for heartbeats and events, mode single (default: in memory; redis.* in the file for Sentinel, Cluster, TLS, an ACL user)")
	f.String("global", "", "the global tier's gRPC address; empty runs the region stand-alone")
	f.String("log-level", "", "debug, info, warn or error")
	return cmd
}

func newAgentCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a node agent",
		Long: `Run a node agent. It registers its node with its region, heartbeats,
watches its assignments and makes them real through its providers
(fake, containerd, libvirt, haproxy), and serves NodeService for the
region's probes. Restarting it changes nothing that is already right.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := config.DefaultAgent()
			if err := config.Load(cfg, config.Source{File: file, Flags: cmd.Flags(), FlagKeys: agentFlags}); err != nil {
				return err
			}
			a, err := agent.New(agent.Options{Config: cfg, Registry: providers(), Metrics: metrics.New("agent"), Logger: cfg.Log.Logger(os.Stderr)})
			if err != nil {
				return err
			}
			return a.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "config", "c", "", "YAML configuration file")
	f.String("node", "", "the node's name (default: hostname)")
	f.String("region", "", "the region's gRPC address (default 127.0.0.1:9091)")
	f.String("listen-grpc", "", "NodeService address (default 127.0.0.1:9092)")
	f.String("listen-metrics", "", "Prometheus /metrics address, e.g. 127.0.0.1:9093 (default: off)")
	f.String("data-dir", "", "the agent's state directory (default /var/lib/strata/agent)")
	f.String("log-level", "", "debug, info, warn or error")
	return cmd
}
