package containerd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/hostpolicy"
	"github.com/stratahq/strata/testkit/testenv/ports"
)

// TestBridgeNetwork runs two web servers on a bridge, fetches each one's
// page from a third container, and checks that deleting them leaves
// nothing: no container, task, snapshot, network namespace, CNI cached
// address or NAT rule, and no bridge.
func TestBridgeNetwork(t *testing.T) {
	// Reserved: no other test's server may listen where the portmap
	// forwards. The operator allows publishing exactly that port.
	hostPort := ports.Get(t)
	e := newEnv(t, func(c *Config) { c.HostPorts = strconv.Itoa(hostPort) })
	const (
		bridge = "st-test0"
		subnet = "10.213.0.0/24"
	)
	freshBridge(t, bridge)
	attach := func(host int) *api.NetworkAttachment {
		return &api.NetworkAttachment{Network: "test", Bridge: bridge, Subnet: subnet, Gateway: "10.213.0.1", Address: fmt.Sprintf("10.213.0.%d", host)}
	}
	// Each server serves its own hostname; the shell stays pid 1 so that
	// SIGTERM stops it at once.
	serve := []string{"sh", "-c", `mkdir -p /www && hostname > /www/index.html && httpd -f -v -p 80 -h /www & trap 'exit 0' TERM; wait`}
	servers := []string{"web-a-" + randomSuffix(t), "web-b-" + randomSuffix(t)}
	var all []string
	for i, id := range servers {
		a := e.assignment(id, serve...)
		a.Network = attach(11 + i)
		if i == 0 {
			a.Spec.Compute.Ports = []api.PortSpec{{Name: "http", ContainerPort: 80, HostPort: hostPort, Protocol: "tcp"}}
		}
		st := e.apply(t, a)
		if st.Phase != api.PhaseReady {
			t.Fatalf("Apply %s: got phase %s (%s); want ready", id, st.Phase, st.Reason)
		}
		if st.Address != a.Network.Address {
			t.Errorf("Apply %s: got address %q; want %q", id, st.Address, a.Network.Address)
		}
		all = append(all, id)
	}

	// httpd may take a moment to listen: the client retries.
	client := "wget-" + randomSuffix(t)
	a := e.assignment(client, "sh", "-c",
		`for ip in 10.213.0.11 10.213.0.12; do
		   n=0; until timeout 5 wget -q -O - http://$ip/; do n=$((n+1)); [ $n -ge 50 ] && exit 1; sleep 0.1; done
		 done`)
	a.Network = attach(13)
	a.Spec.Compute.RestartPolicy = api.RestartNever
	e.apply(t, a)
	all = append(all, client)
	st := e.waitStatus(t, client, "exits", func(st api.AssignmentStatus) bool { return st.ExitCode != nil })
	if *st.ExitCode != 0 {
		t.Fatalf("client exited with %d (%s); want 0; its output:\n%s", *st.ExitCode, st.Reason, e.logs(t, client))
	}
	// Each page is its server's hostname.
	e.waitLogs(t, client, servers...)
	for _, id := range servers {
		// busybox httpd -v logs every response.
		e.waitLogs(t, id, "response:200")
	}

	// The first server's port is published on the host (portmap).
	for _, host := range hostAddresses(t) {
		url := fmt.Sprintf("http://%s/", net.JoinHostPort(host, strconv.Itoa(hostPort)))
		page, err := httpGet(url)
		if err != nil || strings.TrimSpace(page) != servers[0] {
			t.Errorf("GET %s: got %q (%v); want %q", url, page, err, servers[0])
		}
	}

	bridgePorts, err := readBridge(bridge)
	if err != nil || len(bridgePorts) != 3 {
		t.Errorf("bridge %s: got ports %v (%v); want 3", bridge, bridgePorts, err)
	}
	for _, id := range all {
		if err := e.p.Delete(e.ctx(t), &api.Assignment{ID: id}, time.Second); err != nil {
			t.Fatalf("Delete %s: %v", id, err)
		}
	}
	for _, id := range all {
		e.checkGone(t, id)
		if rules := natRules(t, id); rules != "" {
			t.Errorf("NAT rules of %s: got %s; want none", id, rules)
		}
	}
	if snaps := e.activeSnapshots(t); len(snaps) > 0 {
		t.Errorf("snapshots: got %v; want none but image layers", snaps)
	}
	if _, err := readBridge(bridge); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bridge %s: got %v; want it removed with its last replica", bridge, err)
	}
}

