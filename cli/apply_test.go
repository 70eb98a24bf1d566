package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	flavorDoc = "kind: Flavor\nname: small\nspec: {vcpus: 0.5, memoryMiB: 256}\n"
	policyDoc = "kind: NetworkPolicy\nname: web-only\nselector: {app: web}\ningress:\n- from: [{resources: {matchLabels: {app: lb}}}]\n  ports: [{port: 80}]\n"
	webDoc    = "kind: Compute\nname: web\nlabels: {app: web}\nspec: {flavor: small, compute: {image: busybox}}\nschedule: {regions: [{name: dev-1}]}\n"
)

// examples is the repository's example manifests.
var examples = filepath.Join("..", "deploy", "examples")

func TestApply(t *testing.T) {
	tests := []struct {
		name string
		// before is applied first (its writes are not checked).
		before string
		// scale, when set, scales web between before and the apply.
		scale    string
		manifest string
		args     []string
		code     int
		stdout   string
		stderr   string
		writes   []string
	}{
		{
			name:     "creates what does not exist",
			manifest: flavorDoc + "---\n" + webDoc,
			stdout:   "flavor/small created\ncompute/web created\n",
			writes:   []string{"POST /v1/flavors", "POST /v1/resources"},
		},
		{
			name:     "applying twice writes nothing",
			before:   flavorDoc + "---\n" + webDoc,
			manifest: flavorDoc + "---\n" + webDoc,
			stdout:   "flavor/small unchanged\ncompute/web unchanged\n",
		},
		{
			name:     "a changed resource is configured",
			before:   flavorDoc + "---\n" + webDoc,
			manifest: flavorDoc + "---\n" + webDoc + "replicas: 4\n",
			stdout:   "flavor/small unchanged\ncompute/web configured\n",
			writes:   []string{"PUT /v1/resources/web"},
		},
		{
			name:     "a changed flavor is configured",
			before:   flavorDoc,
			manifest: "kind: Flavor\nname: small\nspec: {vcpus: 1, memoryMiB: 256}\n",
			stdout:   "flavor/small configured\n",
			writes:   []string{"PUT /v1/flavors/small"},
		},
		{
			name:     "a manifest without replicas leaves a scaled count alone",
			before:   flavorDoc + "---\n" + webDoc,
			scale:    "5",
			manifest: flavorDoc + "---\n" + webDoc,
			stdout:   "flavor/small unchanged\ncompute/web unchanged\n",
		},
		{
			name:     "dependencies first, whatever the order of the documents",
			manifest: webDoc + "---\n" + flavorDoc,
			stdout:   "flavor/small created\ncompute/web created\n",
			writes:   []string{"POST /v1/flavors", "POST /v1/resources"},
		},
		{
			name:     "a dry run writes nothing",
			before:   flavorDoc,
			manifest: "kind: Flavor\nname: small\nspec: {vcpus: 2, memoryMiB: 256}\n---\n" + webDoc,
			args:     []string{"--dry-run"},
			stdout:   "flavor/small configured (dry run)\ncompute/web created (dry run)\n",
		},
		{
			name:     "regions are registered, and registered again when they change",
			before:   "kind: Region\nname: edge-1\nendpoint: 10.0.0.7:9090\n",
			manifest: "kind: Region\nname: edge-1\nendpoint: 10.0.0.8:9090\n---\nkind: Region\nname: edge-2\nendpoint: 10.0.0.9:9090\n",
			stdout:   "region/edge-1 configured\nregion/edge-2 created\n",
			writes:   []string{"POST /v1/regions", "POST /v1/regions"},
		},
		{
			name:     "a failure does not stop the rest",
			manifest: "kind: Compute\nname: web\nspec: {flavor: nope, compute: {image: busybox}}\n---\n" + flavorDoc,
			code:     1,
			stdout:   "flavor/small created\n",
			stderr:   "error: compute/web: spec.flavor: flavor \"nope\" does not exist (field spec.flavor)\nerror: 1 of 2 objects failed\n",
			writes:   []string{"POST /v1/flavors", "POST /v1/resources"},
		},
		{
			name:     "a bad document stops everything before a write",
			manifest: flavorDoc + "---\nkind: Deployment\nname: web\n",
			code:     2,
			stderr: "error: stdin: document 2 (line 5): unknown kind \"Deployment\" (want one of Region, Flavor, Config, Secret, Image, Volume, Compute, Loadbalancer, NetworkPolicy, Job, AlertRule)\n" +
				"run `stratactl apply --help` for usage\n",
		},
		{
			name:     "a network policy twice in one apply is refused",
			before:   policyDoc,
			manifest: policyDoc + "---\n" + strings.Replace(policyDoc, "name: web-only", "name: db-only", 1) + "---\n" + strings.Replace(policyDoc, "port: 80", "port: 8080", 1),
			code:     2,
			stderr:   "error: stdin: document 3 (line 15): networkpolicy/web-only is also defined in stdin: document 1 (line 1); one apply takes each object once\nrun `stratactl apply --help` for usage\n",
		},
		{
			name:     "a changed network policy is configured",
			before:   policyDoc,
			manifest: strings.Replace(policyDoc, "port: 80", "port: 8080", 1) + "---\n" + strings.Replace(policyDoc, "name: web-only", "name: db-only", 1),
			stdout:   "networkpolicy/web-only configured\nnetworkpolicy/db-only created\n",
			writes:   []string{"PUT /v1/networkpolicies/web-only", "POST /v1/networkpolicies"},
		},
		{
			name:     "an unchanged network policy is left alone",
			before:   policyDoc,
			manifest: policyDoc,
			stdout:   "networkpolicy/web-only unchanged\n",
		},
		{
			name:     "a bad network policy stops everything, naming its field",
			manifest: strings.Replace(policyDoc, "port: 80", "port: 80, protocol: icmp", 1),
			code:     2,
			stderr:   "error: stdin: document 1 (line 1): networkpolicy/web-only: ingress[0].ports[0].protocol: \"icmp\" is not one of \"tcp\", \"udp\"\nrun `stratactl apply --help` for usage\n",
		},
		{
			name:     "a manifest's tenant is where the resource goes",
			before:   flavorDoc,
			manifest: strings.Replace(webDoc, "name: web\n", "name: web\ntenant: acme\n", 1),
			stdout:   "compute/web created\n",
			writes:   []string{"POST /v1/resources"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.before != "" {
				e.must(tc.before, "apply", "-f", "-")
			}
			if tc.scale != "" {
				e.must("", "scale", "web", "--replicas", tc.scale)
			}
			e.srv.Mu.Lock()
			e.srv.Requests = nil
			e.srv.Mu.Unlock()

			r := e.run(tc.manifest, append([]string{"apply", "-f", "-"}, tc.args...)...)
			if r.code != tc.code || r.stdout != tc.stdout || r.stderr != tc.stderr {
				t.Errorf("got exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d\nstdout:\n%s\nstderr:\n%s",
					r.code, r.stdout, r.stderr, tc.code, tc.stdout, tc.stderr)
			}
			if got := e.srv.Writes(); strings.Join(got, ", ") != strings.Join(tc.writes, ", ") {
				t.Errorf("got writes %q; want %q", got, tc.writes)
			}
		})
	}
}

