package api

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/pki"
	globalv1 "github.com/stratahq/strata/proto/global/v1"
)

// TestConfigRefs: a Compute spec naming configs and secrets is checked
// (they exist in the tenant, a pull secret is a registry one, no VM), and
// a region gets their data (secrets decrypted) only for what a resource
// names, and only as itself.
func TestConfigRefs(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, map[string]string{"eu": "127.0.0.1:1", "us": "127.0.0.1:2"})
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/configs", `{"name":"conf","data":{"app.conf":"x=1"}}`))
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/secrets", `{"name":"db","data":{"password":"pw-9"}}`))
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/secrets", `{"name":"reg","type":"registry","data":{"registry":"r.example:5000","username":"u","password":"rp"}}`))
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/secrets", `{"name":"other","data":{"k":"not-for-web"}}`))
	compute := func(name, flavor string, c map[string]any) map[string]any {
		return computeBody(name, func(m map[string]any) {
			m["spec"].(map[string]any)["flavor"] = flavor
			c["image"] = "busybox"
			m["spec"].(map[string]any)["compute"] = c
		})
	}
	web := map[string]any{
		"files":      []map[string]any{{"config": "conf", "path": "/etc/app"}, {"secret": "db", "path": "/run/secrets/db"}},
		"envFrom":    []map[string]any{{"secret": "db", "key": "password", "name": "DB_PASSWORD"}},
		"pullSecret": "reg",
	}
	webBody := compute("web", "small", web)
	webBody["schedule"] = map[string]any{"regions": []map[string]any{{"name": "eu"}}}
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", webBody))

	for _, tc := range []struct {
		name string
		c    map[string]any
		want string
	}{
		{"missing config", map[string]any{"files": []map[string]any{{"config": "nope", "path": "/etc/x"}}}, `config \"nope\" does not exist in tenant \"default\"`},
		{"pull secret not registry", map[string]any{"pullSecret": "db"}, `secret \"db\" is of type opaque, not registry`},
		{"both kinds", map[string]any{"envFrom": []map[string]any{{"config": "conf", "secret": "db"}}}, "names a config and a secret"},
		{"name without key", map[string]any{"envFrom": []map[string]any{{"config": "conf", "name": "X"}}}, "envFrom[0].name: needs a key"},
		{"relative path", map[string]any{"files": []map[string]any{{"config": "conf", "path": "etc"}}}, `files[0].path: \"etc\" must be an absolute path`},
	} {
		r := e.do(t, "POST", "/v1/resources", compute("bad", "small", tc.c))
		if r.code != http.StatusBadRequest || !strings.Contains(string(r.body), tc.want) {
			t.Errorf("%s: got %s; want 400 with %q", tc.name, r, tc.want)
		}
	}
	// A VM takes files and envFrom (its config drive), not a pull secret.
	r := e.do(t, "POST", "/v1/resources", compute("vm", "vmx", map[string]any{"pullSecret": "reg"}))
	if r.code != http.StatusBadRequest || !strings.Contains(string(r.body), "a VM pulls no image") {
		t.Errorf("a VM with a pull secret: got %s; want 400 a VM pulls no image", r)
	}
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", `{"name":"vmimg","kind":"Image","spec":{"image":{"kernel":"/srv/vm/vmlinuz"}}}`))
	vm := compute("vm", "vmx", map[string]any{
		"files":   []map[string]any{{"config": "conf", "path": "/etc/app"}, {"secret": "db", "path": "/run/secrets/db"}},
		"envFrom": []map[string]any{{"secret": "db", "key": "password", "name": "DB_PASSWORD"}},
	})
	vm["spec"].(map[string]any)["compute"].(map[string]any)["image"] = "vmimg"
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", vm))

	// A change of a config's or secret's data rolls web: a new revision
	// with the new generation; labels alone do not.
	revOf := func() (int64, map[string]int64) {
		res := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/web", nil)))
		return res.Revision, res.Spec.Compute.ConfigVersions
	}
	rev0, vers := revOf()
	if vers["config/conf"] != 1 || vers["secret/db"] != 1 || vers["secret/reg"] != 1 {
		t.Fatalf("configVersions %v; want generation 1 of each", vers)
	}
	e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/configs/conf", `{"labels":{"a":"b"},"data":{"app.conf":"x=1"}}`))
	if rev, _ := revOf(); rev != rev0 {
		t.Fatalf("a label change rolled web (revision %d -> %d)", rev0, rev)
	}
	e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/configs/conf", `{"data":{"app.conf":"x=2"}}`))
	rev1, vers := revOf()
	if rev1 != rev0+1 || vers["config/conf"] != 2 {
		t.Fatalf("after a config change: revision %d, versions %v; want %d and config/conf 2", rev1, vers, rev0+1)
	}
	// The VM rolls the same way (its config drive changes).
	if res := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/vm", nil))); res.Revision != 2 || res.Spec.Compute.ConfigVersions["config/conf"] != 2 {
		t.Errorf("the VM after a config change: revision %d, versions %v; want 2 and config/conf 2", res.Revision, res.Spec.Compute.ConfigVersions)
	}
	revs := decodeAs[struct{ Items []api.Revision }](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/web/revisions", nil)))
	if last := revs.Items[len(revs.Items)-1]; last.Cause != "config conf changed" {
		t.Errorf("revision cause %q; want config conf changed", last.Cause)
	}
	e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/secrets/db", `{"data":{"password":"pw-9"}}`)) // the same
	if rev, _ := revOf(); rev != rev1 {
		t.Fatalf("the same secret data rolled web")
	}
	e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/secrets/db", `{"data":{"password":"pw-10"}}`))
	if rev, vers := revOf(); rev != rev1+1 || vers["secret/db"] != 2 {
		t.Fatalf("after a secret change: revision %d, versions %v", rev, vers)
	}
	if _, err := ReencryptSecrets(t.Context(), e.st, testKeyring(t)); err == nil {
		t.Fatal("reencrypt with a keyring that cannot open the secrets succeeded")
	}

	// vm and web use it; the first in name order is named.
	if r := e.do(t, "DELETE", "/v1/configs/conf", nil); r.code != http.StatusConflict || !strings.Contains(string(r.body), `config \"conf\" is used by resource \"vm\"`) {
		t.Errorf("deleting a config in use: got %s; want 409 naming vm", r)
	}

	srv := e.serveGRPC(t)
	fed := globalv1.NewFederationServiceClient(e.dialAs(t, srv, pki.Region("eu")))
	ctx := waitFor(t)
	ask := func(region string, refs ...*globalv1.ConfigDataRef) (*globalv1.GetConfigDataResponse, error) {
		return fed.GetConfigData(ctx, &globalv1.GetConfigDataRequest{Region: region, Tenant: DefaultTenant, Resource: "web", Refs: refs})
	}
	resp, err := ask("eu", &globalv1.ConfigDataRef{Kind: "config", Name: "conf"}, &globalv1.ConfigDataRef{Kind: "secret", Name: "db"}, &globalv1.ConfigDataRef{Kind: "secret", Name: "reg"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, it := range resp.GetItems() {
		for k, v := range it.GetData() {
			got[it.GetKind()+"/"+it.GetName()+"/"+k] = v
		}
	}
	if got["config/conf/app.conf"] != "x=2" || got["secret/db/password"] != "pw-10" || got["secret/reg/password"] != "rp" {
		t.Fatalf("GetConfigData: %v", got)
	}
	// A secret web does not name, another region's name, an unknown
	// resource: refused, and the answer holds no value.
	if _, err := ask("eu", &globalv1.ConfigDataRef{Kind: "secret", Name: "other"}); !errors.Is(err, api.ErrNotFound) || strings.Contains(err.Error(), "not-for-web") {
		t.Errorf("a secret web does not name: %v; want NotFound without the value", err)
	}
	if _, err := ask("us", &globalv1.ConfigDataRef{Kind: "config", Name: "conf"}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("region eu asking as us: %v; want PermissionDenied", err)
	}
	usFed := globalv1.NewFederationServiceClient(e.dialAs(t, srv, pki.Region("us")))
	if _, err := usFed.GetConfigData(ctx, &globalv1.GetConfigDataRequest{Region: "us", Tenant: DefaultTenant, Resource: "web",
		Refs: []*globalv1.ConfigDataRef{{Kind: "secret", Name: "db"}}}); !errors.Is(err, api.ErrNotFound) || strings.Contains(err.Error(), "pw-") {
		t.Errorf("region us, where web is not placed: %v; want not found without the value", err)
	}
	tenantFed := globalv1.NewFederationServiceClient(e.dialAs(t, srv, pki.Node("eu", "n1")))
	if _, err := tenantFed.GetConfigData(ctx, &globalv1.GetConfigDataRequest{Region: "eu", Tenant: DefaultTenant, Resource: "web"}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("a node calling FederationService: %v; want PermissionDenied", err)
	}
}

// TestConfigRefsPodMembers: the Configs and Secrets a pod's init
// containers and sidecars name count as the spec's: they must exist,
// cannot be deleted while named, and a region placed to run the
// resource gets their data, and nothing the spec does not name.
func TestConfigRefsPodMembers(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, map[string]string{"eu": "127.0.0.1:1"})
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/configs", `{"name":"prep-conf","data":{"a":"prep"}}`))
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/secrets", `{"name":"side-token","data":{"token":"tk-3"}}`))
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/secrets", `{"name":"other","data":{"k":"not-for-pod"}}`))
	pod := func(sideSecret string) map[string]any {
		return computeBody("pod", func(m map[string]any) {
			m["schedule"] = map[string]any{"regions": []map[string]any{{"name": "eu"}}}
			m["spec"].(map[string]any)["compute"] = map[string]any{
				"image":          "busybox",
				"initContainers": []map[string]any{{"name": "prep", "image": "busybox", "files": []map[string]any{{"config": "prep-conf", "path": "/etc/prep"}}}},
				"containers":     []map[string]any{{"name": "side", "image": "busybox", "envFrom": []map[string]any{{"secret": sideSecret, "key": "token", "name": "TOKEN"}}}},
			}
		})
	}
	if r := e.do(t, "POST", "/v1/resources", pod("nope")); r.code != http.StatusBadRequest || !strings.Contains(string(r.body), `secret \"nope\" does not exist in tenant`) {
		t.Fatalf("a sidecar naming a missing secret: got %s; want 400 naming it", r)
	}
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", pod("side-token")))
	res := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/pod", nil)))
	if v := res.Spec.Compute.ConfigVersions; v["config/prep-conf"] != 1 || v["secret/side-token"] != 1 {
		t.Errorf("configVersions %v; want the init container's and the sidecar's", v)
	}
	if r := e.do(t, "DELETE", "/v1/secrets/side-token", nil); r.code != http.StatusConflict || !strings.Contains(string(r.body), `used by resource \"pod\"`) {
		t.Errorf("deleting a secret only a sidecar names: got %s; want 409 naming pod", r)
	}

	srv := e.serveGRPC(t)
	fed := globalv1.NewFederationServiceClient(e.dialAs(t, srv, pki.Region("eu")))
	ctx := waitFor(t)
	ask := func(refs ...*globalv1.ConfigDataRef) (*globalv1.GetConfigDataResponse, error) {
		return fed.GetConfigData(ctx, &globalv1.GetConfigDataRequest{Region: "eu", Tenant: DefaultTenant, Resource: "pod", Refs: refs})
	}
	resp, err := ask(&globalv1.ConfigDataRef{Kind: "config", Name: "prep-conf"}, &globalv1.ConfigDataRef{Kind: "secret", Name: "side-token"})
	if err != nil {
		t.Fatal(err)
	}
	if it := resp.GetItems(); len(it) != 2 || it[0].GetData()["a"] != "prep" || it[1].GetData()["token"] != "tk-3" {
		t.Fatalf("GetConfigData of the pod's members' refs: %v", it)
	}
	if _, err := ask(&globalv1.ConfigDataRef{Kind: "secret", Name: "other"}); !errors.Is(err, api.ErrNotFound) || strings.Contains(err.Error(), "not-for-pod") {
		t.Errorf("a secret no container of pod names: %v; want NotFound without the value", err)
	}
}
