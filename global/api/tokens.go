package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/stratahq/strata/internal/api"
)

// TokenRequest asks for a new token.
type TokenRequest struct {
	Tenant string   `json:"tenant"`
	Role   api.Role `json:"role"`
	Name   string   `json:"name,omitempty"`
}

// TokenInfo is a token as the API shows it: never its secret or hash.
type TokenInfo struct {
	ID        string   `json:"id"`
	Name      string   `json:"name,omitempty"`
	Tenant    string   `json:"tenant"`
	Role      api.Role `json:"role"`
	CreatedAt string   `json:"createdAt"`
}

// NewTokenResponse carries the plaintext token, shown this once.
type NewTokenResponse struct {
	TokenInfo
	Token string `json:"token"`
}

func tokenInfo(t *api.Token) TokenInfo {
	return TokenInfo{ID: t.ID, Name: t.Name, Tenant: t.Tenant, Role: t.Role, CreatedAt: t.CreatedAt.UTC().Format("2006-01-02T15:04:05Z07:00")}
}

// CreateToken makes a token for a tenant and role (admins only). Its
// plaintext is returned once; only its hash is stored.
func (s *Service) CreateToken(ctx context.Context, req TokenRequest) (NewTokenResponse, error) {
	if _, err := authorize(ctx, writeRegions); err != nil {
		return NewTokenResponse{}, err
	}
	if req.Tenant == "" {
		req.Tenant = DefaultTenant
	}
	if req.Name != "" && len(req.Name) > 253 {
		return NewTokenResponse{}, api.Invalid("name", "is longer than 253 characters")
	}
	plain, tok, err := s.NewToken(ctx, req.Tenant, req.Role, req.Name)
	if err != nil {
		return NewTokenResponse{}, err
	}
	return NewTokenResponse{TokenInfo: tokenInfo(&tok), Token: plain}, nil
}

// ListTokens lists the tokens (admins only), without secrets.
func (s *Service) ListTokens(ctx context.Context) ([]TokenInfo, error) {
	if _, err := authorize(ctx, writeRegions); err != nil {
		return nil, err
	}
	if err := caught(ctx, s.tokens, &s.wroteTokens); err != nil {
		return nil, err
	}
	items := s.tokens.List()
	out := make([]TokenInfo, 0, len(items))
	for _, it := range items {
		out = append(out, tokenInfo(it.Value))
	}
	slices.SortFunc(out, func(a, b TokenInfo) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// DeleteToken revokes a token (admins only); it stops working as soon as
// every API replica's cache has seen the deletion.
func (s *Service) DeleteToken(ctx context.Context, id string) (TokenInfo, error) {
	if _, err := authorize(ctx, writeRegions); err != nil {
		return TokenInfo{}, err
	}
	it, err := s.st.Tokens.Get(ctx, id)
	if err != nil {
		return TokenInfo{}, storeErr(err, "token", id)
	}
	rev, err := s.st.Tokens.Delete(ctx, id, it.ModRevision)
	if err != nil {
		return TokenInfo{}, storeErr(err, "token", id)
	}
	s.wroteTokens.note(rev)
	return tokenInfo(it.Value), nil
}

// ---- REST ----

func (h *rest) createToken(r *http.Request) (int, any, error) {
	var req TokenRequest
	if err := h.decode(r, &req, true); err != nil {
		return 0, nil, err
	}
	out, err := h.svc.CreateToken(r.Context(), req)
	return http.StatusCreated, out, err
}

func (h *rest) listTokens(r *http.Request) (int, any, error) {
	items, err := h.svc.ListTokens(r.Context())
	return http.StatusOK, list[TokenInfo]{Items: items}, err
}

func (h *rest) deleteToken(r *http.Request) (int, any, error) {
	id := r.PathValue("id")
	if id == "" || len(id) > 64 || strings.ContainsAny(id, "/_ ") {
		return 0, nil, api.Invalid("id", "%q is not a token id", id)
	}
	out, err := h.svc.DeleteToken(r.Context(), id)
	if err != nil {
		return 0, nil, fmt.Errorf("token %s: %w", id, err)
	}
	return http.StatusOK, out, nil
}
