package api

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// Tokens are the bearer tokens, each of one tenant and role, and the
// authentication by them (REST and gRPC alike).
type Tokens struct {
	tokens *store.Collection[api.Token]
	cache  *store.Cache[api.Token]
	log    *slog.Logger
	// wrote is this replica's latest token write, for read-your-writes:
	// a token just created works at once.
	wrote written

	// bootstrap is the bootstrap token (api.bootstrapToken), empty for
	// none. inPlace is closed once it is stored (at once without one):
	// until then authentication waits, rather than refuse the operator's
	// own token of a replica that has just started (Bootstrap).
	bootstrap string
	inPlace   chan struct{}
	placed    sync.Once

	// touched is when this replica last set each token's LastUsedAt (or
	// tried to): the throttle of touch.
	mu      sync.Mutex
	touched map[string]time.Time
	// demoted are the tokens of a tenant other than the system tenant
	// stored with role admin whose demotion to tenant-admin this replica
	// has logged (once each).
	demoted map[string]bool
}

// lastUsedEvery is how often a token's LastUsedAt is written at most.
const lastUsedEvery = time.Minute

// touchTimeout bounds one LastUsedAt write.
const touchTimeout = 5 * time.Second

// TokenRequest asks for a new token.
type TokenRequest struct {
	Tenant string   `json:"tenant"`
	Role   api.Role `json:"role"`
	Name   string   `json:"name,omitempty"`
	// ExpiresAt, when set, is when the token stops working; it must be in
	// the future.
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// TokenInfo is a token as the API shows it: never its secret or hash.
type TokenInfo struct {
	ID        string   `json:"id"`
	Name      string   `json:"name,omitempty"`
	Tenant    string   `json:"tenant"`
	Role      api.Role `json:"role"`
	CreatedAt string   `json:"createdAt"`
	ExpiresAt string   `json:"expiresAt,omitempty"`
	// LastUsedAt is when the token last authenticated a request, to
	// within a minute.
	LastUsedAt string `json:"lastUsedAt,omitempty"`
}

// NewTokenResponse carries the plaintext token, shown this once.
type NewTokenResponse struct {
	TokenInfo
	Token string `json:"token"`
}

// tokenInfo shows t with the role it acts with (effectiveRole).
func tokenInfo(t *api.Token) TokenInfo {
	info := TokenInfo{ID: t.ID, Name: t.Name, Tenant: t.Tenant, Role: effectiveRole(t.Tenant, t.Role), CreatedAt: t.CreatedAt.UTC().Format(time.RFC3339)}
	if !t.ExpiresAt.IsZero() {
		info.ExpiresAt = t.ExpiresAt.UTC().Format(time.RFC3339)
	}
	if !t.LastUsedAt.IsZero() {
		info.LastUsedAt = t.LastUsedAt.UTC().Format(time.RFC3339)
	}
	return info
}

// Authenticate resolves a bearer token (the text after "Bearer ") to an
// identity.
func (t *Tokens) Authenticate(ctx context.Context, bearer string) (Identity, error) {
	if bearer == "" {
		return Identity{}, fmt.Errorf("a bearer token is required (Authorization: Bearer strata_...): %w", api.ErrUnauthenticated)
	}
	id, secret, err := parseToken(bearer)
	if err != nil {
		return Identity{}, err
	}
	tok, err := t.lookup(ctx, id)
	if err != nil {
		return Identity{}, err
	}
	// Constant time: the compare must not tell an attacker how much of a
	// guessed secret's hash was right.
	if tok == nil || subtle.ConstantTimeCompare([]byte(hashSecret(secret)), []byte(tok.Hash)) != 1 {
		return Identity{}, fmt.Errorf("invalid token: %w", api.ErrUnauthenticated)
	}
	if !tok.ExpiresAt.IsZero() && !now().Before(tok.ExpiresAt) {
		return Identity{}, fmt.Errorf("token expired at %s: %w", tok.ExpiresAt.Format(time.RFC3339), api.ErrUnauthenticated)
	}
	t.touch(tok)
	role := effectiveRole(tok.Tenant, tok.Role)
	if role != tok.Role {
		t.noteDemoted(tok)
	}
	return Identity{Tenant: tok.Tenant, Role: role, TokenID: tok.ID, TokenName: tok.Name}, nil
}

// noteDemoted logs, once per token and replica, that tok is stored as an
// admin of a tenant other than the system tenant and acts as that
// tenant's tenant-admin (effectiveRole): the operator should replace it.
func (t *Tokens) noteDemoted(tok *api.Token) {
	t.mu.Lock()
	if t.demoted == nil {
		t.demoted = map[string]bool{}
	}
	seen := t.demoted[tok.ID]
	t.demoted[tok.ID] = true
	t.mu.Unlock()
	if !seen {
		t.log.Warn("a token of role admin outside the system tenant acts as tenant-admin of its tenant only; replace it with a tenant-admin token",
			"token", tok.ID, "name", tok.Name, "tenant", tok.Tenant, "systemTenant", DefaultTenant)
	}
}

// touch records that tok was used, at most once a minute per token, in
// the background: the request neither waits for the write nor fails
// with it. The write is conditional and re-checks the stored time, so
// that replicas racing to record one use write once.
func (t *Tokens) touch(tok *api.Token) {
	at := now()
	if at.Sub(tok.LastUsedAt) < lastUsedEvery {
		return
	}
	t.mu.Lock()
	if t.touched == nil {
		t.touched = map[string]time.Time{}
	}
	if at.Sub(t.touched[tok.ID]) < lastUsedEvery {
		t.mu.Unlock()
		return
	}
	t.touched[tok.ID] = at
	t.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), touchTimeout)
		defer cancel()
		it, err := t.tokens.Modify(ctx, tok.ID, func(cur *api.Token) error {
			if at.Sub(cur.LastUsedAt) < lastUsedEvery {
				return store.ErrNoChange
			}
			cur.LastUsedAt = at.Truncate(time.Second)
			return nil
		})
		if err != nil {
			// A revoked token, an etcd hiccup: the next use tries again.
			t.log.Debug("recording a token's last use", "id", tok.ID, "err", err)
			return
		}
		t.wrote.note(it.ModRevision)
	}()
}

