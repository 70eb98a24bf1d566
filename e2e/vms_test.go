package e2e

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/secretbox"
	"github.com/stratahq/strata/testkit/etcdtest"
	"github.com/stratahq/strata/testkit/testenv"
)

// The VM tests run the real binaries with agents whose provider is the
// libvirt plugin (bin/strata-provider-libvirt) on the machine's libvirtd
// (qemu:///system), booting the kernel and initramfs of `make images`
// (.cache/vm, or STRATA_VM_IMAGE_DIR). The guest's /init configures the
// address of the kernel's ip= argument, prints `ip addr` and then
//
//	STRATA-VM-READY <hostname> <ip>
//
// to the serial console, which the provider logs and the logs API serves.

const (
	vmURI      = "qemu:///system"
	vmMarker   = "STRATA-VM-READY"
	vmRegion   = "e2e-vm"
	vmFlavor   = "vm-small"
	vmImage    = "vm-image"
	vmResource = "vm"
	vmQEMULogs = "/var/log/libvirt/qemu"
	// vmCmdline is the Image's kernel command line, which the kernel
	// prints to the console first.
	vmCmdline = "panic=-1"
)

// vmHost is what a VM test needs of the machine.
type vmHost struct {
	virsh, ip      string
	plugin         string
	kernel, initrd string
}

// requireVMHost checks the machine can run VMs through Strata: root, a
// libvirtd answering on qemu:///system, virtlogd, the plugin binary and
// the test image. Anything missing skips on a laptop and fails under
// CI=true.
func requireVMHost(t *testing.T) vmHost {
	t.Helper()
	testenv.RequireRoot(t, "libvirtd (qemu:///system) and bridges")
	h := vmHost{virsh: testenv.LookPath(t, "virsh"), ip: testenv.LookPath(t, "ip")}
	h.plugin = framework.Bin(t, "strata-provider-libvirt")
	// framework.Bin takes a path from STRATA_BIN_* as it is: the agent
	// would only fail to start it, and the test time out.
	if st, err := os.Stat(h.plugin); err != nil || st.Mode()&0o111 == 0 {
		if err == nil {
			err = fmt.Errorf("%s is not executable", h.plugin)
		}
		testenv.Missing(t, "the libvirt plugin (run `make build`, or set STRATA_BIN_STRATA_PROVIDER_LIBVIRT)", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, h.virsh, "-c", vmURI, "version").CombinedOutput(); err != nil {
		testenv.Missing(t, "libvirtd at "+vmURI+" (deploy/dev/deps.sh starts it)", fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out))))
	}
	if out, err := exec.CommandContext(ctx, "pgrep", "-x", "virtlogd").CombinedOutput(); err != nil {
		testenv.Missing(t, "virtlogd (deploy/dev/deps.sh starts it; VM consoles are logged through it)", fmt.Errorf("%w: %s", err, out))
	}
	dir := os.Getenv("STRATA_VM_IMAGE_DIR")
	if dir == "" {
		dir = filepath.Join(testenv.RepoRoot(), ".cache", "vm")
	}
	h.kernel, h.initrd = filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "initramfs.gz")
	for _, f := range []string{h.kernel, h.initrd} {
		if _, err := os.Stat(f); err != nil {
			testenv.Missing(t, "the test VM image (run `make images`, or set STRATA_VM_IMAGE_DIR)", err)
		}
	}
	return h
}

// vmNode is an agent of a VM cluster.
type vmNode struct {
	name, zone string
	dataDir    string
	pool       string
	// logDir is the provider's console directory: every domain of this
	// agent logs its serial console there, which tells its domains from
	// anyone else's on the shared libvirtd.
	logDir string
	proc   *framework.Proc
}

// vmCluster is a global tier, one region whose network is a bridge of its
// own, and agents running the libvirt plugin.
type vmCluster struct {
	*procCluster
	host   vmHost
	bridge string
	subnet string // a /24
	nodes  map[string]*vmNode
}

// vmOptions are the settings a VM test may change; empty means the
// default of startVMCluster.
type vmOptions struct {
	// statusInterval is the agents' poll interval (default 1s).
	statusInterval string
	// rescanInterval is the libvirt plugin's watch rescan (default 5s).
	rescanInterval string
	// retryBackoff is the region's first delay before replacing a failed
	// replica (default 1s).
	retryBackoff string
}

// startVMCluster starts the cluster. Its clean-up is registered first, so
// that it runs after the processes are killed: it removes whatever the
// agents' domains left (a failed test), their pools and the bridge.
func startVMCluster(t *testing.T, h vmHost, bridge, subnet string, nodes ...string) *vmCluster {
	t.Helper()
	return startVMClusterWith(t, h, vmOptions{}, bridge, subnet, nodes...)
}

