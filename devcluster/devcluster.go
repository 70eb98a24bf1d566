// Package devcluster runs a whole Strata cluster in one process on
// embedded defaults: an embedded etcd per tier, in-memory heartbeats and
// events, a dev CA for mutual TLS, one global replica, regions with
// agents. `strata dev` runs it; end-to-end tests and benchmarks use it too.
// Its data lives in one directory, so a restart resumes.
package devcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/stratahq/strata/agent"
	"github.com/stratahq/strata/global"
	globalapi "github.com/stratahq/strata/global/api"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/etcdserver"
	"github.com/stratahq/strata/internal/metrics"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/secretbox"
	"github.com/stratahq/strata/providers/provider"
	"github.com/stratahq/strata/region"
)

// Options shape a dev cluster.
type Options struct {
	DataDir string
	// Host is the address every tier binds to.
	Host string
	// HTTPPort is the global REST port; regions take the next ports.
	// GRPCPort likewise. Zero picks free ports.
	HTTPPort, GRPCPort int
	Regions            []string
	AgentsPerRegion    int
	// Providers configure every agent (default: the fake provider).
	Providers []config.Provider
	Registry  *provider.Registry
	// TLS turns on mutual TLS between tiers with a generated dev CA;
	// without it every tier runs in insecure mode (plaintext gRPC on
	// loopback only).
	TLS bool
	// Tune lets callers adjust each tier's configuration before start.
	TuneGlobal func(*config.Global)
	TuneRegion func(*config.Region)
	TuneAgent  func(*config.Agent)
	// Logger is passed to every tier as it is: each tier's server adds
	// its own tier=… and identity, so adding them here too would repeat
	// them in every record.
	Logger *slog.Logger
}

// Cluster is a running dev cluster.
type Cluster struct {
	o   Options
	log *slog.Logger
	// Token is the global tier's admin token.
	Token string
	// RegionToken is every region's REST and console token (api.token).
	RegionToken string
	// CA is the dev CA's certificate file ("" without TLS).
	CA      string
	scheme  string
	Global  *global.Server
	Regions map[string]*region.Server

	// ca signs the tiers' identities (nil without TLS), in pkiDir.
	ca     *pki.CA
	pkiDir string

	mu     sync.Mutex
	agents map[string]*agentRun
	g      *errgroup.Group
	ctx    context.Context
}

type agentRun struct {
	agent  *agent.Agent
	cancel context.CancelFunc
	done   chan error
	cfg    *config.Agent
}

// Node names the agents of region r: r-a, r-b, ...
func NodeName(region string, i int) string {
	return fmt.Sprintf("%s-%c", region, 'a'+i)
}

// Start builds and starts the cluster; it returns once every tier serves.
// The cluster stops when ctx is done; Wait returns then.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.DataDir == "" {
		return nil, errors.New("devcluster: data dir is required")
	}
	o.defaults()
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, err
	}
	c := &Cluster{o: o, log: o.Logger, Regions: map[string]*region.Server{}, agents: map[string]*agentRun{}, scheme: "http"}
	if err := c.credentials(); err != nil {
		return nil, err
	}
	g, gctx := errgroup.WithContext(ctx)
	c.g, c.ctx = g, gctx
	if err := c.startGlobal(); err != nil {
		return nil, err
	}
	if err := c.startRegions(); err != nil {
		return nil, err
	}
	if err := c.startAgents(); err != nil {
		return nil, err
	}
	if err := c.waitReady(); err != nil {
		return nil, err
	}
	if err := c.waitRegistered(); err != nil {
		return nil, err
	}
	return c, nil
}

