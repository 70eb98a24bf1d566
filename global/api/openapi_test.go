package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/rest"
)

// The OpenAPI document is written by hand; these tests keep it honest:
// it looks like OpenAPI 3, it describes exactly the routes Handler serves,
// its $refs resolve, its schemas have the JSON fields of the Go types, and
// the status codes the server really answers with are documented.

// openAPIRoute is where the document is served once Handler mounts it.
const openAPIRoute = "GET /v1/openapi.json"

var methods = []string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}

func loadOpenAPI(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	dec := json.NewDecoder(strings.NewReader(string(openAPIDocument)))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	return doc
}

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }

func strs(v any) []string {
	var out []string
	for _, x := range asList(v) {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func asList(v any) []any { l, _ := v.([]any); return l }

// operation is one method of one path of the document.
type operation struct {
	method, path string
	op           map[string]any
}

func (o operation) pattern() string { return strings.ToUpper(o.method) + " " + o.path }

func operations(doc map[string]any) []operation {
	var out []operation
	for _, path := range slices.Sorted(maps.Keys(obj(doc["paths"]))) {
		item := obj(obj(doc["paths"])[path])
		for _, m := range methods {
			if op := obj(item[m]); op != nil {
				out = append(out, operation{m, path, op})
			}
		}
	}
	return out
}

// resolveRef follows a local JSON pointer ("#/components/schemas/Flavor").
func resolveRef(doc map[string]any, ref string) (any, error) {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("%q is not a local reference", ref)
	}
	var cur any = doc
	for _, tok := range strings.Split(p, "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m := obj(cur)
		if m == nil {
			return nil, fmt.Errorf("%q: %q is not inside an object", ref, tok)
		}
		next, ok := m[tok]
		if !ok {
			return nil, fmt.Errorf("%q: no %q", ref, tok)
		}
		cur = next
	}
	return cur, nil
}

// derefSchema returns v, or what it references when it is a {"$ref"}.
func derefSchema(t *testing.T, doc map[string]any, v any) map[string]any {
	t.Helper()
	m := obj(v)
	if ref, ok := m["$ref"].(string); ok {
		target, err := resolveRef(doc, ref)
		if err != nil {
			t.Fatal(err)
		}
		return obj(target)
	}
	return m
}

func TestOpenAPIIsOpenAPI3(t *testing.T) {
	doc := loadOpenAPI(t)
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.0.") {
		t.Errorf("openapi: got %q; want 3.0.x", v)
	}
	info := obj(doc["info"])
	for _, k := range []string{"title", "version", "description"} {
		if s, _ := info[k].(string); s == "" {
			t.Errorf("info.%s is missing", k)
		}
	}
	if len(obj(doc["paths"])) == 0 {
		t.Fatal("no paths")
	}
	schemes := obj(obj(doc["components"])["securitySchemes"])
	if bearer := obj(schemes["bearerAuth"]); bearer["type"] != "http" || bearer["scheme"] != "bearer" {
		t.Errorf("securitySchemes.bearerAuth: got %v; want an http bearer scheme", bearer)
	}

	ids := map[string]string{}
	for _, o := range operations(doc) {
		where := o.pattern()
		id, _ := o.op["operationId"].(string)
		if id == "" {
			t.Errorf("%s: no operationId", where)
		} else if prev, dup := ids[id]; dup {
			t.Errorf("%s: operationId %q is also %s's", where, id, prev)
		}
		ids[id] = where
		if len(strs(o.op["tags"])) == 0 {
			t.Errorf("%s: no tags", where)
		}

		// Path parameters: exactly the path's {wildcards}, required.
		want := map[string]bool{}
		for _, m := range regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(o.path, -1) {
			want[m[1]] = true
		}
		got := map[string]bool{}
		for _, p := range asList(o.op["parameters"]) {
			p := derefSchema(t, doc, p)
			if p["in"] != "path" {
				continue
			}
			name, _ := p["name"].(string)
			got[name] = true
			if p["required"] != true {
				t.Errorf("%s: path parameter %q is not required", where, name)
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: path parameters %v; want %v", where, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}

		// Responses: a success, every error an ErrorBody, 401 exactly
		// where a token is needed.
		resps := obj(o.op["responses"])
		success := false
		for code, r := range resps {
			n, err := strconv.Atoi(code)
			if err != nil {
				t.Errorf("%s: response %q is not a status code", where, code)
				continue
			}
			if n < 300 {
				success = true
				continue
			}
			schema := obj(obj(obj(derefSchema(t, doc, r)["content"])["application/json"])["schema"])
			if schema["$ref"] != "#/components/schemas/ErrorBody" {
				t.Errorf("%s: response %d is not an ErrorBody", where, n)
			}
		}
		if !success {
			t.Errorf("%s: no success response", where)
		}
		security, own := o.op["security"]
		if !own {
			security = doc["security"]
		}
		_, has401 := resps["401"]
		if secured := len(asList(security)) > 0; secured != has401 {
			t.Errorf("%s: secured %v but 401 documented %v", where, secured, has401)
		}
	}
}

// handlerRoutes returns the patterns Handler serves, as the edge
// registered them.
func handlerRoutes(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, p := range (&Server{}).restAPI().Patterns() {
		if out[p] {
			t.Errorf("route %s is registered twice", p)
		}
		out[p] = true
	}
	return out
}

func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	doc := loadOpenAPI(t)
	served := handlerRoutes(t)
	documented := map[string]bool{}
	for _, o := range operations(doc) {
		documented[o.pattern()] = true
	}
	if !served[openAPIRoute] {
		// Until Handler mounts it, the document describes its own route
		// ahead of the handler; every other route must match.
		t.Logf("%s is documented but Handler does not mount it yet", openAPIRoute)
		delete(documented, openAPIRoute)
	}
	for _, p := range slices.Sorted(maps.Keys(served)) {
		if _, path, _ := strings.Cut(p, " "); strings.HasPrefix(path, "/console/") {
			continue // the HTML console is not part of the API
		}
		if !documented[p] {
			t.Errorf("Handler serves %s but openapi.json does not describe it", p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(documented)) {
		if !served[p] {
			t.Errorf("openapi.json describes %s but Handler does not serve it", p)
		}
	}
}

func TestOpenAPIRefsResolve(t *testing.T) {
	doc := loadOpenAPI(t)
	used := map[string]bool{}
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"]; ok {
				s, _ := ref.(string)
				if _, err := resolveRef(doc, s); err != nil {
					t.Errorf("%s: %v", where, err)
				}
				used[s] = true
			}
			for k, x := range v {
				walk(where+"/"+k, x)
			}
		case []any:
			for i, x := range v {
				walk(where+"/"+strconv.Itoa(i), x)
			}
		}
	}
	walk("#", doc)
	comps := obj(doc["components"])
	for _, kind := range []string{"schemas", "parameters", "responses"} {
		for name := range obj(comps[kind]) {
			if ref := "#/components/" + kind + "/" + name; !used[ref] {
				t.Errorf("%s is never referenced", ref)
			}
		}
	}
}