func startVMClusterWith(t *testing.T, h vmHost, o vmOptions, bridge, subnet string, nodes ...string) *vmCluster {
	t.Helper()
	o.statusInterval = cmp.Or(o.statusInterval, "1s")
	o.rescanInterval = cmp.Or(o.rescanInterval, "5s")
	o.retryBackoff = cmp.Or(o.retryBackoff, "1s")
	c := &vmCluster{
		procCluster: &procCluster{t: t, dir: t.TempDir(), bin: framework.Bin(t, "strata"), regions: map[string]*regionProcs{},
			order: []string{vmRegion}, token: "strata_e2e00003_0123456789abcdef0123456789abcdef01234567"},
		host: h, bridge: bridge, subnet: subnet, nodes: map[string]*vmNode{},
	}
	suffix := randHex(t, 3)
	for i, n := range nodes {
		dataDir := filepath.Join(t.TempDir(), n)
		c.nodes[n] = &vmNode{
			name: n, zone: []string{"a", "b"}[i%2], dataDir: dataDir,
			pool:   fmt.Sprintf("strata-e2e-%s-%s", suffix, n),
			logDir: filepath.Join(dataDir, "console"),
		}
	}
	t.Cleanup(c.cleanUp)

	c.pki = framework.NewPKI(t)
	etcd := etcdtest.StartProcess(t)
	gh, gg := framework.FreeAddr(t), framework.FreeAddr(t)
	c.globalHTTP, c.globalGRPC = []string{gh}, []string{gg}
	// Secrets for the VMs' config drives.
	secretsKey := filepath.Join(c.dir, "secrets.key")
	if _, err := secretbox.GenerateKey(secretsKey); err != nil {
		t.Fatal(err)
	}
	cfg := c.write("g1.yaml", fmt.Sprintf(`id: g1
listen: {http: %q, grpc: %q}
etcd: {endpoints: [%q]}
api: {bootstrapToken: %q}
secrets: {keyFiles: [%q]}
log: {level: debug}
`, gh, gg, etcd.Endpoints()[0], c.token, secretsKey)+c.pki.YAML(pki.Global("g1")))
	c.globals = []*framework.Proc{framework.Start(t, "global-g1", c.bin, []string{"global", "--config", cfg})}

	re := etcdtest.StartProcess(t)
	rh, rg := framework.FreeAddr(t), framework.FreeAddr(t)
	gw := strings.TrimSuffix(subnet, ".0/24") + ".1"
	cfg = c.write(vmRegion+".yaml", fmt.Sprintf(`name: %s
id: %s-r1
listen: {http: %q, grpc: %q}
etcd: {endpoints: [%q]}
global: {endpoint: %q}
zones: [a, b]
network: {subnet: %s, gateway: %s, bridge: %s, nodeMask: %d, backend: none}
controller: {retryBackoff: %s}
log: {level: debug}
`, vmRegion, vmRegion, rh, rg, re.Endpoints()[0], gg, subnet, gw, bridge, vmNodeMask, o.retryBackoff)+framework.RegionAPIYAML+c.pki.YAML(pki.Region(vmRegion)))
	rp := &regionProcs{name: vmRegion, http: rh, agents: map[string]*framework.Proc{}, agentMetrics: map[string]string{}}
	rp.proc = framework.Start(t, "region-"+vmRegion, c.bin, []string{"region", "--config", cfg})
	c.regions[vmRegion] = rp

	for _, n := range nodes {
		vn := c.nodes[n]
		m := framework.FreeAddr(t)
		rp.agentMetrics[n] = m
		acfg := c.write(n+".yaml", fmt.Sprintf(`node:
  name: %s
  zone: %s
  milliCPU: 4000
  memoryMiB: 4096
region: {endpoint: %q}
listen: {grpc: %q, metrics: %q}
dataDir: %s
statusInterval: %s
network: {dataPlane: disabled}
providers:
  - name: libvirt
    plugin: %s
    options: {uri: %q, pool: %q, logDir: %q, domainType: qemu, rescanInterval: %s, imageDirs: [%q]}
log: {level: debug}
`, n, vn.zone, rg, framework.FreeAddr(t), m, vn.dataDir, o.statusInterval, h.plugin, vmURI, vn.pool, vn.logDir, o.rescanInterval, filepath.Dir(h.kernel))+c.pki.YAML(pki.Node(vmRegion, n)))
		vn.proc = framework.StartAgent(t, "agent-"+n, acfg)
		rp.agents[n] = vn.proc
	}
	framework.WaitHTTP(t, "http://"+gh+"/readyz", 60*time.Second)
	waitRegions(t, c.global(0), 1)
	framework.Eventually(t, 60*time.Second, "every node registered with a vm provider", func() error {
		var list struct{ Items []api.Node }
		if _, err := c.global(0).Get("/v1/nodes", &list); err != nil {
			return err
		}
		var got []string
		for _, n := range list.Items {
			if n.Serves(api.ProviderVM) {
				got = append(got, n.Name)
			}
		}
		slices.Sort(got)
		if want := slices.Sorted(slices.Values(nodes)); !slices.Equal(got, want) {
			return fmt.Errorf("nodes serving vm: %v; want %v", got, want)
		}
		return nil
	})
	return c
}

