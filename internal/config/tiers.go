package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/hostpolicy"
)

// Etcd is how a tier reaches its etcd cluster.
type Etcd struct {
	// Endpoints of the cluster; empty with Embedded set runs a member in
	// the process (strata dev).
	Endpoints   []string      `mapstructure:"endpoints"`
	Prefix      string        `mapstructure:"prefix"`
	DialTimeout time.Duration `mapstructure:"dialTimeout"`
	// Embedded runs a single-member etcd inside the process in DataDir,
	// on a unix socket there with etcd authentication on (see package
	// etcdserver). It is what `strata dev` runs; a tier refuses it unless
	// AllowEmbedded says so too: one member is no replica, and its data
	// dies with the machine.
	Embedded      bool   `mapstructure:"embedded"`
	DataDir       string `mapstructure:"dataDir"`
	AllowEmbedded bool   `mapstructure:"allowEmbedded"`
	// MaxTxnOps is the most operations the tier puts in one etcd
	// transaction; larger writes are split. It must not exceed the etcd
	// server's --max-txn-ops (stock etcd: 128, the default here), which the
	// tier checks at start.
	MaxTxnOps int `mapstructure:"maxTxnOps"`
	// JSONValues writes every value as JSON, as the releases before the
	// binary codec of the hot collections did (reads take both): set it
	// while any process of the tier still runs such a release.
	JSONValues bool `mapstructure:"jsonValues"`
	// TLS is the client side of TLS to etcd (https:// endpoints): CA
	// alone to verify the members, with cert and key to present a
	// client certificate (etcd --client-cert-auth).
	TLS TLS `mapstructure:"tls"`
	// Username and Password (or PasswordFile, read at start) log in to
	// an etcd with authentication enabled. The password is never logged.
	Username     string `mapstructure:"username"`
	Password     string `mapstructure:"password"`
	PasswordFile string `mapstructure:"passwordFile"`
}

// defaultMaxTxnOps is stock etcd's --max-txn-ops (store.DefaultMaxTxnOps;
// config does not import the store, which would bring the etcd client
// into the agent).
const defaultMaxTxnOps = 128

// minMaxTxnOps leaves room for the largest write that must be atomic.
const minMaxTxnOps = 16

func (e *Etcd) validate(key string) error {
	if !e.Embedded && len(e.Endpoints) == 0 {
		return keyError(key+".endpoints", "is required (or set %s.embedded: true)", key)
	}
	if e.Embedded && !e.AllowEmbedded {
		return keyError(key+".embedded", "a single-member etcd inside the process is for `strata dev`, not a tier that keeps state: give %s.endpoints of an etcd cluster, or set %s.allowEmbedded: true to run on one anyway (a lab; see docs/operations.md)", key, key)
	}
	if e.Embedded && e.DataDir == "" {
		return keyError(key+".dataDir", "is required with %s.embedded", key)
	}
	if e.Prefix == "" || e.Prefix[0] != '/' || e.Prefix[len(e.Prefix)-1] != '/' {
		return keyError(key+".prefix", "%q must start and end with /", e.Prefix)
	}
	if e.MaxTxnOps < minMaxTxnOps {
		return keyError(key+".maxTxnOps", "%d is too small (at least %d; etcd's --max-txn-ops defaults to %d)", e.MaxTxnOps, minMaxTxnOps, defaultMaxTxnOps)
	}
	if err := e.validateAuth(key); err != nil {
		return err
	}
	return positive(key+".dialTimeout", e.DialTimeout)
}

func (e *Etcd) validateAuth(key string) error {
	t := e.TLS
	if t.Enabled() {
		if t.CA == "" {
			return keyError(key+".tls.ca", "is required when %s.tls.cert or key is set", key)
		}
		if (t.Cert == "") != (t.Key == "") {
			return keyError(key+".tls.cert", "and %s.tls.key go together", key)
		}
		for k, f := range map[string]string{"ca": t.CA, "cert": t.Cert, "key": t.Key} {
			if f == "" {
				continue
			}
			if _, err := os.Stat(f); err != nil {
				return keyError(key+".tls."+k, "%v", err)
			}
		}
	}
	if e.Password != "" && e.PasswordFile != "" {
		return keyError(key+".password", "set %s.password or %s.passwordFile, not both", key, key)
	}
	if (e.Password != "" || e.PasswordFile != "") && e.Username == "" {
		return keyError(key+".username", "is required with a password")
	}
	if e.PasswordFile != "" {
		if _, err := os.Stat(e.PasswordFile); err != nil {
			return keyError(key+".passwordFile", "%v", err)
		}
	}
	return nil
}

