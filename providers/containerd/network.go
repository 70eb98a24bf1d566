package containerd

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/containernetworking/cni/libcni"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/hostpolicy"
)

// networkService owns the replicas' networks: a network namespace each
// under NetNSDir (inside a user namespace of its own with a user
// namespace range), attached by CNI with a conflist generated from the
// assignment and kept in CNIConfDir for its DEL, the bridges that no
// replica uses any more, the replica's /etc/hosts, and the check of the
// host ports it publishes. The namespace directories are prepared once.
type networkService struct {
	cfg   Config
	log   *slog.Logger
	ports hostpolicy.PortPolicy
	// userns is the user namespace range of new replicas (nil: none).
	userns *idRange

	netnsDirOnce  sync.Once
	netnsDirErr   error
	usernsDirOnce sync.Once
	usernsDirErr  error
}

func newNetworkService(cfg Config, log *slog.Logger, reserved hostpolicy.PortRanges) (*networkService, error) {
	hostPorts, err := hostpolicy.ParsePorts(cfg.HostPorts)
	if err != nil {
		return nil, err
	}
	return &networkService{
		cfg:    cfg,
		log:    log,
		ports:  hostpolicy.PortPolicy{Allowed: hostPorts, Reserved: reserved, Privileged: cfg.AllowPrivilegedPorts},
		userns: userRange(cfg),
	}, nil
}

// cniVersion is the newest version Debian's plugins (1.1) speak.
const cniVersion = "1.0.0"

// ifName is the replica's interface in its network namespace.
const ifName = "eth0"

// loopbackNetwork names the conflist of replicas without a network.
const loopbackNetwork = "strata-loopback"

// netnsName is the replica's network namespace under NetNSDir: the
// namespace prefix keeps agents sharing a host apart.
func (nw *networkService) netnsName(id string) string { return nw.cfg.Namespace + "-" + id }

func (nw *networkService) netnsPath(id string) string {
	return filepath.Join(nw.cfg.NetNSDir, nw.netnsName(id))
}

func (nw *networkService) conflistPath(id string) string {
	return filepath.Join(nw.cfg.CNIConfDir, id+".conflist")
}

func (nw *networkService) cniCacheDir() string { return filepath.Join(nw.cfg.StateDir, "cni", "cache") }

func (nw *networkService) cni() *libcni.CNIConfig {
	return libcni.NewCNIConfigWithCacheDir([]string{nw.cfg.CNIBinDir}, nw.cniCacheDir(), nil)
}

// conflist is the CNI configuration of one replica, the subset of the
// format the provider writes and reads back.
type conflist struct {
	CNIVersion string           `json:"cniVersion"`
	Name       string           `json:"name"`
	Plugins    []map[string]any `json:"plugins"`
}

// bridge returns the bridge the conflist attaches to, if any.
func (c *conflist) bridge() string {
	for _, pl := range c.Plugins {
		if pl["type"] == "bridge" {
			b, _ := pl["bridge"].(string)
			return b
		}
	}
	return ""
}

// portMapping is the portmap plugin's runtime configuration.
type portMapping struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol"`
}

