package clitest

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// tokenRoutes serves the tokens.
type tokenRoutes struct{ *Server }

func (s tokenRoutes) routes() map[string]handler {
	return map[string]handler{
		"POST /v1/tokens":        s.createToken,
		"GET /v1/tokens":         s.listTokens,
		"DELETE /v1/tokens/{id}": s.deleteToken,
	}
}

// Token is a token as GET /v1/tokens shows it.
type Token struct {
	ID        string   `json:"id"`
	Name      string   `json:"name,omitempty"`
	Tenant    string   `json:"tenant"`
	Role      api.Role `json:"role"`
	CreatedAt string   `json:"createdAt"`
	ExpiresAt string   `json:"expiresAt,omitempty"`
}

func (s tokenRoutes) createToken(r *http.Request) (int, any, error) {
	var req struct {
		Tenant    string    `json:"tenant"`
		Role      api.Role  `json:"role"`
		Name      string    `json:"name,omitempty"`
		ExpiresAt time.Time `json:"expiresAt,omitzero"`
	}
	if err := decode(r, &req); err != nil {
		return 0, nil, err
	}
	if !slices.Contains(api.Roles, req.Role) {
		return 0, nil, api.Invalid("role", "%q is not one of %v", req.Role, api.Roles)
	}
	if !req.ExpiresAt.IsZero() && !req.ExpiresAt.After(s.now()) {
		return 0, nil, api.Invalid("expiresAt", "is not in the future")
	}
	tenant := cmp.Or(req.Tenant, "default")
	id := fmt.Sprintf("%08x", s.version())
	t := Token{ID: id, Name: req.Name, Tenant: tenant, Role: req.Role, CreatedAt: s.now().UTC().Format(time.RFC3339)}
	if !req.ExpiresAt.IsZero() {
		t.ExpiresAt = req.ExpiresAt.UTC().Format(time.RFC3339)
	}
	s.Tokens[id] = t
	return http.StatusCreated, struct {
		Token
		Secret string `json:"token"`
	}{t, "strata_" + id + "_0123456789abcdef0123456789abcdef"}, nil
}

func (s tokenRoutes) listTokens(*http.Request) (int, any, error) {
	return http.StatusOK, list[Token]{Items: sortedValues(s.Tokens)}, nil
}

func (s tokenRoutes) deleteToken(r *http.Request) (int, any, error) {
	id := r.PathValue("id")
	t, ok := s.Tokens[id]
	if !ok {
		return 0, nil, fmt.Errorf("token %s: %w", id, api.ErrNotFound)
	}
	delete(s.Tokens, id)
	return http.StatusOK, t, nil
}