// EtcdPassword returns the configured password, reading PasswordFile
// (its first line) when that is set.
func (e *Etcd) EtcdPassword() (string, error) {
	return secret(e.Password, e.PasswordFile, "etcd.passwordFile")
}

// TLS holds the files for mutual TLS on gRPC links. All empty is refused
// at start unless the tier's `insecure` is set.
type TLS struct {
	CA   string `mapstructure:"ca"`
	Cert string `mapstructure:"cert"`
	Key  string `mapstructure:"key"`
}

// Enabled reports whether TLS is configured.
func (t TLS) Enabled() bool { return t.CA != "" || t.Cert != "" || t.Key != "" }

func (t *TLS) validate(key string) error {
	if !t.Enabled() {
		return nil
	}
	for k, f := range map[string]string{"ca": t.CA, "cert": t.Cert, "key": t.Key} {
		if f == "" {
			return keyError(key+"."+k, "is required when any of %s.ca/cert/key is set", key)
		}
		if _, err := os.Stat(f); err != nil {
			return keyError(key+"."+k, "%v", err)
		}
	}
	return nil
}

// ServingTLS is the certificate an HTTPS server presents (the REST APIs);
// the files are read again when they change.
type ServingTLS struct {
	Cert string `mapstructure:"cert"`
	Key  string `mapstructure:"key"`
}

// Enabled reports whether HTTPS is configured.
func (t ServingTLS) Enabled() bool { return t.Cert != "" || t.Key != "" }

func (t *ServingTLS) validate(key string) error {
	if !t.Enabled() {
		return nil
	}
	for k, f := range map[string]string{"cert": t.Cert, "key": t.Key} {
		if f == "" {
			return keyError(key+"."+k, "is required when %s.cert or key is set", key)
		}
		if _, err := os.Stat(f); err != nil {
			return keyError(key+"."+k, "%v", err)
		}
	}
	return nil
}

// HTTPAPI is what the global and region REST APIs share.
type HTTPAPI struct {
	MaxBodyBytes int64 `mapstructure:"maxBodyBytes"`
	// TLS serves the API over HTTPS. Without it the API is plain HTTP,
	// which a tier allows only on a loopback address or in insecure mode.
	TLS ServingTLS `mapstructure:"tls"`
	// AllowedHosts are the host names the API answers to (the Host
	// header), besides loopback names and IP addresses: a page on
	// another name that resolves to this server (DNS rebinding) is
	// refused.
	AllowedHosts []string `mapstructure:"allowedHosts"`
	// ReadTimeout bounds reading one request, headers and body.
	ReadTimeout time.Duration `mapstructure:"readTimeout"`
}

func (h *HTTPAPI) validate(key string) error {
	if h.MaxBodyBytes < 1024 {
		return keyError(key+".maxBodyBytes", "%d is too small (at least 1024)", h.MaxBodyBytes)
	}
	for i, host := range h.AllowedHosts {
		if host == "" || strings.ContainsAny(host, ":/ ") {
			return keyError(fmt.Sprintf("%s.allowedHosts[%d]", key, i), "%q is not a host name (no port, no scheme)", host)
		}
	}
	return first(h.TLS.validate(key+".tls"), positive(key+".readTimeout", h.ReadTimeout))
}

// DefaultHTTPAPI is the REST API's defaults: a body of at most 1 MiB,
// read within 30s.
func DefaultHTTPAPI() HTTPAPI {
	return HTTPAPI{MaxBodyBytes: 1 << 20, ReadTimeout: 30 * time.Second}
}

// Log sets up the structured logger.
type Log struct {
	Level  string `mapstructure:"level"`
	Format string `mapstructure:"format"`
}

func (l *Log) validate() error {
	switch l.Level {
	case "debug", "info", "warn", "error":
	default:
		return keyError("log.level", "%q is not one of debug, info, warn, error", l.Level)
	}
	switch l.Format {
	case "text", "json":
	default:
		return keyError("log.format", "%q is not text or json", l.Format)
	}
	return nil
}

// defaultEtcd is a tier's etcd on this machine, its keys under prefix.
func defaultEtcd(prefix string) Etcd {
	return Etcd{Endpoints: []string{"http://127.0.0.1:2379"}, Prefix: prefix, DialTimeout: 5 * time.Second, MaxTxnOps: defaultMaxTxnOps}
}

