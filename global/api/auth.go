package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// DefaultTenant is the tenant of the bootstrap token, and of every caller
// when auth is disabled.
const DefaultTenant = "default"

// tokenPrefix starts every bearer token: strata_<id>_<secret>. The id finds
// the stored token without a scan; only the secret's hash is stored.
const tokenPrefix = "strata_"

var (
	tokenIDRE     = regexp.MustCompile(`^[a-z0-9]{1,32}$`)
	tokenSecretRE = regexp.MustCompile(`^[A-Za-z0-9]{16,128}$`)
)

// Identity is who a request acts as. The edge (REST middleware, gRPC
// handler) establishes it and puts it in the request context; the Service
// checks it.
type Identity struct {
	Tenant string
	Role   api.Role
	// TokenID is the bearer token's id; empty for mTLS peers and when auth
	// is disabled.
	TokenID string
}

type identityKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity in ctx.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// Authenticate resolves a bearer token (the text after "Bearer ") to an
// identity.
func (s *Service) Authenticate(ctx context.Context, bearer string) (Identity, error) {
	if bearer == "" {
		return Identity{}, fmt.Errorf("a bearer token is required (Authorization: Bearer strata_...): %w", api.ErrUnauthenticated)
	}
	id, secret, err := parseToken(bearer)
	if err != nil {
		return Identity{}, err
	}
	tok, err := s.lookupToken(ctx, id)
	if err != nil {
		return Identity{}, err
	}
	// Constant time: the compare must not tell an attacker how much of a
	// guessed secret's hash was right.
	if tok == nil || subtle.ConstantTimeCompare([]byte(hashSecret(secret)), []byte(tok.Hash)) != 1 {
		return Identity{}, fmt.Errorf("invalid token: %w", api.ErrUnauthenticated)
	}
	if !tok.ExpiresAt.IsZero() && now().After(tok.ExpiresAt) {
		return Identity{}, fmt.Errorf("token expired at %s: %w", tok.ExpiresAt.Format(time.RFC3339), api.ErrUnauthenticated)
	}
	return Identity{Tenant: tok.Tenant, Role: tok.Role, TokenID: tok.ID}, nil
}

// lookupToken reads the token cache, never etcd: a request must not cost an
// etcd read, least of all one with a made-up token. A token this replica
// just created is waited for, so that it works at once.
func (s *Service) lookupToken(ctx context.Context, id string) (*api.Token, error) {
	if err := caught(ctx, s.tokens, &s.wroteTokens); err != nil {
		return nil, err
	}
	it, ok := s.tokens.Get(id)
	if !ok {
		return nil, nil
	}
	return it.Value, nil
}

// NewToken creates a token and returns its plaintext, which is shown once
// and never stored. The caller is trusted (the CLI, tests).
func (s *Service) NewToken(ctx context.Context, tenant string, role api.Role, name string) (string, api.Token, error) {
	if err := api.ValidateName("tenant", tenant); err != nil {
		return "", api.Token{}, err
	}
	if !validRole(role) {
		return "", api.Token{}, api.Invalid("role", "%q is not one of admin, operator, member, viewer", role)
	}
	plain, err := GenerateToken()
	if err != nil {
		return "", api.Token{}, err
	}
	id, secret, _ := parseToken(plain)
	tok := api.Token{ID: id, Name: name, Hash: hashSecret(secret), Tenant: tenant, Role: role, CreatedAt: now()}
	rev, err := s.st.Tokens.Create(ctx, id, &tok)
	if err != nil {
		return "", api.Token{}, storeErr(err, "token", id)
	}
	s.wroteTokens.note(rev)
	return plain, tok, nil
}