// goSchemas maps the document's schemas to the Go types they describe.
var goSchemas = map[string]reflect.Type{
	"AlertDelivery":       reflect.TypeFor[api.AlertDelivery](),
	"AlertReceiver":       reflect.TypeFor[api.AlertReceiver](),
	"AlertRule":           reflect.TypeFor[api.AlertRule](),
	"AlertRuleUpdate":     reflect.TypeFor[api.AlertRule](),
	"AlertRuleList":       reflect.TypeFor[rest.List[api.AlertRule]](),
	"AssignmentStatus":    reflect.TypeFor[api.AssignmentStatus](),
	"Assignment":          reflect.TypeFor[api.Assignment](),
	"BackendStatus":       reflect.TypeFor[api.BackendStatus](),
	"Capacity":            reflect.TypeFor[api.Capacity](),
	"ComputeSpec":         reflect.TypeFor[api.ComputeSpec](),
	"Condition":           reflect.TypeFor[api.Condition](),
	"DrainRequest":        reflect.TypeFor[api.DrainRequest](),
	"DrainStatus":         reflect.TypeFor[api.DrainStatus](),
	"DrainStep":           reflect.TypeFor[api.DrainStep](),
	"Endpoint":            reflect.TypeFor[api.Endpoint](),
	"ErrorBody":           reflect.TypeFor[api.ErrorBody](),
	"ErrorDetail":         reflect.TypeFor[api.ErrorDetail](),
	"FieldDetail":         reflect.TypeFor[api.FieldDetail](),
	"ReplicaSize":         reflect.TypeFor[api.FlavorSpec](),
	"FlavorUpdate":        reflect.TypeFor[api.Flavor](),
	"Event":               reflect.TypeFor[api.Event](),
	"Quota":               reflect.TypeFor[api.Quota](),
	"Tenant":              reflect.TypeFor[api.Tenant](),
	"TenantList":          reflect.TypeFor[rest.List[api.Tenant]](),
	"TenantQuota":         reflect.TypeFor[TenantQuota](),
	"Config":              reflect.TypeFor[api.Config](),
	"FileMount":           reflect.TypeFor[api.FileMount](),
	"EnvSource":           reflect.TypeFor[api.EnvSource](),
	"SecurityContext":     reflect.TypeFor[api.SecurityContext](),
	"Container":           reflect.TypeFor[api.Container](),
	"ContainerResources":  reflect.TypeFor[api.ContainerResources](),
	"ContainerStatus":     reflect.TypeFor[api.ContainerStatus](),
	"ScratchVolume":       reflect.TypeFor[api.ScratchVolume](),
	"Probe":               reflect.TypeFor[api.Probe](),
	"HTTPGetAction":       reflect.TypeFor[api.HTTPGetAction](),
	"HTTPHeader":          reflect.TypeFor[api.HTTPHeader](),
	"TCPSocketAction":     reflect.TypeFor[api.TCPSocketAction](),
	"GRPCAction":          reflect.TypeFor[api.GRPCAction](),
	"ExecAction":          reflect.TypeFor[api.ExecAction](),
	"GuestAgentAction":    reflect.TypeFor[api.GuestAgentAction](),
	"FlavorHeadroom":      reflect.TypeFor[api.FlavorHeadroom](),
	"ConfigList":          reflect.TypeFor[rest.List[api.Config]](),
	"Secret":              reflect.TypeFor[api.Secret](),
	"SecretList":          reflect.TypeFor[rest.List[api.Secret]](),
	"NetworkPolicy":       reflect.TypeFor[api.NetworkPolicy](),
	"NetworkPolicyUpdate": reflect.TypeFor[api.NetworkPolicy](),
	"NetworkPolicyList":   reflect.TypeFor[rest.List[api.NetworkPolicy]](),
	"NetworkPolicyStatus": reflect.TypeFor[api.NetworkPolicyStatus](),
	"PolicyRegionStatus":  reflect.TypeFor[api.PolicyRegionStatus](),
	"IngressRule":         reflect.TypeFor[api.IngressRule](),
	"PolicyPeer":          reflect.TypeFor[api.PolicyPeer](),
	"PeerSelector":        reflect.TypeFor[api.PeerSelector](),
	"IPBlock":             reflect.TypeFor[api.IPBlock](),
	"PolicyPort":          reflect.TypeFor[api.PolicyPort](),
	"EventList":           reflect.TypeFor[EventList](),
	"FailoverPolicy":      reflect.TypeFor[api.FailoverPolicy](),
	"Flavor":              reflect.TypeFor[api.Flavor](),
	"FlavorList":          reflect.TypeFor[rest.List[api.Flavor]](),
	"FlavorSpec":          reflect.TypeFor[api.FlavorSpec](),
	"HealthCheck":         reflect.TypeFor[api.HealthCheck](),
	"ImageSpec":           reflect.TypeFor[api.ImageSpec](),
	"Listener":            reflect.TypeFor[api.Listener](),
	"LoadbalancerSpec":    reflect.TypeFor[api.LoadbalancerSpec](),
	"NetworkAttachment":   reflect.TypeFor[api.NetworkAttachment](),
	"DNSConfig":           reflect.TypeFor[api.DNSConfig](),
	"Node":                reflect.TypeFor[api.Node](),
	"NodeList":            reflect.TypeFor[NodeList](),
	"NodeNetwork":         reflect.TypeFor[api.NodeNetwork](),
	"NodeProvider":        reflect.TypeFor[api.NodeProvider](),
	"NodeStatus":          reflect.TypeFor[api.NodeStatus](),
	"PortSpec":            reflect.TypeFor[api.PortSpec](),
	"Region":              reflect.TypeFor[api.Region](),
	"RegionList":          reflect.TypeFor[rest.List[api.Region]](),
	"RegionShare":         reflect.TypeFor[api.RegionShare](),
	"RegionStatus":        reflect.TypeFor[api.RegionStatus](),
	"RegionTarget":        reflect.TypeFor[api.RegionTarget](),
	"Replica":             reflect.TypeFor[api.Replica](),
	"ReplicaList":         reflect.TypeFor[ReplicaList](),
	"Resolution":          reflect.TypeFor[Resolution](),
	"ResolvedRecord":      reflect.TypeFor[ResolvedRecord](),
	"Resource":            reflect.TypeFor[api.Resource](),
	"ResourceList":        reflect.TypeFor[ResourceList](),
	"ResourceSpec":        reflect.TypeFor[api.ResourceSpec](),
	"ResourceStatus":      reflect.TypeFor[api.ResourceStatus](),
	"Revision":            reflect.TypeFor[api.Revision](),
	"RevisionList":        reflect.TypeFor[rest.List[api.Revision]](),
	"RolloutPolicy":       reflect.TypeFor[api.RolloutPolicy](),
	"RolloutStatus":       reflect.TypeFor[api.RolloutStatus](),
	"ReserveStatus":       reflect.TypeFor[api.ReserveStatus](),
	"AutoscalePolicy":     reflect.TypeFor[api.AutoscalePolicy](),
	"ScalingRules":        reflect.TypeFor[api.ScalingRules](),
	"AutoscaleStatus":     reflect.TypeFor[api.AutoscaleStatus](),
	"PlanRequest":         reflect.TypeFor[api.PlanRequest](),
	"Plan":                reflect.TypeFor[api.Plan](),
	"ResourcePlan":        reflect.TypeFor[api.ResourcePlan](),
	"ReplicaMove":         reflect.TypeFor[api.ReplicaMove](),
	"JobSpec":             reflect.TypeFor[api.JobSpec](),
	"JobStatus":           reflect.TypeFor[api.JobStatus](),
	"JobRun":              reflect.TypeFor[api.JobRun](),
	"JobAttempt":          reflect.TypeFor[api.JobAttempt](),
	"ScheduleRule":        reflect.TypeFor[api.ScheduleRule](),
	"SpecOverride":        reflect.TypeFor[api.SpecOverride](),
	"Status":              reflect.TypeFor[Status](),
	"Caller":              reflect.TypeFor[Caller](),
	"TokenRequest":        reflect.TypeFor[TokenRequest](),
	"TokenInfo":           reflect.TypeFor[TokenInfo](),
	"NewToken":            reflect.TypeFor[NewTokenResponse](),
	"TokenList":           reflect.TypeFor[rest.List[TokenInfo]](),
	"VolumeAttachment":    reflect.TypeFor[api.VolumeAttachment](),
	"VolumeMount":         reflect.TypeFor[api.VolumeMount](),
	"VolumeSpec":          reflect.TypeFor[api.VolumeSpec](),
}

