package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
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

// TestTokenExpiryAndLastUse: a token made with an expiry works until
// then and is refused after; a token's last use is recorded once, in the
// background, and not again within the minute however often it is used.
func TestTokenExpiryAndLastUse(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.must(t, http.StatusBadRequest, e.do(t, "POST", "/v1/tokens",
		map[string]any{"tenant": "acme", "role": "viewer", "expiresAt": time.Now().Add(-time.Second).Format(time.RFC3339)}))
	expires := time.Now().Add(2 * time.Second).UTC().Truncate(time.Second)
	created := decodeAs[NewTokenResponse](t, e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/tokens",
		map[string]any{"tenant": "acme", "role": "viewer", "name": "short", "expiresAt": expires.Format(time.RFC3339)})))
	if created.ExpiresAt != expires.Format(time.RFC3339) {
		t.Errorf("got expiresAt %q; want %q", created.ExpiresAt, expires.Format(time.RFC3339))
	}
	short := withToken(created.Token)
	for range 5 {
		e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources", nil, short))
	}
	var used TokenInfo
	poll(t, "last use recorded", func() error {
		for _, tk := range decodeAs[rest.List[TokenInfo]](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/tokens", nil))).Items {
			if tk.ID == created.ID && tk.LastUsedAt != "" {
				used = tk
				return nil
			}
		}
		return fmt.Errorf("token %s has no lastUsedAt yet", created.ID)
	})
	if at, err := time.Parse(time.RFC3339, used.LastUsedAt); err != nil || time.Since(at) > time.Minute {
		t.Errorf("got lastUsedAt %q; want a time within the last minute", used.LastUsedAt)
	}
	it, err := e.st.Tokens.Get(t.Context(), created.ID)
	if err != nil {
		t.Fatal(err)
	}
	firstRev := it.ModRevision
	poll(t, "the token expires", func() error {
		if r := e.do(t, "GET", "/v1/resources", nil, short); r.code != http.StatusUnauthorized {
			return fmt.Errorf("got %s; want 401", r)
		}
		return nil
	})
	if it, err := e.st.Tokens.Get(t.Context(), created.ID); err != nil || it.ModRevision != firstRev {
		t.Errorf("token after more uses within the minute: got mod revision %d (%v); want %d (no second write)", it.ModRevision, err, firstRev)
	}
	if r := e.do(t, "GET", "/v1/resources", nil, short); !strings.Contains(string(r.body), "expired") {
		t.Errorf("got %s; want the answer to say the token expired", r)
	}
}

// TestBootstrapTokenBeforeStored: until a replica has stored its
// bootstrap token, the token is neither accepted nor refused. /readyz
// answers 503 and says why; a request with the token is held (never a
// 401 for the operator's own token) and answered once it is stored.
func TestBootstrapTokenBeforeStored(t *testing.T) {
	plain, err := GenerateToken()
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envConfig{bootstrap: plain})
	if r := e.do(t, "GET", "/readyz", nil, withToken("")); r.code != http.StatusServiceUnavailable || !strings.Contains(string(r.body), "bootstrap token") {
		t.Fatalf("readyz before the bootstrap token is stored: got %s; want 503 naming the bootstrap token", r)
	}
	// The server holds the request (up to its cache wait, seconds): the
	// client gives up first, without an answer.
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	r, err := e.send(ctx, "GET", "/v1/flavors", nil, withToken(plain))
	cancel()
	if err == nil {
		t.Fatalf("a request with the bootstrap token before it is stored: got %s; want it held until it is stored", r)
	}

	answered := make(chan string, 1)
	go func() {
		r, err := e.send(t.Context(), "GET", "/v1/flavors", nil, withToken(plain))
		if err != nil {
			answered <- err.Error()
			return
		}
		answered <- r.String()
	}()
	if err := e.svc.Tokens().Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := <-answered; !strings.HasPrefix(got, "200 ") {
		t.Fatalf("a request with the bootstrap token made while it was being stored: got %s; want 200", got)
	}
	e.must(t, http.StatusOK, e.do(t, "GET", "/readyz", nil, withToken("")))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/flavors", nil, withToken(plain)))
	wrong := plain[:len(plain)-4] + "zzzz"
	e.must(t, http.StatusUnauthorized, e.do(t, "GET", "/v1/flavors", nil, withToken(wrong)))
}