// cleanUp removes, after the processes are gone, every domain of the
// cluster's agents, their pools and the bridge.
func (c *vmCluster) cleanUp() {
	t := c.t
	for _, n := range c.nodes {
		for _, d := range c.domains(n) {
			t.Logf("clean-up: removing domain %s of %s", d, n.name)
			_ = c.virsh("destroy", d)
			_ = c.virsh("undefine", d, "--managed-save", "--snapshots-metadata", "--nvram")
			c.removeQEMULog(d)
		}
		if c.virsh("pool-info", n.pool) == nil {
			_ = c.virsh("pool-destroy", n.pool)
			if err := c.virsh("pool-undefine", n.pool); err != nil {
				t.Errorf("clean-up: undefine pool %s: %v", n.pool, err)
			}
		}
	}
	if _, err := os.Stat("/sys/class/net/" + c.bridge); err == nil {
		if out, err := exec.Command(c.host.ip, "link", "del", c.bridge).CombinedOutput(); err != nil {
			t.Errorf("clean-up: remove bridge %s: %v: %s", c.bridge, err, out)
		}
	}
}

func (c *vmCluster) virsh(args ...string) error {
	_, err := c.virshOut(args...)
	return err
}

func (c *vmCluster) virshOut(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.host.virsh, append([]string{"-c", vmURI}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("virsh %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// domains lists the strata- domains of node n: those whose console is
// logged in n's log directory. Other tests' domains on the same libvirtd
// are left alone.
func (c *vmCluster) domains(n *vmNode) []string {
	out, err := c.virshOut("list", "--all", "--name")
	if err != nil {
		c.t.Errorf("list domains: %v", err)
		return nil
	}
	var mine []string
	for name := range strings.FieldsSeq(out) {
		if !strings.HasPrefix(name, "strata-") {
			continue
		}
		x, err := c.virshOut("dumpxml", name)
		if err != nil {
			continue // gone meanwhile
		}
		if strings.Contains(x, n.logDir+"/") {
			mine = append(mine, name)
		}
	}
	slices.Sort(mine)
	return mine
}

// volumes lists the volumes of n's pool.
func (c *vmCluster) volumes(n *vmNode) ([]string, error) {
	if err := c.virsh("pool-refresh", n.pool); err != nil {
		return nil, err
	}
	out, err := c.virshOut("vol-list", "--pool", n.pool)
	if err != nil {
		return nil, err
	}
	var vols []string
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == "Name" || strings.HasPrefix(f[0], "---") {
			continue
		}
		vols = append(vols, f[0])
	}
	return vols, nil
}

// bridgePorts lists the interfaces enslaved to the cluster's bridge.
func (c *vmCluster) bridgePorts() ([]string, error) {
	out, err := exec.Command(c.host.ip, "-o", "link", "show", "master", c.bridge).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ip -o link show master %s: %w: %s", c.bridge, err, out)
	}
	var ports []string
	for line := range strings.Lines(string(out)) {
		// "7: vnet3@...: <BROADCAST,...> ... master e2e-v0 ..."
		f := strings.Fields(line)
		if len(f) > 1 {
			ports = append(ports, strings.TrimSuffix(f[1], ":"))
		}
	}
	return ports, nil
}

// consoles lists the files in n's console directory.
func consoles(n *vmNode) ([]string, error) {
	entries, err := os.ReadDir(n.logDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out, nil
}

// removeQEMULog removes libvirtd's own log of a domain the clean-up
// removed behind the provider's back.
func (c *vmCluster) removeQEMULog(domain string) {
	matches, _ := filepath.Glob(filepath.Join(vmQEMULogs, domain+".log*"))
	for _, f := range matches {
		_ = os.Remove(f)
	}
}

// createVM creates the flavor, the Image resource and a Compute resource
// of one VM replica in the cluster's region; it returns when the create
// call returned.
func (c *vmCluster) createVM(t *testing.T) { c.createVMWith(t, nil) }

// createVMWith is createVM with more fields of the compute spec.
func (c *vmCluster) createVMWith(t *testing.T, compute map[string]any) {
	t.Helper()
	c.createVMImage(t)
	spec := map[string]any{"image": vmImage}
	maps.Copy(spec, compute)
	c.global(0).Must(t, http.MethodPost, "/v1/resources", map[string]any{
		"name": vmResource, "kind": "Compute", "replicas": 1,
		"spec":     map[string]any{"flavor": vmFlavor, "compute": spec},
		"schedule": map[string]any{"regions": []map[string]any{{"name": vmRegion}}},
	}, http.StatusCreated, nil)
}

// createVMImage creates the VM flavor and the Image resource of the test
// image.
func (c *vmCluster) createVMImage(t *testing.T) {
	t.Helper()
	g := c.global(0)
	g.Must(t, http.MethodPost, "/v1/flavors", map[string]any{
		"name": vmFlavor, "kind": "vm", "spec": map[string]any{"vcpus": 1, "memoryMiB": 128},
	}, http.StatusCreated, nil)
	g.Must(t, http.MethodPost, "/v1/resources", map[string]any{
		"name": vmImage, "kind": "Image",
		"spec": map[string]any{"image": map[string]any{"kernel": c.host.kernel, "initrd": c.host.initrd, "cmdline": vmCmdline, "readyMarker": "STRATA-VM-READY"}},
	}, http.StatusCreated, nil)
}

// waitReady waits until the resource is ready at the global API with its
// one replica ready.
func (c *vmCluster) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	framework.Eventually(t, timeout, vmResource+" ready at the global API", func() error {
		r, err := resourceStatus(c.global(0), vmResource)
		if err != nil {
			return err
		}
		if r.Status.Phase != api.PhaseReady || r.Status.Ready != 1 {
			return fmt.Errorf("phase %s (%s), %d ready", r.Status.Phase, r.Status.Reason, r.Status.Ready)
		}
		return nil
	})
}

// runningReplicas returns the replicas of the resource meant to run.
func (c *vmCluster) runningReplicas() ([]api.Replica, error) {
	var reps struct{ Items []api.Replica }
	status, err := c.global(0).Get("/v1/resources/"+vmResource+"/replicas", &reps)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET replicas: %d", status)
	}
	var out []api.Replica
	for _, r := range reps.Items {
		if r.Desired == api.DesiredRunning {
			out = append(out, r)
		}
	}
	return out, nil
}

