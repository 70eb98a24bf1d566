package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/stratahq/strata/internal/api"
)

// DefaultTenant is the system tenant: the tenant of the bootstrap token,
// the only one whose tokens may have role admin, and of every caller when
// auth is disabled.
const DefaultTenant = "default"

// tokenPrefix starts every bearer token: strata_<id>_<secret>. The id finds
// the stored token without a scan; only the secret's hash is stored.
const tokenPrefix = "strata_"

// The token patterns compile on first use: a bounded repetition like
// {16,128} compiles into hundreds of instructions, which every process of
// the binary (agents too) would otherwise build at start and keep.
var (
	tokenIDRE     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]{1,32}$`) })
	tokenSecretRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9]{16,128}$`) })
)

// Identity is who a request acts as. The edges (internal/rest, the gRPC
// token policy) establish it with Tokens and put it in the request
// context; every operation checks it.
type Identity struct {
	Tenant string
	Role   api.Role
	// TokenID is the bearer token's id; empty for mTLS peers and when auth
	// is disabled.
	TokenID string
	// TokenName is the bearer token's name, for the audit log.
	TokenName string
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
	if !ok || !tokenIDRE().MatchString(id) || !tokenSecretRE().MatchString(secret) {
		return "", "", fmt.Errorf("malformed token (want strata_<id>_<secret>): %w", api.ErrUnauthenticated)
	}
	return id, secret, nil
}

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func validRole(r api.Role) bool { return slices.Contains(api.Roles, r) }

