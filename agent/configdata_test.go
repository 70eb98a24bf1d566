package agent

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
)

func TestBuildConfigData(t *testing.T) {
	got := map[api.ConfigRef]*agentv1.ConfigData{
		{Config: "conf"}: {Kind: "config", Name: "conf", Data: map[string]string{"app.conf": "x=1", "MODE": "prod"}},
		{Secret: "db"}:   {Kind: "secret", Name: "db", Data: map[string]string{"password": "pw"}},
		{Secret: "reg"}:  {Kind: "secret", Name: "reg", Type: "registry", Data: map[string]string{"registry": "r:5000", "username": "u", "password": "rp"}},
	}
	c := &api.ComputeSpec{
		Env:        map[string]string{"MODE": "dev", "KEEP": "1"},
		Files:      []api.FileMount{{Config: "conf", Path: "/etc/app"}, {Secret: "db", Path: "/run/db"}},
		EnvFrom:    []api.EnvSource{{Config: "conf", Key: "MODE"}, {Secret: "db", Key: "password", Name: "DB_PASSWORD"}},
		PullSecret: "reg",
	}
	d, err := buildConfigData(c, got)
	if err != nil {
		t.Fatal(err)
	}
	if d.Env["MODE"] != "prod" || d.Env["KEEP"] != "1" || d.Env["DB_PASSWORD"] != "pw" || c.Env["MODE"] != "dev" {
		t.Errorf("env %v (spec env %v); want envFrom over env, the spec untouched", d.Env, c.Env)
	}
	if len(d.Files) != 3 || d.Files[2].Dir != "/run/db" || !d.Files[2].Secret || d.Files[0].Secret {
		t.Errorf("files %+v", d.Files)
	}
	if d.PullAuth == nil || d.PullAuth.Host != "r:5000" || d.PullAuth.Password != "rp" || strings.Contains(d.PullAuth.String(), "rp") {
		t.Errorf("pull auth %v", d.PullAuth)
	}

	// Every key as a variable: a key that is no variable name is an
	// error naming the key, not the value; a missing key too.
	for _, tc := range []struct {
		from []api.EnvSource
		want string
	}{
		{[]api.EnvSource{{Config: "conf"}}, `key "app.conf" is not a variable name`},
		{[]api.EnvSource{{Secret: "db", Key: "nope"}}, `envFrom secret "db" has no key "nope"`},
		{[]api.EnvSource{{Config: "absent"}}, `config "absent": the region did not send it`},
	} {
		_, err := buildConfigData(&api.ComputeSpec{EnvFrom: tc.from}, got)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "x=1") {
			t.Errorf("%+v: got %v; want an error with %q", tc.from, err, tc.want)
		}
	}
}

// TestBuildConfigDataMembers: a pod's init containers and sidecars that
// name Configs and Secrets get their own files and variables, by the
// main container's rules; one that names none gets no entry (its spec's
// env is all it has), and an error names the container and the key,
// never a value.
func TestBuildConfigDataMembers(t *testing.T) {
	got := map[api.ConfigRef]*agentv1.ConfigData{
		{Config: "conf"}: {Kind: "config", Name: "conf", Data: map[string]string{"app.conf": "x=1", "MODE": "prod"}},
		{Secret: "db"}:   {Kind: "secret", Name: "db", Data: map[string]string{"password": "pw"}},
	}
	c := &api.ComputeSpec{
		Image: "app",
		Env:   map[string]string{"MODE": "main"},
		InitContainers: []api.Container{{Name: "migrate", Image: "app",
			Files: []api.FileMount{{Config: "conf", Path: "/etc/migrate"}}}},
		Containers: []api.Container{
			{Name: "proxy", Image: "proxy", Env: map[string]string{"MODE": "dev", "KEEP": "1"},
				Files:   []api.FileMount{{Secret: "db", Path: "/run/db"}},
				EnvFrom: []api.EnvSource{{Config: "conf", Key: "MODE"}, {Secret: "db", Key: "password", Name: "DB_PASSWORD"}}},
			{Name: "plain", Image: "proxy", Env: map[string]string{"A": "1"}},
		},
	}
	d, err := buildConfigData(c, got)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Files) != 0 || d.Env["MODE"] != "main" || len(d.Env) != 1 {
		t.Errorf("main container: files %+v, env %v; want only its spec's env", d.Files, d.Env)
	}
	if len(d.Containers) != 2 {
		t.Fatalf("containers %v; want migrate and proxy", slices.Collect(maps.Keys(d.Containers)))
	}
	if m := d.Containers["migrate"]; len(m.Files) != 2 || m.Files[0].Dir != "/etc/migrate" || m.Files[0].Name != "MODE" || m.Files[1].Name != "app.conf" || m.Files[0].Secret || len(m.Env) != 0 {
		t.Errorf("init container migrate: %+v", m)
	}
	p := d.Containers["proxy"]
	if p.Env["MODE"] != "prod" || p.Env["KEEP"] != "1" || p.Env["DB_PASSWORD"] != "pw" || c.Containers[0].Env["MODE"] != "dev" {
		t.Errorf("sidecar proxy env %v (spec env %v); want envFrom over env, the spec untouched", p.Env, c.Containers[0].Env)
	}
	if len(p.Files) != 1 || p.Files[0].Dir != "/run/db" || p.Files[0].Name != "password" || !p.Files[0].Secret {
		t.Errorf("sidecar proxy files %+v", p.Files)
	}

	for _, tc := range []struct {
		ct   api.Container
		want string
	}{
		{api.Container{Name: "s", EnvFrom: []api.EnvSource{{Config: "conf"}}}, `container s: envFrom config "conf": key "app.conf" is not a variable name`},
		{api.Container{Name: "s", EnvFrom: []api.EnvSource{{Secret: "db", Key: "nope"}}}, `container s: envFrom secret "db" has no key "nope"`},
		{api.Container{Name: "s", Files: []api.FileMount{{Secret: "absent", Path: "/a"}}}, `container s: secret "absent": the region did not send it`},
	} {
		_, err := buildConfigData(&api.ComputeSpec{Containers: []api.Container{tc.ct}}, got)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "x=1") || strings.Contains(err.Error(), "pw") {
			t.Errorf("%+v: got %v; want an error with %q", tc.ct, err, tc.want)
		}
	}
}