// authenticate is Authenticate for the edges (rest.Authenticator, gRPC's
// token policy): the identity goes into the handler's context.
func (t *Tokens) authenticate(ctx context.Context, bearer string) (context.Context, error) {
	id, err := t.Authenticate(ctx, bearer)
	if err != nil {
		return nil, err
	}
	ctx, _ = withAccess(ctx)
	noteCaller(ctx, id)
	return WithIdentity(ctx, id), nil
}

// lookup reads the token cache, never etcd: a request must not cost an
// etcd read, least of all one with a made-up token. A token this replica
// just created is waited for, so that it works at once.
func (t *Tokens) lookup(ctx context.Context, id string) (*api.Token, error) {
	if err := t.awaitBootstrap(ctx); err != nil {
		return nil, err
	}
	if err := caught(ctx, t.cache, &t.wrote); err != nil {
		return nil, err
	}
	it, ok := t.cache.Get(id)
	if !ok {
		return nil, nil
	}
	return it.Value, nil
}

// New creates a token and returns its plaintext, which is shown once and
// never stored. The caller is trusted (the CLI, tests).
func (t *Tokens) New(ctx context.Context, tenant string, role api.Role, name string) (string, api.Token, error) {
	return t.issue(ctx, api.Token{Tenant: tenant, Role: role, Name: name})
}

// issue creates a token with tmpl's tenant, role, name and expiry.
func (t *Tokens) issue(ctx context.Context, tmpl api.Token) (string, api.Token, error) {
	created := now()
	if err := validateToken(&tmpl, created); err != nil {
		return "", api.Token{}, err
	}
	plain, err := GenerateToken()
	if err != nil {
		return "", api.Token{}, err
	}
	id, secret, _ := parseToken(plain)
	tok := api.Token{ID: id, Name: tmpl.Name, Hash: hashSecret(secret), Tenant: tmpl.Tenant, Role: tmpl.Role, CreatedAt: created, ExpiresAt: tmpl.ExpiresAt}
	rev, err := t.tokens.Create(ctx, id, &tok)
	if err != nil {
		return "", api.Token{}, storeErr(err, "token", id)
	}
	t.wrote.note(rev)
	return plain, tok, nil
}