func defaultLog() Log { return Log{Level: "info", Format: "text"} }

// Liveness sets how a monitor turns missed heartbeats into Suspect and Down.
type Liveness struct {
	HeartbeatInterval time.Duration `mapstructure:"heartbeatInterval"`
	// SuspectAfter without a heartbeat: probe the peer's Status RPC.
	SuspectAfter time.Duration `mapstructure:"suspectAfter"`
	// DownAfter without a heartbeat and a failed probe: Down.
	DownAfter    time.Duration `mapstructure:"downAfter"`
	ProbeTimeout time.Duration `mapstructure:"probeTimeout"`
}

// DefaultLiveness is a heartbeat every 2s, Suspect after 6s without one,
// Down after 10s; a probe gets 1s.
func DefaultLiveness() Liveness {
	return Liveness{HeartbeatInterval: 2 * time.Second, SuspectAfter: 6 * time.Second, DownAfter: 10 * time.Second, ProbeTimeout: time.Second}
}

// DefaultRegionsLiveness is how the global tier judges regions unless
// configured: DefaultLiveness, with 2s for a probe across the WAN.
func DefaultRegionsLiveness() Liveness {
	l := DefaultLiveness()
	l.ProbeTimeout = 2 * time.Second
	return l
}

func (l *Liveness) validate(key string) error {
	return first(
		positive(key+".heartbeatInterval", l.HeartbeatInterval),
		positive(key+".probeTimeout", l.ProbeTimeout),
		func() error {
			if l.SuspectAfter <= l.HeartbeatInterval {
				return keyError(key+".suspectAfter", "%s must be longer than heartbeatInterval %s", l.SuspectAfter, l.HeartbeatInterval)
			}
			if l.DownAfter <= l.SuspectAfter {
				return keyError(key+".downAfter", "%s must be longer than suspectAfter %s", l.DownAfter, l.SuspectAfter)
			}
			return nil
		}(),
	)
}

// defaultLeaseTTL bounds failover after a leader dies.
const defaultLeaseTTL = 3 * time.Second

// Server is what the global tier and a region configure alike: the
// replica's identity, its listeners, etcd, Redis, TLS, logging and
// leader election.
type Server struct {
	// ID names this replica (in the election, in logs).
	ID     string `mapstructure:"id"`
	Listen struct {
		HTTP string `mapstructure:"http"`
		GRPC string `mapstructure:"grpc"`
	} `mapstructure:"listen"`
	Etcd  Etcd  `mapstructure:"etcd"`
	Redis Redis `mapstructure:"redis"`
	TLS   TLS   `mapstructure:"tls"`
	// Insecure allows plaintext gRPC (no tls) and plain HTTP off
	// loopback: a test cluster on one machine only (see docs/operations.md).
	Insecure bool `mapstructure:"insecure"`
	Log      Log  `mapstructure:"log"`
	// Audit is the audit log of calls that change something.
	Audit Audit `mapstructure:"audit"`
	// LeaseTTL bounds failover after the leader (the global master, a
	// region's controller) dies.
	LeaseTTL time.Duration `mapstructure:"leaseTTL"`
	// RevokeDeadLeader lets a standby revoke the election lease of a
	// leader whose process is gone (its host refuses connections to the
	// leader's gRPC listen address) instead of waiting for the lease to
	// expire. Only a non-wildcard listen.grpc is published for the probes.
	RevokeDeadLeader bool `mapstructure:"revokeDeadLeader"`
}

// defaultServer listens on loopback at httpAddr and grpcAddr and keeps
// its keys under etcdPrefix of a local etcd.
func defaultServer(httpAddr, grpcAddr, etcdPrefix string) Server {
	s := Server{ID: hostname(), Etcd: defaultEtcd(etcdPrefix), Redis: Redis{Mode: RedisModeSingle}, Log: defaultLog(), LeaseTTL: defaultLeaseTTL,
		RevokeDeadLeader: true, Audit: Audit{MaxSizeMB: 100, MaxBackups: 5}}
	s.Listen.HTTP, s.Listen.GRPC = httpAddr, grpcAddr
	return s
}

// Audit configures the audit log (see docs/operations.md "Audit log").
type Audit struct {
	// Path is the JSON-lines file; empty keeps no audit log.
	Path string `mapstructure:"path"`
	// MaxSizeMB rotates the file at this size; 0 never (rotate it with
	// logrotate and SIGHUP instead).
	MaxSizeMB int `mapstructure:"maxSizeMB"`
	// MaxBackups is how many rotated files are kept.
	MaxBackups int `mapstructure:"maxBackups"`
}

