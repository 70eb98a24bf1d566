package agent

import (
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
