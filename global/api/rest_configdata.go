package api

import (
	"net/http"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/rest"
)

// configDataHandlers serve the tenants' Configs (Configs) and Secrets
// (Secrets) over REST.
type configDataHandlers struct {
	configs *Configs
	secrets *Secrets
}

// configDataRoutes are the routes of Configs and Secrets.
func (h *configDataHandlers) routes() []route {
	return []route{
		{"POST /v1/configs", h.createConfig, inTenant},
		{"GET /v1/configs", h.listConfigs, []string{"tenant", "limit", "continue"}},
		{"GET /v1/configs/{name}", h.getConfig, inTenant},
		{"PUT /v1/configs/{name}", h.updateConfig, inTenant},
		{"DELETE /v1/configs/{name}", h.deleteConfig, inTenant},

		{"POST /v1/secrets", h.createSecret, inTenant},
		{"GET /v1/secrets", h.listSecrets, []string{"tenant", "limit", "continue", "reveal"}},
		{"GET /v1/secrets/{name}", h.getSecret, []string{"tenant", "reveal"}},
		{"PUT /v1/secrets/{name}", h.updateSecret, inTenant},
		{"DELETE /v1/secrets/{name}", h.deleteSecret, inTenant},
	}
}

func (h *configDataHandlers) createConfig(r *http.Request) (any, error) {
	var c api.Config
	if err := rest.Decode(r, &c); err != nil {
		return nil, err
	}
	out, err := h.configs.Create(r.Context(), tenantOf(r), c)
	return rest.Created(out), err
}

func (h *configDataHandlers) listConfigs(r *http.Request) (any, error) {
	q, err := pageQuery(r)
	if err != nil {
		return nil, err
	}
	items, next, err := h.configs.Page(r.Context(), tenantOf(r), q)
	return rest.List[api.Config]{Items: items, Continue: next}, err
}

func (h *configDataHandlers) getConfig(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.configs.Get(r.Context(), tenantOf(r), name)
}

func (h *configDataHandlers) updateConfig(r *http.Request) (any, error) {
	var c api.Config
	if err := rest.Decode(r, &c); err != nil {
		return nil, err
	}
	if err := putTarget(r, &c.Name, &c.ResourceVersion); err != nil {
		return nil, err
	}
	return h.configs.Update(r.Context(), tenantOf(r), c)
}

func (h *configDataHandlers) deleteConfig(r *http.Request) (any, error) {
	name, expect, err := deleteTarget(r)
	if err != nil {
		return nil, err
	}
	return h.configs.Delete(r.Context(), tenantOf(r), name, expect)
}

// decodeSecret reads a secret as a client writes it: Keys are the
// server's.
func decodeSecret(r *http.Request) (api.Secret, error) {
	var s api.Secret
	if err := rest.Decode(r, &s); err != nil {
		return api.Secret{}, err
	}
	s.Keys = nil
	return s, nil
}

func (h *configDataHandlers) createSecret(r *http.Request) (any, error) {
	s, err := decodeSecret(r)
	if err != nil {
		return nil, err
	}
	out, err := h.secrets.Create(r.Context(), tenantOf(r), s)
	return rest.Created(out), err
}

func (h *configDataHandlers) listSecrets(r *http.Request) (any, error) {
	q, err := pageQuery(r)
	if err != nil {
		return nil, err
	}
	reveal, err := rest.QueryBool(r, "reveal")
	if err != nil {
		return nil, err
	}
	items, next, err := h.secrets.Page(r.Context(), tenantOf(r), q, reveal)
	return rest.List[api.Secret]{Items: items, Continue: next}, err
}

func (h *configDataHandlers) getSecret(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	reveal, err := rest.QueryBool(r, "reveal")
	if err != nil {
		return nil, err
	}
	return h.secrets.Get(r.Context(), tenantOf(r), name, reveal)
}

func (h *configDataHandlers) updateSecret(r *http.Request) (any, error) {
	s, err := decodeSecret(r)
	if err != nil {
		return nil, err
	}
	if err := putTarget(r, &s.Name, &s.ResourceVersion); err != nil {
		return nil, err
	}
	return h.secrets.Update(r.Context(), tenantOf(r), s)
}

func (h *configDataHandlers) deleteSecret(r *http.Request) (any, error) {
	name, expect, err := deleteTarget(r)
	if err != nil {
		return nil, err
	}
	return h.secrets.Delete(r.Context(), tenantOf(r), name, expect)
}