// theReplica waits for the one running replica, placed and addressed.
func (c *vmCluster) theReplica(t *testing.T) api.Replica {
	t.Helper()
	var rep api.Replica
	framework.Eventually(t, 30*time.Second, "one running replica with an address", func() error {
		reps, err := c.runningReplicas()
		if err != nil {
			return err
		}
		if len(reps) != 1 || reps[0].Node == "" || reps[0].Network == nil || reps[0].Network.Address == "" {
			return fmt.Errorf("running replicas: %+v", reps)
		}
		rep = reps[0]
		return nil
	})
	return rep
}

// logs reads a replica's console through the global logs API.
func (c *vmCluster) logs(query string) (string, error) { return c.logsOf(vmResource, query) }

// logsOf reads the console of a replica of resource name.
func (c *vmCluster) logsOf(name, query string) (string, error) {
	resp, err := c.global(0).Do(context.Background(), http.MethodGet, "/v1/resources/"+name+"/logs?"+query, nil)
	if err != nil {
		return "", err
	}
	if resp.Status != http.StatusOK {
		return "", fmt.Errorf("GET logs?%s: %d %s", query, resp.Status, resp.Body)
	}
	return string(resp.Body), nil
}

// vmNodeMask is the size of each VM node's address block (four nodes fit
// in a test's /24).
const vmNodeMask = 26