// validateToken checks what a new token is made of, reporting every
// field at fault at once.
func validateToken(tmpl *api.Token, at time.Time) error {
	var role error
	switch {
	case !validRole(tmpl.Role):
		role = api.Invalid("role", "%q is not one of %s", tmpl.Role, rolesText())
	case effectiveRole(tmpl.Tenant, tmpl.Role) != tmpl.Role:
		role = api.Invalid("role", "admin is for the system tenant %q only, as it reaches every tenant; give tenant %q a %s instead", DefaultTenant, tmpl.Tenant, api.RoleTenantAdmin)
	}
	var expiry error
	if !tmpl.ExpiresAt.IsZero() && !tmpl.ExpiresAt.After(at) {
		expiry = api.Invalid("expiresAt", "%s is not in the future", tmpl.ExpiresAt.UTC().Format(time.RFC3339))
	}
	// The name is shown in listings and logs: no terminal escapes or
	// bidirectional overrides that would show another name.
	return api.Join(api.ValidateText("name", tmpl.Name, 253), api.ValidateName("tenant", tmpl.Tenant), role, expiry)
}

// newTokens returns the Tokens of a Server; bootstrap is the bootstrap
// token, empty for none.
func newTokens(tokens *store.Collection[api.Token], cache *store.Cache[api.Token], bootstrap string, log *slog.Logger) *Tokens {
	t := &Tokens{tokens: tokens, cache: cache, log: log, bootstrap: bootstrap, inPlace: make(chan struct{})}
	if bootstrap == "" {
		close(t.inPlace)
	}
	return t
}

// errBootstrapPending is Ready's answer until Bootstrap has stored the
// bootstrap token.
var errBootstrapPending = fmt.Errorf("the bootstrap token (api.bootstrapToken) is not stored yet: %w", api.ErrUnavailable)

// Bootstrap stores the bootstrap token Options.BootstrapToken names
// (EnsureBootstrap), once the caches are loaded; until it has,
// authentication waits (bounded as for a cache, then 503) and Ready
// fails. Without a bootstrap token it does nothing.
func (t *Tokens) Bootstrap(ctx context.Context) error {
	if t.bootstrap == "" {
		return nil
	}
	if err := t.EnsureBootstrap(ctx, t.bootstrap); err != nil {
		return err
	}
	t.placed.Do(func() { close(t.inPlace) })
	return nil
}

// bootstrapped says whether the bootstrap token is in place (or there is
// none).
func (t *Tokens) bootstrapped() bool {
	select {
	case <-t.inPlace:
		return true
	default:
		return false
	}
}

// awaitBootstrap waits until the bootstrap token is in place, at most
// cacheWait: a token presented before that is neither accepted nor
// refused yet.
func (t *Tokens) awaitBootstrap(ctx context.Context) error {
	if t.bootstrapped() {
		return nil
	}
	stuck := errors.New("bootstrap is stuck")
	ctx, cancel := context.WithTimeoutCause(ctx, cacheWait, stuck)
	defer cancel()
	select {
	case <-t.inPlace:
		return nil
	case <-ctx.Done():
	}
	if errors.Is(context.Cause(ctx), stuck) {
		return fmt.Errorf("timed out after %s waiting for this replica to store its bootstrap token (api.bootstrapToken): %w", cacheWait, api.ErrUnavailable)
	}
	return fmt.Errorf("waiting for the bootstrap token to be stored: %w", ctx.Err())
}

// EnsureBootstrap makes plaintext an admin token of tenant "default"
// unless it exists already; `strata dev` prints it. A token with the same
// id but another secret is an error rather than overwritten, so that a
// misconfigured replica cannot replace the operator's token.
func (t *Tokens) EnsureBootstrap(ctx context.Context, plaintext string) error {
	id, secret, err := parseToken(plaintext)
	if err != nil {
		return fmt.Errorf("bootstrap token: %w", err)
	}
	tok := api.Token{ID: id, Name: "bootstrap", Hash: hashSecret(secret), Tenant: DefaultTenant, Role: api.RoleAdmin, CreatedAt: now()}
	rev, err := t.tokens.Create(ctx, id, &tok)
	if errors.Is(err, store.ErrExists) {
		it, gerr := t.tokens.Get(ctx, id)
		if gerr != nil {
			return fmt.Errorf("bootstrap token: %w", storeErr(gerr, "token", id))
		}
		if subtle.ConstantTimeCompare([]byte(it.Value.Hash), []byte(tok.Hash)) != 1 {
			return fmt.Errorf("bootstrap token: token %q exists with another secret: %w", id, api.ErrConflict)
		}
		// Another replica may have stored it after this one's cache
		// loaded: the cache is waited for up to it, as for a write.
		t.wrote.note(it.ModRevision)
		return nil
	}
	if err != nil {
		return fmt.Errorf("bootstrap token: %w", storeErr(err, "token", id))
	}
	t.wrote.note(rev)
	t.log.Info("created the bootstrap token", "id", id, "tenant", DefaultTenant)
	return nil
}