func (a Audit) validate(key string) error {
	switch {
	case a.MaxSizeMB < 0:
		return fmt.Errorf("%s.maxSizeMB: %d is negative", key, a.MaxSizeMB)
	case a.MaxBackups < 0:
		return fmt.Errorf("%s.maxBackups: %d is negative", key, a.MaxBackups)
	}
	return nil
}

func (s *Server) validate() error {
	return first(
		required("id", s.ID),
		s.Audit.validate("audit"),
		validAddr("listen.http", s.Listen.HTTP),
		validAddr("listen.grpc", s.Listen.GRPC),
		s.Etcd.validate("etcd"),
		s.Redis.validate("redis"),
		s.TLS.validate("tls"),
		s.Log.validate(),
		positive("leaseTTL", s.LeaseTTL),
	)
}

// Global configures `strata global`.
type Global struct {
	Server `mapstructure:",squash"`
	// Regions is the liveness of regions as the global monitor sees it.
	Regions Liveness `mapstructure:"regions"`
	API     struct {
		HTTPAPI `mapstructure:",squash"`
		// BootstrapToken is an admin token created at start if no
		// token exists yet.
		BootstrapToken string `mapstructure:"bootstrapToken"`
	} `mapstructure:"api"`
	// Secrets is how tenants' Secrets are encrypted at rest.
	Secrets Secrets `mapstructure:"secrets"`
	// Alerts is where alert rules' receivers may be.
	Alerts Alerts `mapstructure:"alerts"`
}

// Alerts bounds where the master posts alert notifications: a
// receiver's address, as resolved when it is dialled, must be public
// unicast or inside ReceiverNetworks, so that whoever writes a rule
// cannot make the master reach the operator's own side (loopback, the
// clouds' metadata at 169.254.169.254, the region networks).
type Alerts struct {
	// ReceiverNetworks are CIDRs receivers may be on although they are
	// loopback, private, link-local or otherwise internal (a receiver
	// on the operator's network: "10.0.7.0/24"). Default none.
	ReceiverNetworks []string `mapstructure:"receiverNetworks"`
}

func (a *Alerts) validate(key string) error {
	for i, s := range a.ReceiverNetworks {
		if _, err := hostpolicy.ParseNetworks([]string{s}); err != nil {
			return keyError(fmt.Sprintf("%s.receiverNetworks[%d]", key, i), "%v", err)
		}
	}
	return nil
}

// Networks is the receivers' address policy.
func (a *Alerts) Networks() hostpolicy.Networks {
	n, _ := hostpolicy.ParseNetworks(a.ReceiverNetworks) // checked by Validate
	return n
}

// Secrets names the key files of the Secrets' envelope encryption: each
// holds a 256-bit key (base64, first line); the first encrypts, all
// decrypt, so a rotation puts the new file first, restarts every
// replica, runs `strata secrets reencrypt`, then drops the old one.
// None: the tier refuses to store Secrets.
type Secrets struct {
	KeyFiles []string `mapstructure:"keyFiles"`
}

func (s *Secrets) validate(key string) error {
	for i, f := range s.KeyFiles {
		if _, err := os.Stat(f); err != nil {
			return keyError(fmt.Sprintf("%s.keyFiles[%d]", key, i), "%v", err)
		}
	}
	return nil
}

// DefaultGlobal returns the defaults of `strata global`.
func DefaultGlobal() *Global {
	g := &Global{Server: defaultServer("127.0.0.1:8080", "127.0.0.1:9090", "/strata/global/")}
	g.Regions = DefaultRegionsLiveness()
	g.API.HTTPAPI = DefaultHTTPAPI()
	return g
}

// Validate implements Config.
func (g *Global) Validate() error {
	return first(
		g.Server.validate(),
		g.Regions.validate("regions"),
		g.API.validate("api"),
		g.Secrets.validate("secrets"),
		g.Alerts.validate("alerts"),
	)
}

// Network is a region network (see api.Network) in configuration form.
type Network struct {
	Name     string   `mapstructure:"name"`
	Subnet   string   `mapstructure:"subnet"`
	Gateway  string   `mapstructure:"gateway"`
	Bridge   string   `mapstructure:"bridge"`
	Reserved []string `mapstructure:"reserved"`
	// NodeMask is the prefix length of each node's block of the subnet.
	NodeMask int `mapstructure:"nodeMask"`
	// Backend carries traffic between hosts: vxlan, host-gw or none.
	Backend string `mapstructure:"backend"`
	// VNI is the VXLAN network identifier (backend vxlan).
	VNI int `mapstructure:"vni"`
}