// buildConflist generates the CNI configuration of a replica: a bridge
// for its region network with the address the region's IPAM chose
// (static IPAM), loopback, and portmap for host ports; loopback only
// without a network. The port mappings sit in portmap's runtimeConfig,
// so that the file alone is enough for the CNI DEL of an orphan.
func buildConflist(a *api.Assignment) (*conflist, error) {
	lo := map[string]any{"type": "loopback"}
	n := a.Network
	if n == nil || n.Address == "" {
		return &conflist{CNIVersion: cniVersion, Name: loopbackNetwork, Plugins: []map[string]any{lo}}, nil
	}
	if n.Bridge == "" {
		return nil, errors.New("network attachment has no bridge")
	}
	if len(n.Bridge) > unix.IFNAMSIZ-1 {
		return nil, fmt.Errorf("bridge name %q is longer than %d characters", n.Bridge, unix.IFNAMSIZ-1)
	}
	_, subnet, err := net.ParseCIDR(n.Subnet)
	if err != nil {
		return nil, fmt.Errorf("network %s: subnet: %w", n.Network, err)
	}
	ip := net.ParseIP(n.Address)
	if ip == nil {
		addr, _, err := net.ParseCIDR(n.Address)
		if err != nil {
			return nil, fmt.Errorf("network %s: address %q is not an IP", n.Network, n.Address)
		}
		ip = addr
	}
	if !subnet.Contains(ip) {
		return nil, fmt.Errorf("network %s: address %s is outside subnet %s", n.Network, ip, subnet)
	}
	ones, _ := subnet.Mask.Size()
	gw := net.ParseIP(n.Gateway)
	if gw == nil {
		gw = firstHost(subnet)
	}
	defaultRoute := "0.0.0.0/0"
	if ip.To4() == nil {
		defaultRoute = "::/0"
	}
	// No ipMasq: the agent's data plane masquerades what leaves the
	// region network (the plugin's rule would also masquerade traffic to
	// other nodes' blocks, which must keep the replica's address).
	br := map[string]any{
		"type":        "bridge",
		"bridge":      n.Bridge,
		"isGateway":   true,
		"hairpinMode": true,
		"ipam": map[string]any{
			"type":      "static",
			"addresses": []map[string]any{{"address": fmt.Sprintf("%s/%d", ip, ones), "gateway": gw.String()}},
			"routes":    []map[string]any{{"dst": defaultRoute, "gw": gw.String()}},
		},
	}
	if n.MTU > 0 {
		// The replica's veth (and the bridge, if the plugin creates it)
		// leave room for the data plane's encapsulation.
		br["mtu"] = n.MTU
	}
	plugins := []map[string]any{br, lo}
	if pm := portMappings(a); len(pm) > 0 {
		plugins = append(plugins, map[string]any{
			"type":          "portmap",
			"snat":          true,
			"runtimeConfig": map[string]any{"portMappings": pm},
		})
	}
	name := n.Network
	if name == "" {
		name = "strata"
	}
	return &conflist{CNIVersion: cniVersion, Name: name, Plugins: plugins}, nil
}

func portMappings(a *api.Assignment) []portMapping {
	if a.Spec.Compute == nil {
		return nil
	}
	var out []portMapping
	for _, pt := range a.Spec.Compute.Ports {
		if pt.HostPort == 0 {
			continue
		}
		proto := strings.ToLower(pt.Protocol)
		if proto == "" {
			proto = "tcp"
		}
		out = append(out, portMapping{HostPort: pt.HostPort, ContainerPort: pt.ContainerPort, Protocol: proto})
	}
	return out
}

// firstHost is the conventional gateway of a subnet.
func firstHost(n *net.IPNet) net.IP {
	ip := make(net.IP, len(n.IP))
	copy(ip, n.IP)
	ip[len(ip)-1]++
	return ip
}

// setup creates the replica's network namespace and runs CNI ADD
// in it. It returns the namespace's path for the container's spec.
// Leftovers of an earlier attempt are removed first.
func (nw *networkService) setup(ctx context.Context, a *api.Assignment) (string, error) {
	cl, err := buildConflist(a)
	if err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(cl, "", "  ")
	if err != nil {
		return "", fmt.Errorf("conflist: %w", err)
	}
	if err := nw.teardown(ctx, a.ID); err != nil {
		return "", fmt.Errorf("clean up earlier network: %w", err)
	}
	// Written before ADD: a DEL must be possible for whatever ADD did.
	if err := writeFileAtomic(nw.conflistPath(a.ID), b); err != nil {
		return "", fmt.Errorf("conflist: %w", err)
	}
	if err := nw.attach(ctx, a.ID, b, nw.userns); err != nil {
		if terr := nw.teardown(context.WithoutCancel(ctx), a.ID); terr != nil {
			nw.log.Warn("clean up failed network", "id", a.ID, "err", terr)
		}
		return "", err
	}
	return nw.netnsPath(a.ID), nil
}

// restore makes the network namespace of a replica whose task is
// about to start again exist and be attached, from its saved conflist:
// a reboot (or someone) removed it, while containerd kept the container
// that names it. userns is the user namespace the container was made
// with (its label), whatever the configuration says now.
func (nw *networkService) restore(ctx context.Context, id string, userns *idRange) error {
	nsPath := nw.netnsPath(id)
	if isNetNS(nsPath) && (userns == nil || isNS(nw.usernsPath(id))) {
		return nil
	}
	b, err := os.ReadFile(nw.conflistPath(id))
	if err != nil {
		return fmt.Errorf("network of %s is gone and cannot be restored: %w", id, err)
	}
	nw.log.Info("network namespace missing; attaching a new one", "id", id)
	// Whatever the lost attachment left on the host (NAT rules, cached
	// result) goes first.
	if err := nw.detach(ctx, id, b); err != nil {
		nw.log.Warn("clean up lost network", "id", id, "err", err)
	}
	if err := nw.removeNamespaces(id); err != nil {
		return err
	}
	if err := nw.attach(ctx, id, b, userns); err != nil {
		if rerr := nw.removeNamespaces(id); rerr != nil {
			nw.log.Warn("clean up failed network", "id", id, "err", rerr)
		}
		return err
	}
	return nil
}

