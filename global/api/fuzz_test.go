package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/rest"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/testkit/etcdtest"
)

// fuzzServer is a global API on embedded etcd, as served (behind Guard),
// with an admin token, a flavor "small" and a resource "web".
func fuzzServer(f *testing.F) (http.Handler, string) {
	f.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(cancel)
	st := state.New(store.New(etcdtest.Client(f, etcdtest.Embedded(f)), "/strata/global/"))
	svc, err := New(Options{State: st, ID: "fuzz", Version: "test"})
	if err != nil {
		f.Fatal(err)
	}
	go func() { _ = svc.Run(ctx) }()
	poll(f, "service ready", func() error { return svc.Ready(ctx) })
	token, _, err := svc.Tokens().New(ctx, DefaultTenant, api.RoleAdmin, "fuzz")
	if err != nil {
		f.Fatal(err)
	}
	h := rest.Guard(svc.Handler(), rest.GuardOptions{})
	for _, r := range []struct{ path, body string }{
		{"/v1/flavors", `{"name":"small","kind":"container","spec":{"vcpus":0.5,"memoryMiB":256}}`},
		{"/v1/resources", `{"name":"web","kind":"Compute","spec":{"flavor":"small","compute":{"image":"busybox"}}}`},
		{"/v1/networkpolicies", `{"name":"web-only","selector":{"app":"web"},"ingress":[{"from":[{"resources":{}}]}]}`},
	} {
		if rec := serveFuzz(h, token, "POST", r.path, "", []byte(r.body)); rec.Code != http.StatusCreated {
			f.Fatalf("POST %s: got %d %s", r.path, rec.Code, rec.Body)
		}
	}
	return h, token
}

func serveFuzz(h http.Handler, token, method, path, query string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://127.0.0.1"+path, bytes.NewReader(body))
	req.URL.RawQuery = query
	req.Header.Set("Authorization", "Bearer "+token)
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// checkAnswer fails t for a 5xx, or an error that is not an
// api.ErrorBody in JSON.
func checkAnswer(t *testing.T, what string, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code >= 500 {
		t.Fatalf("%s: got %d %s; want no 5xx", what, rec.Code, rec.Body)
	}
	if rec.Code < 400 {
		return
	}
	var eb api.ErrorBody
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" || json.Unmarshal(rec.Body.Bytes(), &eb) != nil || eb.Error.Code == "" {
		t.Fatalf("%s: got %d %q %s; want a JSON api.ErrorBody", what, rec.Code, ct, rec.Body)
	}
}

// bodyRoutes take a JSON body.
var bodyRoutes = []struct{ method, path string }{
	{"POST", "/v1/resources"},
	{"PUT", "/v1/resources/web"},
	{"POST", "/v1/resources/web/scale"},
	{"POST", "/v1/resources/web/rollback"},
	{"POST", "/v1/flavors"},
	{"PUT", "/v1/flavors/small"},
	{"POST", "/v1/tokens"},
	{"POST", "/v1/regions"},
	{"POST", "/v1/networkpolicies"},
	{"PUT", "/v1/networkpolicies/web-only"},
}

// FuzzRESTBodies sends arbitrary bodies to the routes that decode one:
// no 5xx, every refusal a JSON error.
func FuzzRESTBodies(f *testing.F) {
	h, token := fuzzServer(f)
	seeds := []string{
		`{"name":"a","kind":"Compute","replicas":2,"spec":{"flavor":"small","compute":{"image":"x","command":["sh","-c","true"],"env":{"A":"1"}}},"schedule":{"regions":[{"name":"eu","weight":2}]},"failover":{"after":"30s"}}`,
		`{"name":"web","kind":"Compute","spec":{"flavor":"small","compute":{"image":"y"}},"resourceVersion":1}`,
		`{"name":"lb","kind":"Loadbalancer","spec":{"loadbalancer":{"listeners":[{"port":80}],"selector":{"a":"b"},"healthCheck":{"interval":"1s"}}}}`,
		`{"replicas":3}`, `{"revision":1}`,
		`{"name":"f","kind":"vm","spec":{"vcpus":2,"memoryMiB":512}}`,
		`{"tenant":"default","role":"viewer","name":"ci"}`,
		`{"name":"eu","endpoint":"127.0.0.1:1"}`,
		`{"name":"p","selector":{"a":"b"},"ingress":[{"from":[{"ipBlock":{"cidr":"10.0.0.0/8","except":["10.1.0.0/16"]}},{"resources":{"matchLabels":{"x":"y"}}}],"ports":[{"protocol":"udp","port":53,"endPort":54}]}]}`,
		`{"name":"a","name":"b"}`, `[]`, `{"x":1}`, `{"replicas":1e400}`, ``,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		r := bodyRoutes[int(route)%len(bodyRoutes)]
		checkAnswer(t, r.method+" "+r.path+" "+string(body), serveFuzz(h, token, r.method, r.path, "", body))
	})
}

// queryRoutes read query parameters.
var queryRoutes = []string{
	"/v1/resources", "/v1/flavors", "/v1/tokens", "/v1/regions", "/v1/nodes", "/v1/events",
	"/v1/resources/web", "/v1/resources/web/revisions", "/v1/flavors/small",
	"/v1/networkpolicies", "/v1/networkpolicies/web-only",
}

// FuzzRESTQueries sends arbitrary query strings to the routes that read
// one: no 5xx, every refusal a JSON error.
func FuzzRESTQueries(f *testing.F) {
	h, token := fuzzServer(f)
	seeds := []string{
		"limit=2", "limit=-5", "limit=ten", "continue=YTp3ZWI", "continue=garbage", "selector=app%3Dweb,tier", "selector=a+in+(b,c)",
		"kind=Compute", "kind=Nope", "tenant=other", "region=mars", "after=eu%3D1000-0", "after=garbage", "object=node%2Fn1",
		"limit=1&continue=%00", "%zz", "tenant=Bad_Name&limit=99999999999999999999",
	}
	for i, s := range seeds {
		f.Add(uint8(i), s)
	}
	f.Fuzz(func(t *testing.T, route uint8, query string) {
		path := queryRoutes[int(route)%len(queryRoutes)]
		if strings.ContainsAny(query, "#\r\n") {
			query = strings.NewReplacer("#", "%23", "\r", "%0D", "\n", "%0A").Replace(query)
		}
		checkAnswer(t, "GET "+path+"?"+query, serveFuzz(h, token, "GET", path, query, nil))
	})
}
