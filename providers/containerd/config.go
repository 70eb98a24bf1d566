package containerd

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/hostpolicy"
	"github.com/stratahq/strata/providers/provider"
	"github.com/stratahq/strata/providers/provider/probe"
)

// Defaults of Config.
const (
	DefaultAddress     = "/run/containerd/containerd.sock"
	DefaultSnapshotter = "overlayfs"
	DefaultRuntime     = "io.containerd.runc.v2"
	DefaultCNIBinDir   = "/usr/lib/cni"
	DefaultNetNSDir    = "/var/run/netns"
	DefaultLockDir     = "/run/lock/strata"
	// DefaultDataDir is used when the agent gives no data directory (a
	// provider made by hand).
	DefaultDataDir = "/var/lib/strata/providers/containerd"
	// DefaultStopGracePeriod is the SIGTERM → SIGKILL delay of a replica
	// whose spec sets none.
	DefaultStopGracePeriod = 10 * time.Second
	// DefaultRestartBackoff and DefaultRestartBackoffMax bound the delay
	// before a crashed task is restarted: it doubles on every exit that
	// follows a short run, so a crash loop does not spin the node.
	// (a container's crash-loop back-off, Kubernetes' figures), and
	// DefaultRestartBackoffReset is how long a task must run for its
	// next exit to restart it without back-off.
	DefaultRestartBackoff      = 10 * time.Second
	DefaultRestartBackoffMax   = 5 * time.Minute
	DefaultRestartBackoffReset = 10 * time.Minute
	// DefaultHostPorts are the host ports replicas may publish: the
	// range Kubernetes gives node ports, below Linux's ephemeral ports
	// (32768-60999) and above the usual host services.
	DefaultHostPorts = "30000-32767"
	// DefaultPidsLimit caps the processes (and threads) of one replica.
	DefaultPidsLimit = 1024
	// DefaultArchiveMaxMiB and DefaultArchiveTimeout bound the download
	// of an image archive by URL.
	DefaultArchiveMaxMiB  = 4096
	DefaultArchiveTimeout = 10 * time.Minute
	// DefaultPullProgressInterval is how often a pull's progress is
	// reported.
	DefaultPullProgressInterval = time.Second
	// SeccompDefault and SeccompUnconfined are the special values of
	// Config.Seccomp; anything else is the path of a profile.
	SeccompDefault    = "default"
	SeccompUnconfined = "unconfined"
	// DefaultUserNamespaceHostID and DefaultUserNamespaceSize are the
	// host ids of replicas' ids 0-65535 with UserNamespace: far above
	// the accounts of a host (and below 2^31, runc's limit).
	DefaultUserNamespaceHostID = 1 << 30
	DefaultUserNamespaceSize   = 1 << 16
)

