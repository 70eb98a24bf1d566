package security

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/testkit/etcdtest"
)

// TestSecurityStartRefused starts each tier with a configuration that
// would answer without an identity: it must exit, saying why, before it
// serves anything.
func TestSecurityStartRefused(t *testing.T) {
	bin := framework.Bin(t, "strata")
	dir := t.TempDir()
	ca := framework.NewPKI(t)
	region := func(extra string) string {
		return fmt.Sprintf(`name: r1
listen: {http: %q, grpc: %q}
etcd: {endpoints: ["http://127.0.0.1:1"]}
`, framework.FreeAddr(t), framework.FreeAddr(t)) + extra
	}
	tests := []struct {
		name string
		tier string
		cfg  string
		want string
	}{
		{"global without TLS", "global", fmt.Sprintf("id: g1\nlisten: {http: %q, grpc: %q}\n", framework.FreeAddr(t), framework.FreeAddr(t)),
			"tls.ca, tls.cert and tls.key are required"},
		{"region without TLS", "region", region(framework.RegionAPIYAML), "tls.ca, tls.cert and tls.key are required"},
		{"region without a REST token", "region", region(ca.YAML(pki.Region("r1"))), "api.token: is required"},
		{"region with a node's certificate", "region", region(framework.RegionAPIYAML + ca.YAML(pki.Node("r1", "n1"))), "tls.cert names node:r1/n1; this process is region:r1"},
		{"global with a region's certificate", "global", fmt.Sprintf("id: g1\nlisten: {http: %q, grpc: %q}\n", framework.FreeAddr(t), framework.FreeAddr(t)) + ca.YAML(pki.Region("r1")),
			"tls.cert names region:r1; this process is global:g1"},
		{"agent without TLS", "agent", fmt.Sprintf("node: {name: n1}\nregion: {endpoint: %q}\nlisten: {grpc: %q}\ndataDir: %s\n",
			framework.FreeAddr(t), framework.FreeAddr(t), filepath.Join(dir, "n1")), "tls.ca, tls.cert and tls.key are required"},
		{"agent without TLS, run as `strata agent`", "strata agent", fmt.Sprintf("node: {name: n1}\nregion: {endpoint: %q}\nlisten: {grpc: %q}\ndataDir: %s\n",
			framework.FreeAddr(t), framework.FreeAddr(t), filepath.Join(dir, "n1d")), "tls.ca, tls.cert and tls.key are required"},
		{"agent with another node's certificate", "agent", fmt.Sprintf("node: {name: n1}\nregion: {endpoint: %q}\nlisten: {grpc: %q}\ndataDir: %s\n",
			framework.FreeAddr(t), framework.FreeAddr(t), filepath.Join(dir, "n1b")) + ca.YAML(pki.Node("r1", "n2")), "tls.cert names node:r1/n2"},
		{"agent with a pre-region node certificate", "agent", fmt.Sprintf("node: {name: n1}\nregion: {endpoint: %q}\nlisten: {grpc: %q}\ndataDir: %s\n",
			framework.FreeAddr(t), framework.FreeAddr(t), filepath.Join(dir, "n1c")) + legacyNodeCert(t, ca, dir), "is not node:<region>/<name>"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := framework.WriteFile(t, dir, fmt.Sprintf("%d.yaml", i), tt.cfg)
			cmd, args := bin, []string{tt.tier, "--config", cfg}
			switch tt.tier {
			case "agent": // the agent's own binary, as installed
				cmd, args = framework.AgentCommand(t, cfg)
			case "strata agent": // the same command in the binary of every tier
				args = []string{"agent", "--config", cfg}
			}
			p := framework.Start(t, fmt.Sprintf("tier-%d", i), cmd, args)
			framework.Eventually(t, 30*time.Second, tt.tier+" exits", func() error {
				if !p.Exited() {
					return fmt.Errorf("still running")
				}
				return nil
			})
			if log := p.Tail(20); !strings.Contains(log, tt.want) {
				t.Fatalf("got log:\n%s\nwant it to say %q", log, tt.want)
			}
		})
	}
}

// legacyNodeCert writes a node certificate of the old form, node:<name>
// (no region), and returns its tls section.
func legacyNodeCert(t *testing.T, p *framework.PKI, dir string) string {
	t.Helper()
	f := p.FilesFor(t, "legacy", "node:n1")
	return fmt.Sprintf("tls:\n  ca: %s\n  cert: %s\n  key: %s\n", f.CA, f.Cert, f.Key)
}

// TestSecurityInsecureModeWarnsOnce starts a region in insecure mode on
// loopback: it serves, and says so in one warning.
func TestSecurityInsecureModeWarnsOnce(t *testing.T) {
	bin := framework.Bin(t, "strata")
	dir := t.TempDir()
	etcd := etcdtest.StartProcess(t)
	httpAddr := framework.FreeAddr(t)
	cfg := framework.WriteFile(t, dir, "region.yaml", fmt.Sprintf(`name: r1
listen: {http: %q, grpc: %q}
etcd: {endpoints: [%q]}
insecure: true
`, httpAddr, framework.FreeAddr(t), etcd.Endpoints()[0])+framework.RegionAPIYAML)
	p := framework.Start(t, "region", bin, []string{"region", "--config", cfg})
	framework.WaitHTTP(t, "http://"+httpAddr+"/readyz", 60*time.Second)
	log := p.Tail(200)
	if n := strings.Count(log, "INSECURE MODE"); n != 1 {
		t.Fatalf("got %d INSECURE MODE warnings in:\n%s\nwant exactly one", n, log)
	}
	if !strings.Contains(log, "loopback") || !strings.Contains(log, "never for production") {
		t.Fatalf("got the warning:\n%s\nwant it to say loopback only and never for production", log)
	}
}
