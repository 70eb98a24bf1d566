package api

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/rest"
)

func TestTokensLifecycle(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	admin := e.token(t, "default", api.RoleAdmin)
	created := decodeAs[NewTokenResponse](t, e.must(t, http.StatusCreated,
		e.do(t, "POST", "/v1/tokens", map[string]any{"tenant": "default", "role": "viewer", "name": "dashboards"}, withToken(admin))))
	if created.Token == "" || created.Role != api.RoleViewer {
		t.Fatalf("created: got %+v; want a viewer token with its plaintext", created)
	}
	viewer := withToken(created.Token)
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources", nil, viewer))
	e.must(t, http.StatusForbidden, e.do(t, "POST", "/v1/resources", computeBody("x"), viewer))
	e.must(t, http.StatusForbidden, e.do(t, "GET", "/v1/tokens", nil, viewer))

	toks := decodeAs[rest.List[TokenInfo]](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/tokens", nil, withToken(admin))))
	found := false
	for _, tk := range toks.Items {
		if tk.ID == created.ID {
			found = true
		}
	}
	if !found {
		t.Fatalf("list: %s missing from %+v", created.ID, toks.Items)
	}
	e.must(t, http.StatusBadRequest, e.do(t, "POST", "/v1/tokens", map[string]any{"role": "god"}, withToken(admin)))
	e.must(t, http.StatusOK, e.do(t, "DELETE", "/v1/tokens/"+created.ID, nil, withToken(admin)))
	poll(t, "revoked token refused", func() error {
		if r := e.do(t, "GET", "/v1/resources", nil, viewer); r.code != http.StatusUnauthorized {
			return fmt.Errorf("status %d", r.code)
		}
		return nil
	})
	e.must(t, http.StatusNotFound, e.do(t, "DELETE", "/v1/tokens/"+created.ID, nil, withToken(admin)))
}

func TestTokenExpiry(t *testing.T) {
	e := newEnv(t, envConfig{})
	admin := withToken(e.token(t, "default", api.RoleAdmin))
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	created := decodeAs[NewTokenResponse](t, e.must(t, http.StatusCreated,
		e.do(t, "POST", "/v1/tokens", map[string]any{"tenant": "acme", "role": "member", "name": "ci", "expiresAt": at.Format(time.RFC3339)}, admin)))
	if created.ExpiresAt != at.Format(time.RFC3339) {
		t.Fatalf("created.expiresAt = %q; want %q", created.ExpiresAt, at.Format(time.RFC3339))
	}
	// It works until then, and the list says when it stops.
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources", nil, withToken(created.Token)))
	toks := decodeAs[rest.List[TokenInfo]](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/tokens", nil, admin)))
	i := slices.IndexFunc(toks.Items, func(tk TokenInfo) bool { return tk.ID == created.ID })
	if i < 0 || toks.Items[i].ExpiresAt != created.ExpiresAt {
		t.Fatalf("list: got %+v; want %s expiring at %s", toks.Items, created.ID, created.ExpiresAt)
	}

	for _, tc := range []struct {
		name string
		body map[string]any
	}{
		{"in the past", map[string]any{"role": "viewer", "expiresAt": time.Now().Add(-time.Minute).Format(time.RFC3339)}},
		{"not a time", map[string]any{"role": "viewer", "expiresAt": "tomorrow"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.must(t, http.StatusBadRequest, e.do(t, "POST", "/v1/tokens", tc.body, admin))
			if got := decodeAs[api.ErrorBody](t, r).Error; got.Message == "" {
				t.Fatalf("got %+v; want a message", got)
			}
		})
	}
}
