package main

import (
	"context"
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

// tierFlag is a command-line flag that sets a configuration key.
type tierFlag struct {
	name, key, usage string
	list             bool // a comma-separated list
}

// runner is a tier built from its configuration.
type runner interface {
	Run(ctx context.Context) error
}

// tierCommand completes cmd into a tier's command: --config and flags,
// and a run that loads cfg (its defaults, then the file, the environment
// and the flags the user set), builds the tier and runs it until the
// command's context ends.
func tierCommand[C config.Config](cmd *cobra.Command, cfg C, flags []tierFlag, build func(C) (runner, error)) *cobra.Command {
	var file string
	f := cmd.Flags()
	f.StringVarP(&file, "config", "c", "", "YAML configuration file")
	keys := map[string]string{}
	for _, tf := range flags {
		if tf.list {
			f.StringSlice(tf.name, nil, tf.usage)
		} else {
			f.String(tf.name, "", tf.usage)
		}
		keys[tf.name] = tf.key
	}
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := config.Load(cfg, config.Source{File: file, Flags: cmd.Flags(), FlagKeys: keys}); err != nil {
			return err
		}
		r, err := build(cfg)
		if err != nil {
			return err
		}
		return r.Run(cmd.Context())
	}
	return cmd
}

var logLevelFlag = tierFlag{name: "log-level", key: "log.level", usage: "debug, info, warn or error"}

func newGlobalCmd() *cobra.Command {
	return tierCommand(&cobra.Command{
		Use:   "global",
		Short: "Run a replica of the global tier (REST/gRPC API and the master controller)",
		Long: `Run a replica of the global tier. Every replica serves the REST API
(/v1/...) and the gRPC ResourceService; the replicas elect a master through
etcd, and only the master propagates resources to regions.

Several replicas need a shared Redis (redis.*: one server, Sentinel or a
Cluster) so that any of them can take region heartbeats.`,
	}, config.DefaultGlobal(), []tierFlag{
		{name: "id", key: "id", usage: "this replica's identity (default: hostname)"},
		{name: "listen-http", key: "listen.http", usage: "REST API address (default 127.0.0.1:8080)"},
		{name: "listen-grpc", key: "listen.grpc", usage: "gRPC address (default 127.0.0.1:9090)"},
		{name: "etcd-endpoints", key: "etcd.endpoints", usage: "etcd client URLs (default http://127.0.0.1:2379)", list: true},
		{name: "redis", key: "redis.addr", usage: "Redis host:port for region heartbeats, mode single (default: in memory; redis.* in the file for Sentinel, Cluster, TLS, an ACL user)"},
		logLevelFlag,
	}, func(cfg *config.Global) (runner, error) {
		return global.New(global.Options{Config: cfg, Logger: processLogger(cfg.Log)})
	})
}

func newRegionCmd() *cobra.Command {
	return tierCommand(&cobra.Command{
		Use:   "region",
		Short: "Run a region (its API, and on the elected leader its controller and node monitor)",
		Long: `Run a region. It serves RegionService (for the global tier), AgentService
(for agents) and an operator REST API; its replicas elect a leader through
the region's own etcd, which runs the controller and the node monitor. A
region keeps working when the global tier is unreachable.`,
	}, config.DefaultRegion(), []tierFlag{
		{name: "name", key: "name", usage: "the region's name (required)"},
		{name: "id", key: "id", usage: "this replica's identity (default: hostname)"},
		{name: "listen-http", key: "listen.http", usage: "operator REST address (default 127.0.0.1:8081)"},
		{name: "listen-grpc", key: "listen.grpc", usage: "gRPC address for the global tier and agents (default 127.0.0.1:9091)"},
		{name: "etcd-endpoints", key: "etcd.endpoints", usage: "the region's etcd client URLs", list: true},
		{name: "redis", key: "redis.addr", usage: "Redis host:port for heartbeats and events, mode single (default: in memory; redis.* in the file for Sentinel, Cluster, TLS, an ACL user)"},
		{name: "global", key: "global.endpoint", usage: "the global tier's gRPC address; empty runs the region stand-alone"},
		logLevelFlag,
	}, func(cfg *config.Region) (runner, error) {
		return region.New(region.Options{Config: cfg, Logger: processLogger(cfg.Log)})
	})
}

func newAgentCmd() *cobra.Command {
	return tierCommand(&cobra.Command{
		Use:   "agent",
		Short: "Run a node agent",
		Long: `Run a node agent. It registers its node with its region, heartbeats,
watches its assignments and makes them real through its providers
(fake, containerd, libvirt, haproxy), and serves NodeService for the
region's probes. Restarting it changes nothing that is already right.`,
	}, config.DefaultAgent(), []tierFlag{
		{name: "node", key: "node.name", usage: "the node's name (default: hostname)"},
		{name: "region", key: "region.endpoint", usage: "the region's gRPC address (default 127.0.0.1:9091)"},
		{name: "listen-grpc", key: "listen.grpc", usage: "NodeService address (default 127.0.0.1:9092)"},
		{name: "listen-metrics", key: "listen.metrics", usage: "Prometheus /metrics address, e.g. 127.0.0.1:9093 (default: off)"},
		{name: "data-dir", key: "dataDir", usage: "the agent's state directory (default /var/lib/strata/agent)"},
		logLevelFlag,
	}, func(cfg *config.Agent) (runner, error) {
		return agent.New(agent.Options{Config: cfg, Registry: providers(), Metrics: metrics.New("agent"), Logger: cfg.Log.Logger(os.Stderr)})
	})
}