// TestBridgeSharedByReplicas checks that the bridge stays while a
// replica uses it, and that a replica without a network gets loopback
// only.
func TestBridgeSharedByReplicas(t *testing.T) {
	e := newEnv(t)
	const bridge = "st-test1"
	freshBridge(t, bridge)
	attach := func(host int) *api.NetworkAttachment {
		return &api.NetworkAttachment{Network: "shared", Bridge: bridge, Subnet: "10.213.2.0/24", Address: fmt.Sprintf("10.213.2.%d", host)}
	}
	first, second := e.assignment("shared-1-"+randomSuffix(t)), e.assignment("shared-2-"+randomSuffix(t))
	first.Network, second.Network = attach(11), attach(12)
	e.apply(t, first)
	e.apply(t, second)
	if err := e.p.Delete(e.ctx(t), first, time.Second); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if ports, err := readBridge(bridge); err != nil || len(ports) != 1 {
		t.Errorf("bridge %s after deleting one of two replicas: got ports %v (%v); want 1", bridge, ports, err)
	}

	lo := e.assignment("lo-"+randomSuffix(t), "sh", "-c", `ip -o addr; echo done`)
	lo.Spec.Compute.RestartPolicy = api.RestartNever
	e.apply(t, lo)
	e.waitStatus(t, lo.ID, "exits", func(st api.AssignmentStatus) bool { return st.ExitCode != nil })
	out := e.waitLogs(t, lo.ID, "done")
	if !strings.Contains(out, "127.0.0.1") || strings.Contains(out, "eth0") {
		t.Errorf("interfaces without a network: got %q; want loopback (up, 127.0.0.1) only", out)
	}

	if err := e.p.Delete(e.ctx(t), second, time.Second); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := readBridge(bridge); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bridge %s after its last replica: got %v; want it removed", bridge, err)
	}
}

// TestDataPlaneBridgeStays: a bridge the agent's data plane owns (its
// alias says so) stays when its last replica goes, and a replica gets the
// attachment's MTU.
func TestDataPlaneBridgeStays(t *testing.T) {
	e := newEnv(t)
	const bridge = "st-test2"
	freshBridge(t, bridge)
	for _, args := range [][]string{
		{"link", "add", bridge, "type", "bridge"},
		{"link", "set", bridge, "alias", api.BridgeAlias},
		{"addr", "add", "10.213.4.1/24", "dev", bridge},
		{"link", "set", bridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	t.Cleanup(func() {
		if err := deleteLink(bridge); err != nil {
			t.Errorf("remove bridge %s: %v", bridge, err)
		}
	})
	a := e.assignment("mtu-"+randomSuffix(t), "sh", "-c", `echo mtu=$(cat /sys/class/net/eth0/mtu)`)
	a.Spec.Compute.RestartPolicy = api.RestartNever
	a.Network = &api.NetworkAttachment{Network: "dp", Bridge: bridge, Subnet: "10.213.4.0/24", Gateway: "10.213.4.1", Address: "10.213.4.9", MTU: 1400}
	e.apply(t, a)
	e.waitStatus(t, a.ID, "exits", func(st api.AssignmentStatus) bool { return st.ExitCode != nil })
	e.waitLogs(t, a.ID, "mtu=1400")
	if err := e.p.Delete(e.ctx(t), a, time.Second); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if ports, err := readBridge(bridge); err != nil || len(ports) != 0 {
		t.Fatalf("bridge %s after its last replica: ports %v (%v); want it in place, empty", bridge, ports, err)
	}
}

// freshBridge makes sure bridge does not exist before a test that checks
// its removal: an unused one left by an interrupted run is removed, one
// in use means another run is on it.
func freshBridge(t *testing.T, bridge string) {
	t.Helper()
	ports, err := readBridge(bridge)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil || len(ports) > 0 {
		t.Fatalf("bridge %s is in use (ports %v, %v): is another run of these tests on this host?", bridge, ports, err)
	}
	t.Logf("removing bridge %s left by an interrupted run", bridge)
	if err := deleteLink(bridge); err != nil {
		t.Fatalf("remove bridge %s: %v", bridge, err)
	}
}

// hostAddresses are the host's own IPv4 addresses to reach a published
// port on: loopback and the first other interface's.
func hostAddresses(t *testing.T) []string {
	t.Helper()
	out := []string{"127.0.0.1"}
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatalf("interfaces: %v", err)
	}
	for _, ifi := range ifs {
		if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagLoopback != 0 || strings.HasPrefix(ifi.Name, "st-") || strings.HasPrefix(ifi.Name, "veth") {
			continue
		}
		addrs, _ := ifi.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				return append(out, ipn.IP.String())
			}
		}
	}
	return out
}

