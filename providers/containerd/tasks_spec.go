package containerd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/stratahq/strata/internal/api"
)

// cfsPeriod is the CPU quota period, in microseconds.
const cfsPeriod = 100000

// specOpts builds the OCI spec of cs: the image's config, then the
// replica's user, command, environment, working directory, hostname,
// resources, mounts and network namespace; last, the check of its user.
func (tk *taskService) specOpts(ctx context.Context, cs containerSpec) ([]oci.SpecOpts, error) {
	a, img := cs.a, cs.image
	var c api.ComputeSpec
	if a.Spec.Compute != nil {
		c = *a.Spec.Compute
	}
	opts := []oci.SpecOpts{
		oci.WithImageConfig(img),
		withUser(c.SecurityContext),
		oci.WithHostname(hostname(a.ID)),
		oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: cs.netns}),
		oci.WithMounts(cs.mounts),
	}
	if len(c.Command) > 0 || len(c.Args) > 0 {
		// Command replaces the image's entrypoint, Args its cmd, as in
		// Kubernetes.
		argv := append(slices.Clone(c.Command), c.Args...)
		if len(c.Command) == 0 {
			ic, err := img.Spec(ctx)
			if err != nil {
				return nil, fmt.Errorf("image config: %w", err)
			}
			argv = append(slices.Clone(ic.Config.Entrypoint), c.Args...)
		}
		if len(argv) == 0 {
			return nil, errors.New("no command: the image has no entrypoint and the spec no command")
		}
		opts = append(opts, oci.WithProcessArgs(argv...))
	}
	if vars := envOf(ctx, c); len(vars) > 0 {
		env := make([]string, 0, len(vars))
		for _, k := range keys(vars) {
			env = append(env, k+"="+vars[k])
		}
		opts = append(opts, oci.WithEnv(env))
	}
	if c.WorkingDir != "" {
		opts = append(opts, oci.WithProcessCwd(c.WorkingDir))
	}
	if m := a.Flavor.MemoryMiB; m > 0 {
		limit := uint64(m) << 20
		// Swap counts against the limit: a replica over its memory is
		// OOM-killed, not slowed down by swapping.
		opts = append(opts, oci.WithMemoryLimit(limit), withMemorySwap(int64(limit)))
	}
	if v := a.Flavor.VCPUs; v > 0 {
		opts = append(opts, oci.WithCPUCFS(int64(v*cfsPeriod), cfsPeriod))
	}
	opts = append(opts, tk.sandboxOpts()...)
	pol := userPolicy{refuseRoot: tk.cfg.RefuseRoot, userns: tk.userns}
	if pol.userns != nil {
		opts = append(opts, withUserns(cs.usernsPath, *pol.userns))
	}
	return append(opts, checkUser(c.SecurityContext, pol), withFilesOwner(cs.filesDir, pol)), nil
}

// sandboxOpts confine a replica (see Config): Docker's default
// capabilities without CAP_NET_RAW (no raw sockets: no spoofed packets
// on the region network) plus the operator's additions, a seccomp
// profile (after the capabilities: containerd's default profile allows
// some calls only with some capabilities), no_new_privileges, a pids
// limit. A user namespace is the node's choice (Config.UserNamespace,
// see userns.go).
func (tk *taskService) sandboxOpts() []oci.SpecOpts {
	opts := []oci.SpecOpts{oci.WithDroppedCapabilities([]string{"CAP_NET_RAW"})}
	if len(tk.cfg.AddCapabilities) > 0 {
		opts = append(opts, oci.WithAddedCapabilities(tk.cfg.AddCapabilities))
	}
	switch tk.cfg.Seccomp {
	case SeccompUnconfined:
	case SeccompDefault:
		opts = append(opts, seccomp.WithDefaultProfile())
		if !kernelHasX32() {
			opts = append(opts, withoutSeccompArch(specs.ArchX32))
		}
	default:
		opts = append(opts, seccomp.WithProfile(tk.cfg.Seccomp))
	}
	if !tk.cfg.AllowNewPrivileges {
		opts = append(opts, oci.WithNoNewPrivileges)
	}
	if tk.cfg.PidsLimit > 0 {
		opts = append(opts, oci.WithPidsLimit(tk.cfg.PidsLimit))
	}
	return opts
}

func withMemorySwap(limit int64) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Linux == nil || s.Linux.Resources == nil || s.Linux.Resources.Memory == nil {
			return nil
		}
		if _, err := os.Stat("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"); err != nil {
			if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
				// cgroup v1 without swap accounting rejects a swap limit.
				return nil
			}
		}
		s.Linux.Resources.Memory.Swap = &limit
		return nil
	}
}

// hostname is the replica id, cut to the kernel's limit.
func hostname(id string) string {
	if len(id) > 64 {
		return id[:64]
	}
	return id
}

// withUserns puts the container in the user namespace pinned at path,
// the owner of its network namespace, with r's mappings (which runc
// needs to know the host's view of ids).
func withUserns(path string, r idRange) oci.SpecOpts {
	return oci.Compose(
		oci.WithUserNamespace(r.mapping(), r.mapping()),
		oci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.UserNamespace, Path: path}),
	)
}
