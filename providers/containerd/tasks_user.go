package containerd

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/stratahq/strata/internal/api"
)

// errUser is the class of a replica refused for the user it would run
// as: its reason names securityContext.
var errUser = errors.New("securityContext")

// withUser sets the process's user from sc over the image's USER,
// which oci.WithImageConfig set before, as Kubernetes does: runAsUser
// replaces the uid (its primary gid then the one of the image's
// /etc/passwd, else 0), runAsGroup the primary gid; the supplementary
// groups are the user's in the image's /etc/group.
func withUser(sc *api.SecurityContext) oci.SpecOpts {
	return func(ctx context.Context, cl oci.Client, c *containers.Container, s *oci.Spec) error {
		if sc == nil || (sc.RunAsUser == nil && sc.RunAsGroup == nil) {
			return nil
		}
		if s.Process == nil {
			s.Process = &specs.Process{}
		}
		uid := strconv.FormatUint(uint64(s.Process.User.UID), 10)
		if sc.RunAsUser != nil {
			uid = strconv.FormatInt(*sc.RunAsUser, 10)
		}
		user := uid
		if sc.RunAsGroup != nil {
			user += ":" + strconv.FormatInt(*sc.RunAsGroup, 10)
		}
		if err := oci.WithUser(user)(ctx, cl, c, s); err != nil {
			return fmt.Errorf("%w: user %s: %w", errUser, user, err)
		}
		return oci.WithAdditionalGIDs(uid)(ctx, cl, c, s)
	}
}

// userPolicy is what a node allows its replicas' users.
type userPolicy struct {
	// refuseRoot refuses a process that would be root on the host.
	refuseRoot bool
	// userns is the node's user namespace range; nil for none.
	userns *idRange
}

// hostIDs maps a process's uid and gid in the container to the host's;
// false when one is outside the user namespace.
func (pol userPolicy) hostIDs(uid, gid uint32) (hostUID, hostGID uint32, ok bool) {
	if pol.userns == nil {
		return uid, gid, true
	}
	hostUID, uok := pol.userns.toHost(uid)
	hostGID, gok := pol.userns.toHost(gid)
	return hostUID, hostGID, uok && gok
}

// checkUser refuses, once the spec is complete, a process that would
// run as root: uid 0 in the container with sc.RunAsNonRoot, uid 0 on the
// host on a node with refuseRoot (never, in a user namespace); and one
// whose ids its user namespace does not map.
func checkUser(sc *api.SecurityContext, pol userPolicy) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		var uid, gid uint32
		if s.Process != nil {
			uid, gid = s.Process.User.UID, s.Process.User.GID
		}
		hostUID, _, ok := pol.hostIDs(uid, gid)
		if !ok {
			return fmt.Errorf("%w: user %d:%d is outside this node's user namespace (ids 0-%d)", errUser, uid, gid, pol.userns.size-1)
		}
		explicit := sc != nil && sc.RunAsUser != nil
		switch {
		case uid == 0 && sc != nil && sc.RunAsNonRoot:
			// runAsUser 0 with runAsNonRoot is refused by the API:
			// here the image's user is root.
			return fmt.Errorf("%w: container has runAsNonRoot and image will run as root (uid 0): set runAsUser, or an image whose USER is not root", errUser)
		case hostUID == 0 && pol.refuseRoot && explicit:
			return fmt.Errorf("%w: container's runAsUser 0 breaks this node's non-root policy (refuseRoot): set a runAsUser other than 0", errUser)
		case hostUID == 0 && pol.refuseRoot:
			return fmt.Errorf("%w: container would run as root (the image's user is uid 0) and this node refuses root containers (refuseRoot): set runAsUser, or an image whose USER is not root", errUser)
		}
		return nil
	}
}