// storeLegacyToken stores, as a release that let any tenant have admins
// did, a token of tenant with role, and returns its plaintext.
func (e *testEnv) storeLegacyToken(t *testing.T, tenant string, role api.Role) (string, string) {
	t.Helper()
	plain, err := GenerateToken()
	if err != nil {
		t.Fatal(err)
	}
	id, secret, _ := parseToken(plain)
	rev, err := e.st.Tokens.Create(t.Context(), id, &api.Token{ID: id, Name: "old-admin", Hash: hashSecret(secret), Tenant: tenant, Role: role, CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	e.svc.tokens.wrote.note(rev)
	return plain, id
}

// TestTenantAdmin: admin is the system tenant's only. A token of
// another tenant administers that tenant (tenant-admin), whether it was
// made as one or stored as an admin by an older release: its tenant's
// resources, secrets and tokens, never another tenant's anything, nor
// what tenants share, nor its own quota. The system tenant's admin
// still reaches everything.
func TestTenantAdmin(t *testing.T) {
	var logs syncBuffer
	e := newEnv(t, envConfig{logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	e.fixtures(t, nil)
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources?tenant=acme", computeBody("app")))
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/secrets?tenant=acme", `{"name":"db","data":{"password":"acme-s3cret"}}`))
	acmeMember := decodeAs[NewTokenResponse](t, e.must(t, http.StatusCreated,
		e.do(t, "POST", "/v1/tokens", map[string]any{"tenant": "acme", "role": "member", "name": "acme-ci"})))

	// Nobody makes an admin outside the system tenant any more.
	r := e.must(t, http.StatusBadRequest, e.do(t, "POST", "/v1/tokens", map[string]any{"tenant": "team-a", "role": "admin"}))
	if got := decodeAs[api.ErrorBody](t, r).Error; got.Field != "role" || !strings.Contains(got.Message, "tenant-admin") {
		t.Errorf("admin of team-a: got %+v; want an invalid role pointing at tenant-admin", got)
	}
	if _, _, err := e.svc.Tokens().New(t.Context(), "team-a", api.RoleAdmin, "x"); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("Tokens.New of an admin of team-a: got %v; want it invalid", err)
	}

	made := decodeAs[NewTokenResponse](t, e.must(t, http.StatusCreated,
		e.do(t, "POST", "/v1/tokens", map[string]any{"tenant": "team-a", "role": "tenant-admin", "name": "team-a-admin"})))
	legacy, legacyID := e.storeLegacyToken(t, "team-a", api.RoleAdmin)
	for name, tok := range map[string]string{"tenant-admin": made.Token, "legacy-admin": legacy} {
		t.Run(name, func(t *testing.T) {
			as := withToken(tok)
			// Each subtest writes its own objects.
			mine := computeBody(name)
			for _, c := range []struct {
				method, path string
				body         any
				want         int
			}{
				// Another tenant's anything: 404 for what is named, 403
				// for lists and creates.
				{"GET", "/v1/resources/app?tenant=acme", nil, http.StatusNotFound},
				{"GET", "/v1/resources?tenant=acme", nil, http.StatusForbidden},
				{"GET", "/v1/secrets/db?tenant=acme&reveal=true", nil, http.StatusNotFound},
				{"GET", "/v1/secrets?tenant=acme&reveal=true", nil, http.StatusForbidden},
				{"POST", "/v1/resources?tenant=acme", mine, http.StatusForbidden},
				{"POST", "/v1/tokens", map[string]any{"tenant": "acme", "role": "member"}, http.StatusForbidden},
				{"DELETE", "/v1/tokens/" + acmeMember.ID, nil, http.StatusNotFound},
				{"GET", "/v1/tenants/acme/quota", nil, http.StatusForbidden},
				{"GET", "/v1/events?object=resource/acme/app", nil, http.StatusForbidden},
				// What tenants share, and its own quota.
				{"PUT", "/v1/tenants/team-a", `{"quota":{"replicas":1000}}`, http.StatusForbidden},
				{"GET", "/v1/tenants", nil, http.StatusForbidden},
				{"POST", "/v1/flavors", `{"name":"tiny","kind":"container","spec":{"vcpus":0.1,"memoryMiB":64}}`, http.StatusForbidden},
				{"GET", "/v1/nodes", nil, http.StatusForbidden},
				// Roles that reach beyond a tenant.
				{"POST", "/v1/tokens", map[string]any{"role": "admin"}, http.StatusBadRequest},
				{"POST", "/v1/tokens", map[string]any{"role": "infra"}, http.StatusForbidden},
				// Its own tenant.
				{"POST", "/v1/resources", mine, http.StatusCreated},
				{"POST", "/v1/secrets", `{"name":"` + name + `","data":{"password":"team-a-s3cret"}}`, http.StatusCreated},
				{"GET", "/v1/secrets/" + name + "?reveal=true", nil, http.StatusOK},
				{"GET", "/v1/tenants/team-a/quota", nil, http.StatusOK},
			} {
				if r := e.do(t, c.method, c.path, c.body, as); r.code != c.want {
					t.Errorf("%s %s: got %s; want %d", c.method, c.path, r, c.want)
				}
			}
			// Its tenant's tokens: made in its tenant by default, listed,
			// revoked; nobody else's listed.
			dash := decodeAs[NewTokenResponse](t, e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/tokens", map[string]any{"role": "viewer", "name": "dash"}, as)))
			if dash.Tenant != "team-a" || dash.Role != api.RoleViewer {
				t.Errorf("created %+v; want a viewer of team-a", dash.TokenInfo)
			}
			for _, tk := range decodeAs[rest.List[TokenInfo]](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/tokens", nil, as))).Items {
				if tk.Tenant != "team-a" {
					t.Errorf("lists %+v of another tenant", tk)
				}
				if tk.Role == api.RoleAdmin {
					t.Errorf("lists %+v as an admin; want it shown as the tenant-admin it acts as", tk)
				}
			}
			e.must(t, http.StatusOK, e.do(t, "DELETE", "/v1/tokens/"+dash.ID, nil, as))
			if st := decodeAs[Status](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/status", nil, as))); st.Caller != (Caller{Tenant: "team-a", Role: api.RoleTenantAdmin}) {
				t.Errorf("status caller: got %+v; want tenant-admin of team-a", st.Caller)
			}
		})
	}
	// The stored admin was said once, however often it was used.
	if n := strings.Count(logs.String(), "token="+legacyID); n != 1 {
		t.Errorf("the legacy admin token is logged %d times; want once:\n%s", n, logs.String())
	}

	// The system tenant's admin reaches everything still.
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/app?tenant=acme", nil))
	if s := decodeAs[api.Secret](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/secrets/db?tenant=acme&reveal=true", nil))); s.Data["password"] != "acme-s3cret" {
		t.Errorf("the system admin reveals %+v; want acme's value", s.Data)
	}
	all := decodeAs[rest.List[TokenInfo]](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/tokens", nil))).Items
	if !slices.ContainsFunc(all, func(tk TokenInfo) bool { return tk.ID == acmeMember.ID }) || !slices.ContainsFunc(all, func(tk TokenInfo) bool { return tk.ID == made.ID }) {
		t.Errorf("the system admin lists %+v; want acme's and team-a's tokens", all)
	}
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/tokens", map[string]any{"tenant": "acme", "role": "infra"}))
	e.must(t, http.StatusOK, e.do(t, "DELETE", "/v1/tokens/"+acmeMember.ID, nil))
}

// TestTokenValidationReportsAll: a token request with several mistakes
// is refused with every one of them.
func TestTokenValidationReportsAll(t *testing.T) {
	e := newEnv(t, envConfig{})
	r := e.must(t, http.StatusBadRequest, e.do(t, "POST", "/v1/tokens", map[string]any{
		"name": "ci\u001b[2J", "tenant": "Not A Tenant", "role": "god", "expiresAt": time.Now().Add(-time.Hour).Format(time.RFC3339),
	}))
	if got, want := detailFields(t, r), []string{"name", "tenant", "role", "expiresAt"}; !slices.Equal(got, want) {
		t.Errorf("got fields %q (%s); want %q", got, r, want)
	}
}
