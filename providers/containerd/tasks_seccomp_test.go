package containerd

import (
	"compress/gzip"
	"context"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func TestWithoutSeccompArch(t *testing.T) {
	s := &oci.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}, Linux: &specs.Linux{}}
	if err := seccomp.WithDefaultProfile()(context.Background(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	before := *s.Linux.Seccomp
	archs := slices.Clone(before.Architectures)
	if err := withoutSeccompArch(specs.ArchX32)(context.Background(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	got := s.Linux.Seccomp
	want := slices.DeleteFunc(slices.Clone(archs), func(a specs.Arch) bool { return a == specs.ArchX32 })
	if !slices.Equal(got.Architectures, want) {
		t.Errorf("architectures: got %v; want %v (from %v)", got.Architectures, want, archs)
	}
	if runtime.GOARCH == "amd64" && !slices.Equal(got.Architectures, []specs.Arch{specs.ArchX86_64, specs.ArchX86}) {
		t.Errorf("architectures on amd64: got %v; want x86-64 and x86", got.Architectures)
	}
	if got.DefaultAction != before.DefaultAction || len(got.Syscalls) != len(before.Syscalls) {
		t.Errorf("profile changed beyond its architectures: %+v", got)
	}
	// Without a profile there is nothing to change.
	bare := &oci.Spec{Linux: &specs.Linux{}}
	if err := withoutSeccompArch(specs.ArchX32)(context.Background(), nil, nil, bare); err != nil || bare.Linux.Seccomp != nil {
		t.Errorf("spec without a profile: got %+v, %v", bare.Linux.Seccomp, err)
	}
}

// TestKernelHasX32 checks the probe against what the kernel says of
// itself, where its configuration is readable.
func TestKernelHasX32(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		if kernelHasX32() {
			t.Fatal("x32 reported off amd64")
		}
		return
	}
	cfg, ok := kernelConfig(t)
	if !ok {
		t.Logf("x32 ABI: %v (kernel configuration unreadable)", kernelHasX32())
		return
	}
	if want := slices.Contains(cfg, "CONFIG_X86_X32_ABI=y"); !want && kernelHasX32() {
		t.Errorf("kernelHasX32: got true on a kernel built without CONFIG_X86_X32_ABI")
	}
}

// kernelConfig returns the lines of /proc/config.gz, when there is one.
func kernelConfig(t *testing.T) ([]string, bool) {
	t.Helper()
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		return nil, false
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("/proc/config.gz: %v", err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatalf("/proc/config.gz: %v", err)
	}
	return strings.Split(string(b), "\n"), true
}
