package main

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/cmd/internal/tier"
	"github.com/stratahq/strata/global"
	"github.com/stratahq/strata/internal/config"
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

func newGlobalCmd() *cobra.Command {
	return tier.Command(&cobra.Command{
		Use:   "global",
		Short: "Run a replica of the global tier (REST/gRPC API and the master controller)",
		Long: `Run a replica of the global tier. Every replica serves the REST API
(/v1/...) and the gRPC ResourceService; the replicas elect a master through
etcd, and only the master propagates resources to regions.

Several replicas need a shared Redis (redis.*: one server, Sentinel or a
Cluster) so that any of them can take region heartbeats.`,
	}, config.DefaultGlobal(), []tier.Flag{
		{Name: "id", Key: "id", Usage: "this replica's identity (default: hostname)"},
		{Name: "listen-http", Key: "listen.http", Usage: "REST API address (default 127.0.0.1:8080)"},
		{Name: "listen-grpc", Key: "listen.grpc", Usage: "gRPC address (default 127.0.0.1:9090)"},
		{Name: "etcd-endpoints", Key: "etcd.endpoints", Usage: "etcd client URLs (default http://127.0.0.1:2379)", List: true},
		{Name: "redis", Key: "redis.addr", Usage: "Redis host:port for region heartbeats, mode single (default: in memory; redis.* in the file for Sentinel, Cluster, TLS, an ACL user)"},
		tier.LogLevelFlag,
	}, func(cfg *config.Global) (tier.Runner, error) {
		return global.New(global.Options{Config: cfg, Logger: processLogger(cfg.Log)})
	})
}

func newRegionCmd() *cobra.Command {
	return tier.Command(&cobra.Command{
		Use:   "region",
		Short: "Run a region (its API, and on the elected leader its controller and node monitor)",
		Long: `Run a region. It serves RegionService (for the global tier), AgentService
(for agents) and an operator REST API; its replicas elect a leader through
the region's own etcd, which runs the controller and the node monitor. A
region keeps working when the global tier is unreachable.`,
	}, config.DefaultRegion(), []tier.Flag{
		{Name: "name", Key: "name", Usage: "the region's name (required)"},
		{Name: "id", Key: "id", Usage: "this replica's identity (default: hostname)"},
		{Name: "listen-http", Key: "listen.http", Usage: "operator REST address (default 127.0.0.1:8081)"},
		{Name: "listen-grpc", Key: "listen.grpc", Usage: "gRPC address for the global tier and agents (default 127.0.0.1:9091)"},
		{Name: "etcd-endpoints", Key: "etcd.endpoints", Usage: "the region's etcd client URLs", List: true},
		{Name: "redis", Key: "redis.addr", Usage: "Redis host:port for heartbeats and events, mode single (default: in memory; redis.* in the file for Sentinel, Cluster, TLS, an ACL user)"},
		{Name: "global", Key: "global.endpoint", Usage: "the global tier's gRPC address; empty runs the region stand-alone"},
		tier.LogLevelFlag,
	}, func(cfg *config.Region) (tier.Runner, error) {
		return region.New(region.Options{Config: cfg, Logger: processLogger(cfg.Log)})
	})
}

func newAgentCmd() *cobra.Command {
	return tier.NewAgentCmd("agent", tier.AgentLong+`

The same command is a binary of its own, strata-agent (the one the
packages install and the strata-agent unit runs): it links only the
agent and its providers, and so takes less memory on every node.`)
}
