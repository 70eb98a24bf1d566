package containerd

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/containernetworking/cni/libcni"
	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/internal/api"
)

// cniVersion is the newest version Debian's plugins (1.1) speak.
const cniVersion = "1.0.0"

// ifName is the replica's interface in its network namespace.
const ifName = "eth0"

// loopbackNetwork names the conflist of replicas without a network.
const loopbackNetwork = "strata-loopback"

// netnsName is the replica's network namespace under NetNSDir: the
// namespace prefix keeps agents sharing a host apart.
func (p *Provider) netnsName(id string) string { return p.cfg.Namespace + "-" + id }

func (p *Provider) netnsPath(id string) string {
	return filepath.Join(p.cfg.NetNSDir, p.netnsName(id))
}

func (p *Provider) conflistPath(id string) string {
	return filepath.Join(p.cfg.CNIConfDir, id+".conflist")
}

func (p *Provider) cniCacheDir() string { return filepath.Join(p.cfg.StateDir, "cni", "cache") }

func (p *Provider) cni() *libcni.CNIConfig {
	return libcni.NewCNIConfigWithCacheDir([]string{p.cfg.CNIBinDir}, p.cniCacheDir(), nil)
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

// setupNetwork creates the replica's network namespace and runs CNI ADD
// in it. It returns the namespace's path for the container's spec.
// Leftovers of an earlier attempt are removed first.
func (p *Provider) setupNetwork(ctx context.Context, a *api.Assignment) (string, error) {
	cl, err := buildConflist(a)
	if err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(cl, "", "  ")
	if err != nil {
		return "", fmt.Errorf("conflist: %w", err)
	}
	if err := p.teardownNetwork(ctx, a.ID); err != nil {
		return "", fmt.Errorf("clean up earlier network: %w", err)
	}
	// Written before ADD: a DEL must be possible for whatever ADD did.
	if err := writeFileAtomic(p.conflistPath(a.ID), b); err != nil {
		return "", fmt.Errorf("conflist: %w", err)
	}
	if err := p.attach(ctx, a.ID, b, p.userns); err != nil {
		if terr := p.teardownNetwork(context.WithoutCancel(ctx), a.ID); terr != nil {
			p.log.Warn("clean up failed network", "id", a.ID, "err", terr)
		}
		return "", err
	}
	return p.netnsPath(a.ID), nil
}

// restoreNetwork makes the network namespace of a replica whose task is
// about to start again exist and be attached, from its saved conflist:
// a reboot (or someone) removed it, while containerd kept the container
// that names it. userns is the user namespace the container was made
// with (its label), whatever the configuration says now.
func (p *Provider) restoreNetwork(ctx context.Context, id string, userns *idRange) error {
	nsPath := p.netnsPath(id)
	if isNetNS(nsPath) && (userns == nil || isNS(p.usernsPath(id))) {
		return nil
	}
	b, err := os.ReadFile(p.conflistPath(id))
	if err != nil {
		return fmt.Errorf("network of %s is gone and cannot be restored: %w", id, err)
	}
	p.log.Info("network namespace missing; attaching a new one", "id", id)
	// Whatever the lost attachment left on the host (NAT rules, cached
	// result) goes first.
	if err := p.detach(ctx, id, b); err != nil {
		p.log.Warn("clean up lost network", "id", id, "err", err)
	}
	if err := p.removeNamespaces(id); err != nil {
		return err
	}
	if err := p.attach(ctx, id, b, userns); err != nil {
		if rerr := p.removeNamespaces(id); rerr != nil {
			p.log.Warn("clean up failed network", "id", id, "err", rerr)
		}
		return err
	}
	return nil
}

// attach creates the replica's network namespace (owned by a user
// namespace of userns when not nil) and runs CNI ADD of conflist b in
// it; on failure the caller cleans up.
func (p *Provider) attach(ctx context.Context, id string, b []byte, userns *idRange) error {
	var cl conflist
	if err := json.Unmarshal(b, &cl); err != nil {
		return fmt.Errorf("conflist: %w", err)
	}
	list, err := libcni.ConfListFromBytes(b)
	if err != nil {
		return fmt.Errorf("conflist: %w", err)
	}
	nsPath := p.netnsPath(id)
	if err := p.createNetNS(id, userns); err != nil {
		return err
	}
	rt := &libcni.RuntimeConf{ContainerID: id, NetNS: nsPath, IfName: ifName}
	add := func() error {
		_, err := p.cni().AddNetworkList(ctx, list, rt)
		return err
	}
	if br := cl.bridge(); br != "" {
		err = p.withBridgeLock(br, add)
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
func (p *Provider) detach(ctx context.Context, id string, b []byte) error {
	var cl conflist
	if err := json.Unmarshal(b, &cl); err != nil {
		return fmt.Errorf("conflist %s: %w", p.conflistPath(id), err)
	}
	list, err := libcni.ConfListFromBytes(b)
	if err != nil {
		return fmt.Errorf("conflist %s: %w", p.conflistPath(id), err)
	}
	// DEL needs the namespace (plugins tear down what is inside it) but
	// must also succeed when it is gone already.
	nsPath := p.netnsPath(id)
	if !isNetNS(nsPath) {
		nsPath = ""
	}
	rt := &libcni.RuntimeConf{ContainerID: id, NetNS: nsPath, IfName: ifName}
	del := func() error {
		if err := p.cni().DelNetworkList(ctx, list, rt); err != nil {
			return fmt.Errorf("cni del (%s): %w", cl.Name, err)
		}
		if br := cl.bridge(); br != "" {
			return p.removeBridgeIfUnused(br)
		}
		return nil
	}
	if br := cl.bridge(); br != "" {
		return p.withBridgeLock(br, del)
	}
	return del()
}

// teardownNetwork detaches the replica, removes its network namespace
// and its conflist. Nothing to remove is not an error.
func (p *Provider) teardownNetwork(ctx context.Context, id string) error {
	var errs []error
	b, err := os.ReadFile(p.conflistPath(id))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		errs = append(errs, err)
	default:
		if err := p.detach(ctx, id, b); err != nil {
			errs = append(errs, err)
			break
		}
		if err := os.Remove(p.conflistPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := p.removeNamespaces(id); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeNamespaces removes the replica's network namespace and the pin
// of the user namespace that owns it, if any.
func (p *Provider) removeNamespaces(id string) error {
	return errors.Join(removeNetNS(p.netnsPath(id)), removeNetNS(p.usernsPath(id)))
}

// withBridgeLock runs fn holding a host-wide lock on bridge: a replica
// of another agent must not see its bridge vanish between the bridge
// plugin creating it and attaching its veth.
func (p *Provider) withBridgeLock(bridge string, fn func() error) error {
	if err := os.MkdirAll(p.cfg.LockDir, 0o755); err != nil {
		return fmt.Errorf("lock dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(p.cfg.LockDir, "bridge-"+bridge+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
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
func (p *Provider) removeBridgeIfUnused(bridge string) error {
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
	p.log.Info("removed unused bridge", "bridge", bridge)
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

// createNetNS creates the network namespace of replica id bound to its
// path, as `ip netns add` does: a thread unshares its network namespace
// and bind-mounts it onto an empty file, which keeps it alive without a
// process. With userns, the namespace is made inside a new user
// namespace of that range instead (see createUsernsNetNS).
func (p *Provider) createNetNS(id string, userns *idRange) error {
	if err := p.prepareNetNSDir(); err != nil {
		return err
	}
	path := p.netnsPath(id)
	if err := createEmpty(path); err != nil {
		return fmt.Errorf("netns %s: %w", path, err)
	}
	if userns != nil {
		return p.createUsernsNetNS(id, *userns)
	}
	errc := make(chan error, 1)
	go func() {
		// The thread's namespace changes, so it must never run another
		// goroutine: staying locked makes the runtime end the thread
		// with this goroutine. The main thread is not ended but parked,
		// so the thread also returns to its namespace: parked in the
		// new one, it would keep that alive after its unmount.
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid()))
		if err != nil {
			errc <- fmt.Errorf("current namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		err = unix.Mount(self, path, "none", unix.MS_BIND, "")
		if err != nil {
			err = fmt.Errorf("bind mount: %w", err)
		}
		if serr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); serr != nil {
			err = errors.Join(err, fmt.Errorf("return to the host namespace: %w", serr))
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		removeNetNS(path) //nolint:errcheck // the error that matters is err
		return fmt.Errorf("netns %s: %w", path, err)
	}
	return nil
}

// createEmpty creates the empty file a namespace is bind-mounted on.
func createEmpty(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return err
	}
	return f.Close()
}

// prepareNetNSDir makes NetNSDir a shared mount point, as iproute2 does,
// so that namespaces mounted later propagate into mount namespaces
// copied before (and their unmounts too).
func (p *Provider) prepareNetNSDir() error {
	p.netnsDirOnce.Do(func() { p.netnsDirErr = makeSharedDir(p.cfg.NetNSDir) })
	return p.netnsDirErr
}

// makeSharedDir makes dir a shared mount point (see prepareNetNSDir).
func makeSharedDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("namespace dir: %w", err)
	}
	err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if errors.Is(err, unix.EINVAL) {
		// Not a mount point yet: make it one.
		if err = unix.Mount(dir, dir, "none", unix.MS_BIND|unix.MS_REC, ""); err == nil {
			err = unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
		}
	}
	if err != nil {
		return fmt.Errorf("namespace dir %s: make shared mount: %w", dir, err)
	}
	return nil
}

// removeNetNS unmounts and removes a namespace file; absent is fine.
func removeNetNS(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove netns %s: %w", path, err)
	}
	return nil
}

// isNetNS reports whether path is a mounted network namespace.
func isNetNS(path string) bool { return isNS(path) }

// isNS reports whether path is a mounted namespace.
func isNS(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false
	}
	return st.Type == unix.NSFS_MAGIC
}

func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
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