// EnsureBootstrapToken makes plaintext an admin token of tenant "default"
// unless it exists already; `strata dev` prints it. A token with the same
// id but another secret is an error rather than overwritten, so that a
// misconfigured replica cannot replace the operator's token.
func (s *Service) EnsureBootstrapToken(ctx context.Context, plaintext string) error {
	id, secret, err := parseToken(plaintext)
	if err != nil {
		return fmt.Errorf("bootstrap token: %w", err)
	}
	tok := api.Token{ID: id, Name: "bootstrap", Hash: hashSecret(secret), Tenant: DefaultTenant, Role: api.RoleAdmin, CreatedAt: now()}
	rev, err := s.st.Tokens.Create(ctx, id, &tok)
	if errors.Is(err, store.ErrExists) {
		it, gerr := s.st.Tokens.Get(ctx, id)
		if gerr != nil {
			return fmt.Errorf("bootstrap token: %w", storeErr(gerr, "token", id))
		}
		if subtle.ConstantTimeCompare([]byte(it.Value.Hash), []byte(tok.Hash)) != 1 {
			return fmt.Errorf("bootstrap token: token %q exists with another secret: %w", id, api.ErrConflict)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("bootstrap token: %w", storeErr(err, "token", id))
	}
	s.wroteTokens.note(rev)
	s.log.Info("created the bootstrap token", "id", id, "tenant", DefaultTenant)
	return nil
}

// GenerateToken returns a new random token in the form the API accepts,
// for callers that must know the plaintext before it is stored
// (EnsureBootstrapToken).
func GenerateToken() (string, error) {
	id, err := randomHex(8)
	if err != nil {
		return "", err
	}
	secret, err := randomHex(32)
	if err != nil {
		return "", err
	}
	return tokenPrefix + id + "_" + secret, nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random bytes: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func parseToken(s string) (id, secret string, err error) {
	rest, ok := strings.CutPrefix(s, tokenPrefix)
	if ok {
		id, secret, ok = strings.Cut(rest, "_")
	}
	if !ok || !tokenIDRE.MatchString(id) || !tokenSecretRE.MatchString(secret) {
		return "", "", fmt.Errorf("malformed token (want strata_<id>_<secret>): %w", api.ErrUnauthenticated)
	}
	return id, secret, nil
}

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func validRole(r api.Role) bool {
	switch r {
	case api.RoleAdmin, api.RoleOperator, api.RoleMember, api.RoleViewer:
		return true
	}
	return false
}

// action is what a caller wants to do; roles grant actions.
type action int

const (
	readResources action = iota
	writeResources
	readFlavors
	writeFlavors
	readRegions
	writeRegions
	useNodes // every node operation, reads included: nodes are infrastructure
	readStatus
)

// may is the role table:
//
//	admin     everything, in any tenant
//	operator  its tenant's resources, node operations, reading regions
//	member    its tenant's resources
//	viewer    reading its tenant's resources
//
// Every role reads flavors (they are needed to write a resource) and the
// status overview.
func may(r api.Role, a action) bool {
	switch a {
	case readFlavors, readStatus, readResources:
		return validRole(r)
	case writeResources:
		return r == api.RoleAdmin || r == api.RoleOperator || r == api.RoleMember
	case readRegions, useNodes:
		return r == api.RoleAdmin || r == api.RoleOperator
	}
	return r == api.RoleAdmin
}

// authorize checks that the caller may do a on nothing tenant-scoped.
func authorize(ctx context.Context, a action) (Identity, error) {
	id, ok := IdentityFrom(ctx)
	if !ok {
		return Identity{}, fmt.Errorf("no caller identity: %w", api.ErrUnauthenticated)
	}
	if !may(id.Role, a) {
		return Identity{}, fmt.Errorf("role %q may not do this: %w", id.Role, api.ErrForbidden)
	}
	return id, nil
}

// tenantScope checks that the caller may do a in tenant (empty: the
// caller's own) and returns the tenant to act in. Only admins reach other
// tenants; for anyone else that is forbidden, which tells nothing about
// any object (lists, creates).
func tenantScope(ctx context.Context, a action, tenant string) (string, error) {
	id, err := authorize(ctx, a)
	if err != nil {
		return "", err
	}
	if tenant == "" {
		return id.Tenant, nil
	}
	if err := api.ValidateName("tenant", tenant); err != nil {
		return "", err
	}
	if tenant != id.Tenant && id.Role != api.RoleAdmin {
		return "", fmt.Errorf("tenant %q is not yours: %w", tenant, api.ErrForbidden)
	}
	return tenant, nil
}

// resourceScope is tenantScope for the resource called name, with one
// difference: another tenant's resource is "not found", so that a tenant
// cannot probe which names another one uses.
func resourceScope(ctx context.Context, a action, tenant, name string) (string, error) {
	if err := api.ValidateName("name", name); err != nil {
		return "", err
	}
	id, err := authorize(ctx, a)
	if err != nil {
		return "", err
	}
	if tenant != "" && tenant != id.Tenant && id.Role != api.RoleAdmin {
		return "", api.NotFound("resource", name)
	}
	return tenantScope(ctx, a, tenant)
}
