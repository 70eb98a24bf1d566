package clitest

import (
	"net/http"

	"github.com/stratahq/strata/internal/api"
)

// regionRoutes serves the region registrations.
type regionRoutes struct{ *Server }

func (s regionRoutes) routes() map[string]handler {
	return map[string]handler{
		"GET /v1/regions":           s.listRegions,
		"POST /v1/regions":          s.registerRegion,
		"GET /v1/regions/{name}":    s.getRegion,
		"DELETE /v1/regions/{name}": s.deleteRegion,
	}
}

func (s regionRoutes) listRegions(*http.Request) (int, any, error) {
	return http.StatusOK, list[api.Region]{Items: sortedValues(s.Regions)}, nil
}

func (s regionRoutes) getRegion(r *http.Request) (int, any, error) {
	return named(s.Regions, "region", r)
}

func (s regionRoutes) registerRegion(r *http.Request) (int, any, error) {
	var reg api.Region
	if err := decode(r, &reg); err != nil {
		return 0, nil, err
	}
	if err := reg.Validate(); err != nil {
		return 0, nil, err
	}
	cur, ok := s.Regions[reg.Name]
	// Every registration refreshes registeredAt, as the global API does.
	reg.RegisteredAt, reg.Status = s.now(), nil
	if ok {
		reg.Status = cur.Status
	}
	reg.ResourceVersion = s.version()
	s.Regions[reg.Name] = reg
	if ok {
		return http.StatusOK, reg, nil
	}
	return http.StatusCreated, reg, nil
}

func (s regionRoutes) deleteRegion(r *http.Request) (int, any, error) {
	reg, ok := s.Regions[r.PathValue("name")]
	if !ok {
		return 0, nil, api.NotFound("region", r.PathValue("name"))
	}
	delete(s.Regions, reg.Name)
	return http.StatusOK, reg, nil
}