// waitBooted polls the replica's console through the logs API until the
// guest's marker line names its hostname and IPAM address and `ip addr`
// shows that address; it returns the console.
func (c *vmCluster) waitBooted(t *testing.T, rep api.Replica, query string, timeout time.Duration) string {
	t.Helper()
	addr := rep.Network.Address
	wantMarker := fmt.Sprintf("%s %s %s", vmMarker, vmHostname(rep.ID), addr)
	// The guest's interface holds its node's block, not the region's subnet.
	wantInet := fmt.Sprintf("inet %s/%d", addr, vmNodeMask)
	var log string
	framework.Eventually(t, timeout, "the guest's marker and address in the console of "+rep.ID, func() error {
		var err error
		if log, err = c.logs(query); err != nil {
			return err
		}
		if !strings.Contains(log, vmMarker) {
			return fmt.Errorf("no %s yet (%d bytes of console)", vmMarker, len(log))
		}
		if !strings.Contains(log, wantMarker) {
			return fmt.Errorf("no line %q in the console:\n%s", wantMarker, lastLines(log, 30))
		}
		if !strings.Contains(log, wantInet) {
			return fmt.Errorf("no %q in the guest's ip addr output:\n%s", wantInet, lastLines(log, 30))
		}
		return nil
	})
	return log
}

// The port the guest of TestVMBootsThroughStrata serves, and the line
// its console prints just before it listens.
const (
	vmProbePort  = 8080
	vmListenLine = "STRATA-PROBE-LISTENING"
)

// waitReadyAfterListen waits until the VM's one replica is ready at the
// global API, and fails when it was ever ready before its console said
// the guest listens, or was never seen booted and still unready: the
// readiness probe, not the boot marker, made it ready. The status is
// read before the console each time, so a ready status always has the
// line in the console read after it.
func (c *vmCluster) waitReadyAfterListen(t *testing.T, rep api.Replica, timeout time.Duration) {
	t.Helper()
	heldBack := false
	framework.Eventually(t, timeout, vmResource+" ready after its guest listens", func() error {
		r, err := resourceStatus(c.global(0), vmResource)
		if err != nil {
			return err
		}
		log, err := c.logs("tail=400")
		if err != nil {
			return err
		}
		ready := r.Status.Phase == api.PhaseReady && r.Status.Ready == 1
		listening := strings.Contains(log, vmListenLine)
		switch {
		case ready && !listening:
			t.Fatalf("%s ready before its guest listens on %d:\n%s", rep.ID, vmProbePort, lastLines(log, 20))
		case !ready && strings.Contains(log, vmMarker) && !listening:
			heldBack = true
		}
		if !ready {
			return fmt.Errorf("phase %s (%s), %d ready; guest listening: %v", r.Status.Phase, r.Status.Reason, r.Status.Ready, listening)
		}
		return nil
	})
	if !heldBack {
		t.Errorf("%s was never seen booted and unready: the readiness probe held nothing back", rep.ID)
	}
}

