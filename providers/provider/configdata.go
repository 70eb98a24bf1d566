package provider

import (
	"context"
	"fmt"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/proto/apiproto"
	providerv1 "github.com/stratahq/strata/proto/provider/v1"
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
	// Containers are the data of a pod's other containers, init
	// containers and sidecars, by name: those whose files or envFrom
	// name Configs or Secrets (one without keeps its spec's env). Left
	// out of the JSON when empty, so that a provider's digest of the
	// data of a replica without them does not change.
	Containers map[string]ContainerData `json:",omitempty"`
}

// ContainerData is what one pod container beside the main one gets of
// the Configs and Secrets, as ConfigData's Env and Files for the main
// container.
type ContainerData struct {
	// Env are the variables of the container's envFrom, over its env.
	Env map[string]string
	// Files are the files of the container's files mounts.
	Files []File
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

// ApplyConfig implements ConfigApplier over the wire: the data rides on
// the Apply call (the plugin's unix socket is the agent's only). A
// plugin that cannot take it answers ErrUnsupported.
func (c *Client) ApplyConfig(ctx context.Context, a *api.Assignment, d *ConfigData) (api.AssignmentStatus, error) {
	if a == nil {
		return api.AssignmentStatus{}, api.Invalid("assignment", "is required")
	}
	resp, err := c.rpc.Apply(ctx, &providerv1.ApplyRequest{Assignment: apiproto.AssignmentToPB(a), Config: configDataToPB(d)})
	if err != nil {
		return api.AssignmentStatus{}, callError("apply "+a.ID, err)
	}
	return apiproto.AssignmentStatusFromPB(resp.GetStatus()), nil
}

var _ ConfigApplier = (*Client)(nil)

// applyWith is the server's Apply of a with the request's config data,
// if any.
func applyWith(ctx context.Context, p Provider, a *api.Assignment, pb *providerv1.ConfigData) (api.AssignmentStatus, error) {
	if pb == nil {
		return p.Apply(ctx, a)
	}
	ca, ok := p.(ConfigApplier)
	if !ok {
		return api.AssignmentStatus{}, fmt.Errorf("apply %s: configs and secrets: %w", a.ID, ErrUnsupported)
	}
	return ca.ApplyConfig(ctx, a, configDataFromPB(pb))
}

func configDataToPB(d *ConfigData) *providerv1.ConfigData {
	if d == nil {
		return nil
	}
	out := &providerv1.ConfigData{Env: d.Env, Files: filesToPB(d.Files)}
	if r := d.PullAuth; r != nil {
		out.PullAuth = &providerv1.RegistryAuth{Host: r.Host, Username: r.Username, Password: r.Password}
	}
	if len(d.Containers) > 0 {
		out.Containers = make(map[string]*providerv1.ContainerConfigData, len(d.Containers))
		for name, c := range d.Containers {
			out.Containers[name] = &providerv1.ContainerConfigData{Env: c.Env, Files: filesToPB(c.Files)}
		}
	}
	return out
}

func configDataFromPB(pb *providerv1.ConfigData) *ConfigData {
	d := &ConfigData{Env: pb.GetEnv(), Files: filesFromPB(pb.GetFiles())}
	if r := pb.GetPullAuth(); r != nil {
		d.PullAuth = &RegistryAuth{Host: r.GetHost(), Username: r.GetUsername(), Password: r.GetPassword()}
	}
	if cs := pb.GetContainers(); len(cs) > 0 {
		d.Containers = make(map[string]ContainerData, len(cs))
		for name, c := range cs {
			d.Containers[name] = ContainerData{Env: c.GetEnv(), Files: filesFromPB(c.GetFiles())}
		}
	}
	return d
}

func filesToPB(files []File) []*providerv1.ConfigFile {
	var out []*providerv1.ConfigFile
	for _, f := range files {
		out = append(out, &providerv1.ConfigFile{Dir: f.Dir, Name: f.Name, Data: f.Data, Secret: f.Secret})
	}
	return out
}

func filesFromPB(files []*providerv1.ConfigFile) []File {
	var out []File
	for _, f := range files {
		out = append(out, File{Dir: f.GetDir(), Name: f.GetName(), Data: f.GetData(), Secret: f.GetSecret()})
	}
	return out
}
