package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/stratahq/strata/internal/api"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/providers/provider"
)

// configFetcher owns the data of Configs and Secrets on their way to a
// provider: it fetches them from the region (GetConfigData) for one
// Apply and keeps none of it.
type configFetcher struct {
	node string
	// client is the region's AgentService; nil before the agent is
	// connected.
	client agentv1.AgentServiceClient
}

// apply applies asg with its provider. An assignment that names Configs
// or Secrets gets their data fetched from the region first, for this
// Apply only (the agent keeps none of it), and goes to a provider that
// can take it; one that cannot answers with an error status rather than
// running the replica without them.
func (f *configFetcher) apply(ctx context.Context, e *providerEntry, asg *api.Assignment) (api.AssignmentStatus, error) {
	c := asg.Spec.Compute
	if c == nil || len(c.Refs()) == 0 {
		return e.p.Apply(ctx, asg)
	}
	ca, ok := e.p.(provider.ConfigApplier)
	if !ok {
		return unsupportedConfigs(e.name), nil
	}
	d, err := f.fetch(ctx, asg)
	if err != nil {
		return api.AssignmentStatus{}, err // retried with the queue's backoff
	}
	st, err := ca.ApplyConfig(ctx, asg, d)
	if errors.Is(err, provider.ErrUnsupported) {
		return unsupportedConfigs(e.name), nil
	}
	return st, err
}

func unsupportedConfigs(name string) api.AssignmentStatus {
	return api.AssignmentStatus{Phase: api.PhaseError, Reason: fmt.Sprintf("provider %s does not support configs and secrets (files, envFrom, pullSecret)", name)}
}

// fetch asks the region for the data asg's spec names and
// arranges it for the provider. Errors name configs, secrets and keys,
// never a value.
func (f *configFetcher) fetch(ctx context.Context, asg *api.Assignment) (*provider.ConfigData, error) {
	if f.client == nil {
		return nil, errors.New("configs and secrets: not connected to the region")
	}
	resp, err := f.client.GetConfigData(ctx, &agentv1.GetConfigDataRequest{Node: f.node, AssignmentId: asg.ID})
	if err != nil {
		return nil, fmt.Errorf("configs and secrets: %w", err)
	}
	got := map[api.ConfigRef]*agentv1.ConfigData{}
	for _, it := range resp.GetItems() {
		ref := api.ConfigRef{Config: it.GetName()}
		if it.GetKind() == "secret" {
			ref = api.ConfigRef{Secret: it.GetName()}
		}
		got[ref] = it
	}
	return buildConfigData(asg.Spec.Compute, got)
}

// buildConfigData turns the fetched data into files, variables and pull
// credentials, as c says: the main container's, and those of each pod
// container whose files or envFrom name Configs or Secrets, by the same
// rules (envFrom over env, files per mount path).
func buildConfigData(c *api.ComputeSpec, got map[api.ConfigRef]*agentv1.ConfigData) (*provider.ConfigData, error) {
	lookup := func(r api.ConfigRef) (map[string]string, error) {
		it, ok := got[r]
		if !ok {
			return nil, fmt.Errorf("%s %q: the region did not send it", r.Kind(), r.Name())
		}
		return it.GetData(), nil
	}
	main, err := containerData(c.Env, c.Files, c.EnvFrom, lookup)
	if err != nil {
		return nil, err
	}
	d := &provider.ConfigData{Env: main.Env, Files: main.Files}
	for _, ct := range slices.Concat(c.InitContainers, c.Containers) {
		if len(ct.Files) == 0 && len(ct.EnvFrom) == 0 {
			continue
		}
		cd, err := containerData(ct.Env, ct.Files, ct.EnvFrom, lookup)
		if err != nil {
			return nil, fmt.Errorf("container %s: %w", ct.Name, err)
		}
		if d.Containers == nil {
			d.Containers = map[string]provider.ContainerData{}
		}
		d.Containers[ct.Name] = cd
	}
	if c.PullSecret != "" {
		data, err := lookup(api.ConfigRef{Secret: c.PullSecret})
		if err != nil {
			return nil, err
		}
		d.PullAuth = &provider.RegistryAuth{Host: data[api.RegistryKeyHost], Username: data[api.RegistryKeyUsername], Password: data[api.RegistryKeyPassword]}
	}
	return d, nil
}

// containerData is one container's files (each key of each mount, in
// key order) and variables (envFrom over env).
func containerData(env map[string]string, files []api.FileMount, envFrom []api.EnvSource, lookup func(api.ConfigRef) (map[string]string, error)) (provider.ContainerData, error) {
	d := provider.ContainerData{Env: maps.Clone(env)}
	for _, f := range files {
		data, err := lookup(f.Ref())
		if err != nil {
			return provider.ContainerData{}, err
		}
		for _, k := range slices.Sorted(maps.Keys(data)) {
			d.Files = append(d.Files, provider.File{Dir: f.Path, Name: k, Data: []byte(data[k]), Secret: f.Secret != ""})
		}
	}
	if err := addEnv(&d, envFrom, lookup); err != nil {
		return provider.ContainerData{}, err
	}
	return d, nil
}

// addEnv sets the variables of envFrom, in order, over the spec's env.
func addEnv(d *provider.ContainerData, from []api.EnvSource, lookup func(api.ConfigRef) (map[string]string, error)) error {
	if d.Env == nil && len(from) > 0 {
		d.Env = map[string]string{}
	}
	for _, e := range from {
		data, err := lookup(e.Ref())
		if err != nil {
			return err
		}
		if e.Key == "" {
			for _, k := range slices.Sorted(maps.Keys(data)) {
				if !api.ValidEnvName(k) {
					return fmt.Errorf("envFrom %s %q: key %q is not a variable name (name the keys to take with key and name)", e.Ref().Kind(), e.Ref().Name(), k)
				}
				d.Env[k] = data[k]
			}
			continue
		}
		v, ok := data[e.Key]
		if !ok {
			return fmt.Errorf("envFrom %s %q has no key %q", e.Ref().Kind(), e.Ref().Name(), e.Key)
		}
		name := e.Name
		if name == "" {
			name = e.Key
		}
		d.Env[name] = v
	}
	return nil
}