func TestApplyTenantFromManifest(t *testing.T) {
	e := newEnv(t)
	e.must(flavorDoc, "apply", "-f", "-")
	doc := strings.Replace(webDoc, "name: web\n", "name: web\ntenant: acme\n", 1)
	e.must(doc, "apply", "-f", "-")
	if _, ok := e.srv.Resources["acme/web"]; !ok {
		t.Fatalf("got resources %v; want acme/web", keys(e.srv.Resources))
	}
	if got := e.must(doc, "apply", "-f", "-"); got != "compute/web unchanged\n" {
		t.Errorf("applying again: got %q; want unchanged", got)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestRoundTrip: what get prints as JSON or YAML applies back as a no-op.
func TestRoundTrip(t *testing.T) {
	e := newEnv(t)
	e.must("", "apply", "-f", examples)
	for _, get := range [][]string{
		{"get", "resources"},
		{"get", "flavors"},
		{"get", "regions"},
		{"get", "res", "web"},
		{"get", "flavor", "small"},
	} {
		for _, format := range []string{"json", "yaml"} {
			name := strings.Join(get, " ") + " -o " + format
			t.Run(name, func(t *testing.T) {
				out := e.must("", append(get, "-o", format)...)
				e.srv.Mu.Lock()
				e.srv.Requests = nil
				e.srv.Mu.Unlock()
				applied := e.must(out, "apply", "-f", "-")
				for _, line := range strings.Split(strings.TrimSpace(applied), "\n") {
					if !strings.HasSuffix(line, " unchanged") {
						t.Errorf("got %q; want every object unchanged", line)
					}
				}
				if w := e.srv.Writes(); len(w) != 0 {
					t.Errorf("got writes %q; want none", w)
				}
			})
		}
	}
}

func TestApplyExamples(t *testing.T) {
	e := newEnv(t)
	got := e.must("", "apply", "-f", examples)
	want := "flavor/small created\nflavor/lb-small created\nimage/busybox created\nvolume/scratch created\ncompute/site created\ncompute/web created\nloadbalancer/web-lb created\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	again := e.must("", "apply", "-f", examples)
	if strings.Count(again, " unchanged\n") != 7 {
		t.Errorf("applying again: got\n%s\nwant seven unchanged", again)
	}
	// The README of the examples is not a manifest, and is there.
	if _, err := os.Stat(filepath.Join(examples, "README.md")); err != nil {
		t.Error(err)
	}
}

func TestDelete(t *testing.T) {
	t.Run("by manifest: resources first and waited for, then flavors", func(t *testing.T) {
		e := newEnv(t)
		e.must("", "apply", "-f", examples)
		got := e.must("", "delete", "-f", examples)
		want := "loadbalancer/web-lb deleted\ncompute/site deleted\ncompute/web deleted\nvolume/scratch deleted\nimage/busybox deleted\nflavor/small deleted\nflavor/lb-small deleted\n"
		if got != want {
			t.Errorf("got\n%s\nwant\n%s", got, want)
		}
		if len(e.srv.Resources) != 0 || len(e.srv.Flavors) != 0 {
			t.Errorf("got %d resources and %d flavors left; want none", len(e.srv.Resources), len(e.srv.Flavors))
		}
	})
	t.Run("by name", func(t *testing.T) {
		e := newEnv(t)
		e.must(flavorDoc+"---\n"+webDoc, "apply", "-f", "-")
		if got := e.must("", "delete", "resource", "web"); got != "compute/web deletion requested\n" {
			t.Errorf("got %q", got)
		}
		e.must(webDoc, "apply", "-f", "-") // gone by the next look: created again
		if got := e.must("", "delete", "res", "web", "--wait"); got != "compute/web deleted\n" {
			t.Errorf("--wait: got %q", got)
		}
		if got := e.must("", "delete", "fl", "small"); got != "flavor/small deleted\n" {
			t.Errorf("flavor: got %q", got)
		}
	})
	t.Run("not found", func(t *testing.T) {
		e := newEnv(t)
		if r := e.run("", "delete", "res", "nope"); r.code != 3 || r.stderr != "error: resource \"nope\" not found\n" {
			t.Errorf("got exit %d, %q; want 3 and the server's message", r.code, r.stderr)
		}
		if r := e.run("", "delete", "res", "nope", "--ignore-not-found"); r.code != 0 || r.stdout != "resource/nope not found\n" {
			t.Errorf("--ignore-not-found: got exit %d, %q", r.code, r.stdout)
		}
	})
}
