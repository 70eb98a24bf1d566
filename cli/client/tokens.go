package client

import (
	"context"
	"net/http"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// Tokens is the client of the API's bearer tokens (admins; tenant-admins
// their tenant's).
type Tokens struct{ c *conn }

// Token is a bearer token as the API lists it: never its secret.
type Token struct {
	ID        string    `json:"id"`
	Name      string    `json:"name,omitempty"`
	Tenant    string    `json:"tenant"`
	Role      api.Role  `json:"role"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// NewToken is a token just created, with its plaintext (shown once).
type NewToken struct {
	Token
	Secret string `json:"token"`
}

// TokenRequest asks for a token (POST /v1/tokens).
type TokenRequest struct {
	Name      string    `json:"name,omitempty"`
	Tenant    string    `json:"tenant,omitempty"`
	Role      api.Role  `json:"role"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// Create makes a token (admins only).
func (tk Tokens) Create(ctx context.Context, r TokenRequest) (NewToken, error) {
	return call[NewToken](ctx, tk.c, request{method: http.MethodPost, path: "/v1/tokens", body: r})
}

// List returns every token (admins only).
func (tk Tokens) List(ctx context.Context) ([]Token, error) {
	return items[Token](ctx, tk.c, request{method: http.MethodGet, path: "/v1/tokens"})
}

// Revoke deletes a token by its id (admins only).
func (tk Tokens) Revoke(ctx context.Context, id string) (Token, error) {
	return call[Token](ctx, tk.c, request{method: http.MethodDelete, path: "/v1/tokens/" + escape(id)})
}
