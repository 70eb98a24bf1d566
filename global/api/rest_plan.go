package api

import (
	"net/http"

	"github.com/stratahq/strata/internal/rest"
)

// planHandlers serve what-if plans (Server.Plan).
type planHandlers struct{ s *Server }

func (h *planHandlers) routes() []route {
	return []route{{"POST /v1/plan", h.plan, inTenant}}
}

// planBody is api.PlanRequest as a client writes it: each resource to
// apply as a create or update body (its replicas may be left out).
type planBody struct {
	LoseRegions []string       `json:"loseRegions"`
	Scale       map[string]int `json:"scale"`
	Apply       []resourceBody `json:"apply"`
}

func (h *planHandlers) plan(r *http.Request) (any, error) {
	var body planBody
	if err := rest.Decode(r, &body); err != nil {
		return nil, err
	}
	req := PlanRequest{LoseRegions: body.LoseRegions, Scale: body.Scale}
	for _, b := range body.Apply {
		res, o := b.resource()
		req.Apply = append(req.Apply, PlanApply{Resource: res, ReplicasUnset: o.ReplicasUnset})
	}
	return h.s.Plan(r.Context(), tenantOf(r), req)
}