// RegionController sets a region controller's deadlines.
type RegionController struct {
	// ProvisionTimeout bounds created/provision → ready.
	ProvisionTimeout time.Duration `mapstructure:"provisionTimeout"`
	// DestroyTimeout bounds destroy → destroyed.
	DestroyTimeout time.Duration `mapstructure:"destroyTimeout"`
	// RetryBackoff is the first delay before re-placing a failed
	// replica; it doubles up to a minute.
	RetryBackoff time.Duration `mapstructure:"retryBackoff"`
	// DrainDeadline is the default for drains that name none.
	DrainDeadline time.Duration `mapstructure:"drainDeadline"`
	// Resync looks at every resource this often: a safety net, since a
	// resource is looked at when something it depends on changes and
	// when one of its deadlines or back-offs comes.
	Resync time.Duration `mapstructure:"resync"`
}

// DefaultRegionController returns the controller's defaults.
func DefaultRegionController() RegionController {
	return RegionController{ProvisionTimeout: 5 * time.Minute, DestroyTimeout: 2 * time.Minute, RetryBackoff: time.Second, DrainDeadline: 10 * time.Minute, Resync: time.Minute}
}

// Region configures `strata region`.
type Region struct {
	Name   string `mapstructure:"name"`
	Server `mapstructure:",squash"`
	Zones  []string `mapstructure:"zones"`
	// Advertise is how others reach this region (defaults to Listen).
	Advertise struct {
		HTTP string `mapstructure:"http"`
		GRPC string `mapstructure:"grpc"`
	} `mapstructure:"advertise"`
	// Global names the global tier's gRPC addresses: one, or several
	// replicas separated by commas (heartbeats go to the first that
	// answers). Empty runs the region stand-alone.
	Global struct {
		Endpoint string `mapstructure:"endpoint"`
	} `mapstructure:"global"`
	// Nodes is the liveness of agents as the node monitor sees it.
	Nodes      Liveness         `mapstructure:"nodes"`
	Controller RegionController `mapstructure:"controller"`
	Network    Network          `mapstructure:"network"`
	API        struct {
		HTTPAPI `mapstructure:",squash"`
		// Token protects the operator REST API and console. It is
		// required: the region's REST API has no anonymous mode.
		Token string `mapstructure:"token"`
	} `mapstructure:"api"`
}

// DefaultRegion returns the defaults of `strata region`.
func DefaultRegion() *Region {
	r := &Region{Server: defaultServer("127.0.0.1:8081", "127.0.0.1:9091", "/strata/region/")}
	r.Nodes = DefaultLiveness()
	r.Controller = DefaultRegionController()
	r.Network = Network{Name: "default", Subnet: "10.88.0.0/16", Gateway: "10.88.0.1", Bridge: "strata0", NodeMask: 24, Backend: "vxlan", VNI: 1}
	r.API.HTTPAPI = DefaultHTTPAPI()
	return r
}

// Default implements Defaulter.
func (r *Region) Default() {
	if r.Advertise.HTTP == "" {
		r.Advertise.HTTP = r.Listen.HTTP
	}
	if r.Advertise.GRPC == "" {
		r.Advertise.GRPC = r.Listen.GRPC
	}
}

// Validate implements Config.
func (r *Region) Validate() error {
	return first(
		required("name", r.Name),
		r.Server.validate(),
		r.Nodes.validate("nodes"),
		positive("controller.provisionTimeout", r.Controller.ProvisionTimeout),
		positive("controller.destroyTimeout", r.Controller.DestroyTimeout),
		positive("controller.retryBackoff", r.Controller.RetryBackoff),
		positive("controller.drainDeadline", r.Controller.DrainDeadline),
		positive("controller.resync", r.Controller.Resync),
		r.validateNetwork(),
		r.API.validate("api"),
		func() error {
			if len(r.API.Token) < 16 {
				return keyError("api.token", "is required and at least 16 characters (the region REST API and console have no anonymous mode; e.g. STRATA_API_TOKEN=$(openssl rand -hex 32))")
			}
			return nil
		}(),
	)
}

