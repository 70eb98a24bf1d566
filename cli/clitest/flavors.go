package clitest

import (
	"fmt"
	"net/http"

	"github.com/stratahq/strata/internal/api"
)

// flavorRoutes serves the flavors.
type flavorRoutes struct{ *Server }

func (s flavorRoutes) routes() map[string]handler {
	return map[string]handler{
		"GET /v1/flavors":           s.listFlavors,
		"POST /v1/flavors":          s.createFlavor,
		"GET /v1/flavors/{name}":    s.getFlavor,
		"PUT /v1/flavors/{name}":    s.updateFlavor,
		"DELETE /v1/flavors/{name}": s.deleteFlavor,
	}
}

func (s flavorRoutes) listFlavors(*http.Request) (int, any, error) {
	return http.StatusOK, list[api.Flavor]{Items: sortedValues(s.Flavors)}, nil
}

func (s flavorRoutes) getFlavor(r *http.Request) (int, any, error) {
	return named(s.Flavors, "flavor", r)
}

func (s flavorRoutes) createFlavor(r *http.Request) (int, any, error) {
	var f api.Flavor
	if err := decode(r, &f); err != nil {
		return 0, nil, err
	}
	if err := f.Validate(); err != nil {
		return 0, nil, err
	}
	if _, ok := s.Flavors[f.Name]; ok {
		return 0, nil, api.AlreadyExists("flavor", f.Name)
	}
	f = api.Flavor{Name: f.Name, Kind: f.Kind, Spec: f.Spec, CreatedAt: s.now(), UpdatedAt: s.now(), ResourceVersion: s.version()}
	s.Flavors[f.Name] = f
	return http.StatusCreated, f, nil
}

func (s flavorRoutes) updateFlavor(r *http.Request) (int, any, error) {
	var f api.Flavor
	if err := decode(r, &f); err != nil {
		return 0, nil, err
	}
	f.Name = r.PathValue("name")
	if err := f.Validate(); err != nil {
		return 0, nil, err
	}
	cur, ok := s.Flavors[f.Name]
	switch {
	case !ok:
		return 0, nil, api.NotFound("flavor", f.Name)
	case cur.Kind != f.Kind:
		return 0, nil, api.Invalid("kind", "is immutable: flavor %q is a %s flavor, not %s", f.Name, cur.Kind, f.Kind)
	case cur.Spec == f.Spec:
		return http.StatusOK, cur, nil
	}
	cur.Spec, cur.UpdatedAt, cur.ResourceVersion = f.Spec, s.now(), s.version()
	s.Flavors[f.Name] = cur
	return http.StatusOK, cur, nil
}

func (s flavorRoutes) deleteFlavor(r *http.Request) (int, any, error) {
	name := r.PathValue("name")
	f, ok := s.Flavors[name]
	if !ok {
		return 0, nil, api.NotFound("flavor", name)
	}
	for _, res := range s.Resources {
		if res.Spec.Flavor == name {
			return 0, nil, fmt.Errorf("flavor %q is used by resource %q: %w", name, res.Name, api.ErrConflict)
		}
	}
	delete(s.Flavors, name)
	return http.StatusOK, f, nil
}