// httpGet fetches url, retrying briefly while the server starts.
func httpGet(url string) (string, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	var err error
	for range 20 {
		var resp *http.Response
		resp, err = c.Get(url)
		if err == nil {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return string(b), fmt.Errorf("status %s", resp.Status)
			}
			return string(b), rerr
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", err
}

// natRules returns the iptables NAT rules mentioning id (the bridge
// plugin's masquerading, portmap's forwards); "" without iptables.
func natRules(t *testing.T, id string) string {
	t.Helper()
	out, err := exec.Command("iptables", "-t", "nat", "-S").Output()
	if err != nil {
		t.Logf("iptables: %v; NAT rules not checked", err)
		return ""
	}
	var hits []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, id) {
			hits = append(hits, l)
		}
	}
	return strings.Join(hits, "; ")
}

func TestBuildConflist(t *testing.T) {
	base := func() *api.Assignment {
		return &api.Assignment{
			ID:      "r1",
			Spec:    api.ResourceSpec{Compute: &api.ComputeSpec{}},
			Network: &api.NetworkAttachment{Network: "prod", Bridge: "st-prod", Subnet: "10.1.0.0/16", Gateway: "10.1.0.1", Address: "10.1.2.3"},
		}
	}
	tests := []struct {
		name    string
		change  func(a *api.Assignment)
		want    string // conflist JSON; "" when an error is wanted
		wantErr string
	}{
		{
			name: "bridge with static address",
			want: `{"cniVersion":"1.0.0","name":"prod","plugins":[` +
				`{"bridge":"st-prod","hairpinMode":true,"ipam":{"addresses":[{"address":"10.1.2.3/16","gateway":"10.1.0.1"}],"routes":[{"dst":"0.0.0.0/0","gw":"10.1.0.1"}],"type":"static"},"isGateway":true,"type":"bridge"},` +
				`{"type":"loopback"}]}`,
		},
		{
			name: "host ports add portmap",
			change: func(a *api.Assignment) {
				a.Spec.Compute.Ports = []api.PortSpec{{ContainerPort: 80, HostPort: 8080}, {ContainerPort: 53, HostPort: 5353, Protocol: "UDP"}, {ContainerPort: 9000}}
			},
			want: `{"cniVersion":"1.0.0","name":"prod","plugins":[` +
				`{"bridge":"st-prod","hairpinMode":true,"ipam":{"addresses":[{"address":"10.1.2.3/16","gateway":"10.1.0.1"}],"routes":[{"dst":"0.0.0.0/0","gw":"10.1.0.1"}],"type":"static"},"isGateway":true,"type":"bridge"},` +
				`{"type":"loopback"},` +
				`{"runtimeConfig":{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"},{"hostPort":5353,"containerPort":53,"protocol":"udp"}]},"snat":true,"type":"portmap"}]}`,
		},
		{
			name:   "no gateway takes the subnet's first host",
			change: func(a *api.Assignment) { a.Network.Gateway = "" },
			want: `{"cniVersion":"1.0.0","name":"prod","plugins":[` +
				`{"bridge":"st-prod","hairpinMode":true,"ipam":{"addresses":[{"address":"10.1.2.3/16","gateway":"10.1.0.1"}],"routes":[{"dst":"0.0.0.0/0","gw":"10.1.0.1"}],"type":"static"},"isGateway":true,"type":"bridge"},` +
				`{"type":"loopback"}]}`,
		},
		{
			name:   "the attachment's MTU goes to the bridge plugin",
			change: func(a *api.Assignment) { a.Network.MTU = 1450 },
			want: `{"cniVersion":"1.0.0","name":"prod","plugins":[` +
				`{"bridge":"st-prod","hairpinMode":true,"ipam":{"addresses":[{"address":"10.1.2.3/16","gateway":"10.1.0.1"}],"routes":[{"dst":"0.0.0.0/0","gw":"10.1.0.1"}],"type":"static"},"isGateway":true,"mtu":1450,"type":"bridge"},` +
				`{"type":"loopback"}]}`,
		},
		{
			name:   "no network is loopback only",
			change: func(a *api.Assignment) { a.Network = nil },
			want:   `{"cniVersion":"1.0.0","name":"strata-loopback","plugins":[{"type":"loopback"}]}`,
		},
		{name: "address outside the subnet", change: func(a *api.Assignment) { a.Network.Address = "10.2.0.1" }, wantErr: "outside subnet"},
		{name: "bad subnet", change: func(a *api.Assignment) { a.Network.Subnet = "10.1.0.0" }, wantErr: "subnet"},
		{name: "bad address", change: func(a *api.Assignment) { a.Network.Address = "ten" }, wantErr: "not an IP"},
		{name: "no bridge", change: func(a *api.Assignment) { a.Network.Bridge = "" }, wantErr: "no bridge"},
		{name: "bridge name too long", change: func(a *api.Assignment) { a.Network.Bridge = "strata-bridge-prod" }, wantErr: "longer than 15"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := base()
			if tc.change != nil {
				tc.change(a)
			}
			cl, err := buildConflist(a)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("buildConflist: got %v; want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("buildConflist: %v", err)
			}
			b, err := json.Marshal(cl)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("conflist:\ngot  %s\nwant %s", b, tc.want)
			}
		})
	}
}