func (r *Region) validateNetwork() error {
	n := r.Network
	pfx, err := netip.ParsePrefix(n.Subnet)
	if err != nil || !pfx.Addr().Is4() {
		return keyError("network.subnet", "%q is not an IPv4 CIDR", n.Subnet)
	}
	gw, err := netip.ParseAddr(n.Gateway)
	if err != nil || !pfx.Contains(gw) {
		return keyError("network.gateway", "%q is not an address in %s", n.Gateway, n.Subnet)
	}
	if n.Bridge == "" || len(n.Bridge) > 15 {
		return keyError("network.bridge", "%q must be a Linux interface name (1-15 characters)", n.Bridge)
	}
	if n.NodeMask < pfx.Bits() || n.NodeMask > 30 {
		return keyError("network.nodeMask", "/%d is not a block of %s (from /%d to /30)", n.NodeMask, n.Subnet, pfx.Bits())
	}
	switch n.Backend {
	case "vxlan", "host-gw", "none":
	default:
		return keyError("network.backend", "%q is not vxlan, host-gw or none", n.Backend)
	}
	if n.VNI < 1 || n.VNI > 1<<24-1 {
		return keyError("network.vni", "%d is not a VXLAN network identifier (1-16777215)", n.VNI)
	}
	return required("network.name", n.Name)
}

// Data plane settings of an agent (AgentNetwork.DataPlane).
const (
	// DataPlaneAuto programs the host unless every provider is named
	// fake (the fake attaches nothing to the host).
	DataPlaneAuto     = "auto"
	DataPlaneEnabled  = "enabled"
	DataPlaneDisabled = "disabled"
)

// AgentNetwork is how an agent sets up its host for the region network.
type AgentNetwork struct {
	// DataPlane says whether the agent programs the host (bridge, routes
	// to other nodes' blocks, VXLAN, masquerade): auto, enabled or
	// disabled.
	DataPlane string `mapstructure:"dataPlane"`
	// Bridge is this host's bridge for replicas (default: the region
	// network's). Agents sharing a host need one each.
	Bridge string `mapstructure:"bridge"`
	// UnderlayAddress is the address other hosts reach this one at;
	// default: the first IPv4 address of UnderlayInterface.
	UnderlayAddress string `mapstructure:"underlayAddress"`
	// UnderlayInterface carries traffic to other hosts; default: the
	// interface of the default route (or the one holding
	// UnderlayAddress).
	UnderlayInterface string `mapstructure:"underlayInterface"`
	// Table is the agent's nftables table (IPv4 family). Agents of
	// different regions sharing a host need one each.
	Table string `mapstructure:"table"`
	// DNS is the name server the agent runs for the host's replicas.
	DNS AgentDNS `mapstructure:"dns"`
}

// AgentDNS configures the agent's name server: it answers the host's
// replicas on the gateway of the host's block, port 53 (the address the
// host policy admits for DNS), names of their tenant's ready replicas
// under Zone, and forwards other names to the node's resolvers.
type AgentDNS struct {
	// Enabled runs it where the agent programs the host's network
	// (default true); replicas get a resolv.conf naming it.
	Enabled bool `mapstructure:"enabled"`
	// Zone is the domain the names live under (default strata.internal).
	Zone string `mapstructure:"zone"`
	// TTL is the answers' time to live (default 5s, 1s to 1h): how long
	// a resolver may keep an address after its replica stops being ready.
	TTL time.Duration `mapstructure:"ttl"`
}

func (d *AgentDNS) validate() error {
	if !isDomain(d.Zone) {
		return keyError("network.dns.zone", "%q is not a domain name (labels of letters, digits and '-', dot-separated)", d.Zone)
	}
	if d.TTL < time.Second || d.TTL > time.Hour {
		return keyError("network.dns.ttl", "%s is not between 1s and 1h", d.TTL)
	}
	return nil
}

// isDomain reports whether s is a DNS name of at most 253 characters
// whose labels are each a DNS label.
func isDomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for l := range strings.SplitSeq(s, ".") {
		if !isLabel(l) {
			return false
		}
	}
	return true
}

