package api

import (
	"fmt"
	"net/http"
	"testing"

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
