package api

import (
	"net/http"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/rest"
)

// alertHandlers serve the alert rules (AlertRules) over REST.
type alertHandlers struct {
	rules func() *AlertRules
}

func (h *alertHandlers) routes() []route {
	return []route{
		{"POST /v1/alertrules", h.createAlertRule, nil},
		{"GET /v1/alertrules", h.listAlertRules, nil},
		{"GET /v1/alertrules/{name}", h.getAlertRule, nil},
		{"PUT /v1/alertrules/{name}", h.updateAlertRule, nil},
		{"DELETE /v1/alertrules/{name}", h.deleteAlertRule, nil},
	}
}

func (h *alertHandlers) createAlertRule(r *http.Request) (any, error) {
	var ar api.AlertRule
	if err := rest.Decode(r, &ar); err != nil {
		return nil, err
	}
	out, err := h.rules().Create(r.Context(), ar)
	return rest.Created(out), err
}

func (h *alertHandlers) listAlertRules(r *http.Request) (any, error) {
	items, err := h.rules().List(r.Context())
	return rest.List[api.AlertRule]{Items: items}, err
}

func (h *alertHandlers) getAlertRule(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.rules().Get(r.Context(), name)
}

func (h *alertHandlers) updateAlertRule(r *http.Request) (any, error) {
	var ar api.AlertRule
	if err := rest.Decode(r, &ar); err != nil {
		return nil, err
	}
	if err := putTarget(r, &ar.Name, &ar.ResourceVersion); err != nil {
		return nil, err
	}
	return h.rules().Update(r.Context(), ar)
}

func (h *alertHandlers) deleteAlertRule(r *http.Request) (any, error) {
	name, expect, err := deleteTarget(r)
	if err != nil {
		return nil, err
	}
	return h.rules().Delete(r.Context(), name, expect)
}
