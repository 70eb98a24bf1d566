package api

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/stratahq/strata/internal/api"
)

// rolesKey is the extension of every secured operation that lists the
// roles that may call it (in their own tenant); its description starts
// with "Role: " and the same roles in words (describeRoles).
const rolesKey = "x-strata-roles"

// allRoles are the roles, in the order the document names them.
var allRoles = []api.Role{api.RoleAdmin, api.RoleInfra, api.RoleOperator, api.RoleMember, api.RoleViewer}

// describeRoles is how a description names roles: "any", "any but
// infra", or a list ("admin, operator or member").
func describeRoles(roles []string) string {
	switch {
	case len(roles) == len(allRoles):
		return "any"
	case len(roles) == len(allRoles)-1 && !slices.Contains(roles, string(api.RoleInfra)):
		return "any but infra"
	case len(roles) == 1:
		return roles[0]
	}
	return strings.Join(roles[:len(roles)-1], ", ") + " or " + roles[len(roles)-1]
}

// documentedRoles returns an operation's x-strata-roles, in allRoles'
// order, and whether they are given in that order without repeats.
func documentedRoles(op map[string]any) (roles []string, ordered bool) {
	roles = strs(op[rolesKey])
	var want []string
	for _, r := range allRoles {
		if slices.Contains(roles, string(r)) {
			want = append(want, string(r))
		}
	}
	return roles, slices.Equal(roles, want)
}

// rolesBodies are the bodies TestOpenAPIRoles sends where an empty object
// would be refused before the role is checked.
var rolesBodies = map[string]string{
	"scaleResource":    `{"replicas":1}`,
	"rollbackResource": `{"revision":1}`,
}

// TestOpenAPIRoles calls every secured operation with a token of each
// role and checks the document against the answers: a role the
// operation's x-strata-roles leaves out gets 403, one it lists does not,
// the description names the same roles, and every answer, refusals
// included, is one the document declares for the operation (kin-openapi's
// validator: status, headers, body).
//
// The calls name objects that do not exist ("nothing") and send an empty
// object as the body (or rolesBodies'), so that a role that may call an operation gets an
// answer that changes nothing (404, 400) but only after the role was
// checked; tenants are "default", the tokens' own.
func TestOpenAPIRoles(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs an embedded etcd")
	}
	doc := loadOpenAPI(t)
	kin := loadKinDocument(t)
	served := handlerRoutes(t)
	e := newEnv(t, envConfig{})
	kin.Servers = openapi3.Servers{{URL: e.srv.URL}}
	router, err := legacy.NewRouter(kin)
	if err != nil {
		t.Fatal(err)
	}
	e.fixtures(t, map[string]string{"eu": newFakeRegion("eu", "n1").serve(t, e.pki)})
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("web")))
	tokens := map[api.Role]string{}
	for _, r := range allRoles {
		tokens[r] = e.token(t, DefaultTenant, r)
	}
	var last exchange
	e.observe = func(req *http.Request, body []byte, r *response) {
		last = exchange{req: req, body: body, resp: r, invalid: true}
	}

	for _, o := range operations(doc) {
		security, own := o.op["security"]
		if !own {
			security = doc["security"]
		}
		if !served[o.pattern()] || len(asList(security)) == 0 {
			continue // public: no roles
		}
		where := o.pattern()
		roles, ordered := documentedRoles(o.op)
		if !ordered {
			t.Errorf("%s: %s %v: want roles of %v, in that order, each once", where, rolesKey, roles, allRoles)
		}
		desc, _ := o.op["description"].(string)
		if len(roles) == 0 {
			t.Errorf("%s: no %s", where, rolesKey)
		} else if want := "Role: " + describeRoles(roles); !strings.HasPrefix(desc, want) {
			t.Errorf("%s: the description starts %q; want %q (from %s %v)", where, api.Clip(desc), want, rolesKey, roles)
		}

		path := o.path
		if strings.HasPrefix(path, "/v1/tenants/") {
			path = strings.Replace(path, "{name}", DefaultTenant, 1)
		}
		path = strings.NewReplacer("{name}", "nothing", "{region}", "eu", "{node}", "nothing", "{number}", "1", "{id}", "nothing").Replace(path)
		var body any
		if o.op["requestBody"] != nil {
			body = `{}`
			if b, ok := rolesBodies[o.op["operationId"].(string)]; ok {
				body = b
			}
		}
		var allowed []string
		for _, role := range allRoles {
			r := e.do(t, strings.ToUpper(o.method), path, body, withToken(tokens[role]))
			if err := validateExchange(t.Context(), router, last); err != nil {
				t.Errorf("%s as %s: %v", where, role, err)
			}
			if r.code != http.StatusForbidden {
				allowed = append(allowed, string(role))
			}
		}
		if !slices.Equal(allowed, roles) {
			t.Errorf("%s: %s %v; the server lets %v call it (%s %s as each role)", where, rolesKey, roles, allowed, strings.ToUpper(o.method), path)
		}
	}
}

// TestOpenAPIRolesDescribed checks describeRoles on the forms the
// document uses.
func TestOpenAPIRolesDescribed(t *testing.T) {
	for want, roles := range map[string][]string{
		"any":                       {"admin", "infra", "operator", "member", "viewer"},
		"any but infra":             {"admin", "operator", "member", "viewer"},
		"admin":                     {"admin"},
		"admin or infra":            {"admin", "infra"},
		"admin, operator or member": {"admin", "operator", "member"},
		"admin, infra or operator":  {"admin", "infra", "operator"},
	} {
		if got := describeRoles(roles); got != want {
			t.Errorf("describeRoles(%v) = %q; want %q", roles, got, want)
		}
	}
}