// Config is the provider's settings. Factory reads them from the agent's
// config file with the keys address, namespace, snapshotter, runtime,
// cniBinDir, cniConfDir, stateDir, netnsDir, lockDir, volumeRoot,
// logRoot, logDriver, restartBackoff, restartBackoffMax, restartBackoffReset, imageDirs,
// archiveURLs, archiveNetworks, archiveMaxMiB, archiveTimeout,
// registries, registryHosts, pullProgressInterval, hostPorts, allowPrivilegedPorts, pidsLimit, seccomp,
// addCapabilities, allowNewPrivileges, refuseRoot, userNamespace, userNamespaceHostID and
// userNamespaceSize (case-insensitive); empty fields take the defaults documented on each.
//
// The fields from imageDirs on are what tenants may reach on the host
// and how their containers are confined: nothing is reachable unless
// listed (see docs/operations.md, "What tenants may reach on a node").
type Config struct {
	// Address is containerd's socket (default DefaultAddress).
	Address string
	// Namespace is the containerd namespace holding everything this
	// agent creates (default "strata-<node>"): one per agent, so that
	// agents sharing a host, and other containerd users, never see each
	// other's containers.
	Namespace string
	// Snapshotter unpacks images and holds container root filesystems
	// (default overlayfs).
	Snapshotter string
	// Runtime is the containerd runtime (default io.containerd.runc.v2).
	Runtime string
	// CNIBinDir holds the CNI plugins: bridge, static, loopback and
	// portmap (default /usr/lib/cni).
	CNIBinDir string
	// CNIConfDir holds the conflist generated for each replica, which
	// its CNI DEL reads again (default <DataDir>/cni/conf).
	CNIConfDir string
	// StateDir holds libcni's cache, downloaded image archives and
	// per-replica files such as /etc/hosts (default <DataDir>/state).
	StateDir string
	// NetNSDir holds the replicas' network namespaces, where
	// `ip netns` finds them (default /var/run/netns).
	NetNSDir string
	// LockDir holds the host-wide locks that serialise bridge creation
	// and removal between agents on one host (default /run/lock/strata).
	LockDir string
	// VolumeRoot holds the volumes, one directory per Volume replica
	// (default <DataDir>/volumes).
	VolumeRoot string
	// LogRoot holds one log file per replica, stdout and stderr
	// together (default <DataDir>/logs).
	LogRoot string
	// LogDriver is how task output reaches the log file: "binary" (the
	// default: a script in StateDir that the shim runs) or "file"
	// (containerd's file logging, which can lose stderr written at exit;
	// for nodes whose StateDir cannot hold executables).
	LogDriver string
	// RestartBackoff is the first delay before a crashed task restarts;
	// it doubles up to RestartBackoffMax while the task keeps crashing.
	RestartBackoff    time.Duration
	RestartBackoffMax time.Duration
	// RestartBackoffReset is how long a task must run for its back-off
	// to start over from RestartBackoff.
	RestartBackoffReset time.Duration

	// ImageDirs are the host directories an Image's archive path may be
	// in (symbolic links resolved, ".." refused). Default none: archives
	// by path are refused.
	ImageDirs []string
	// ArchiveURLs is the allowlist of archive URLs, each
	// scheme://host[:port][/path-prefix] ("https://images.example.com/strata",
	// "https://*.mirror.example.net"); redirects must match too. Default
	// none: archives by URL are refused.
	ArchiveURLs []string
	// ArchiveNetworks are CIDRs an archive URL may reach although they
	// are loopback, private or link-local (checked on the address each
	// connection dials, after DNS). Default none.
	ArchiveNetworks []string
	// ArchiveMaxMiB and ArchiveTimeout bound one download (defaults
	// DefaultArchiveMaxMiB and DefaultArchiveTimeout).
	ArchiveMaxMiB  int64
	ArchiveTimeout time.Duration
	// Registries are the registry hosts (docker.io, registry.example.com:5000)
	// an image reference may be pulled from. Default none: a reference
	// must name an image already in the namespace (imported from an
	// archive).
	Registries []string
	// RegistryHosts are how to reach a registry of Registries, by host:
	// the CA that signs its certificate, credentials, plain HTTP. A
	// registry not named here is reached over HTTPS with the system's
	// CAs and no credentials.
	RegistryHosts map[string]RegistryHost
	// PullProgressInterval is how often a replica whose image is being
	// pulled reports how far the pull is (default
	// DefaultPullProgressInterval).
	PullProgressInterval time.Duration

	// HostPorts are the host ports replicas may publish (default
	// DefaultHostPorts), minus the node's own (provider.Options'
	// ReservedPorts); below 1024 only with AllowPrivilegedPorts.
	HostPorts            string
	AllowPrivilegedPorts bool

	// PidsLimit caps a replica's processes and threads (default
	// DefaultPidsLimit; -1 for no limit).
	PidsLimit int64
	// Seccomp is the replicas' seccomp profile: "default" (containerd's
	// default profile, the default), "unconfined", or the path of a
	// profile in the OCI runtime spec's JSON.
	Seccomp string
	// AddCapabilities are added to the default set (Docker's, without
	// CAP_NET_RAW), e.g. [CAP_NET_RAW] for ping.
	AddCapabilities []string
	// AllowNewPrivileges lets setuid binaries in images gain privileges
	// (no_new_privileges is set otherwise).
	AllowNewPrivileges bool
	// RefuseRoot fails every replica whose process would run as root on
	// the host (uid 0, from its securityContext or its image's USER),
	// with the reason, instead of starting it.
	RefuseRoot bool
	// UserNamespace runs every new replica in a user namespace of its
	// own, whose ids 0 to UserNamespaceSize-1 are the host's
	// UserNamespaceHostID onwards (defaults DefaultUserNamespaceHostID
	// and DefaultUserNamespaceSize; the range must belong to no one else
	// on the host). Root in such a replica is not root on the node.
	UserNamespace       bool
	UserNamespaceHostID int64
	UserNamespaceSize   int64
}