// rolesText is every role, for the errors that list them.
var rolesText = sync.OnceValue(func() string {
	names := make([]string, len(api.Roles))
	for i, r := range api.Roles {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
})

// effectiveRole is the role a token of tenant with role acts with: admin
// is the system tenant's (DefaultTenant) only, and a token of another
// tenant stored as admin, by a release that let any tenant have one, acts
// as its tenant's administrator, never as everyone's.
func effectiveRole(tenant string, role api.Role) api.Role {
	if role == api.RoleAdmin && tenant != DefaultTenant {
		return api.RoleTenantAdmin
	}
	return role
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
	readEvents // a tenant's own; every tenant's with seeEverything
	seeEverything
	readTenant // its own record and quota
	// manageTokens creates, lists and revokes tokens: a tenant-admin
	// its own tenant's (grantableBy says which roles), an admin
	// everyone's.
	manageTokens
	manageTenants
	// readSecrets reads the values of its tenant's Secrets (reads
	// without it see their keys only).
	readSecrets
)

// may is the role table:
//
//	admin         everything, in any tenant (the system tenant's tokens
//	              only: effectiveRole)
//	infra         nodes (cordon, drain, delete), regions, every region's
//	              events; no tenant's resources
//	tenant-admin  its tenant's resources, configs and secrets (values
//	              included), its tenant's tokens, reading regions
//	operator      its tenant's resources, configs and secrets (values
//	              included), reading regions
//	member        its tenant's resources, configs and secrets (values
//	              included)
//	viewer        reading its tenant's resources and configs, and its
//	              secrets' keys but not their values
//
// Every role reads flavors (they are needed to write a resource), the
// status overview (region endpoints with readRegions only), its tenant's
// events and quota; only admins manage tenants, and only admins and
// tenant-admins tokens. Which tenants a caller reaches is
// Identity.allTenants's to say.
func may(r api.Role, a action) bool {
	switch a {
	case readFlavors, readStatus, readTenant, readEvents:
		return validRole(r)
	}
	if roles, ok := grants[a]; ok {
		return slices.Contains(roles, r)
	}
	return r == api.RoleAdmin
}

// grants are the roles that may do an action, for the actions that are
// not every role's or admins' only (may).
var grants = func() map[action][]api.Role {
	const (
		admin, tenantAdmin, infra = api.RoleAdmin, api.RoleTenantAdmin, api.RoleInfra
		operator, member, viewer  = api.RoleOperator, api.RoleMember, api.RoleViewer
	)
	writers := []api.Role{admin, tenantAdmin, operator, member}
	return map[action][]api.Role{
		readResources:  {admin, tenantAdmin, operator, member, viewer},
		writeResources: writers,
		readSecrets:    writers,
		readRegions:    {admin, tenantAdmin, operator, infra},
		useNodes:       {admin, infra},
		seeEverything:  {admin, infra},
		manageTokens:   {admin, tenantAdmin},
	}
}()

// may reports whether id may do a (in its own tenant; allTenants says
// whether in others).
func (id Identity) may(a action) bool { return may(effectiveRole(id.Tenant, id.Role), a) }

// allTenants reports whether id reaches every tenant: an admin of the
// system tenant only.
func (id Identity) allTenants() bool { return effectiveRole(id.Tenant, id.Role) == api.RoleAdmin }

// grantableBy reports whether id may make a token of role: an admin any;
// a tenant-admin the roles of its tenant's own (tenant-admin, operator,
// member, viewer), never admin or infra, which reach beyond a tenant.
func grantableBy(id Identity, role api.Role) bool {
	if id.allTenants() {
		return true
	}
	switch role {
	case api.RoleTenantAdmin, api.RoleOperator, api.RoleMember, api.RoleViewer:
		return true
	}
	return false
}

// authorize checks that the caller may do a on nothing tenant-scoped.
func authorize(ctx context.Context, a action) (Identity, error) {
	id, ok := IdentityFrom(ctx)
	if !ok {
		return Identity{}, fmt.Errorf("no caller identity: %w", api.ErrUnauthenticated)
	}
	if !id.may(a) {
		return Identity{}, fmt.Errorf("role %q may not do this: %w", effectiveRole(id.Tenant, id.Role), api.ErrForbidden)
	}
	return id, nil
}

// tenantScope checks that the caller may do a in tenant (empty: the
// caller's own) and returns the tenant to act in. Only the system
// tenant's admins reach other tenants; for anyone else that is
// forbidden, which tells nothing about any object (lists, creates).
func tenantScope(ctx context.Context, a action, tenant string) (string, error) {
	id, err := authorize(ctx, a)
	if err != nil {
		return "", err
	}
	if tenant == "" {
		tenant = id.Tenant
	} else if err := api.ValidateName("tenant", tenant); err != nil {
		return "", err
	}
	noteTenant(ctx, id, tenant)
	if tenant != id.Tenant && !id.allTenants() {
		return "", fmt.Errorf("tenant %q is not yours: %w", tenant, api.ErrForbidden)
	}
	return tenant, nil
}

// resourceScope is objectScope for a resource.
func resourceScope(ctx context.Context, a action, tenant, name string) (string, error) {
	return objectScope(ctx, a, tenant, "resource", name)
}

// objectScope is tenantScope for a tenant's object called name (what:
// "resource", "config", "secret"), with one difference: another tenant's
// is "not found", so that a tenant cannot probe which names another one
// uses.
func objectScope(ctx context.Context, a action, tenant, what, name string) (string, error) {
	if err := api.ValidateName("name", name); err != nil {
		return "", err
	}
	id, err := authorize(ctx, a)
	if err != nil {
		return "", err
	}
	if tenant != "" && tenant != id.Tenant && !id.allTenants() {
		// A probe of another tenant's names: audited as a read of it.
		if api.ValidateName("tenant", tenant) == nil {
			noteTenant(ctx, id, tenant)
		}
		return "", api.NotFound(what, name)
	}
	return tenantScope(ctx, a, tenant)
}

// writeScope is the tenant a write acts in: the one the request names
// (?tenant=), else the one its body names, else the caller's; a body
// that names another than the request is invalid. name is the object
// an update or delete names ("" for a create).
func writeScope(ctx context.Context, query, body, what, name string) (string, error) {
	tenant := query
	if tenant == "" {
		tenant = body
	}
	var err error
	if name == "" {
		tenant, err = tenantScope(ctx, writeResources, tenant)
	} else {
		tenant, err = objectScope(ctx, writeResources, tenant, what, name)
	}
	if err != nil {
		return "", err
	}
	if body != "" && body != tenant {
		return "", api.Invalid("tenant", "%q does not match the tenant of the request, %q", body, tenant)
	}
	return tenant, nil
}
