package clitest

import (
	"net/http"

	"github.com/stratahq/strata/internal/api"
)

// alertRoutes serves the alert rules. The fake keeps the secret as the
// API does (stored, never answered) in AlertSecrets.
type alertRoutes struct{ *Server }

func (s alertRoutes) routes() map[string]handler {
	return map[string]handler{
		"GET /v1/alertrules":           s.listAlertRules,
		"POST /v1/alertrules":          s.createAlertRule,
		"GET /v1/alertrules/{name}":    s.getAlertRule,
		"PUT /v1/alertrules/{name}":    s.updateAlertRule,
		"DELETE /v1/alertrules/{name}": s.deleteAlertRule,
	}
}

func (s alertRoutes) listAlertRules(*http.Request) (int, any, error) {
	return http.StatusOK, list[api.AlertRule]{Items: sortedValues(s.AlertRules)}, nil
}

func (s alertRoutes) getAlertRule(r *http.Request) (int, any, error) {
	return named(s.AlertRules, "alert rule", r)
}

func (s alertRoutes) createAlertRule(r *http.Request) (int, any, error) {
	var ar api.AlertRule
	if err := decode(r, &ar); err != nil {
		return 0, nil, err
	}
	if err := ar.Validate(); err != nil {
		return 0, nil, err
	}
	if _, ok := s.AlertRules[ar.Name]; ok {
		return 0, nil, api.AlreadyExists("alert rule", ar.Name)
	}
	s.AlertSecrets[ar.Name] = ar.Receiver.Secret
	ar.Receiver.HasSecret, ar.Receiver.Secret = ar.Receiver.Secret != "", ""
	ar.CreatedAt, ar.UpdatedAt, ar.ResourceVersion = s.now(), s.now(), s.version()
	s.AlertRules[ar.Name] = ar
	return http.StatusCreated, ar, nil
}

func (s alertRoutes) updateAlertRule(r *http.Request) (int, any, error) {
	var ar api.AlertRule
	if err := decode(r, &ar); err != nil {
		return 0, nil, err
	}
	ar.Name = r.PathValue("name")
	if err := ar.Validate(); err != nil {
		return 0, nil, err
	}
	cur, ok := s.AlertRules[ar.Name]
	if !ok {
		return 0, nil, api.NotFound("alert rule", ar.Name)
	}
	if ar.Receiver.Secret != "" {
		s.AlertSecrets[ar.Name] = ar.Receiver.Secret
	}
	ar.Receiver.HasSecret, ar.Receiver.Secret = s.AlertSecrets[ar.Name] != "", ""
	ar.CreatedAt, ar.UpdatedAt, ar.ResourceVersion, ar.Status = cur.CreatedAt, s.now(), s.version(), cur.Status
	s.AlertRules[ar.Name] = ar
	return http.StatusOK, ar, nil
}

func (s alertRoutes) deleteAlertRule(r *http.Request) (int, any, error) {
	code, v, err := named(s.AlertRules, "alert rule", r)
	if err == nil {
		delete(s.AlertRules, r.PathValue("name"))
	}
	return code, v, err
}
