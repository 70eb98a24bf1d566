package libvirt

import (
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/hostpolicy"
)

// Domain types Config.DomainType accepts.
const (
	DomainTypeAuto = "auto"
	DomainTypeKVM  = "kvm"
	DomainTypeQEMU = "qemu"
	// domainTypeTest is the test driver's only domain type.
	domainTypeTest = "test"
)

// Config is the provider's settings; Factory reads them from the agent's
// config with the keys uri, pool, logDir, domainType, kvmProbeKernel,
// rescanInterval and imageDirs.
type Config struct {
	// URI is libvirtd's connection URI (default qemu:///system; the tests
	// use test:///default, which needs no daemon).
	URI string `mapstructure:"uri"`
	// Pool is the storage pool holding root disks and volumes (default
	// "strata"). It is created, as a directory pool under DataDir/pool,
	// when it does not exist.
	Pool string `mapstructure:"pool"`
	// LogDir holds the domains' serial console logs (default
	// DataDir/console).
	LogDir string `mapstructure:"logDir"`
	// DomainType is "auto" (the default: KVM when KVM guests actually
	// run, else QEMU's TCG), "kvm" or "qemu".
	DomainType string `mapstructure:"domainType"`
	// KVMProbeKernel is a Linux kernel that auto boots under KVM when the
	// provider starts, to decide; without it, the kernel of the first VM
	// applied is tried (a boot sector alone is no proof: see accel.go).
	KVMProbeKernel string `mapstructure:"kvmProbeKernel"`
	// RescanInterval is how often a watch rescans the domains (default
	// 5s; see WithRescanInterval).
	RescanInterval time.Duration `mapstructure:"rescanInterval"`
	// ImageDirs are the host directories an Image's kernel, initrd and
	// disk may be in (symbolic links resolved, ".." refused; never the
	// storage pool, the data or the console directory, which hold other
	// replicas' disks). Default none: VM images are refused.
	ImageDirs []string `mapstructure:"imageDirs"`
	// DriveDir holds the VMs' config drives and exit disks (default
	// /run/strata-libvirt/<node>: a tmpfs, so that secrets never reach
	// a disk, and reachable by QEMU's user, which the agent's data
	// directory need not be).
	DriveDir string `mapstructure:"driveDir"`
}

// withDefaults fills in what cfg leaves empty.
func (c Config) withDefaults(dataDir string) Config {
	if c.URI == "" {
		c.URI = "qemu:///system"
	}
	if c.Pool == "" {
		c.Pool = "strata"
	}
	if c.LogDir == "" && dataDir != "" {
		c.LogDir = filepath.Join(dataDir, "console")
	}
	if c.DomainType == "" {
		c.DomainType = DomainTypeAuto
	}
	return c
}

// Validate reports a config that makes no sense, wrapping api.ErrInvalid.
func (c Config) Validate() error {
	switch c.DomainType {
	case "", DomainTypeAuto, DomainTypeKVM, DomainTypeQEMU:
	default:
		return api.Invalid("domainType", "%q is not one of auto, kvm, qemu", c.DomainType)
	}
	if c.LogDir != "" && !filepath.IsAbs(c.LogDir) {
		return api.Invalid("logDir", "%q must be an absolute path", c.LogDir)
	}
	if c.DriveDir != "" && !filepath.IsAbs(c.DriveDir) {
		return api.Invalid("driveDir", "%q must be an absolute path", c.DriveDir)
	}
	if c.KVMProbeKernel != "" && !filepath.IsAbs(c.KVMProbeKernel) {
		return api.Invalid("kvmProbeKernel", "%q must be an absolute path", c.KVMProbeKernel)
	}
	if c.RescanInterval < 0 {
		return api.Invalid("rescanInterval", "must not be negative (got %s)", c.RescanInterval)
	}
	if strings.ContainsAny(c.Pool, "/ ") {
		return api.Invalid("pool", "%q is not a pool name", c.Pool)
	}
	if _, err := hostpolicy.NewDirs(c.ImageDirs, nil); err != nil {
		return api.Invalid("imageDirs", "%v", err)
	}
	return nil
}

// Option tunes a Provider.
type Option func(*Provider)

// WithName names the provider (default "libvirt"); its health condition
// is provider/<name>.
func WithName(name string) Option { return func(p *Provider) { p.name = name } }

// WithNode sets the agent's node: it is written into every domain's
// metadata, and List returns only this node's domains, since several
// agents may share one libvirtd.
func WithNode(node string) Option { return func(p *Provider) { p.node = node } }

// WithDataDir sets the provider's private directory: the default pool and
// console directories, and the records of this node's volumes.
func WithDataDir(dir string) Option { return func(p *Provider) { p.dataDir = dir } }

// WithLogger sets the logger (default: discard).
func WithLogger(log *slog.Logger) Option {
	return func(p *Provider) {
		if log != nil {
			p.log = log
		}
	}
}

// WithRescanInterval sets how often a Watch rescans the domains (default
// 5s; Config.RescanInterval). Lifecycle events make a watch look at a
// domain at once; the rescan catches what they cannot tell: a guest
// printing its ready marker, events lost while libvirtd restarted.
func WithRescanInterval(d time.Duration) Option { return func(p *Provider) { p.rescanInterval = d } }

// WithKVMProbeTimeout bounds how long the automatic domain type choice
// waits for a KVM test guest to run (default 5s; a working KVM runs it in
// well under a second).
func WithKVMProbeTimeout(d time.Duration) Option { return func(p *Provider) { p.probeTimeout = d } }
