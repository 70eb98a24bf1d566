package main

import (
	"slices"
	"strings"
	"testing"
)

const mod = "example.com/m"

func pkg(path string, imports ...string) Package {
	p := Package{ImportPath: mod + "/" + path}
	for _, i := range imports {
		if !strings.Contains(i, ".") {
			i = mod + "/" + i
		}
		p.Imports = append(p.Imports, i)
	}
	return p
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		pkg  Package
		want []string // violations, as From imports To (or From alone)
	}{
		{"down", pkg("region/api", "internal/store", "proto/apiproto", "proto/region/v1", "golang.org/x/sync/errgroup"), nil},
		{"own wing", pkg("region", "region/api", "region/console"), nil},
		{"ground to ground", pkg("internal/store", "internal/api"), nil},
		{"contract to wire", pkg("providers/provider", "proto/provider/v1", "proto/apiproto"), nil},
		{"composition to tiers", pkg("devcluster", "agent", "global", "region", "providers/provider"), nil},
		{"ground up to the contract", pkg("internal/metrics", "providers/provider"), []string{"internal/metrics imports providers/provider"}},
		{"ground up to the tiers", pkg("internal/devcluster", "agent", "global/api"), []string{"internal/devcluster imports agent", "internal/devcluster imports global/api"}},
		{"domain types up to the wire", pkg("internal/api", "proto/resource/v1"), []string{"internal/api imports proto/resource/v1"}},
		{"tier into another tier", pkg("global/console", "region/console"), []string{"global/console imports region/console"}},
		{"a shared client is allowed", pkg("global/controller", "region/client"), nil},
		{"provider into another provider", pkg("providers/haproxy", "providers/containerd"), []string{"providers/haproxy imports providers/containerd"}},
		{"tier up to composition", pkg("agent", "devcluster"), []string{"agent imports devcluster"}},
		{"test support in production", pkg("region/api", "testkit/storetest"), []string{"region/api imports testkit/storetest"}},
		{"test support in test support", pkg("testkit/storetest", "testkit/etcdtest"), nil},
		{"on no floor", pkg("misc", "internal/api"), []string{"misc"}},
		{"imports a package on no floor", pkg("agent", "misc"), []string{"agent imports misc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := slices.Clone(floors)
			for i := range fs {
				if fs[i].Name == "tiers" {
					fs[i].Shared = []string{"region/client"}
				}
			}
			var got []string
			for _, v := range Check(mod, fs, []Package{tc.pkg}) {
				s := v.From
				if v.To != "" {
					s += " imports " + v.To
				}
				got = append(got, s)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q; want %q", got, tc.want)
			}
		})
	}
}

func TestLocate(t *testing.T) {
	for rel, want := range map[string]string{
		"internal/api":              "ground",
		"proto/apiproto":            "wire",
		"testkit/simhost":           "ground",
		"cli/manifest":              "tiers",
		"internal/apiextra":         "ground",
		"proto/agent/v1":            "wire",
		"providers/provider":        "contract",
		"providers/provider/x":      "contract",
		"providers/fake/fakeplugin": "providers",
		"region/api":                "tiers",
		"cmd/strata":                "composition",
		"e2e/framework":             "outside",
	} {
		p, ok := locate(floors, rel)
		if !ok || floors[p.floor].Name != want {
			t.Errorf("%s: got floor %q (found %v); want %q", rel, floors[p.floor].Name, ok, want)
		}
	}
}

// TestModule runs the check on this module, so that `go test ./...`
// catches what `make lint` does.
func TestModule(t *testing.T) {
	module, pkgs, err := list("github.com/stratahq/strata/...")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages; want the whole module", len(pkgs))
	}
	for _, v := range Check(module, floors, pkgs) {
		t.Error(v)
	}
}