// handWritten are schemas with no Go type of their own: enums of string
// types (checked where they are used), the Duration encoding, and bodies
// that rest.go decodes into anonymous structs. Check them by eye.
var handWritten = []string{
	"CordonRequest", "Duration", "EmptyObject", "Health", "Phase", "ProbeStatus",
	"ProviderKind", "ResourceKind", "RollbackRequest", "ScaleRequest", "SecretType",
}

// outputOnly are the schemas only servers send: their required fields
// are exactly those always encoded (no omitempty or omitzero).
var outputOnly = []string{
	"AlertDelivery", "AlertRuleList",
	"Assignment", "AssignmentStatus", "BackendStatus", "Capacity", "Condition", "DrainStatus",
	"DrainStep", "Endpoint", "ErrorBody", "ErrorDetail", "Event", "EventList", "FieldDetail", "FlavorList",
	"NetworkAttachment", "DNSConfig", "Node", "NodeList", "NodeNetwork", "NodeProvider", "NodeStatus", "RegionList",
	"RegionShare", "RegionStatus", "Replica", "ReplicaList", "Resolution", "ResolvedRecord", "ResourceList", "ResourceStatus",
	"Revision", "RevisionList", "RolloutStatus", "Status", "VolumeAttachment",
}

type jsonField struct {
	name string
	typ  reflect.Type
	omit bool
}