// Create makes a token for a tenant (the caller's when req names none)
// and role: an admin for any tenant and role, a tenant-admin for its own
// tenant and the roles grantableBy allows. Its plaintext is returned
// once; only its hash is stored.
func (t *Tokens) Create(ctx context.Context, req TokenRequest) (NewTokenResponse, error) {
	id, err := authorize(ctx, manageTokens)
	if err != nil {
		return NewTokenResponse{}, err
	}
	if req.Tenant == "" {
		req.Tenant = id.Tenant
	}
	if req.Tenant != id.Tenant && !id.allTenants() {
		return NewTokenResponse{}, fmt.Errorf("tenant %s is not yours: %w", api.Quote(req.Tenant), api.ErrForbidden)
	}
	tmpl := api.Token{Tenant: req.Tenant, Role: req.Role, Name: req.Name, ExpiresAt: req.ExpiresAt}
	if err := admit(ctx, tokenAdmission, onRequest, &tmpl); err != nil {
		return NewTokenResponse{}, err
	}
	if !grantableBy(id, req.Role) {
		return NewTokenResponse{}, fmt.Errorf("role %q may not make %s tokens, which reach beyond a tenant: %w", id.Role, req.Role, api.ErrForbidden)
	}
	plain, tok, err := t.issue(ctx, tmpl)
	if err != nil {
		return NewTokenResponse{}, err
	}
	return NewTokenResponse{TokenInfo: tokenInfo(&tok), Token: plain}, nil
}

// List lists the tokens the caller manages (every one for an admin, its
// tenant's for a tenant-admin), without secrets.
func (t *Tokens) List(ctx context.Context) ([]TokenInfo, error) {
	id, err := authorize(ctx, manageTokens)
	if err != nil {
		return nil, err
	}
	if err := caught(ctx, t.cache, &t.wrote); err != nil {
		return nil, err
	}
	items := t.cache.List()
	out := make([]TokenInfo, 0, len(items))
	for _, it := range items {
		if manages(id, it.Value) {
			out = append(out, tokenInfo(it.Value))
		}
	}
	slices.SortFunc(out, func(a, b TokenInfo) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// manages reports whether id manages tok: an admin every token, a
// tenant-admin its tenant's.
func manages(id Identity, tok *api.Token) bool { return id.allTenants() || tok.Tenant == id.Tenant }

// Page is one page of List: at most q.Limit tokens after those of the
// page whose continue token q carries, by id, and the next page's token.
func (t *Tokens) Page(ctx context.Context, q PageQuery) ([]TokenInfo, string, error) {
	id, err := authorize(ctx, manageTokens)
	if err != nil {
		return nil, "", err
	}
	limit, err := api.PageSize(q.Limit)
	if err != nil {
		return nil, "", err
	}
	after, err := api.AfterToken(q.Continue)
	if err != nil {
		return nil, "", err
	}
	if err := caught(ctx, t.cache, &t.wrote); err != nil {
		return nil, "", err
	}
	items := t.cache.Range("", after, limit+1, func(it store.Item[api.Token]) bool { return manages(id, it.Value) })
	out := make([]TokenInfo, 0, len(items))
	for _, it := range items {
		out = append(out, tokenInfo(it.Value))
	}
	page, next := api.Paginate(out, func(ti TokenInfo) string { return ti.ID }, "", limit)
	return page, next, nil
}

// Delete revokes a token the caller manages (another tenant's is not
// found for a tenant-admin); it stops working as soon as every API
// replica's cache has seen the deletion.
func (t *Tokens) Delete(ctx context.Context, id string) (TokenInfo, error) {
	caller, err := authorize(ctx, manageTokens)
	if err != nil {
		return TokenInfo{}, err
	}
	var it store.Item[api.Token]
	// A use recorded in between (touch) is no reason to refuse.
	err = t.tokens.Store().RetryConflicts(ctx, "delete token "+id, func() error {
		var err error
		if it, err = t.tokens.Get(ctx, id); err != nil {
			return err
		}
		if !manages(caller, it.Value) {
			return store.ErrNotFound
		}
		rev, err := t.tokens.Delete(ctx, id, it.ModRevision)
		if err == nil {
			t.wrote.note(rev)
		}
		return err
	})
	if err != nil {
		return TokenInfo{}, storeErr(err, "token", id)
	}
	return tokenInfo(it.Value), nil
}