// defaults fills in what o leaves out.
func (o *Options) defaults() {
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if len(o.Regions) == 0 {
		o.Regions = []string{"dev-1", "dev-2"}
	}
	if o.AgentsPerRegion == 0 {
		o.AgentsPerRegion = 2
	}
	if len(o.Providers) == 0 {
		o.Providers = []config.Provider{{Name: "fake"}}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// credentials loads (or makes) the admin and region tokens and, with
// TLS, the dev CA.
func (c *Cluster) credentials() error {
	var err error
	if c.Token, err = loadOrCreateToken(filepath.Join(c.o.DataDir, "admin-token")); err != nil {
		return err
	}
	if c.RegionToken, err = loadOrCreateToken(filepath.Join(c.o.DataDir, "region-token")); err != nil {
		return err
	}
	c.pkiDir = filepath.Join(c.o.DataDir, "pki")
	if c.o.TLS {
		if c.ca, err = pki.LoadOrCreateCA(c.pkiDir, "strata dev CA"); err != nil {
			return fmt.Errorf("devcluster: %w", err)
		}
		c.CA = filepath.Join(c.pkiDir, "ca.pem")
	}
	return nil
}

// secure gives a tier its identity (mutual TLS with the dev CA) or,
// without TLS, insecure mode; off loopback its REST API is HTTPS with a
// certificate of the dev CA.
func (c *Cluster) secure(file string, id pki.Identity, tlsCfg *config.TLS, insecure *bool, apiTLS *config.ServingTLS) error {
	if c.ca == nil {
		*insecure = true
		return nil
	}
	f, err := c.ca.WriteIdentity(c.pkiDir, file, id.String(), []string{"127.0.0.1", "localhost", c.o.Host})
	if err != nil {
		return err
	}
	*tlsCfg = config.TLS{CA: f.CA, Cert: f.Cert, Key: f.Key}
	if apiTLS != nil && !isLoopback(c.o.Host) {
		*apiTLS = config.ServingTLS{Cert: f.Cert, Key: f.Key}
		c.scheme = "https"
	}
	return nil
}

func (c *Cluster) startGlobal() error {
	o := c.o
	gcfg := config.DefaultGlobal()
	gcfg.ID = "global"
	gcfg.Listen.HTTP = addr(o.Host, o.HTTPPort, 0)
	gcfg.Listen.GRPC = addr(o.Host, o.GRPCPort, 0)
	gcfg.Etcd = config.Etcd{Embedded: true, AllowEmbedded: true, DataDir: filepath.Join(o.DataDir, "etcd", "global"), Prefix: "/strata/global/", DialTimeout: 5 * time.Second}
	gcfg.API.BootstrapToken = c.Token
	keyFile, err := devSecretsKey(o.DataDir)
	if err != nil {
		return err
	}
	gcfg.Secrets.KeyFiles = []string{keyFile}
	if err := c.secure("global", pki.Global(gcfg.ID), &gcfg.TLS, &gcfg.Insecure, &gcfg.API.TLS); err != nil {
		return err
	}
	if o.TuneGlobal != nil {
		o.TuneGlobal(gcfg)
	}
	gsrv, err := global.New(global.Options{Config: gcfg, Logger: o.Logger})
	if err != nil {
		return fmt.Errorf("devcluster: %w", err)
	}
	c.Global = gsrv
	c.g.Go(func() error { return gsrv.Run(c.ctx) })
	return nil
}

// devSecretsKey is the dev cluster's key of Secrets' encryption, in its
// data directory: made on the first start, kept for the next ones.
func devSecretsKey(dataDir string) (string, error) {
	p := filepath.Join(dataDir, "secrets.key")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("devcluster: %w", err)
	}
	if _, err := secretbox.GenerateKey(p); err != nil {
		return "", fmt.Errorf("devcluster: %w", err)
	}
	return p, nil
}

func (c *Cluster) startRegions() error {
	o := c.o
	for i, name := range o.Regions {
		rcfg := config.DefaultRegion()
		rcfg.Name, rcfg.ID = name, name
		rcfg.Listen.HTTP = addr(o.Host, o.HTTPPort, i+1)
		rcfg.Listen.GRPC = addr(o.Host, o.GRPCPort, i+1)
		rcfg.Etcd = config.Etcd{Embedded: true, AllowEmbedded: true, DataDir: filepath.Join(o.DataDir, "etcd", name), Prefix: "/strata/region/", DialTimeout: 5 * time.Second}
		rcfg.Global.Endpoint = c.Global.GRPCAddr()
		rcfg.Zones = []string{"a", "b"}
		rcfg.Network.Subnet = fmt.Sprintf("10.%d.0.0/16", 88+i)
		rcfg.Network.Gateway = fmt.Sprintf("10.%d.0.1", 88+i)
		rcfg.Network.Bridge = "strata" + fmt.Sprint(i)
		// Every agent runs on this host: no routes between hosts, each
		// agent on a bridge of its own (below), the host routing between
		// them.
		rcfg.Network.Backend = api.BackendNone
		rcfg.API.Token = c.RegionToken
		if err := c.secure(name, pki.Region(name), &rcfg.TLS, &rcfg.Insecure, &rcfg.API.TLS); err != nil {
			return err
		}
		if o.TuneRegion != nil {
			o.TuneRegion(rcfg)
		}
		rsrv, err := region.New(region.Options{Config: rcfg, Logger: o.Logger})
		if err != nil {
			return fmt.Errorf("devcluster: %w", err)
		}
		c.Regions[name] = rsrv
		c.g.Go(func() error { return rsrv.Run(c.ctx) })
	}
	return nil
}

// startAgents starts every region's agents. The tiers' ports are the
// node's own: no load balancer or host port of a tenant may take them.
func (c *Cluster) startAgents() error {
	o := c.o
	var tierPorts []string
	for _, addr := range []string{c.Global.HTTPAddr(), c.Global.GRPCAddr()} {
		tierPorts = append(tierPorts, portOf(addr))
	}
	for _, r := range c.Regions {
		tierPorts = append(tierPorts, portOf(r.HTTPAddr()), portOf(r.GRPCAddr()))
	}
	for _, name := range o.Regions {
		for i := range o.AgentsPerRegion {
			node := NodeName(name, i)
			acfg := config.DefaultAgent()
			acfg.Node.Name = node
			acfg.Node.Zone = []string{"a", "b"}[i%2]
			acfg.Node.Labels = map[string]string{"strata.io/dev": "true"}
			acfg.Region.Endpoint = c.Regions[name].GRPCAddr()
			acfg.Listen.GRPC = o.Host + ":0"
			acfg.Listen.Metrics = o.Host + ":0"
			acfg.DataDir = filepath.Join(o.DataDir, "agents", node)
			acfg.Providers = perNode(o.Providers, node)
			acfg.ReservedPorts = strings.Join(tierPorts, ",")
			// One bridge per agent, of its node's block; one nftables
			// table per region, whose agents masquerade its network.
			acfg.Network.Bridge = fmt.Sprintf("strata%d%c", slices.Index(o.Regions, name), 'a'+i)
			acfg.Network.Table = "strata-" + name
			acfg.Node.MilliCPU, acfg.Node.MemoryMiB, acfg.Node.DiskMiB = 8000, 16384, 100000
			if err := c.secure("node-"+node, pki.Node(name, node), &acfg.TLS, &acfg.Insecure, nil); err != nil {
				return err
			}
			if o.TuneAgent != nil {
				o.TuneAgent(acfg)
			}
			if err := c.startAgent(acfg); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitReady waits until every tier serves.
func (c *Cluster) waitReady() error {
	wait := func(ch <-chan struct{}, what string) error {
		select {
		case <-ch:
			return nil
		case <-c.ctx.Done():
			if err := c.g.Wait(); err != nil {
				return fmt.Errorf("devcluster: %s: %w", what, err)
			}
			return fmt.Errorf("devcluster: stopped before %s was ready", what)
		case <-time.After(60 * time.Second):
			return fmt.Errorf("devcluster: %s not ready after 60s", what)
		}
	}
	if err := wait(c.Global.Ready(), "global"); err != nil {
		return err
	}
	for name, r := range c.Regions {
		if err := wait(r.Ready(), "region "+name); err != nil {
			return err
		}
	}
	for node, a := range c.agentList() {
		if err := wait(a.agent.Ready(), "agent "+node); err != nil {
			return err
		}
	}
	return nil
}

// waitRegistered waits until the global tier knows every region (their
// first heartbeat registers them): the cluster is usable then.
func (c *Cluster) waitRegistered() error {
	deadline := time.Now().Add(60 * time.Second)
	admin := globalapi.WithIdentity(c.ctx, globalapi.Identity{Tenant: globalapi.DefaultTenant, Role: api.RoleAdmin})
	for _, name := range c.o.Regions {
		for {
			_, err := c.Global.API().Regions().Get(admin, name)
			if err == nil {
				break
			}
			if time.Now().After(deadline) || c.ctx.Err() != nil {
				return fmt.Errorf("devcluster: region %s did not register with the global tier: %w", name, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

func (c *Cluster) agentList() map[string]*agentRun {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]*agentRun, len(c.agents))
	for k, v := range c.agents {
		out[k] = v
	}
	return out
}

func (c *Cluster) startAgent(cfg *config.Agent) error {
	a, err := agent.New(agent.Options{Config: cfg, Registry: c.o.Registry, Metrics: metrics.New("agent"), Logger: c.o.Logger})
	if err != nil {
		return fmt.Errorf("devcluster: agent %s: %w", cfg.Node.Name, err)
	}
	actx, cancel := context.WithCancel(c.ctx)
	run := &agentRun{agent: a, cancel: cancel, done: make(chan error, 1), cfg: cfg}
	c.mu.Lock()
	c.agents[cfg.Node.Name] = run
	c.mu.Unlock()
	c.g.Go(func() error {
		err := a.Run(actx)
		run.done <- err
		if c.ctx.Err() == nil && actx.Err() != nil {
			return nil // stopped on purpose (StopAgent)
		}
		return err
	})
	return nil
}

// StopAgent stops one agent as a crash would look to its region: its
// replicas stay with its providers.
func (c *Cluster) StopAgent(node string) error {
	c.mu.Lock()
	run, ok := c.agents[node]
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("devcluster: no agent %s", node)
	}
	run.cancel()
	<-run.done
	return nil
}

// RestartAgent starts a stopped agent again with the same configuration.
func (c *Cluster) RestartAgent(node string) error {
	c.mu.Lock()
	run, ok := c.agents[node]
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("devcluster: no agent %s", node)
	}
	if err := c.startAgent(run.cfg); err != nil {
		return err
	}
	c.mu.Lock()
	a := c.agents[node].agent
	c.mu.Unlock()
	select {
	case <-a.Ready():
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("devcluster: agent %s not ready after restart", node)
	}
}

// Wait blocks until the cluster has stopped and returns the first error.
func (c *Cluster) Wait() error { return c.g.Wait() }

// GlobalURL is the REST API's base URL.
func (c *Cluster) GlobalURL() string { return c.scheme + "://" + c.Global.HTTPAddr() }

// RegionURL is region name's REST API base URL.
func (c *Cluster) RegionURL(name string) string {
	return c.scheme + "://" + c.Regions[name].HTTPAddr()
}

// Summary describes the running cluster for people.
func (c *Cluster) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Strata dev cluster is up (data in %s)\n\n", c.o.DataDir)
	fmt.Fprintf(&b, "  global REST API   %s/v1\n", c.GlobalURL())
	fmt.Fprintf(&b, "  global gRPC       %s\n", c.Global.GRPCAddr())
	for _, name := range c.o.Regions {
		fmt.Fprintf(&b, "  region %-10s %s  (console /console, gRPC %s)\n", name, c.RegionURL(name), c.Regions[name].GRPCAddr())
	}
	fmt.Fprintf(&b, "  agents            %d per region (", c.o.AgentsPerRegion)
	var provs []string
	for _, p := range c.o.Providers {
		provs = append(provs, p.Name)
	}
	fmt.Fprintf(&b, "%s)\n", strings.Join(provs, ", "))
	fmt.Fprintf(&b, "\n  admin token       %s   (global API and console)\n", c.Token)
	fmt.Fprintf(&b, "  region token      %s   (every region's API and console)\n", c.RegionToken)
	fmt.Fprintf(&b, "  etcd              %s   (one per tier; user root, password in root.password beside it)\n",
		filepath.Join(c.o.DataDir, "etcd", "<tier>", etcdserver.SocketName))
	if c.CA != "" {
		fmt.Fprintf(&b, "  dev CA            %s   (mutual TLS between the tiers)\n", c.CA)
	} else {
		fmt.Fprintf(&b, "  INSECURE MODE     plaintext gRPC on loopback: every local process may act as any tier\n")
	}
	curl := "curl"
	if c.scheme == "https" {
		curl += " --cacert " + c.CA
	}
	fmt.Fprintf(&b, "\n  export STRATA_URL=%s STRATA_TOKEN=%s\n", c.GlobalURL(), c.Token)
	fmt.Fprintf(&b, "  %s -H \"Authorization: Bearer $STRATA_TOKEN\" $STRATA_URL/v1/regions\n", curl)
	fmt.Fprintf(&b, "  %s -H \"Authorization: Bearer %s\" %s/v1/nodes\n", curl, c.RegionToken, c.RegionURL(c.o.Regions[0]))
	return b.String()
}

// perNode gives each agent what must not be shared on one machine: its
// own libvirt storage pool.
func perNode(ps []config.Provider, node string) []config.Provider {
	out := make([]config.Provider, len(ps))
	for i, p := range ps {
		out[i] = p
		if p.Name == "libvirt" {
			opts := map[string]any{"pool": "strata-" + node}
			for k, v := range p.Options {
				opts[k] = v
			}
			out[i].Options = opts
		}
	}
	return out
}

// portOf is the port of host:port, "" if none.
func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// isLoopback reports whether host is a loopback address or name.
func isLoopback(host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	return host == "localhost"
}

func addr(host string, base, offset int) string {
	if base == 0 {
		return net.JoinHostPort(host, "0")
	}
	return net.JoinHostPort(host, fmt.Sprint(base+offset))
}

// loadOrCreateToken keeps the admin token across restarts of the dev
// cluster, so the printed token stays valid.
func loadOrCreateToken(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
	}
	var id [4]byte
	var secret [20]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", err
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return "", err
	}
	t := "strata_" + hex.EncodeToString(id[:]) + "_" + hex.EncodeToString(secret[:])
	if err := os.WriteFile(path, []byte(t+"\n"), 0o600); err != nil {
		return "", err
	}
	return t, nil
}