// attach creates the replica's network namespace (owned by a user
// namespace of userns when not nil) and runs CNI ADD of conflist b in
// it; on failure the caller cleans up.
func (nw *networkService) attach(ctx context.Context, id string, b []byte, userns *idRange) error {
	var cl conflist
	if err := json.Unmarshal(b, &cl); err != nil {
		return fmt.Errorf("conflist: %w", err)
	}
	list, err := libcni.ConfListFromBytes(b)
	if err != nil {
		return fmt.Errorf("conflist: %w", err)
	}
	nsPath := nw.netnsPath(id)
	if err := nw.createNetNS(id, userns); err != nil {
		return err
	}
	rt := &libcni.RuntimeConf{ContainerID: id, NetNS: nsPath, IfName: ifName}
	add := func() error {
		_, err := nw.cni().AddNetworkList(ctx, list, rt)
		return err
	}
	if br := cl.bridge(); br != "" {
		err = nw.withBridgeLock(br, add)
	} else {
		err = add()
	}
	if err != nil {
		return fmt.Errorf("cni add (%s): %w", cl.Name, err)
	}
	return nil
}

// detach runs CNI DEL of conflist b, in the replica's network namespace
// when it still exists, and removes the bridge when no other replica (of
// any agent on this host) is attached to it any more: CNI DEL leaves
// bridges behind.
func (nw *networkService) detach(ctx context.Context, id string, b []byte) error {
	var cl conflist
	if err := json.Unmarshal(b, &cl); err != nil {
		return fmt.Errorf("conflist %s: %w", nw.conflistPath(id), err)
	}
	list, err := libcni.ConfListFromBytes(b)
	if err != nil {
		return fmt.Errorf("conflist %s: %w", nw.conflistPath(id), err)
	}
	// DEL needs the namespace (plugins tear down what is inside it) but
	// must also succeed when it is gone already.
	nsPath := nw.netnsPath(id)
	if !isNetNS(nsPath) {
		nsPath = ""
	}
	rt := &libcni.RuntimeConf{ContainerID: id, NetNS: nsPath, IfName: ifName}
	del := func() error {
		if err := nw.cni().DelNetworkList(ctx, list, rt); err != nil {
			return fmt.Errorf("cni del (%s): %w", cl.Name, err)
		}
		if br := cl.bridge(); br != "" {
			return nw.removeBridgeIfUnused(br)
		}
		return nil
	}
	if br := cl.bridge(); br != "" {
		return nw.withBridgeLock(br, del)
	}
	return del()
}

