package libvirt

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/hostpolicy"
	"github.com/stratahq/strata/providers/provider"
	"github.com/stratahq/strata/providers/provider/providertest"
	"github.com/stratahq/strata/testkit/testenv"
)

// TestPlugin runs the conformance suite against the plugin binary, as an
// agent runs it, on libvirt's test driver.
func TestPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the plugin binary")
	}
	goTool := testenv.LookPath(t, "go")
	bin := filepath.Join(t.TempDir(), "strata-provider-libvirt")
	build := exec.CommandContext(t.Context(), goTool, "build", "-o", bin, "github.com/stratahq/strata/cmd/strata-provider-libvirt")
	build.Env = append(build.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	p, err := provider.StartPlugin(ctx, provider.PluginConfig{
		Name:    "libvirt",
		Binary:  bin,
		Options: map[string]any{"uri": testURI, "pool": "strata-plugin", "imageDirs": []string{testImageDir}},
		Node:    "plugin-node",
		DataDir: t.TempDir(),
		// Passed through to the plugin as --reserved-ports.
		ReservedPorts: hostpolicy.MustParsePorts("9092"),
	}, testLogger(t))
	if err != nil {
		t.Fatalf("StartPlugin: %v", err)
	}
	t.Cleanup(func() {
		deleteAll(t, p)
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	providertest.Run(t, providertest.Harness{
		New:   func(*testing.T) provider.Provider { return p },
		Kinds: []api.ProviderKind{api.ProviderVM},
		Assignment: func(_ *testing.T, _ api.ProviderKind, id string) *api.Assignment {
			return vmAssignment(id)
		},
		ReadyTimeout: 10 * time.Second,
		SupportsLogs: true,
		// The test driver's domains live in the plugin's process, out of
		// the test's reach: TestConformance kills them in process, and
		// e2e's TestVMFailureReportedByPush with virsh on the real
		// libvirtd through this binary.
		Watches: true,
	})
}
