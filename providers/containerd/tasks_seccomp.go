package containerd

import (
	"context"
	"slices"
	"sync"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// x32SyscallBit marks a system call of the x32 ABI on x86-64.
const x32SyscallBit = 0x40000000

// kernelHasX32 reports whether the kernel runs x32 programs: getpid
// through the x32 ABI answers ENOSYS when it does not (the x32 ABI is
// off in most distributions' kernels). Only amd64 has the ABI.
var kernelHasX32 = sync.OnceValue(func() bool {
	if !isAMD64 {
		return false
	}
	_, _, errno := unix.RawSyscall(x32SyscallBit|unix.SYS_GETPID, 0, 0, 0)
	return errno != unix.ENOSYS
})

// withoutSeccompArch leaves arch out of the seccomp profile. runc
// compiles the profile for every architecture it lists, at each task's
// start: containerd's default profile lists x86-64, x86 and x32 on
// amd64, and on a kernel without the x32 ABI, where no x32 program can
// run, the x32 third of that work filters nothing. With x32 left out
// of the filter, a raw x32 system call (ENOSYS from such a kernel) is
// refused as from a foreign architecture, which kills the thread.
func withoutSeccompArch(arch specs.Arch) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Linux == nil || s.Linux.Seccomp == nil {
			return nil
		}
		sc := s.Linux.Seccomp
		sc.Architectures = slices.DeleteFunc(slices.Clone(sc.Architectures), func(a specs.Arch) bool { return a == arch })
		return nil
	}
}
