package containerd

import (
	"fmt"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// User namespaces (Config.UserNamespace). Every replica gets a user
// namespace of its own in which uids and gids 0 to size-1 are the
// host's hostID to hostID+size-1: root in the container is an
// unprivileged user on the node. The range is the node's, shared by
// its replicas (what differs per replica is the namespace).
//
// The network namespace is what makes it work with runc 1.1: mounting
// sysfs needs CAP_SYS_ADMIN over the user namespace that owns the
// network namespace, so a container in a new user namespace cannot
// mount /sys in a network namespace made by the host. As containerd 2's
// CRI plugin does, the provider makes the network namespace inside a
// new user namespace (a stopped process holds both while they are
// bind-mounted, see holdNamespaces), pins that user namespace, and the container joins both
// by path: its init, root in the namespace that owns the network, mounts
// sysfs as usual. The root filesystem is the image's chowned into the
// range once per image (runc 1.1 has no idmapped mounts): a committed
// snapshot that the image's config references, so that it lives as
// long as the image.

// labelUserns on a container is the range it was made with,
// "hostID:size": its restarts rebuild its namespaces alike whatever the
// configuration says now.
const labelUserns = "strata.io/userns"

// idRange is the host ids that ids 0 to size-1 of a user namespace are.
type idRange struct{ hostID, size uint32 }

func (r idRange) String() string { return fmt.Sprintf("%d:%d", r.hostID, r.size) }

// toHost maps id into the range; false when it is outside.
func (r idRange) toHost(id uint32) (uint32, bool) {
	if id >= r.size {
		return 0, false
	}
	return r.hostID + id, true
}

// mapping is the range as the OCI runtime spec (and /proc/pid/uid_map)
// says it.
func (r idRange) mapping() []specs.LinuxIDMapping {
	return []specs.LinuxIDMapping{{ContainerID: 0, HostID: r.hostID, Size: r.size}}
}

// usernsOfLabels reads labelUserns; nil when the container has no user
// namespace (or a label this provider cannot read, which it never
// writes).
func usernsOfLabels(labels map[string]string) *idRange {
	host, size, ok := strings.Cut(labels[labelUserns], ":")
	if !ok {
		return nil
	}
	h, err1 := strconv.ParseUint(host, 10, 32)
	s, err2 := strconv.ParseUint(size, 10, 32)
	if err1 != nil || err2 != nil {
		return nil
	}
	return &idRange{hostID: uint32(h), size: uint32(s)}
}
