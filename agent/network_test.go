package agent

import (
	"testing"

	"github.com/stratahq/strata/internal/config"
)

func TestDataPlaneWanted(t *testing.T) {
	prov := func(names ...string) []config.Provider {
		var out []config.Provider
		for _, n := range names {
			out = append(out, config.Provider{Name: n})
		}
		return out
	}
	cases := []struct {
		name      string
		setting   string
		providers []config.Provider
		prebuilt  bool
		want      bool
	}{
		{"auto with containerd", config.DataPlaneAuto, prov("containerd", "haproxy"), false, true},
		{"auto with the fake only", config.DataPlaneAuto, prov("fake"), false, false},
		{"auto with the fake behind a socket", config.DataPlaneAuto, []config.Provider{{Name: "fake", Socket: "/run/fake.sock"}}, false, false},
		{"auto with pre-built providers (tests)", config.DataPlaneAuto, prov("containerd"), true, false},
		{"unset is auto", "", prov("libvirt"), false, true},
		{"enabled with the fake", config.DataPlaneEnabled, prov("fake"), true, true},
		{"disabled with containerd", config.DataPlaneDisabled, prov("containerd"), false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := &config.Agent{Providers: c.providers}
			cfg.Network.DataPlane = c.setting
			if got := dataPlaneWanted(cfg, c.prebuilt, nil); got != c.want {
				t.Fatalf("got %v; want %v", got, c.want)
			}
		})
	}
}
