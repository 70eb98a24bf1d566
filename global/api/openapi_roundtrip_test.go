package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/stratahq/strata/internal/api"
)

// loadKinDocument loads openapi.json with kin-openapi and validates it,
// as an OpenAPI linter does.
func loadKinDocument(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(openAPIDocument)
	if err != nil {
		t.Fatalf("kin-openapi cannot load openapi.json: %v", err)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
	return doc
}

func TestOpenAPIValidatesWithKin(t *testing.T) { loadKinDocument(t) }

// exchange is one request and its answer, as the client saw them.
type exchange struct {
	req  *http.Request
	body []byte
	resp *response
	// invalid marks a request sent to be refused: only its answer must
	// match the document.
	invalid bool
}

// TestOpenAPIRoundTrip sends a set of real requests to a real server
// (embedded etcd, a fake region) and checks each request and answer
// against openapi.json with kin-openapi's validator: every status, header
// and body the server sends must be what the document says, and every
// request the document allows must be one the server takes.
func TestOpenAPIRoundTrip(t *testing.T) {
	doc := loadKinDocument(t)
	e := newEnv(t, envConfig{})
	doc.Servers = openapi3.Servers{{URL: e.srv.URL}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu        sync.Mutex
		exchanges []exchange
		invalid   bool
	)
	e.observe = func(req *http.Request, body []byte, r *response) {
		mu.Lock()
		defer mu.Unlock()
		exchanges = append(exchanges, exchange{req: req, body: body, resp: r, invalid: invalid})
	}
	bad := func(fn func()) {
		invalid = true
		defer func() { invalid = false }()
		fn()
	}

	eu := newFakeRegion("eu", "n1", "n2")
	eu.events = 4
	e.fixtures(t, map[string]string{"eu": eu.serve(t, e.pki)})
	poll(t, "region reachable", func() error {
		if r := e.do(t, "GET", "/v1/nodes", nil); len(decodeAs[NodeList](t, r).Items) != 2 {
			return errors.New("got " + r.String())
		}
		return nil
	})
	ifMatch := func(r *response) reqOption { return withHeader("If-Match", r.header.Get("ETag")) }
	infra := e.token(t, DefaultTenant, api.RoleInfra)

	// Flavors.
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/flavors?limit=2", nil))
	small := e.must(t, http.StatusOK, e.do(t, "GET", "/v1/flavors/small", nil))
	e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/flavors/small", `{"kind":"container","spec":{"vcpus":0.5,"memoryMiB":300}}`, ifMatch(small)))
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/flavors", `{"name":"tmp","kind":"vm","spec":{"vcpus":1,"memoryMiB":512,"diskMiB":1024}}`))
	e.must(t, http.StatusOK, e.do(t, "DELETE", "/v1/flavors/tmp", nil))

	// Resources of every kind, and what is done to them.
	key := withHeader("Idempotency-Key", "roundtrip-1")
	web := e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("web", func(m map[string]any) {
		m["labels"] = map[string]string{"app": "web"}
		m["replicas"] = 2
		m["schedule"] = map[string]any{"regions": []map[string]any{{"name": "eu", "weight": 2}}}
		m["failover"] = map[string]any{"after": "30s", "toRegions": []string{"eu"}}
		m["rollout"] = map[string]any{"maxSurge": 1, "maxUnavailable": 1}
		m["spec"].(map[string]any)["compute"] = map[string]any{"image": "busybox", "command": []string{"sh", "-c", "sleep 1d"},
			"env": map[string]string{"A": "b"}, "ports": []map[string]any{{"containerPort": 80}}, "stopGracePeriod": "5s"}
	}), key))
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", `{"name":"lb","kind":"Loadbalancer","spec":{"loadbalancer":{"listeners":[{"port":30080,"protocol":"http"}],"selector":{"app":"web"},"healthCheck":{"type":"http","path":"/healthz","interval":"2s"}}}}`))
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", `{"name":"vol","kind":"Volume","spec":{"volume":{"sizeMiB":64}}}`))
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", `{"name":"img","kind":"Image","spec":{"image":{"ref":"docker.io/library/busybox:latest"}}}`))
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", `{"name":"batch","kind":"Job","spec":{"flavor":"small","compute":{"image":"busybox","command":["sh","-c","exit 0"]},"job":{"completions":3,"parallelism":2,"backoffLimit":1,"activeDeadline":"10m","schedule":"*/5 * * * *","concurrencyPolicy":"Forbid","historyLimit":2,"ttl":"30m"}}}`))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/batch", nil))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources?kind=Job", nil))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources?selector=app%3Dweb&limit=1", nil))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources?kind=Compute", nil))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/web", nil, ifMatch(web)))
	web2 := e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/resources/web", computeBody("web", func(m map[string]any) {
		m["spec"].(map[string]any)["compute"] = map[string]any{"image": "busybox:2"}
	}), ifMatch(web)))
	e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/web/scale", `{"replicas":3}`))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/web/revisions", nil))
	e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/web/revisions/1/pin", nil))
	e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/web/revisions/1/unpin", nil))
	e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/web/rollback", `{"revision":1}`))
	e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/web/rollout/pause", nil))
	e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/web/rollout/resume", nil))
	e.must(t, http.StatusConflict, e.do(t, "POST", "/v1/resources/web/rollout/cancel", nil)) // no rollout now
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/web/replicas", nil))
	// A load balancer's replica has no flavor: its size is zeros.
	lb := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/lb", nil)))
	eu.mu.Lock()
	eu.replicas = append(eu.replicas, api.Replica{Assignment: api.Assignment{
		ID: "lb-0", Tenant: DefaultTenant, Resource: "lb", ResourceUID: lb.UID, Kind: api.KindLoadbalancer, Provider: api.ProviderLoadbalancer,
		Revision: 1, Node: "n1", Desired: api.DesiredRunning, Spec: lb.Spec, Generation: 1, CreatedAt: now(),
	}, Region: "eu", Phase: api.PhaseReady})
	eu.mu.Unlock()
	if reps := decodeAs[ReplicaList](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/lb/replicas", nil))); len(reps.Items) != 1 {
		t.Fatalf("got %d replicas of lb; want 1", len(reps.Items))
	}
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/lb/logs?tail=10", nil))
	e.must(t, http.StatusAccepted, e.do(t, "DELETE", "/v1/resources/vol", nil))

	// Alert rules.
	rule := e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/alertrules", alertRuleBody("nodes")))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/alertrules", nil))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/alertrules/nodes", nil))
	e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/alertrules/nodes", `{"reasons":["NodeDown"],"receiver":{"type":"alertmanager","url":"https://hooks.example.com/a"}}`, ifMatch(rule)))
	e.must(t, http.StatusOK, e.do(t, "DELETE", "/v1/alertrules/nodes", nil))
	// Network policies.
	pol := e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/networkpolicies", `{"name":"web-only","selector":{"app":"web"},"ingress":[{"from":[{"resources":{"matchLabels":{"app":"lb"}}},{"ipBlock":{"cidr":"192.168.0.0/16","except":["192.168.1.0/24"]}}],"ports":[{"protocol":"tcp","port":80},{"protocol":"udp","port":5000,"endPort":5010}]}]}`))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/networkpolicies", nil))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/networkpolicies/web-only?tenant=default", nil))
	pol2 := e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/networkpolicies/web-only", `{"selector":{"app":"web"},"ingress":[]}`, ifMatch(pol)))
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/networkpolicies", `{"name":"tmp"}`))
	e.must(t, http.StatusOK, e.do(t, "DELETE", "/v1/networkpolicies/tmp", nil))
	// Configs and secrets.
	conf := e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/configs", `{"name":"conf","labels":{"app":"web"},"data":{"app.conf":"x=1\n"}}`))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/configs?limit=1", nil))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/configs/conf", nil))
	e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/configs/conf", `{"data":{"app.conf":"x=2\n"}}`, ifMatch(conf)))
	e.must(t, http.StatusOK, e.do(t, "DELETE", "/v1/configs/conf", nil))
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/secrets", `{"name":"reg","type":"registry","data":{"registry":"r.example:5000","username":"u","password":"p"}}`))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/secrets?limit=1", nil))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/secrets/reg?reveal=true", nil))
	e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/secrets/reg", `{"type":"registry","data":{"registry":"r.example:5000","username":"u","password":"p2"}}`))
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/configs", `{"name":"conf2","data":{"app.conf":"x=1\n"}}`))
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("withconf", func(m map[string]any) {
		m["spec"].(map[string]any)["compute"] = map[string]any{"image": "r.example:5000/app:1", "pullSecret": "reg",
			"files": []map[string]any{{"config": "conf2", "path": "/etc/app"}}, "envFrom": []map[string]any{{"config": "conf2", "key": "app.conf", "name": "APP_CONF"}}}
	})))
	bad(func() { e.must(t, http.StatusConflict, e.do(t, "DELETE", "/v1/secrets/reg", nil)) }) // withconf pulls with it

	// Regions, nodes, events, tokens, status, probes.
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/regions", nil))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/regions/eu", nil))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/nodes?region=eu&selector=pool%3Da&limit=1", nil))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/regions/eu/nodes/n1", nil))
	e.must(t, http.StatusOK, e.do(t, "POST", "/v1/regions/eu/nodes/n1/cordon", `{"reason":"maintenance"}`))
	e.must(t, http.StatusOK, e.do(t, "POST", "/v1/regions/eu/nodes/n1/uncordon", nil))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/events?limit=2", nil))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/events?region=eu&after=1000-0", nil))
	tok := e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/tokens", `{"tenant":"default","role":"viewer","name":"ci"}`))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/tokens?limit=1", nil))
	e.must(t, http.StatusOK, e.do(t, "DELETE", "/v1/tokens/"+decodeAs[NewTokenResponse](t, tok).ID, nil))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/status", nil))
	e.must(t, http.StatusOK, e.do(t, "GET", "/healthz", nil, withToken("")))
	e.must(t, http.StatusOK, e.do(t, "GET", "/readyz", nil, withToken("")))
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/openapi.json", nil, withToken("")))

	// Refusals: their answers must be documented too.
	bad(func() {
		e.must(t, http.StatusBadRequest, e.do(t, "POST", "/v1/resources", `{"name":"Bad","kind":"Compute","replicas":-1,"spec":{"flavor":"small","compute":{"image":""}}}`))
		e.must(t, http.StatusBadRequest, e.do(t, "POST", "/v1/resources", `{"name":"a","name":"b"}`))
		e.must(t, http.StatusBadRequest, e.do(t, "POST", "/v1/resources", `{"name":"j","kind":"Job","spec":{"flavor":"small","compute":{"image":"busybox"},"job":{"backoffLimit":-1,"schedule":"61 * * * *"}}}`))
		e.must(t, http.StatusBadRequest, e.do(t, "GET", "/v1/resources?limit=-5", nil))
		e.must(t, http.StatusBadRequest, e.do(t, "GET", "/v1/events?after=garbage", nil))
		e.must(t, http.StatusBadRequest, e.do(t, "GET", "/v1/resources?limt=5", nil))
		e.must(t, http.StatusBadRequest, e.do(t, "GET", "/v1/regions?all=true", nil))
		e.must(t, http.StatusBadRequest, e.do(t, "GET", "/readyz?verbose=1", nil, withToken("")))
		e.must(t, http.StatusNotFound, e.do(t, "GET", "/v1/nodes?region=mars", nil))
		e.must(t, http.StatusNotFound, e.do(t, "GET", "/v1/events?region=mars", nil))
		// An infra token reads no tenant's resources (TestOpenAPIRoles
		// calls every operation as every role).
		for _, path := range []string{"/v1/resources/web", "/v1/resources/web/revisions", "/v1/resources/web/replicas", "/v1/resources/lb/logs"} {
			e.must(t, http.StatusForbidden, e.do(t, "GET", path, nil, withToken(infra)))
		}
		e.must(t, http.StatusUnauthorized, e.do(t, "GET", "/v1/resources", nil, withToken("")))
		e.must(t, http.StatusNotFound, e.do(t, "GET", "/v1/resources/nothing", nil))
		e.must(t, http.StatusBadRequest, e.do(t, "POST", "/v1/alertrules", alertRuleBody("bad", func(m map[string]any) { m["reasons"] = []string{} })))
		e.must(t, http.StatusNotFound, e.do(t, "GET", "/v1/alertrules/nothing", nil))
		e.must(t, http.StatusConflict, e.do(t, "PUT", "/v1/resources/web", computeBody("web"), ifMatch(web)))
		e.must(t, http.StatusConflict, e.do(t, "POST", "/v1/resources", computeBody("web")))
		e.must(t, http.StatusUnsupportedMediaType, e.do(t, "POST", "/v1/flavors", `{}`, withHeader("Content-Type", "text/plain")))
		e.must(t, http.StatusRequestEntityTooLarge, e.do(t, "POST", "/v1/resources", `{"name":"`+strings.Repeat("x", 2<<20)+`"}`))
		e.must(t, http.StatusNotFound, e.do(t, "GET", "/v1/resources/web/logs", nil)) // no replicas in the fake region
		e.must(t, http.StatusBadRequest, e.do(t, "POST", "/v1/networkpolicies", `{"name":"p","ingress":[{"from":[{}],"ports":[{"protocol":"icmp","port":70000}]}]}`))
		e.must(t, http.StatusBadRequest, e.do(t, "POST", "/v1/networkpolicies", `{"name":"p","ingress":[{"from":[{"ipBlock":{"cidr":"10.0.0.1/8"}}]}]}`))
		e.must(t, http.StatusNotFound, e.do(t, "GET", "/v1/networkpolicies/nothing", nil))
		e.must(t, http.StatusConflict, e.do(t, "PUT", "/v1/networkpolicies/web-only", `{"selector":{}}`, ifMatch(pol)))
		e.must(t, http.StatusConflict, e.do(t, "POST", "/v1/networkpolicies", `{"name":"web-only"}`))
		e.must(t, http.StatusBadRequest, e.do(t, "POST", "/v1/secrets", `{"name":"s","data":{"a/b":"v"}}`))
		e.must(t, http.StatusNotFound, e.do(t, "GET", "/v1/secrets/none", nil))
		e.must(t, http.StatusBadRequest, e.do(t, "GET", "/v1/secrets?reveal=maybe", nil))
	})
	_ = web2
	_ = pol2

	if len(exchanges) < 50 {
		t.Fatalf("recorded %d exchanges; want the whole set", len(exchanges))
	}
	for i, x := range exchanges {
		name := fmt.Sprintf("%d %s %s -> %d", i, x.req.Method, x.req.URL.RequestURI(), x.resp.code)
		if err := validateExchange(t.Context(), router, x); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// validateExchange checks one exchange against the document.
func validateExchange(ctx context.Context, router routers.Router, x exchange) error {
	req := x.req.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(x.body))
	route, params, err := router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("no operation in the document: %w", err)
	}
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
	}
	if !x.invalid {
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			return fmt.Errorf("request does not match the document: %w", err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 x.resp.code,
		Header:                 x.resp.header,
		Body:                   io.NopCloser(bytes.NewReader(x.resp.body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Errorf("answer %s does not match the document: %w", api.Clip(string(x.resp.body)), err)
	}
	return nil
}