// vmHostname is the guest's hostname the provider gives a replica (its
// domain name, restricted to hostname characters).
func vmHostname(id string) string {
	h := []byte(strings.ToLower("strata-" + id))
	for i, ch := range h {
		if (ch < 'a' || ch > 'z') && (ch < '0' || ch > '9') && ch != '-' {
			h[i] = '-'
		}
	}
	if len(h) > 63 {
		h = h[:63]
	}
	return strings.TrimRight(string(h), "-")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func randHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestVMBootsThroughStrata: a VM resource applied at the global API boots
// on an agent's libvirt plugin with the address the region's IPAM gave
// it, its console is readable through the logs API, and deleting the
// resource leaves nothing on the host: no domain, no volume, no tap
// device, no console log.
func TestVMBootsThroughStrata(t *testing.T) {
	h := requireVMHost(t)
	c := startVMCluster(t, h, "e2e-v0", "10.233.0.0/24", "vm-0")
	node := c.nodes["vm-0"]
	g := c.global(0)

	// The guest serves a port some seconds after its init marker; a TCP
	// readiness probe on the guest's address, run by the node's agent,
	// holds the replica unready until then.
	applied := time.Now()
	c.createVMWith(t, map[string]any{
		"command":        []string{"sh", "-c", fmt.Sprintf("sleep 6; mkdir -p /tmp/www; echo ok >/tmp/www/index.html; echo %s; exec httpd -f -p %d -h /tmp/www", vmListenLine, vmProbePort)},
		"readinessProbe": map[string]any{"tcpSocket": map[string]any{"port": vmProbePort}, "periodSeconds": 1},
	})
	rep := c.theReplica(t)
	c.waitReadyAfterListen(t, rep, 2*time.Minute)
	toReady := time.Since(applied)
	if rep.Node != node.name || rep.Region != vmRegion {
		t.Fatalf("replica %s on %s/%s; want %s/%s", rep.ID, rep.Region, rep.Node, vmRegion, node.name)
	}
	if !strings.HasPrefix(rep.Network.Address, "10.233.0.") || rep.Network.Bridge != c.bridge {
		t.Errorf("replica network %+v; want an address in 10.233.0.0/24 on %s", rep.Network, c.bridge)
	}
	log := c.waitBooted(t, rep, "tail=200", 2*time.Minute)
	toMarker := time.Since(applied)
	t.Logf("VM %s at %s on %s: ready at the global API %v after the create call; guest marker in the logs API after %v",
		rep.ID, rep.Network.Address, rep.Node, toReady.Round(time.Millisecond), toMarker.Round(time.Millisecond))
	if n := strings.Count(strings.TrimRight(log, "\n"), "\n") + 1; n > 200 {
		t.Errorf("logs?tail=200 returned %d lines", n)
	}
	// The whole console: the kernel's command line is the Image's, then
	// the serial console, then the IPAM address.
	full, err := c.logs("")
	if err != nil {
		t.Fatal(err)
	}
	mask := net.IP(net.CIDRMask(vmNodeMask, 32)).String() // the node block's
	wantIP := "ip=" + rep.Network.Address + "::" + rep.Network.Gateway + ":" + mask + ":" + vmHostname(rep.ID) + ":eth0:off"
	for _, want := range []string{vmCmdline + " console=ttyS0 " + wantIP, "[strata] "} {
		if !strings.Contains(full, want) {
			t.Errorf("console: no %q in\n%s", want, lastLines(full, 40))
		}
	}

	// What the VM holds on the host while it runs.
	domain := "strata-" + rep.ID
	if got := c.domains(node); !slices.Equal(got, []string{domain}) {
		t.Errorf("domains of %s: %v; want [%s]", node.name, got, domain)
	}
	taps, err := c.bridgePorts()
	if err != nil {
		t.Fatal(err)
	}
	if len(taps) != 1 {
		t.Errorf("ports of bridge %s: %v; want the VM's tap device", c.bridge, taps)
	}
	if files, _ := consoles(node); !slices.Contains(files, domain+".log") {
		t.Errorf("console directory %s: %v; want %s.log", node.logDir, files, domain)
	}

	deleted := time.Now()
	g.Must(t, http.MethodDelete, "/v1/resources/"+vmResource, nil, http.StatusAccepted, nil)
	framework.Eventually(t, 60*time.Second, "nothing of "+domain+" left on the host", func() error {
		if d := c.domains(node); len(d) != 0 {
			return fmt.Errorf("domains of %s: %v", node.name, d)
		}
		vols, err := c.volumes(node)
		if err != nil {
			return err
		}
		if len(vols) != 0 {
			return fmt.Errorf("volumes in pool %s: %v", node.pool, vols)
		}
		ports, err := c.bridgePorts()
		if err != nil {
			return err
		}
		if len(ports) != 0 {
			return fmt.Errorf("ports of bridge %s: %v", c.bridge, ports)
		}
		for _, tap := range taps {
			if _, err := os.Stat("/sys/class/net/" + tap); err == nil {
				return fmt.Errorf("tap device %s still exists", tap)
			}
		}
		files, err := consoles(node)
		if err != nil {
			return err
		}
		if len(files) != 0 {
			return fmt.Errorf("console directory %s: %v", node.logDir, files)
		}
		if m, _ := filepath.Glob(filepath.Join(vmQEMULogs, domain+".log*")); len(m) != 0 {
			return fmt.Errorf("libvirtd's logs of the domain: %v", m)
		}
		return nil
	})
	gone := time.Since(deleted)
	framework.Eventually(t, 30*time.Second, "the resource gone from the global API", func() error {
		status, err := g.Get("/v1/resources/"+vmResource, nil)
		if err != nil {
			return err
		}
		if status != http.StatusNotFound {
			return fmt.Errorf("GET %s: %d", vmResource, status)
		}
		return nil
	})
	t.Logf("delete: the host clean %v after the delete call; resource gone %v after it",
		gone.Round(time.Millisecond), time.Since(deleted).Round(time.Millisecond))
}

// TestVMDrainReplaces: draining the node a VM runs on through the global
// API starts a replacement VM on the other node, which boots, and removes
// the old domain.
func TestVMDrainReplaces(t *testing.T) {
	h := requireVMHost(t)
	c := startVMCluster(t, h, "e2e-v1", "10.233.1.0/24", "vm-a", "vm-b")
	g := c.global(0)
	nodePath := func(n string) string { return "/v1/regions/" + vmRegion + "/nodes/" + n }

	// vm-b cordoned: the VM goes to vm-a.
	g.Must(t, http.MethodPost, nodePath("vm-b")+"/cordon", map[string]string{"reason": "e2e: place the VM on vm-a"}, http.StatusOK, nil)
	applied := time.Now()
	c.createVM(t)
	c.waitReady(t, 2*time.Minute)
	toReady := time.Since(applied)
	old := c.theReplica(t)
	if old.Node != "vm-a" {
		t.Fatalf("replica %s placed on %s; want vm-a (vm-b is cordoned)", old.ID, old.Node)
	}
	c.waitBooted(t, old, "tail=200&replica="+old.ID, 2*time.Minute)
	t.Logf("VM %s at %s on vm-a: ready at the global API %v after the create call; guest marker after %v",
		old.ID, old.Network.Address, toReady.Round(time.Millisecond), time.Since(applied).Round(time.Millisecond))
	g.Must(t, http.MethodPost, nodePath("vm-b")+"/uncordon", nil, http.StatusOK, nil)
	oldDomain := "strata-" + old.ID
	if got := c.domains(c.nodes["vm-a"]); !slices.Equal(got, []string{oldDomain}) {
		t.Fatalf("domains of vm-a: %v; want [%s]", got, oldDomain)
	}

	posted := time.Now()
	var started api.DrainStatus
	g.Must(t, http.MethodPost, nodePath("vm-a")+"/drain", map[string]any{"deadline": "3m", "reason": "e2e: drain a VM"}, http.StatusOK, &started)
	if started.State != api.DrainRunning {
		t.Fatalf("drain started as %+v; want running", started)
	}
	var d api.DrainStatus
	framework.Eventually(t, 3*time.Minute+15*time.Second, "the drain of vm-a finished", func() error {
		d = api.DrainStatus{}
		g.Must(t, http.MethodGet, nodePath("vm-a")+"/drain", nil, http.StatusOK, &d)
		if d.State == api.DrainRunning {
			return fmt.Errorf("drain %s: total %d moved %d remaining %d (%s)", d.State, d.Total, d.Moved, d.Remaining, d.Message)
		}
		return nil
	})
	drained := time.Since(posted)
	t.Logf("drain of vm-a: %s in %v after the call (startedAt→finishedAt %v); steps %+v",
		d.State, drained.Round(time.Millisecond), d.FinishedAt.Sub(d.StartedAt).Round(time.Millisecond), d.Steps)
	if d.State != api.DrainSucceeded || d.Total != 1 || d.Moved != 1 || d.Remaining != 0 || d.Failed != 0 {
		t.Fatalf("drain ended %s: total %d moved %d remaining %d failed %d (%s); want succeeded with 1 moved",
			d.State, d.Total, d.Moved, d.Remaining, d.Failed, d.Message)
	}

	// The replacement runs on vm-b, ready, booted with its own address.
	repl := c.theReplica(t)
	if repl.ID == old.ID || repl.Node != "vm-b" {
		t.Fatalf("running replica %s on %s after the drain; want a new one on vm-b", repl.ID, repl.Node)
	}
	if repl.Phase != api.PhaseReady {
		t.Errorf("replacement %s: phase %s; want ready", repl.ID, repl.Phase)
	}
	if repl.Replaces != "" && repl.Replaces != old.ID {
		t.Errorf("replacement %s replaces %q; want %s", repl.ID, repl.Replaces, old.ID)
	}
	c.waitReady(t, 30*time.Second)
	// The image names a ready marker, so the replacement counted as
	// ready (and the old VM went) only once its guest was up: the
	// marker is in its console already when the drain says it is done.
	c.waitBooted(t, repl, "tail=200&replica="+repl.ID, 5*time.Second)
	booted := time.Since(posted)
	t.Logf("replacement %s at %s on vm-b: booted and drained %v after the drain call",
		repl.ID, repl.Network.Address, booted.Round(time.Millisecond))
	if got := c.domains(c.nodes["vm-b"]); !slices.Equal(got, []string{"strata-" + repl.ID}) {
		t.Errorf("domains of vm-b: %v; want [strata-%s]", got, repl.ID)
	}

	// The old domain is gone, with its console.
	framework.Eventually(t, 60*time.Second, "the old domain "+oldDomain+" gone", func() error {
		if got := c.domains(c.nodes["vm-a"]); len(got) != 0 {
			return fmt.Errorf("domains of vm-a: %v", got)
		}
		if files, err := consoles(c.nodes["vm-a"]); err != nil || len(files) != 0 {
			return fmt.Errorf("console directory of vm-a: %v, %v", files, err)
		}
		return nil
	})
	if n, err := c.node("vm-a"); err != nil || n.Schedulable {
		t.Errorf("vm-a after its drain: schedulable %v (%v); want cordoned", n.Schedulable, err)
	}
}

// node reads a node through the global API.
func (c *vmCluster) node(name string) (api.Node, error) {
	var n api.Node
	status, err := c.global(0).Get("/v1/regions/"+vmRegion+"/nodes/"+name, &n)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("GET node %s: %d", name, status)
	}
	return n, err
}

