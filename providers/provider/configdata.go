package provider

import (
	"context"

	"github.com/stratahq/strata/internal/api"
)

// ConfigData is what one Apply needs of the Configs and Secrets its
// assignment names, fetched by the agent from its region (which asked
// the global tier) for this Apply only: the agent keeps none of it, and
// a provider writes what it must to the node (files) with modes that
// only root reads.
type ConfigData struct {
	// Env are the variables of the spec's envFrom, over its env.
	Env map[string]string
	// Files are the files of the spec's files mounts.
	Files []File
	// PullAuth are the registry credentials of the spec's pullSecret.
	PullAuth *RegistryAuth
}

// File is one key of a mounted Config or Secret.
type File struct {
	// Dir is the mount's path in the replica; Name the key.
	Dir, Name string
	Data      []byte
	// Secret files are mode 0400, Config files 0444.
	Secret bool
}

// RegistryAuth are the credentials of one registry, from a registry
// Secret. String never shows the password.
type RegistryAuth struct {
	Host, Username, Password string
}

func (r *RegistryAuth) String() string { return r.Username + "@" + r.Host }

// ConfigApplier is a provider that can give a replica Configs and
// Secrets (files, environment, pull credentials). The agent refuses an
// assignment that names any to a provider without it, with a clear
// status, rather than ignoring them.
type ConfigApplier interface {
	ApplyConfig(ctx context.Context, a *api.Assignment, d *ConfigData) (api.AssignmentStatus, error)
}

// ApplyConfig forwards to the wrapped provider, or ErrUnsupported.
func (i *instrumented) ApplyConfig(ctx context.Context, a *api.Assignment, d *ConfigData) (api.AssignmentStatus, error) {
	ca, ok := i.p.(ConfigApplier)
	if !ok {
		return api.AssignmentStatus{}, ErrUnsupported
	}
	return timed(i, "apply", func() (api.AssignmentStatus, error) { return ca.ApplyConfig(ctx, a, d) })
}

var _ ConfigApplier = (*instrumented)(nil)