// teardown detaches the replica, removes its network namespace
// and its conflist. Nothing to remove is not an error.
func (nw *networkService) teardown(ctx context.Context, id string) error {
	var errs []error
	b, err := os.ReadFile(nw.conflistPath(id))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		errs = append(errs, err)
	default:
		if err := nw.detach(ctx, id, b); err != nil {
			errs = append(errs, err)
			break
		}
		if err := os.Remove(nw.conflistPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := nw.removeNamespaces(id); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeNamespaces removes the replica's network namespace and the pin
// of the user namespace that owns it, if any.
func (nw *networkService) removeNamespaces(id string) error {
	return errors.Join(removeNetNS(nw.netnsPath(id)), removeNetNS(nw.usernsPath(id)))
}

// withBridgeLock runs fn holding a host-wide lock on bridge: a replica
// of another agent must not see its bridge vanish between the bridge
// plugin creating it and attaching its veth.
func (nw *networkService) withBridgeLock(bridge string, fn func() error) error {
	if err := os.MkdirAll(nw.cfg.LockDir, 0o755); err != nil {
		return fmt.Errorf("lock dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(nw.cfg.LockDir, "bridge-"+bridge+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("bridge lock: %w", err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("bridge lock: %w", err)
	}
	defer unix.Flock(int(f.Fd()), unix.LOCK_UN) //nolint:errcheck // closing the file unlocks too
	return fn()
}

// removeBridgeIfUnused deletes bridge when it has no port left, unless
// the agent's data plane owns it (its alias says so): that bridge holds
// the node's gateway and routes, and stays. The caller holds the bridge's
// lock.
func (nw *networkService) removeBridgeIfUnused(bridge string) error {
	if alias, _ := os.ReadFile(filepath.Join("/sys/class/net", bridge, "ifalias")); strings.TrimSpace(string(alias)) == api.BridgeAlias {
		return nil
	}
	ports, err := readBridge(bridge)
	if errors.Is(err, os.ErrNotExist) {
		return nil // gone, or not a bridge we can judge
	}
	if err != nil {
		return fmt.Errorf("bridge %s: %w", bridge, err)
	}
	if len(ports) > 0 {
		return nil
	}
	if err := deleteLink(bridge); err != nil {
		return fmt.Errorf("remove bridge %s: %w", bridge, err)
	}
	nw.log.Info("removed unused bridge", "bridge", bridge)
	return nil
}

// deleteLink deletes a network interface by name over rtnetlink (as `ip
// link del` does), without a dependency on iproute2.
func deleteLink(name string) error {
	b, err := os.ReadFile(filepath.Join("/sys/class/net", name, "ifindex"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	index, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("ifindex of %s: %w", name, err)
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink bind: %w", err)
	}
	const hdr, ifinfo = unix.SizeofNlMsghdr, unix.SizeofIfInfomsg
	msg := make([]byte, hdr+ifinfo)
	ne := binary.NativeEndian
	ne.PutUint32(msg[0:4], uint32(len(msg)))
	ne.PutUint16(msg[4:6], unix.RTM_DELLINK)
	ne.PutUint16(msg[6:8], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	ne.PutUint32(msg[8:12], 1) // sequence
	// ifinfomsg: family, pad, type, index, flags, change.
	msg[hdr] = unix.AF_UNSPEC
	ne.PutUint32(msg[hdr+4:hdr+8], uint32(index))
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return fmt.Errorf("netlink receive: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.Header.Type != unix.NLMSG_ERROR || len(m.Data) < 4 {
			continue
		}
		if errno := int32(ne.Uint32(m.Data[0:4])); errno != 0 {
			e := unix.Errno(-errno)
			if e == unix.ENODEV {
				return nil
			}
			return fmt.Errorf("netlink: %w", e)
		}
		return nil
	}
	return errors.New("netlink: no acknowledgement")
}

// readBridge returns the ports of bridge; an error when there is no such
// bridge.
func readBridge(bridge string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join("/sys/class/net", bridge, "brif"))
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out, nil
}

// checkHostPorts refuses host ports outside Config.HostPorts, the node's
// own ports and, unless allowed, privileged ones: a published port is a
// DNAT rule that takes the port from whatever host service has it.
func (nw *networkService) checkHostPorts(a *api.Assignment) error {
	for _, pm := range portMappings(a) {
		if err := nw.ports.Check(pm.HostPort); err != nil {
			return fmt.Errorf("hostPort %d: %w", pm.HostPort, err)
		}
	}
	return nil
}

func (nw *networkService) hostsPath(id string) string {
	return filepath.Join(nw.cfg.StateDir, "hosts", id)
}

// resolvPath is the replica's own resolv.conf, written when its
// assignment carries a resolver (Network.DNS).
func (nw *networkService) resolvPath(id string) string {
	return filepath.Join(nw.cfg.StateDir, "resolv", id)
}

// networkFiles are the files of a replica's network a container mounts:
// its hosts file and its resolv.conf ("": the node's).
type networkFiles struct {
	hosts, resolv string
}

// ownResolver reports whether the replica gets a resolv.conf of its own:
// it has an address (its own namespace) and its assignment a resolver.
func ownResolver(a *api.Assignment) bool {
	return a.Network != nil && a.Network.Address != "" && a.Network.DNS != nil
}

// writeNetworkFiles writes the replica's /etc/hosts and, with a resolver
// of its own, its resolv.conf; without one, a resolv.conf left from an
// earlier container is removed (the new container mounts the node's).
func (nw *networkService) writeNetworkFiles(a *api.Assignment) (networkFiles, error) {
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	if a.Network != nil && a.Network.Address != "" {
		fmt.Fprintf(&b, "%s\t%s\n", a.Network.Address, hostname(a.ID))
	} else {
		fmt.Fprintf(&b, "127.0.1.1\t%s\n", hostname(a.ID))
	}
	files := networkFiles{hosts: nw.hostsPath(a.ID)}
	if err := writeNetworkFile(files.hosts, b.String()); err != nil {
		return networkFiles{}, err
	}
	if !ownResolver(a) {
		return files, removeFiles(nw.resolvPath(a.ID))
	}
	files.resolv = nw.resolvPath(a.ID)
	if err := writeNetworkFile(files.resolv, a.Network.DNS.ResolvConf()); err != nil {
		return networkFiles{}, err
	}
	return files, nil
}

// writeNetworkFile writes a file a container mounts read-only: atomically,
// readable by the container's (perhaps remapped) users.
func writeNetworkFile(path, content string) error {
	if err := writeFileAtomic(path, []byte(content)); err != nil {
		return err
	}
	return os.Chmod(path, 0o644)
}

// removeNetworkFiles removes the files writeNetworkFiles wrote.
func (nw *networkService) removeNetworkFiles(id string) error {
	return removeFiles(nw.hostsPath(id), nw.resolvPath(id))
}

// refreshResolv brings the resolv.conf of a replica whose container is
// kept up to date with its assignment's resolver. A change of resolver
// alone recreates no container (specHash leaves Network.DNS out), so the
// file is rewritten in place: a bind mount pins the inode, and an atomic
// rename would not reach the container. Only a replica that has a file of
// its own (its container mounts it) is touched, never the node's
// resolv.conf; a container made without one keeps the node's until it is
// recreated. Rewriting in place is not atomic: a lookup in the instant
// between truncate and write may read an empty file, once per change of
// resolver.
func (nw *networkService) refreshResolv(a *api.Assignment) error {
	if !ownResolver(a) {
		return nil
	}
	path := nw.resolvPath(a.ID)
	have, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	want := a.Network.DNS.ResolvConf()
	if err != nil || string(have) == want {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(want); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// networkMounts are the files a container's network needs: its hosts
// file and, with an address of its own, a resolv.conf: the replica's own
// (files.resolv) or else the node's.
func networkMounts(a *api.Assignment, files networkFiles) []specs.Mount {
	mounts := []specs.Mount{{Destination: "/etc/hosts", Type: "bind", Source: files.hosts, Options: []string{"rbind", "ro"}}}
	if a.Network != nil && a.Network.Address != "" {
		resolv := files.resolv
		if resolv == "" {
			resolv = "/etc/resolv.conf"
		}
		mounts = append(mounts, specs.Mount{Destination: "/etc/resolv.conf", Type: "bind", Source: resolv, Options: []string{"rbind", "ro"}})
	}
	return mounts
}

// condition checks the plugins the generated conflists use: bridge,
// static and loopback are needed by every replica (Error when missing),
// portmap only by host ports and iptables by the bridge's masquerading
// (Warning).
func (nw *networkService) condition() api.Condition {
	var missing, optional []string
	for _, name := range []string{"bridge", "static", "loopback"} {
		if !isExecutable(filepath.Join(nw.cfg.CNIBinDir, name)) {
			missing = append(missing, name)
		}
	}
	if !isExecutable(filepath.Join(nw.cfg.CNIBinDir, "portmap")) {
		optional = append(optional, "portmap (host ports)")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		optional = append(optional, "iptables (masquerading, host ports)")
	}
	switch {
	case len(missing) > 0:
		return api.Condition{Type: api.ConditionCNI, Status: api.ConditionError, Reason: "PluginsMissing",
			Message: fmt.Sprintf("CNI plugins missing in %s: %s (install containernetworking-plugins)", nw.cfg.CNIBinDir, strings.Join(missing, ", "))}
	case len(optional) > 0:
		return api.Condition{Type: api.ConditionCNI, Status: api.ConditionWarning, Reason: "PluginsMissing",
			Message: "missing: " + strings.Join(optional, ", ")}
	}
	return api.Condition{Type: api.ConditionCNI, Status: api.ConditionReady, Reason: "PluginsPresent",
		Message: fmt.Sprintf("bridge, static, loopback and portmap in %s (cniVersion %s)", nw.cfg.CNIBinDir, cniVersion)}
}