// isLabel: 1-63 letters, digits and '-', not starting or ending with '-'.
func isLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for _, c := range l {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func (n *AgentNetwork) validate() error {
	switch n.DataPlane {
	case DataPlaneAuto, DataPlaneEnabled, DataPlaneDisabled:
	default:
		return keyError("network.dataPlane", "%q is not auto, enabled or disabled", n.DataPlane)
	}
	if len(n.Bridge) > 15 {
		return keyError("network.bridge", "%q must be a Linux interface name (1-15 characters)", n.Bridge)
	}
	if len(n.UnderlayInterface) > 15 {
		return keyError("network.underlayInterface", "%q must be a Linux interface name (1-15 characters)", n.UnderlayInterface)
	}
	if n.UnderlayAddress != "" {
		if a, err := netip.ParseAddr(n.UnderlayAddress); err != nil || !a.Is4() {
			return keyError("network.underlayAddress", "%q is not an IPv4 address", n.UnderlayAddress)
		}
	}
	if n.Table == "" || len(n.Table) > 31 {
		return keyError("network.table", "%q must be an nftables table name (1-31 characters)", n.Table)
	}
	return n.DNS.validate()
}

// Provider is one provider an agent runs: in-process (Plugin and Socket
// empty), as a plugin binary the agent starts and supervises (Plugin), or
// an already-running plugin (Socket). Options are the provider's own
// settings, decoded by the provider.
type Provider struct {
	Name    string         `mapstructure:"name"`
	Plugin  string         `mapstructure:"plugin"`
	Socket  string         `mapstructure:"socket"`
	Options map[string]any `mapstructure:"options"`
}

// Agent configures `strata agent`.
type Agent struct {
	Node struct {
		Name   string            `mapstructure:"name"`
		Zone   string            `mapstructure:"zone"`
		Labels map[string]string `mapstructure:"labels"`
		// Capacity zero means detected from the machine.
		MilliCPU  int64 `mapstructure:"milliCPU"`
		MemoryMiB int64 `mapstructure:"memoryMiB"`
		DiskMiB   int64 `mapstructure:"diskMiB"`
		// Auto-cordon and auto-drain on conditions in Error.
		EnableAutoCordon   bool          `mapstructure:"enableAutoCordon"`
		AutoCordonInterval time.Duration `mapstructure:"autoCordonInterval"`
		EnableAutoDrain    bool          `mapstructure:"enableAutoDrain"`
		AutoDrainInterval  time.Duration `mapstructure:"autoDrainInterval"`
	} `mapstructure:"node"`
	// Region is the region's gRPC address (AgentService).
	Region struct {
		Endpoint string `mapstructure:"endpoint"`
	} `mapstructure:"region"`
	Listen struct {
		// GRPC serves NodeService (probes, logs).
		GRPC string `mapstructure:"grpc"`
		// Metrics serves Prometheus metrics over HTTP; empty disables.
		Metrics string `mapstructure:"metrics"`
	} `mapstructure:"listen"`
	Advertise struct {
		GRPC string `mapstructure:"grpc"`
	} `mapstructure:"advertise"`
	DataDir string `mapstructure:"dataDir"`
	// TLS is the agent's node identity, node:<region>/<node.name>: the
	// region it serves is read from the certificate.
	TLS TLS `mapstructure:"tls"`
	// Insecure allows plaintext gRPC without tls: a test cluster on one
	// machine only (see docs/operations.md).
	Insecure  bool       `mapstructure:"insecure"`
	Log       Log        `mapstructure:"log"`
	Providers []Provider `mapstructure:"providers"`
	// StatusInterval is how often providers are polled for status and
	// health between events.
	StatusInterval time.Duration `mapstructure:"statusInterval"`
	// Concurrency bounds provider calls in flight.
	Concurrency int `mapstructure:"concurrency"`
	// ReservedPorts are host ports of services sharing the node (a
	// co-located region or global tier, etcd, Redis, sshd...) that no
	// provider may give a tenant, written "8080-8082,9090-9091". The
	// agent's own listen.grpc, listen.metrics and advertise.grpc ports
	// are reserved without being listed.
	ReservedPorts string `mapstructure:"reservedPorts"`
	// Network sets up the host for the region network.
	Network AgentNetwork `mapstructure:"network"`
}

// DefaultAgent returns the defaults of `strata agent`.
func DefaultAgent() *Agent {
	a := &Agent{}
	a.Node.Name = hostname()
	a.Node.AutoCordonInterval = time.Minute
	a.Node.AutoDrainInterval = 5 * time.Minute
	a.Region.Endpoint = "127.0.0.1:9091"
	a.Listen.GRPC = "127.0.0.1:9092"
	a.DataDir = "/var/lib/strata/agent"
	a.Log = defaultLog()
	a.Providers = []Provider{{Name: "fake"}}
	a.StatusInterval = 5 * time.Second
	a.Concurrency = 8
	a.Network = AgentNetwork{DataPlane: DataPlaneAuto, Table: "strata",
		DNS: AgentDNS{Enabled: true, Zone: "strata.internal", TTL: 5 * time.Second}}
	return a
}

// Default implements Defaulter.
func (a *Agent) Default() {
	if a.Advertise.GRPC == "" {
		a.Advertise.GRPC = a.Listen.GRPC
	}
}

// Validate implements Config.
func (a *Agent) Validate() error {
	err := first(
		required("node.name", a.Node.Name),
		required("region.endpoint", a.Region.Endpoint),
		validAddr("listen.grpc", a.Listen.GRPC),
		required("dataDir", a.DataDir),
		a.TLS.validate("tls"),
		a.Log.validate(),
		positive("statusInterval", a.StatusInterval),
		a.Network.validate(),
	)
	if err != nil {
		return err
	}
	if a.Concurrency < 1 {
		return keyError("concurrency", "must be at least 1")
	}
	if _, err := hostpolicy.ParsePorts(a.ReservedPorts); err != nil {
		return keyError("reservedPorts", "%v", err)
	}
	if len(a.Providers) == 0 {
		return keyError("providers", "an agent needs at least one provider")
	}
	seen := map[string]bool{}
	for i, p := range a.Providers {
		if p.Name == "" {
			return keyError("providers["+strconv.Itoa(i)+"].name", "is required")
		}
		if seen[p.Name] {
			return keyError("providers["+strconv.Itoa(i)+"].name", "provider %q is configured twice", p.Name)
		}
		seen[p.Name] = true
		if p.Plugin != "" && p.Socket != "" {
			return keyError("providers["+strconv.Itoa(i)+"]", "set plugin or socket, not both")
		}
	}
	return nil
}

// NodePorts are the ports no provider may give a tenant: ReservedPorts
// and the agent's own listening ports (a port 0, chosen by the kernel
// among the ephemeral ports, cannot be known before it listens).
func (a *Agent) NodePorts() hostpolicy.PortRanges {
	ports, _ := hostpolicy.ParsePorts(a.ReservedPorts) // checked by Validate
	for _, addr := range []string{a.Listen.GRPC, a.Listen.Metrics, a.Advertise.GRPC} {
		if _, p, err := net.SplitHostPort(addr); err == nil {
			if n, err := strconv.Atoi(p); err == nil && n > 0 && n <= 65535 {
				ports = append(ports, hostpolicy.PortRange{Lo: n, Hi: n})
			}
		}
	}
	return ports
}

func validAddr(key, addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return keyError(key, "%q is not host:port", addr)
	}
	return nil
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}

