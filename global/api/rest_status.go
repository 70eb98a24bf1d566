package api

import (
	"net/http"

	"github.com/stratahq/strata/internal/rest"
)

// statusHandlers serve the global tier's status and its probes
// (Server.Status, Server.Ready).
type statusHandlers struct {
	s *Server
	// stream reports the error of a handler off the JSON routes (rest.API.Error).
	stream func(w http.ResponseWriter, r *http.Request, err error)
}

func (h *statusHandlers) routes() []route {
	return []route{{"GET /v1/status", h.status, nil}}
}

func (h *statusHandlers) status(r *http.Request) (any, error) {
	return h.s.Status(r.Context())
}

// healthz says the process serves HTTP; nothing else.
func (h *statusHandlers) healthz(w http.ResponseWriter, r *http.Request) {
	rest.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz says this replica can serve: etcd answers and the caches are
// loaded. Load balancers take it out of rotation otherwise.
func (h *statusHandlers) readyz(w http.ResponseWriter, r *http.Request) {
	if err := h.s.Ready(r.Context()); err != nil {
		h.stream(w, r, err)
		return
	}
	rest.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