// TestVMFailureReportedByPush: a VM destroyed behind Strata's back (`virsh
// destroy`) shows as failed in the API although the agent polls its
// provider once an hour and the libvirt plugin rescans once an hour: the
// plugin's lifecycle event, pushed through the plugin's Watch stream to
// the agent and reported to the region, is the only way it can arrive in
// time. The acceptance figure is 2s; the test asserts only a deadline far
// below an hour and logs the latencies it measured, over
// STRATA_E2E_VM_KILLS kills (default 10), each of a fresh replica the
// region started in place of the one before.
func TestVMFailureReportedByPush(t *testing.T) {
	h := requireVMHost(t)
	kills := 10
	if v := os.Getenv("STRATA_E2E_VM_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("STRATA_E2E_VM_KILLS=%q: want a positive number", v)
		}
		kills = n
	}
	c := startVMClusterWith(t, h, vmOptions{statusInterval: "1h", rescanInterval: "1h", retryBackoff: "100ms"},
		"e2e-v2", "10.233.2.0/24", "vm-p")
	c.createVM(t)
	// Far below the hour of a poll or a rescan, far above the 2s target.
	const deadline = 30 * time.Second
	var took []time.Duration
	var killed string
	for i := range kills {
		// The replacement's readiness (its guest's marker) is seen by
		// the agent's fast polls after Apply, which back off: allow for
		// that.
		var rep api.Replica
		framework.Eventually(t, 5*time.Minute, fmt.Sprintf("kill %d: a ready replica other than %q", i+1, killed), func() error {
			reps, err := c.runningReplicas()
			if err != nil {
				return err
			}
			if len(reps) != 1 || reps[0].ID == killed || reps[0].Phase != api.PhaseReady {
				return fmt.Errorf("running replicas: %+v", reps)
			}
			rep = reps[0]
			return nil
		})
		killed = rep.ID
		domain := "strata-" + rep.ID
		if err := c.virsh("destroy", domain); err != nil {
			t.Fatalf("kill %d: %v", i+1, err)
		}
		destroyed := time.Now()
		var last string
		for {
			failed, state, err := c.replicaFailed(rep.ID)
			if err == nil && failed {
				last = state
				break
			}
			if err != nil {
				state = err.Error()
			}
			last = state
			if time.Since(destroyed) > deadline {
				t.Fatalf("kill %d: replica %s not failed in the API %v after virsh destroy: %s", i+1, rep.ID, deadline, last)
			}
			time.Sleep(20 * time.Millisecond)
		}
		took = append(took, time.Since(destroyed))
		t.Logf("kill %d: %s failed in the API %v after virsh destroy returned: %s", i+1, rep.ID, took[i].Round(time.Millisecond), last)
	}
	slices.Sort(took)
	// Nearest rank: the smallest sample with p% of them at or below it.
	pct := func(p int) time.Duration { return took[max(0, (p*len(took)+99)/100-1)].Round(time.Millisecond) }
	t.Logf("virsh destroy -> failed in the API, %d kills, poll interval 1h, rescan 1h: min %v, median %v, p90 %v, max %v (API polled every 20ms)",
		len(took), took[0].Round(time.Millisecond), pct(50), pct(90), took[len(took)-1].Round(time.Millisecond))
}

// replicaFailed reports whether the global API shows replica id failed:
// in phase error, or already being replaced because it failed, or gone
// (the region replaces a failed replica at once, so its error phase may
// be short).
func (c *vmCluster) replicaFailed(id string) (bool, string, error) {
	var reps struct{ Items []api.Replica }
	status, err := c.global(0).Get("/v1/resources/"+vmResource+"/replicas", &reps)
	if err != nil {
		return false, "", err
	}
	if status != http.StatusOK {
		return false, "", fmt.Errorf("GET replicas: %d", status)
	}
	for _, r := range reps.Items {
		if r.ID != id {
			continue
		}
		state := fmt.Sprintf("phase %s, desired %s (%s)", r.Phase, r.Desired, r.Reason)
		return r.Phase == api.PhaseError || (r.Desired == api.DesiredDestroyed && strings.HasPrefix(r.Reason, "failed")), state, nil
	}
	// Gone: destroyed and forgotten between two looks. Nothing but its
	// failure destroys it in these tests.
	return true, "gone from the API", nil
}