// jsonFields lists the JSON fields of a struct as encoding/json writes
// them, embedded structs promoted.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			out = append(out, jsonFields(ft)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omit := slices.ContainsFunc(strings.Split(opts, ","), func(o string) bool { return o == "omitempty" || o == "omitzero" })
		out = append(out, jsonField{name, f.Type, omit})
	}
	return out
}

// refName returns the schema a property references, directly or through
// a one-element allOf (which lets a reference carry a description), and
// the schema itself.
func refName(t *testing.T, doc map[string]any, s map[string]any) (string, map[string]any) {
	t.Helper()
	if all := asList(s["allOf"]); len(all) == 1 {
		s = obj(all[0])
	}
	ref, ok := s["$ref"].(string)
	if !ok {
		return "", s
	}
	return strings.TrimPrefix(ref, "#/components/schemas/"), derefSchema(t, doc, s)
}

// properties merges a schema's properties and required fields with those
// of its allOf parts.
func properties(t *testing.T, doc map[string]any, s map[string]any) (map[string]any, map[string]bool) {
	t.Helper()
	props, req := map[string]any{}, map[string]bool{}
	for _, part := range asList(s["allOf"]) {
		p, r := properties(t, doc, derefSchema(t, doc, part))
		maps.Copy(props, p)
		maps.Copy(req, r)
	}
	maps.Copy(props, obj(s["properties"]))
	for _, r := range strs(s["required"]) {
		req[r] = true
	}
	return props, req
}

