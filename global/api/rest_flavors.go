package api

import (
	"net/http"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/rest"
)

// flavorHandlers serve the flavor catalog (Flavors) over REST.
type flavorHandlers struct {
	flavors *Flavors
}

func (h *flavorHandlers) routes() []route {
	return []route{
		{"POST /v1/flavors", h.createFlavor, nil},
		{"GET /v1/flavors", h.listFlavors, paged},
		{"GET /v1/flavors/{name}", h.getFlavor, nil},
		{"PUT /v1/flavors/{name}", h.updateFlavor, nil},
		{"DELETE /v1/flavors/{name}", h.deleteFlavor, nil},
	}
}

func (h *flavorHandlers) createFlavor(r *http.Request) (any, error) {
	var f api.Flavor
	if err := rest.Decode(r, &f); err != nil {
		return nil, err
	}
	out, err := h.flavors.Create(r.Context(), f)
	return rest.Created(out), err
}

func (h *flavorHandlers) listFlavors(r *http.Request) (any, error) {
	q, err := pageQuery(r)
	if err != nil {
		return nil, err
	}
	items, next, err := h.flavors.Page(r.Context(), q)
	return rest.List[api.Flavor]{Items: items, Continue: next}, err
}

func (h *flavorHandlers) getFlavor(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.flavors.Get(r.Context(), name)
}

func (h *flavorHandlers) updateFlavor(r *http.Request) (any, error) {
	var f api.Flavor
	if err := rest.Decode(r, &f); err != nil {
		return nil, err
	}
	if err := putTarget(r, &f.Name, &f.ResourceVersion); err != nil {
		return nil, err
	}
	return h.flavors.Update(r.Context(), f)
}

func (h *flavorHandlers) deleteFlavor(r *http.Request) (any, error) {
	name, expect, err := deleteTarget(r)
	if err != nil {
		return nil, err
	}
	return h.flavors.Delete(r.Context(), name, expect)
}
