package containerd

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
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
	DefaultRestartBackoff    = 100 * time.Millisecond
	DefaultRestartBackoffMax = 30 * time.Second
)

// Config is the provider's settings. Factory reads them from the agent's
// config file with the keys address, namespace, snapshotter, runtime,
// cniBinDir, cniConfDir, stateDir, netnsDir, lockDir, volumeRoot,
// logRoot, logDriver, restartBackoff and restartBackoffMax
// (case-insensitive);
// empty fields take the defaults documented on each.
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
	if c.RestartBackoff < 0 || c.RestartBackoffMax < 0 {
		return api.Invalid("restartBackoff", "must not be negative")
	}
	return nil
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
	name    string
	node    string
	dataDir string
	log     *slog.Logger
}

// WithName names the provider (default "containerd"); its health
// condition is provider/<name>.
func WithName(name string) Option { return func(o *options) { o.name = name } }

// WithNode sets the agent's node: it names the default namespace and is
// reported in statuses.
func WithNode(node string) Option { return func(o *options) { o.node = node } }

// WithDataDir sets the directory the default paths live under.
func WithDataDir(dir string) Option { return func(o *options) { o.dataDir = dir } }

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
	opts := []Option{WithNode(o.Node), WithDataDir(o.DataDir), WithLogger(o.Logger)}
	if o.Name != "" {
		opts = append(opts, WithName(o.Name))
	}
	p, err := New(ctx, cfg, opts...)
	if err != nil {
		return nil, err
	}
	return p, nil
}