var (
	timeType     = reflect.TypeFor[time.Time]()
	durationType = reflect.TypeFor[api.Duration]()
)

// checkType reports how schema s fails to describe Go type gt.
func checkType(t *testing.T, doc map[string]any, gt reflect.Type, s map[string]any) string {
	t.Helper()
	for gt.Kind() == reflect.Pointer {
		gt = gt.Elem()
	}
	name, rs := refName(t, doc, s)
	typ, _ := rs["type"].(string)
	switch {
	case gt == durationType:
		if name != "Duration" {
			return "want a $ref to Duration"
		}
	case gt == timeType:
		if typ != "string" || rs["format"] != "date-time" {
			return "want a date-time string"
		}
	case gt.Kind() == reflect.Struct:
		if name == "" || goSchemas[name] != gt {
			return fmt.Sprintf("want a $ref to the schema of %s (got %q)", gt, name)
		}
	case gt.Kind() == reflect.String:
		if typ != "string" {
			return "want type string"
		}
	case gt.Kind() == reflect.Bool:
		if typ != "boolean" {
			return "want type boolean"
		}
	case gt.Kind() >= reflect.Int && gt.Kind() <= reflect.Uint64:
		if typ != "integer" {
			return "want type integer"
		}
	case gt.Kind() == reflect.Float32 || gt.Kind() == reflect.Float64:
		if typ != "number" {
			return "want type number"
		}
	case gt.Kind() == reflect.Slice || gt.Kind() == reflect.Array:
		if typ != "array" {
			return "want type array"
		}
		if why := checkType(t, doc, gt.Elem(), obj(rs["items"])); why != "" {
			return "items: " + why
		}
	case gt.Kind() == reflect.Map:
		if typ != "object" {
			return "want type object"
		}
		if why := checkType(t, doc, gt.Elem(), obj(rs["additionalProperties"])); why != "" {
			return "additionalProperties: " + why
		}
	}
	return ""
}

