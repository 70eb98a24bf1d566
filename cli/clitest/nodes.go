package clitest

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/stratahq/strata/internal/api"
)

// nodeRoutes serves the regions' nodes: reading them, cordon, uncordon and
// the scripted drains.
type nodeRoutes struct{ *Server }

func (s nodeRoutes) routes() map[string]handler {
	return map[string]handler{
		"GET /v1/nodes":                                   s.listNodes,
		"GET /v1/regions/{region}/nodes/{node}":           s.getNode,
		"POST /v1/regions/{region}/nodes/{node}/cordon":   s.cordon(false),
		"POST /v1/regions/{region}/nodes/{node}/uncordon": s.cordon(true),
		"POST /v1/regions/{region}/nodes/{node}/drain":    s.drain,
		"GET /v1/regions/{region}/nodes/{node}/drain":     s.getDrain,
	}
}

func (s nodeRoutes) listNodes(r *http.Request) (int, any, error) {
	q := r.URL.Query()
	sel, err := api.ParseSelector(q.Get("selector"))
	if err != nil {
		return 0, nil, err
	}
	out := list[api.Node]{Items: []api.Node{}}
	for _, n := range s.Nodes {
		if (q.Get("region") == "" || n.Region == q.Get("region")) && sel.Matches(n.Labels) {
			out.Items = append(out.Items, n)
		}
	}
	return http.StatusOK, out, nil
}

func (s nodeRoutes) node(r *http.Request) (int, error) {
	region, name := r.PathValue("region"), r.PathValue("node")
	if _, ok := s.Regions[region]; !ok {
		return -1, api.NotFound("region", region)
	}
	i := slices.IndexFunc(s.Nodes, func(n api.Node) bool { return n.Region == region && n.Name == name })
	if i < 0 {
		return -1, fmt.Errorf("region %q: node %q %w", region, name, api.ErrNotFound)
	}
	return i, nil
}

func (s nodeRoutes) getNode(r *http.Request) (int, any, error) {
	i, err := s.node(r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, s.Nodes[i], nil
}

func (s nodeRoutes) cordon(uncordon bool) handler {
	return func(r *http.Request) (int, any, error) {
		i, err := s.node(r)
		if err != nil {
			return 0, nil, err
		}
		var b struct {
			Reason string `json:"reason"`
		}
		if err := decode(r, &b); err != nil {
			return 0, nil, err
		}
		n := &s.Nodes[i]
		n.Schedulable, n.CordonReason = uncordon, b.Reason
		return http.StatusOK, *n, nil
	}
}

func (s nodeRoutes) drain(r *http.Request) (int, any, error) {
	i, err := s.node(r)
	if err != nil {
		return 0, nil, err
	}
	var d api.DrainRequest
	if err := decode(r, &d); err != nil {
		return 0, nil, err
	}
	if err := d.Validate(); err != nil {
		return 0, nil, err
	}
	s.Nodes[i].Schedulable = false
	script := s.Drains[r.PathValue("region")+"/"+r.PathValue("node")]
	if len(script) == 0 {
		return http.StatusOK, api.DrainStatus{Node: r.PathValue("node"), State: api.DrainSucceeded, StartedAt: s.now(), FinishedAt: s.now()}, nil
	}
	return http.StatusOK, script[0], nil
}

func (s nodeRoutes) getDrain(r *http.Request) (int, any, error) {
	if _, err := s.node(r); err != nil {
		return 0, nil, err
	}
	key := r.PathValue("region") + "/" + r.PathValue("node")
	script := s.Drains[key]
	if len(script) == 0 {
		return 0, nil, fmt.Errorf("node %q has no drain: %w", r.PathValue("node"), api.ErrNotFound)
	}
	ds := script[0]
	if len(script) > 1 {
		s.Drains[key] = script[1:]
	}
	return http.StatusOK, ds, nil
}