// withDefaults fills in the empty fields for an agent's node and data
// directory.
func (c Config) withDefaults(node, dataDir string) Config {
	if dataDir == "" {
		dataDir = DefaultDataDir
	}
	set := func(f *string, v string) {
		if *f == "" {
			*f = v
		}
	}
	set(&c.Address, DefaultAddress)
	set(&c.Namespace, namespaceFor(node))
	set(&c.Snapshotter, DefaultSnapshotter)
	set(&c.Runtime, DefaultRuntime)
	set(&c.CNIBinDir, DefaultCNIBinDir)
	set(&c.CNIConfDir, filepath.Join(dataDir, "cni", "conf"))
	set(&c.StateDir, filepath.Join(dataDir, "state"))
	set(&c.NetNSDir, DefaultNetNSDir)
	set(&c.LockDir, DefaultLockDir)
	set(&c.VolumeRoot, filepath.Join(dataDir, "volumes"))
	set(&c.LogRoot, filepath.Join(dataDir, "logs"))
	set(&c.LogDriver, LogDriverBinary)
	if c.RestartBackoff <= 0 {
		c.RestartBackoff = DefaultRestartBackoff
	}
	if c.RestartBackoffMax <= 0 {
		c.RestartBackoffMax = DefaultRestartBackoffMax
	}
	c.RestartBackoffMax = max(c.RestartBackoffMax, c.RestartBackoff)
	if c.RestartBackoffReset <= 0 {
		c.RestartBackoffReset = DefaultRestartBackoffReset
	}
	set(&c.HostPorts, DefaultHostPorts)
	set(&c.Seccomp, SeccompDefault)
	if c.PidsLimit == 0 {
		c.PidsLimit = DefaultPidsLimit
	}
	if c.UserNamespaceHostID == 0 {
		c.UserNamespaceHostID = DefaultUserNamespaceHostID
	}
	if c.UserNamespaceSize == 0 {
		c.UserNamespaceSize = DefaultUserNamespaceSize
	}
	if c.ArchiveMaxMiB <= 0 {
		c.ArchiveMaxMiB = DefaultArchiveMaxMiB
	}
	if c.PullProgressInterval <= 0 {
		c.PullProgressInterval = DefaultPullProgressInterval
	}
	if c.ArchiveTimeout <= 0 {
		c.ArchiveTimeout = DefaultArchiveTimeout
	}
	return c
}

// Validate reports settings that make no sense, wrapping api.ErrInvalid.
// It expects defaults applied.
func (c Config) Validate() error {
	if err := validIdentifier(c.Namespace); err != nil {
		return api.Invalid("namespace", "%q is not a containerd namespace: %v", c.Namespace, err)
	}
	dirs := []struct{ key, v string }{
		{"cniBinDir", c.CNIBinDir}, {"cniConfDir", c.CNIConfDir}, {"stateDir", c.StateDir},
		{"netnsDir", c.NetNSDir}, {"lockDir", c.LockDir}, {"volumeRoot", c.VolumeRoot}, {"logRoot", c.LogRoot},
	}
	for _, d := range dirs {
		if !filepath.IsAbs(d.v) {
			return api.Invalid(d.key, "must be an absolute path, not %q", d.v)
		}
	}
	if c.LogDriver != LogDriverBinary && c.LogDriver != LogDriverFile {
		return api.Invalid("logDriver", "%q is not a log driver (want %q or %q)", c.LogDriver, LogDriverBinary, LogDriverFile)
	}
	if c.RestartBackoff < 0 || c.RestartBackoffMax < 0 || c.RestartBackoffReset < 0 {
		return api.Invalid("restartBackoff", "must not be negative")
	}
	if _, err := c.dirs(); err != nil {
		return api.Invalid("imageDirs", "%v", err)
	}
	if _, err := c.fetcher(); err != nil {
		return api.Invalid("archiveURLs", "%v", err)
	}
	if _, err := hostpolicy.ParsePorts(c.HostPorts); err != nil {
		return api.Invalid("hostPorts", "%v", err)
	}
	if err := c.validateRegistryHosts(); err != nil {
		return err
	}
	if c.PidsLimit < -1 {
		return api.Invalid("pidsLimit", "%d is not a limit (-1 for none)", c.PidsLimit)
	}
	return c.validateSandbox()
}

