package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stratahq/strata/agent/netplane"
	"github.com/stratahq/strata/internal/config"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
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

// TestDNSServices: replicas may reach DNS on the node's own name servers
// (containers get its resolv.conf), not on loopback ones (systemd-resolved's
// stub, which replicas cannot reach anyway), and nothing else.
func TestDNSServices(t *testing.T) {
	cases := []struct {
		name, conf string
		want       []string
	}{
		{"two servers, a stub and IPv6", "# generated\nsearch example.com\nnameserver 127.0.0.53\nnameserver 192.0.2.1\nnameserver ::1\nnameserver 2001:db8::1\nnameserver 10.0.0.2 # second\noptions edns0\n",
			[]string{"udp 192.0.2.1 53", "tcp 192.0.2.1 53", "udp 10.0.0.2 53", "tcp 10.0.0.2 53"}},
		{"the stub only", "nameserver 127.0.0.53\n", nil},
		{"a broken line", "nameserver\nnameserver not-an-address\n", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "resolv.conf")
			if err := os.WriteFile(path, []byte(c.conf), 0o644); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range dnsServices(path) {
				got = append(got, fmt.Sprintf("%s %s %s", s.Proto, s.Addr, s.Ports))
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("got %q; want %q", got, c.want)
			}
		})
	}
	if got := dnsServices(filepath.Join(t.TempDir(), "missing")); got != nil {
		t.Errorf("no resolv.conf: got %v; want none", got)
	}
}

// TestNetViewMerge: a snapshot replaces the endpoints and policies the
// view held; later batches add, replace and remove them; a policy that
// is not JSON fails the batch (the stream reconnects for a snapshot).
func TestNetViewMerge(t *testing.T) {
	snap := &agentv1.NetworkBatch{
		Snapshot: true, Network: &agentv1.RegionNetwork{Subnet: "10.9.0.0/16", Backend: "vxlan"},
		Endpoints: []*agentv1.NetworkEndpoint{{Id: "a1", Address: "10.9.0.2", Tenant: "a", Node: "n1", Labels: map[string]string{"app": "web"}}},
		Policies:  [][]byte{[]byte(`{"name":"web","tenant":"a","selector":{"app":"web"}}`)},
	}
	var v netView
	v.endpoints = map[string]netplane.Endpoint{"stale": {ID: "stale"}}
	if err := v.merge(snap); err != nil {
		t.Fatal(err)
	}
	if _, ok := v.endpoints["stale"]; ok || v.endpoints["a1"].Addr.String() != "10.9.0.2" || v.policies["a/web"].Selector["app"] != "web" {
		t.Fatalf("after the snapshot: endpoints %v, policies %v; want a1 and a/web only", v.endpoints, v.policies)
	}
	next := &agentv1.NetworkBatch{
		Endpoints:        []*agentv1.NetworkEndpoint{{Id: "a2", Address: "10.9.1.2", Tenant: "a", Node: "n2"}},
		EndpointsRemoved: []string{"a1"},
		PoliciesRemoved:  []string{"a/web"},
	}
	if err := v.merge(next); err != nil {
		t.Fatal(err)
	}
	if len(v.endpoints) != 1 || v.endpoints["a2"].Node != "n2" || len(v.policies) != 0 {
		t.Fatalf("after a change: endpoints %v, policies %v; want a2 only, no policy", v.endpoints, v.policies)
	}
	if err := v.merge(&agentv1.NetworkBatch{Policies: [][]byte{[]byte("{")}}); err == nil {
		t.Fatal("a policy that is not JSON: merged; want an error")
	}
}
