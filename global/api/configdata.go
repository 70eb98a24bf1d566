package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// What a region reads of the Configs and Secrets its replicas name
// (Server.ConfigData), checked against the resource that names them.

// errNotReferenced is what a region asking for data a resource does not
// name gets: the same answer as for a resource that does not exist.
var errNotReferenced = fmt.Errorf("not referenced: %w", api.ErrNotFound)

// ConfigData is the data of one Config or Secret, for a replica.
type ConfigData struct {
	Ref  api.ConfigRef
	Type api.SecretType // a Secret's
	Data map[string]string
}

// ConfigData returns the data (secrets decrypted) of refs for the
// resource tenant/name, asked by region, which must be one the resource
// is placed in (its status names it) or scheduled to (its schedule names
// it). Every ref must be named by the resource's spec or one of its kept
// revisions (a rollout runs old ones): anything else is not found, so
// that a region gets only what a resource it runs uses. Nothing here is
// logged.
func (s *Server) ConfigData(ctx context.Context, region, tenant, name string, refs []api.ConfigRef) ([]ConfigData, error) {
	if err := api.ValidateName("tenant", tenant); err != nil {
		return nil, err
	}
	if err := api.ValidateName("resource", name); err != nil {
		return nil, err
	}
	named, err := s.namedRefs(ctx, region, tenant, name)
	if err != nil {
		return nil, err
	}
	out := make([]ConfigData, 0, len(refs))
	for _, ref := range refs {
		if !named[ref] {
			return nil, fmt.Errorf("%s %q of resource %q: %w", ref.Kind(), ref.Name(), name, errNotReferenced)
		}
		d, err := s.readRef(ctx, tenant, ref)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// namedRefs is every Config and Secret the resource's spec and kept
// revisions name.
func (s *Server) namedRefs(ctx context.Context, region, tenant, name string) (map[api.ConfigRef]bool, error) {
	it, err := s.st.Resources.Get(ctx, state.ResourceName(tenant, name))
	if err != nil {
		return nil, storeErr(err, "resource", name)
	}
	if err := s.placedIn(ctx, it, region); err != nil {
		return nil, err
	}
	named := map[api.ConfigRef]bool{}
	add := func(spec api.ResourceSpec) {
		if spec.Compute != nil {
			for _, r := range spec.Compute.Refs() {
				named[r] = true
			}
		}
	}
	add(it.Value.Spec)
	revs, _, err := s.st.Revisions.ListPrefix(ctx, state.RevisionPrefix(tenant, name))
	if err != nil {
		return nil, storeErr(err, "revisions", name)
	}
	for _, rv := range revs {
		if rv.Value.UID == it.Value.UID {
			add(rv.Value.Spec)
		}
	}
	return named, nil
}

// placedIn checks that the resource it may run in region: its schedule
// names the region, or its status (the master's placement) does. A
// region not placed yet is told so, and its agent asks again later.
func (s *Server) placedIn(ctx context.Context, it store.Item[api.Resource], region string) error {
	for _, t := range it.Value.Schedule.Regions {
		if t.Name == region {
			return nil
		}
	}
	st, err := s.st.Statuses.Get(ctx, it.Name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return storeErr(err, "resource", it.Value.Name)
	}
	if err == nil && st.Value.UID == it.Value.UID {
		if _, ok := st.Value.Regions[region]; ok {
			return nil
		}
	}
	return fmt.Errorf("resource %q is not placed in region %q: %w", it.Value.Name, region, errNotReferenced)
}

// readRef reads one Config or Secret (decrypted).
func (s *Server) readRef(ctx context.Context, tenant string, ref api.ConfigRef) (ConfigData, error) {
	key := state.ResourceName(tenant, ref.Name())
	if ref.Kind() == "config" {
		it, err := s.st.Configs.Get(ctx, key)
		if err != nil {
			return ConfigData{}, storeErr(err, "config", ref.Name())
		}
		return ConfigData{Ref: ref, Data: it.Value.Data}, nil
	}
	it, err := s.st.Secrets.Get(ctx, key)
	if err != nil {
		return ConfigData{}, storeErr(err, "secret", ref.Name())
	}
	data, err := s.secrets.open(it)
	if err != nil {
		return ConfigData{}, err
	}
	return ConfigData{Ref: ref, Type: it.Value.Type, Data: data}, nil
}