// validateSandbox checks what confines containers: the seccomp profile,
// the capabilities added and the user namespace range.
func (c Config) validateSandbox() error {
	// runc takes ids up to 2^31-1; host id 0 would map root to root.
	const maxID = 1<<31 - 1
	if c.UserNamespaceHostID < 1 || c.UserNamespaceHostID > maxID {
		return api.Invalid("userNamespaceHostID", "%d is not a host id (1-%d)", c.UserNamespaceHostID, maxID)
	}
	if c.UserNamespaceSize < 1 || c.UserNamespaceHostID+c.UserNamespaceSize-1 > maxID {
		return api.Invalid("userNamespaceSize", "%d ids from %d do not fit below %d", c.UserNamespaceSize, c.UserNamespaceHostID, maxID+1)
	}
	if c.Seccomp != SeccompDefault && c.Seccomp != SeccompUnconfined && !filepath.IsAbs(c.Seccomp) {
		return api.Invalid("seccomp", "%q is not %q, %q or the absolute path of a profile", c.Seccomp, SeccompDefault, SeccompUnconfined)
	}
	for _, cp := range c.AddCapabilities {
		if !strings.HasPrefix(cp, "CAP_") || strings.ToUpper(cp) != cp {
			return api.Invalid("addCapabilities", "%q is not a capability (CAP_NET_RAW, ...)", cp)
		}
	}
	return nil
}

// dirs is the directories archives may be in: ImageDirs, never the
// provider's own state, volumes or logs.
func (c Config) dirs() (hostpolicy.Dirs, error) {
	return hostpolicy.NewDirs(c.ImageDirs, []string{c.StateDir, c.VolumeRoot, c.LogRoot, c.CNIConfDir})
}

func (c Config) fetcher() (*hostpolicy.Fetcher, error) {
	return hostpolicy.NewFetcher(hostpolicy.FetcherConfig{
		Allow:         c.ArchiveURLs,
		AllowNetworks: c.ArchiveNetworks,
		MaxBytes:      c.ArchiveMaxMiB << 20,
		Timeout:       c.ArchiveTimeout,
	})
}

// namespaceFor turns a node name into a containerd namespace: containerd
// allows letters, digits, '.', '_' and '-'.
func namespaceFor(node string) string {
	if node == "" {
		node = "default"
	}
	var b strings.Builder
	for _, r := range node {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	ns := "strata-" + b.String()
	if len(ns) > maxIdentifier {
		ns = ns[:maxIdentifier]
	}
	return ns
}

// Option tunes a Provider.
type Option func(*options)

type options struct {
	name     string
	node     string
	dataDir  string
	log      *slog.Logger
	reserved hostpolicy.PortRanges
	// probeOpts configure the probe manager (tests shorten its time
	// unit).
	probeOpts []probe.Option
}

// WithProbeOptions passes options to the provider's probe manager.
func WithProbeOptions(opts ...probe.Option) Option {
	return func(o *options) { o.probeOpts = append(o.probeOpts, opts...) }
}

// WithName names the provider (default "containerd"); its health
// condition is provider/<name>.
func WithName(name string) Option { return func(o *options) { o.name = name } }

// WithNode sets the agent's node: it names the default namespace and is
// reported in statuses.
func WithNode(node string) Option { return func(o *options) { o.node = node } }

// WithDataDir sets the directory the default paths live under.
func WithDataDir(dir string) Option { return func(o *options) { o.dataDir = dir } }

// WithReservedPorts sets the node's own ports, which replicas never
// publish whatever HostPorts allows.
func WithReservedPorts(r hostpolicy.PortRanges) Option {
	return func(o *options) { o.reserved = r }
}

// WithLogger sets the logger (default: discard).
func WithLogger(log *slog.Logger) Option {
	return func(o *options) {
		if log != nil {
			o.log = log
		}
	}
}

// Factory makes a Provider from the agent's options (see Config for the
// keys of Options.Config).
func Factory(ctx context.Context, o provider.Options) (provider.Provider, error) {
	var cfg Config
	if err := provider.Decode(o.Config, &cfg); err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	opts := []Option{WithNode(o.Node), WithDataDir(o.DataDir), WithLogger(o.Logger), WithReservedPorts(o.ReservedPorts)}
	if o.Name != "" {
		opts = append(opts, WithName(o.Name))
	}
	p, err := New(ctx, cfg, opts...)
	if err != nil {
		return nil, err
	}
	return p, nil
}
