package api

import (
	"net/http"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/rest"
)

// regionHandlers serve the registered regions (Regions) and their nodes
// (Nodes) over REST.
type regionHandlers struct {
	regions *Regions
	nodes   *Nodes
}

func (h *regionHandlers) routes() []route {
	return []route{
		{"POST /v1/regions", h.registerRegion, nil},
		{"GET /v1/regions", h.listRegions, nil},
		{"GET /v1/regions/{name}", h.getRegion, nil},
		{"DELETE /v1/regions/{name}", h.deleteRegion, nil},

		{"GET /v1/nodes", h.listNodes, []string{"region", "selector", "limit", "continue"}},
		{"GET /v1/regions/{region}/nodes/{node}", h.getNode, nil},
		{"DELETE /v1/regions/{region}/nodes/{node}", h.deleteNode, nil},
		{"POST /v1/regions/{region}/nodes/{node}/cordon", h.cordonNode, nil},
		{"POST /v1/regions/{region}/nodes/{node}/uncordon", h.uncordonNode, nil},
		{"POST /v1/regions/{region}/nodes/{node}/drain", h.drainNode, nil},
		{"GET /v1/regions/{region}/nodes/{node}/drain", h.getDrain, nil},
	}
}

func (h *regionHandlers) registerRegion(r *http.Request) (any, error) {
	var reg api.Region
	if err := rest.Decode(r, &reg); err != nil {
		return nil, err
	}
	out, created, err := h.regions.Register(r.Context(), reg)
	if created {
		return rest.Created(out), err
	}
	return out, err
}

func (h *regionHandlers) listRegions(r *http.Request) (any, error) {
	items, err := h.regions.List(r.Context())
	return rest.List[api.Region]{Items: items}, err
}

func (h *regionHandlers) getRegion(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.regions.Get(r.Context(), name)
}

func (h *regionHandlers) deleteRegion(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.regions.Delete(r.Context(), name)
}

func (h *regionHandlers) listNodes(r *http.Request) (any, error) {
	pq, err := pageQuery(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	return h.nodes.Page(r.Context(), q.Get("region"), q.Get("selector"), pq)
}

// nodePath returns the region and node names of a node route.
func nodePath(r *http.Request) (region, node string, err error) {
	if region, err = rest.PathName(r, "region"); err != nil {
		return "", "", err
	}
	node, err = rest.PathName(r, "node")
	return region, node, err
}

func (h *regionHandlers) getNode(r *http.Request) (any, error) {
	region, node, err := nodePath(r)
	if err != nil {
		return nil, err
	}
	return h.nodes.Get(r.Context(), region, node)
}

func (h *regionHandlers) deleteNode(r *http.Request) (any, error) {
	region, node, err := nodePath(r)
	if err != nil {
		return nil, err
	}
	return struct{}{}, h.nodes.Delete(r.Context(), region, node)
}

func (h *regionHandlers) cordonNode(r *http.Request) (any, error) {
	region, node, err := nodePath(r)
	if err != nil {
		return nil, err
	}
	var body struct {
		Reason string `json:"reason"`
	}
	if err := rest.DecodeOptional(r, &body); err != nil {
		return nil, err
	}
	return h.nodes.Cordon(r.Context(), region, node, body.Reason)
}

func (h *regionHandlers) uncordonNode(r *http.Request) (any, error) {
	region, node, err := nodePath(r)
	if err != nil {
		return nil, err
	}
	if err := rest.DecodeOptional(r, &struct{}{}); err != nil {
		return nil, err
	}
	return h.nodes.Uncordon(r.Context(), region, node)
}

func (h *regionHandlers) drainNode(r *http.Request) (any, error) {
	region, node, err := nodePath(r)
	if err != nil {
		return nil, err
	}
	var d api.DrainRequest
	if err := rest.DecodeOptional(r, &d); err != nil {
		return nil, err
	}
	return h.nodes.Drain(r.Context(), region, node, d)
}

func (h *regionHandlers) getDrain(r *http.Request) (any, error) {
	region, node, err := nodePath(r)
	if err != nil {
		return nil, err
	}
	return h.nodes.GetDrain(r.Context(), region, node)
}