// TestNetworkRestored checks that a replica whose network namespace and
// bridge vanished with its task (a reboot) gets them back when the
// supervisor of the next provider restarts it.
func TestNetworkRestored(t *testing.T) {
	e := newEnv(t)
	const bridge = "st-test2"
	freshBridge(t, bridge)
	a := e.assignment("restored-"+randomSuffix(t), "sh", "-c", `ip -o -4 addr show eth0; trap 'exit 0' TERM; sleep 3600 & wait`)
	a.Network = &api.NetworkAttachment{Network: "restore", Bridge: bridge, Subnet: "10.213.4.0/24", Address: "10.213.4.11"}
	e.apply(t, a)
	e.waitLogs(t, a.ID, "inet 10.213.4.11/24")
	pid := e.pid(t, a.ID)
	if err := e.p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	// The reboot: the task, the namespace's mount and the bridge go;
	// containerd keeps the container.
	ctx := e.p.nsCtx(e.ctx(t))
	c, err := client.New(DefaultAddress, client.WithDefaultNamespace(e.ns))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctr, err := c.LoadContainer(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	task, err := ctr.Task(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := task.Delete(ctx, client.WithProcessKill); err != nil {
		t.Fatalf("delete task: %v", err)
	}
	if err := removeNetNS(e.p.network.netnsPath(a.ID)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "veth gone with its namespace", func() (bool, string) {
		ports, err := readBridge(bridge)
		return err == nil && len(ports) == 0, fmt.Sprintf("ports %v, %v", ports, err)
	})
	if err := deleteLink(bridge); err != nil {
		t.Fatal(err)
	}

	e.p = e.open(t, e.p.cfg)
	st := e.waitStatus(t, a.ID, "restarted", func(st api.AssignmentStatus) bool { return st.Phase == api.PhaseReady && st.Restarts == 1 })
	if st.Address != "10.213.4.11" {
		t.Errorf("restarted: got address %q; want 10.213.4.11", st.Address)
	}
	if e.pid(t, a.ID) == pid {
		t.Errorf("restarted: got the old task's pid; want a new task")
	}
	eventually(t, "the new task reports its address", func() (bool, string) {
		logs := e.logs(t, a.ID)
		return strings.Count(logs, "inet 10.213.4.11/24") == 2, logs
	})
	if ports, err := readBridge(bridge); err != nil || len(ports) != 1 {
		t.Errorf("bridge %s: got ports %v, %v; want the replica's veth", bridge, ports, err)
	}
	if err := e.p.Delete(e.ctx(t), a, time.Second); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	e.checkGone(t, a.ID)
	if _, err := readBridge(bridge); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bridge %s: got %v; want it removed", bridge, err)
	}
}

// TestNetworkServiceFiles checks the paths and files the network
// service keeps for a replica and its check of host ports, without
// making a namespace.
func TestNetworkServiceFiles(t *testing.T) {
	cfg := Config{
		Namespace: "strata-test", NetNSDir: "/run/netns", CNIConfDir: t.TempDir(), StateDir: t.TempDir(),
		HostPorts: "30000-30010",
	}
	nw, err := newNetworkService(cfg, slog.New(slog.DiscardHandler), hostpolicy.MustParsePorts("30005"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := nw.netnsPath("r1"), "/run/netns/strata-test-r1"; got != want {
		t.Errorf("netnsPath: got %s; want %s", got, want)
	}
	if got, want := nw.conflistPath("r1"), filepath.Join(cfg.CNIConfDir, "r1.conflist"); got != want {
		t.Errorf("conflistPath: got %s; want %s", got, want)
	}
	if got, want := nw.usernsPath("r1"), filepath.Join(cfg.StateDir, "userns", "strata-test-r1"); got != want {
		t.Errorf("usernsPath: got %s; want %s", got, want)
	}

	a := &api.Assignment{ID: "r1", Network: &api.NetworkAttachment{Address: "10.1.0.7"}}
	files, err := nw.writeNetworkFiles(a)
	if err != nil {
		t.Fatal(err)
	}
	if files.hosts != nw.hostsPath("r1") || files.resolv != "" {
		t.Errorf("network files without a resolver: got %+v; want the hosts file and the node's resolv.conf", files)
	}
	b, err := os.ReadFile(files.hosts)
	if err != nil || !strings.Contains(string(b), "10.1.0.7\tr1\n") || !strings.Contains(string(b), "127.0.0.1\tlocalhost\n") {
		t.Errorf("hosts file: got %q, %v; want localhost and 10.1.0.7 r1", b, err)
	}
	checkMounts := func(mounts []specs.Mount, resolv string) {
		t.Helper()
		if len(mounts) != 2 || mounts[0].Destination != "/etc/hosts" || mounts[0].Source != files.hosts ||
			mounts[1].Destination != "/etc/resolv.conf" || mounts[1].Source != resolv {
			t.Errorf("network mounts with an address: got %+v; want hosts and resolv.conf from %s", mounts, resolv)
		}
	}
	checkMounts(networkMounts(a, files), "/etc/resolv.conf")
	// A pod's other containers mount what its main one does.
	checkMounts(networkMounts(a, networkFilesOf(networkMounts(a, files))), "/etc/resolv.conf")
	if _, err := os.Stat(nw.resolvPath("r1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("resolv file without a resolver: got %v; want none", err)
	}
	if err := nw.refreshResolv(a); err != nil {
		t.Errorf("refreshResolv without a resolver: %v", err)
	}

	// With a resolver: a file of its own, 0644, mounted instead of the
	// node's.
	a.Network.DNS = &api.DNSConfig{Nameservers: []string{"10.1.0.1"}, Search: []string{"web.acme.svc"}, Options: []string{"ndots:2"}}
	if files, err = nw.writeNetworkFiles(a); err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cfg.StateDir, "resolv", "r1"); files.resolv != want {
		t.Errorf("resolv file: got %q; want %q", files.resolv, want)
	}
	const wantResolv = "nameserver 10.1.0.1\nsearch web.acme.svc\noptions ndots:2\n"
	checkResolv := func(want string) {
		t.Helper()
		b, err := os.ReadFile(files.resolv)
		if err != nil || string(b) != want {
			t.Errorf("resolv file: got %q, %v; want %q", b, err, want)
		}
		if fi, err := os.Stat(files.resolv); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("resolv file mode: got %v, %v; want 0644", fi.Mode().Perm(), err)
		}
	}
	checkResolv(wantResolv)
	checkMounts(networkMounts(a, files), files.resolv)
	checkMounts(networkMounts(a, networkFilesOf(networkMounts(a, files))), files.resolv)

	// A kept container's file is rewritten in place: same inode, which
	// its bind mount pins.
	before, err := os.Stat(files.resolv)
	if err != nil {
		t.Fatal(err)
	}
	a.Network.DNS = &api.DNSConfig{Nameservers: []string{"10.1.0.1", "10.1.0.2"}}
	if err := nw.refreshResolv(a); err != nil {
		t.Fatal(err)
	}
	checkResolv("nameserver 10.1.0.1\nnameserver 10.1.0.2\n")
	if after, err := os.Stat(files.resolv); err != nil || !os.SameFile(before, after) {
		t.Errorf("refreshResolv replaced the file (%v); want it rewritten in place", err)
	}
	// Never the node's: a replica without a file of its own is left alone.
	other := &api.Assignment{ID: "r2", Network: &api.NetworkAttachment{Address: "10.1.0.8", DNS: a.Network.DNS}}
	if err := nw.refreshResolv(other); err != nil {
		t.Errorf("refreshResolv without a file: %v", err)
	}
	if _, err := os.Stat(nw.resolvPath("r2")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refreshResolv without a file: got %v; want none written", err)
	}

	// Without an address (no namespace of its own) no resolv.conf is
	// mounted, resolver or not.
	noAddr := &api.Assignment{ID: "r3", Network: &api.NetworkAttachment{DNS: a.Network.DNS}}
	nf, err := nw.writeNetworkFiles(noAddr)
	if err != nil || nf.resolv != "" {
		t.Errorf("network files without an address: got %+v, %v; want no resolv file", nf, err)
	}
	if mounts := networkMounts(noAddr, nf); len(mounts) != 1 {
		t.Errorf("network mounts without an address: got %+v; want the hosts file", mounts)
	}

	// Removed with the replica.
	if err := nw.removeNetworkFiles("r1"); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{nw.hostsPath("r1"), nw.resolvPath("r1")} {
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after removeNetworkFiles: got %v; want it removed", path, err)
		}
	}
	// A new container without a resolver drops a stale file.
	a.Network.DNS = &api.DNSConfig{Nameservers: []string{"10.1.0.1"}}
	if _, err := nw.writeNetworkFiles(a); err != nil {
		t.Fatal(err)
	}
	a.Network.DNS = nil
	if _, err := nw.writeNetworkFiles(a); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(nw.resolvPath("r1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("resolv file after a container without a resolver: got %v; want it removed", err)
	}

	withPorts := func(hostPorts ...int) *api.Assignment {
		c := &api.ComputeSpec{}
		for _, hp := range hostPorts {
			c.Ports = append(c.Ports, api.PortSpec{ContainerPort: 80, HostPort: hp})
		}
		return &api.Assignment{ID: "r1", Spec: api.ResourceSpec{Compute: c}}
	}
	if err := nw.checkHostPorts(withPorts(30001, 30010)); err != nil {
		t.Errorf("allowed host ports: %v", err)
	}
	for _, hp := range []int{30005, 30011, 80} {
		if err := nw.checkHostPorts(withPorts(hp)); err == nil {
			t.Errorf("host port %d: got no error; want it refused", hp)
		}
	}
}

// TestReplicaResolver checks that a replica with a resolver reads its own
// resolv.conf, that a change of resolver reaches it without a new
// container, and that deleting it removes the file.
func TestReplicaResolver(t *testing.T) {
	e := newEnv(t)
	const bridge = "st-test7"
	freshBridge(t, bridge)
	id := "dns-" + randomSuffix(t)
	a := e.assignment(id, "sh", "-c", `trap 'exit 0' TERM; while true; do cat /etc/resolv.conf; sleep 0.1; done & wait`)
	a.Network = &api.NetworkAttachment{Network: "test", Bridge: bridge, Subnet: "10.213.7.0/24", Gateway: "10.213.7.1", Address: "10.213.7.11",
		DNS: &api.DNSConfig{Nameservers: []string{"10.213.7.1"}, Search: []string{"web.acme.svc"}, Options: []string{"ndots:2"}}}
	if st := e.apply(t, a); st.Phase != api.PhaseReady {
		t.Fatalf("Apply: got phase %s (%s); want ready", st.Phase, st.Reason)
	}
	e.waitLogs(t, id, "nameserver 10.213.7.1", "search web.acme.svc", "options ndots:2")
	before, err := e.p.tasks.container(e.ctx(t), id)
	if err != nil || before == nil {
		t.Fatalf("container: %v, %v", before, err)
	}

	next := *a
	nw := *a.Network
	nw.DNS = &api.DNSConfig{Nameservers: []string{"10.213.7.53"}}
	next.Network, next.Generation = &nw, 2
	if _, err := e.p.Apply(e.ctx(t), &next); err != nil {
		t.Fatalf("Apply with another resolver: %v", err)
	}
	e.waitLogs(t, id, "nameserver 10.213.7.53")
	after, err := e.p.tasks.container(e.ctx(t), id)
	if err != nil || after == nil || !after.CreatedAt.Equal(before.CreatedAt) || after.Labels[labelStarted] != before.Labels[labelStarted] {
		t.Errorf("container after a change of resolver: got %+v, %v; want the one created before", after, err)
	}

	if err := e.p.Delete(e.ctx(t), a, time.Second); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := os.Stat(e.p.network.resolvPath(id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("resolv file after Delete: got %v; want it removed", err)
	}
}