// Weaknesses names, one line each, what in s is allowed but leaves the
// tier less protected than it could be: the tiers log each once at start
// (insecure mode has its own warning).
func (s *Server) Weaknesses() []string {
	var out []string
	for _, ep := range s.Etcd.Endpoints {
		if u, err := url.Parse(ep); err == nil && u.Scheme == "http" && !loopbackHost(u.Hostname()) {
			out = append(out, "etcd endpoint "+ep+" is plaintext: everything the tier stores crosses the network in clear (https:// endpoints with etcd.tls)")
			break
		}
	}
	switch {
	case s.Etcd.Embedded:
		out = append(out, "etcd is embedded: one member inside this process, no replica; its socket and root password in "+s.Etcd.DataDir+" let any process of this user read and write the tier's state (etcd.endpoints of an etcd cluster)")
	case s.Etcd.Username == "" && !s.Etcd.TLS.Enabled() && len(s.Etcd.Endpoints) > 0:
		out = append(out, "etcd: no user and no client certificate: anyone who reaches etcd reads and writes the tier's state (etcd.username or etcd.tls.cert)")
	}
	if s.Redis.Configured() && !s.Redis.TLS.On() {
		addrs := append(append([]string{s.Redis.Addr}, s.Redis.Sentinel.Addrs...), s.Redis.Cluster.Addrs...)
		if slices.ContainsFunc(addrs, func(a string) bool {
			h, _, err := net.SplitHostPort(a)
			return err == nil && !loopbackHost(h)
		}) {
			out = append(out, "redis is plaintext to another machine (redis.tls)")
		}
	}
	if s.Audit.Path == "" {
		out = append(out, "no audit log: calls that change something are not recorded (audit.path)")
	}
	return out
}

// loopbackHost reports whether host is a loopback name or address.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