func TestOpenAPISchemasMatchGoTypes(t *testing.T) {
	doc := loadOpenAPI(t)
	schemas := obj(obj(doc["components"])["schemas"])
	for name := range schemas {
		if goSchemas[name] == nil && !slices.Contains(handWritten, name) {
			t.Errorf("schema %s is neither mapped to a Go type in goSchemas nor listed in handWritten", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(goSchemas)) {
		gt := goSchemas[name]
		s := obj(schemas[name])
		if s == nil {
			t.Errorf("no schema %s for %s", name, gt)
			continue
		}
		props, required := properties(t, doc, s)
		fields := jsonFields(gt)
		always := map[string]bool{}
		for _, f := range fields {
			p, ok := props[f.name]
			if !ok {
				t.Errorf("%s: %s has JSON field %q; the schema lacks it", name, gt, f.name)
				continue
			}
			if why := checkType(t, doc, f.typ, obj(p)); why != "" {
				t.Errorf("%s.%s: Go type %s: %s", name, f.name, f.typ, why)
			}
			if !f.omit {
				always[f.name] = true
			}
		}
		for p := range props {
			if !slices.ContainsFunc(fields, func(f jsonField) bool { return f.name == p }) {
				t.Errorf("%s: the schema has property %q; %s has no such JSON field", name, p, gt)
			}
		}
		for r := range required {
			if _, ok := props[r]; !ok {
				t.Errorf("%s: required %q is not a property", name, r)
			}
		}
		if slices.Contains(outputOnly, name) && !maps.Equal(required, always) {
			t.Errorf("%s: required %v; want the fields always encoded, %v",
				name, slices.Sorted(maps.Keys(required)), slices.Sorted(maps.Keys(always)))
		}
	}
}

func TestOpenAPIHandler(t *testing.T) {
	h := OpenAPIHandler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/openapi.json", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET: %d; want 200", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type: %q; want application/json", ct)
	}
	if rec.Body.String() != string(openAPIDocument) {
		t.Error("GET: the body is not the document")
	}
	etag := rec.Header().Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	rec = httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/v1/openapi.json", nil)
	req.Header.Set("If-None-Match", etag)
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Errorf("GET with If-None-Match: %d; want 304", rec.Code)
	}
}

// TestOpenAPIStatusCodes sends one request to every documented operation
// of a real Handler (fixtures: flavor small, resource web, region eu, a
// fake RegionService with node n1) and checks that the status it gets is
// documented for that operation, and that a JSON success body has only
// properties of its schema.
func TestOpenAPIStatusCodes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs an embedded etcd")
	}
	doc := loadOpenAPI(t)
	served := handlerRoutes(t)
	e := newEnv(t, envConfig{})
	e.fixtures(t, map[string]string{"eu": newFakeRegion("eu", "n1").serve(t, e.pki)})
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("web")))

	bodies := map[string]string{
		"createFlavor":     `{"name":"tiny","kind":"container","spec":{"vcpus":0.1,"memoryMiB":64}}`,
		"updateFlavor":     `{"kind":"container","spec":{"vcpus":0.5,"memoryMiB":512}}`,
		"createResource":   `{"name":"api","kind":"Compute","spec":{"flavor":"small","compute":{"image":"busybox"}}}`,
		"updateResource":   `{"kind":"Compute","replicas":2,"spec":{"flavor":"small","compute":{"image":"busybox","env":{"V":"2"}}}}`,
		"scaleResource":    `{"replicas":3}`,
		"rollbackResource": `{"revision":1}`,
		"registerRegion":   `{"name":"us","endpoint":"127.0.0.1:2"}`,
		"cordonNode":       `{"reason":"test"}`,
		"drainNode":        `{"deadline":"1m"}`,
	}
	// Deletions last, so that the other operations find their objects.
	ops := operations(doc)
	slices.SortStableFunc(ops, func(a, b operation) int {
		return boolInt(a.method == "delete") - boolInt(b.method == "delete")
	})
	for _, o := range ops {
		if !served[o.pattern()] {
			continue // the document's own route, not mounted yet
		}
		path := o.path
		name := "web"
		switch {
		case strings.HasPrefix(path, "/v1/flavors/"):
			name = "small"
		case strings.HasPrefix(path, "/v1/regions/{name}"):
			name = "eu"
		}
		path = strings.NewReplacer("{name}", name, "{region}", "eu", "{node}", "n1", "{number}", "1").Replace(path)
		id, _ := o.op["operationId"].(string)
		var body any
		if b, ok := bodies[id]; ok {
			body = b
		}
		r := e.do(t, strings.ToUpper(o.method), path, body)
		resps := obj(o.op["responses"])
		resp, ok := resps[strconv.Itoa(r.code)]
		if !ok {
			t.Errorf("%s %s (%s): got %s; documented: %v", strings.ToUpper(o.method), path, id, r, slices.Sorted(maps.Keys(resps)))
			continue
		}
		if r.code >= 300 {
			continue
		}
		schema := obj(obj(obj(derefSchema(t, doc, resp)["content"])["application/json"])["schema"])
		name, s := refName(t, doc, schema)
		if name == "" || len(obj(s["properties"]))+len(asList(s["allOf"])) == 0 {
			continue
		}
		props, _ := properties(t, doc, s)
		var got map[string]any
		if err := json.Unmarshal(r.body, &got); err != nil {
			t.Errorf("%s %s: %v", o.method, path, err)
			continue
		}
		for k := range got {
			if _, ok := props[k]; !ok {
				t.Errorf("%s %s: the answer has %q, which schema %s lacks", strings.ToUpper(o.method), path, k, name)
			}
		}
	}

	if served[openAPIRoute] {
		// Mounted: it must be served without a token.
		r := e.do(t, "GET", "/v1/openapi.json", nil, withToken(""))
		if r.code != http.StatusOK || string(r.body) != string(openAPIDocument) {
			t.Errorf("GET /v1/openapi.json without a token: %d; want 200 and the document (is it exempt in authenticate?)", r.code)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The query parameters a route takes (the ones the edge lets through,
// refusing any other) are those the document describes for it.
func TestOpenAPIQueryParametersAreServed(t *testing.T) {
	doc := loadOpenAPI(t)
	a := (&Server{}).restAPI()
	for _, o := range operations(doc) {
		var documented []string
		for _, p := range asList(o.op["parameters"]) {
			if p := derefSchema(t, doc, p); p["in"] == "query" {
				documented = append(documented, p["name"].(string))
			}
		}
		slices.Sort(documented)
		served := a.Query(o.pattern())
		slices.Sort(served)
		if !slices.Equal(served, documented) {
			t.Errorf("%s takes the query parameters %v; openapi.json describes %v", o.pattern(), served, documented)
		}
	}
}
