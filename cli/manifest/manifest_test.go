package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		// want is each object as "ref@doc:line" (plus ",item" in a List).
		want []string
	}{
		{
			name: "multi-document YAML, empty documents and comments skipped",
			in: `# flavors first
---
kind: Flavor
name: small
spec: {vcpus: 0.5, memoryMiB: 256}
---
# nothing here
---

kind: Compute
name: web
spec:
  flavor: small
  compute: {image: busybox}
--- {kind: Region, name: edge-1, endpoint: "10.0.0.7:9090"}
`,
			want: []string{"flavor/small@1:3", "compute/web@2:10", "region/edge-1@3:15"},
		},
		{
			name: "JSON object",
			in:   `{"kind":"Volume","name":"data","replicas":1,"spec":{"volume":{"sizeMiB":64}}}`,
			want: []string{"volume/data@1:1"},
		},
		{
			name: "JSON values one after the other",
			in: `{"kind":"Image","name":"busybox","spec":{"image":{"ref":"busybox"}}}

{"kind":"Flavor","name":"lb","providerKind":"loadbalancer","spec":{"vcpus":1,"memoryMiB":64}}`,
			want: []string{"image/busybox@1:1", "flavor/lb@2:3"},
		},
		{
			name: "a List, as get -o yaml prints it",
			in: `kind: List
items:
- kind: Flavor
  name: small
  providerKind: container
  spec: {vcpus: 1, memoryMiB: 64}
  createdAt: "2026-01-02T15:04:05Z"
  resourceVersion: 9
- kind: Loadbalancer
  name: lb
  spec:
    flavor: small
    loadbalancer:
      listeners: [{port: 80}]
      selector: {app: web}
`,
			want: []string{"flavor/small@1:1,1", "loadbalancer/lb@1:1,2"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Parse("f.yaml", []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				s := o.Ref() + "@" + strconv.Itoa(o.Source.Doc) + ":" + strconv.Itoa(o.Source.Line)
				if o.Source.Item > 0 {
					s += "," + strconv.Itoa(o.Source.Item)
				}
				got = append(got, s)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("got %v; want %v", got, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	valid := "kind: Flavor\nname: small\nspec: {vcpus: 1, memoryMiB: 64}\n"
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"unknown kind names the document", valid + "---\nkind: Deployment\nname: web\n",
			`f.yaml: document 2 (line 5): unknown kind "Deployment" (want one of Region, Flavor, Config, Secret, Image, Volume, Compute, Loadbalancer, NetworkPolicy, Job, AlertRule)`},
		{"missing kind", "name: web\n",
			`f.yaml: document 1 (line 1): kind is missing (want one of Region, Flavor, Config, Secret, Image, Volume, Compute, Loadbalancer, NetworkPolicy, Job, AlertRule)`},
		{"kind in the wrong case", "kind: compute\nname: web\n",
			`f.yaml: document 1 (line 1): unknown kind "compute" (kinds are case-sensitive: did you mean "Compute"?)`},
		{"a flavor written with its REST kind", "kind: container\nname: small\nspec: {vcpus: 1, memoryMiB: 64}\n",
			`f.yaml: document 1 (line 1): unknown kind "container": a flavor's manifest has kind: Flavor and providerKind: container`},
		{"unknown field", "kind: Compute\nname: web\nreplica: 3\n",
			`f.yaml: document 1 (line 1): replica: unknown field`},
		{"wrong type names the field", "kind: Flavor\nname: small\nspec: {vcpus: many, memoryMiB: 64}\n",
			`f.yaml: document 1 (line 1): spec.vcpus: must be a number, not string`},
		{"validation before anything is sent", valid + "---\nkind: Compute\nname: web\nreplicas: -1\nspec: {flavor: small, compute: {image: busybox}}\n",
			`f.yaml: document 2 (line 5): compute/web: replicas: must not be negative (got -1)`},
		{"flavor validation speaks of providerKind", "kind: Flavor\nname: small\nproviderKind: gpu\nspec: {vcpus: 1, memoryMiB: 64}\n",
			`f.yaml: document 1 (line 1): flavor/small: providerKind: "gpu" is not one of "container", "vm", "loadbalancer"`},
		{"duplicate keys", "kind: Flavor\nname: a\nname: b\n",
			`f.yaml: document 1 (line 3): not valid YAML: line 3: mapping key "name" already defined at line 2`},
		{"broken YAML names its line", valid + "---\nkind: Compute\n  name: [web\n",
			`f.yaml: document 2 (line 6): not valid YAML: yaml: line 6: mapping values are not allowed in this context`},
		{"broken JSON", `{"kind": "Compute", "name": }`,
			`f.yaml: document 1 (line 1): not valid JSON: invalid character '}' looking for beginning of value`},
		{"not an object", "- a\n- b\n",
			`f.yaml: document 1 (line 1): a manifest must be an object with a kind`},
		{"an Image with replicas", "kind: Image\nname: i\nreplicas: 2\nspec: {image: {ref: busybox}}\n",
			`f.yaml: document 1 (line 1): image/i: replicas: an Image has no replicas (agents fetch it when needed): omit it or set 0`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tc.in))
			if err == nil {
				t.Fatalf("got no error; want %q", tc.want)
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
			var me *Error
			if !errors.As(err, &me) {
				t.Errorf("got %T; want a *manifest.Error", err)
			}
		})
	}
}

func TestParseFlavorDefaultsProviderKind(t *testing.T) {
	objs, err := Parse("f.yaml", []byte("kind: Flavor\nname: small\nspec: {vcpus: 0.5, memoryMiB: 256}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := objs[0].Flavor.Kind; got != api.ProviderContainer {
		t.Errorf("got provider kind %q; want container", got)
	}
}

func TestParseResourceReplicas(t *testing.T) {
	for _, tc := range []struct {
		in      string
		set     bool
		replica int
	}{
		{"kind: Volume\nname: v\nspec: {volume: {sizeMiB: 1}}\n", false, 0},
		{"kind: Volume\nname: v\nreplicas: 0\nspec: {volume: {sizeMiB: 1}}\n", true, 0},
		{"kind: Volume\nname: v\nreplicas: 1\nspec: {volume: {sizeMiB: 1}}\n", true, 1},
	} {
		t.Run(tc.in, func(t *testing.T) {
			objs, err := Parse("f.yaml", []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if o := objs[0]; o.ReplicasSet != tc.set || o.Resource.Replicas != tc.replica {
				t.Errorf("got set %v replicas %d; want set %v replicas %d", o.ReplicasSet, o.Resource.Replicas, tc.set, tc.replica)
			}
		})
	}
}

func TestParseYAMLReadsYes(t *testing.T) {
	// YAML 1.2, as get prints: "yes" is a string, so a label keeps it.
	objs, err := Parse("f.yaml", []byte("kind: Image\nname: i\nlabels: {enabled: yes}\nspec: {image: {ref: busybox}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := objs[0].Resource.Labels["enabled"]; got != "yes" {
		t.Errorf("got label %q; want yes", got)
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b-web.yaml", "kind: Compute\nname: web\nspec: {flavor: small, compute: {image: busybox}}\n")
	write("a-flavor.yml", "kind: Flavor\nname: small\nspec: {vcpus: 1, memoryMiB: 64}\n")
	write("c.json", `{"kind":"Image","name":"busybox","spec":{"image":{"ref":"busybox"}}}`)
	write("README.md", "# not a manifest\n")

	t.Run("directory, by file name, other files ignored", func(t *testing.T) {
		objs, err := Read([]string{dir}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range objs {
			got = append(got, o.Ref())
		}
		if want := "flavor/small compute/web image/busybox"; strings.Join(got, " ") != want {
			t.Errorf("got %v; want %s", got, want)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		objs, err := Read([]string{"-"}, strings.NewReader("kind: Flavor\nname: x\nspec: {vcpus: 1, memoryMiB: 64}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) != 1 || objs[0].Source.File != "stdin" {
			t.Errorf("got %+v; want one object from stdin", objs)
		}
	})
	t.Run("the same object twice", func(t *testing.T) {
		_, err := Read([]string{dir, filepath.Join(dir, "b-web.yaml")}, nil)
		if err == nil || !strings.Contains(err.Error(), "compute/web is also defined in") {
			t.Errorf("got %v; want a duplicate error", err)
		}
	})
	t.Run("resources of different kinds share names", func(t *testing.T) {
		write2 := filepath.Join(t.TempDir(), "v.yaml")
		if err := os.WriteFile(write2, []byte("kind: Volume\nname: web\nspec: {volume: {sizeMiB: 1}}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Read([]string{filepath.Join(dir, "b-web.yaml"), write2}, nil)
		if err == nil || !strings.Contains(err.Error(), "volume/web is also defined in") {
			t.Errorf("got %v; want a duplicate error", err)
		}
	})
	t.Run("empty directory", func(t *testing.T) {
		_, err := Read([]string{t.TempDir()}, nil)
		if err == nil || !strings.Contains(err.Error(), "no manifests") {
			t.Errorf("got %v; want a no-manifests error", err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := Read([]string{filepath.Join(dir, "nope.yaml")}, nil)
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("got %v; want not-exist", err)
		}
	})
}

func TestSortForApply(t *testing.T) {
	objs := []Object{
		{Kind: KindLoadbalancer, Resource: &api.Resource{Name: "lb"}},
		{Kind: KindCompute, Resource: &api.Resource{Name: "web"}},
		{Kind: KindCompute, Resource: &api.Resource{Name: "api"}},
		{Kind: KindImage, Resource: &api.Resource{Name: "img"}},
		{Kind: KindFlavor, Flavor: &api.Flavor{Name: "small"}},
		{Kind: KindVolume, Resource: &api.Resource{Name: "data"}},
		{Kind: KindRegion, Region: &api.Region{Name: "r"}},
	}
	refs := func() string {
		var s []string
		for _, o := range objs {
			s = append(s, o.Ref())
		}
		return strings.Join(s, " ")
	}
	SortForApply(objs)
	if got, want := refs(), "region/r flavor/small image/img volume/data compute/web compute/api loadbalancer/lb"; got != want {
		t.Errorf("apply order: got %s; want %s", got, want)
	}
	SortForDelete(objs)
	if got, want := refs(), "loadbalancer/lb compute/web compute/api volume/data image/img flavor/small region/r"; got != want {
		t.Errorf("delete order: got %s; want %s", got, want)
	}
}

func TestUpToDate(t *testing.T) {
	// cur is web as the server holds it: defaulted, with server fields.
	cur := func(edit func(*api.Resource)) api.Resource {
		r := api.Resource{
			Name: "web", Tenant: "default", UID: "u1", Kind: api.KindCompute, Labels: map[string]string{"app": "web"},
			Spec: api.ResourceSpec{Flavor: "small", Compute: &api.ComputeSpec{
				Image: "busybox", RestartPolicy: api.RestartAlways,
				Ports: []api.PortSpec{{ContainerPort: 8080, Protocol: "tcp"}},
			}},
			Replicas:           3,
			Schedule:           api.ScheduleRule{Regions: []api.RegionTarget{{Name: "dev-1", Weight: 1}}},
			MaxRevisionHistory: 10, Revision: 4, Generation: 7, ResourceVersion: 99,
			Status: &api.ResourceStatus{Phase: api.PhaseReady, Ready: 3},
		}
		if edit != nil {
			edit(&r)
		}
		return r
	}
	const manifest = `kind: Compute
name: web
labels: {app: web}
spec:
  flavor: small
  compute:
    image: busybox
    ports: [{containerPort: 8080}]
schedule:
  regions: [{name: dev-1}]
`
	tests := []struct {
		name  string
		extra string
		cur   api.Resource
		want  bool
	}{
		{"defaults are not differences", "", cur(nil), true},
		{"no replicas in the manifest keeps a scaled count", "", cur(func(r *api.Resource) { r.Replicas = 7 }), true},
		{"replicas that differ", "replicas: 5\n", cur(nil), false},
		{"replicas that match", "replicas: 3\n", cur(nil), true},
		{"the resource's own tenant", "tenant: default\n", cur(nil), true},
		{"another tenant", "tenant: acme\n", cur(nil), false},
		{"a label removed on the server", "", cur(func(r *api.Resource) { r.Labels = nil }), false},
		{"a spec change", "", cur(func(r *api.Resource) { r.Spec.Compute.Image = "nginx" }), false},
		{"an empty map is an absent one", "overrides: {}\n", cur(nil), true},
		{"a rollout policy", "rollout: {maxSurge: 1}\n", cur(nil), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Parse("f.yaml", []byte(manifest+tc.extra))
			if err != nil {
				t.Fatal(err)
			}
			if got := ResourceUpToDate(objs[0], tc.cur); got != tc.want {
				t.Errorf("got %v; want %v", got, tc.want)
			}
		})
	}

	small := api.Flavor{Name: "small", Kind: api.ProviderContainer, Spec: api.FlavorSpec{VCPUs: 0.5, MemoryMiB: 256}, ResourceVersion: 3}
	for _, tc := range []struct {
		name string
		want api.Flavor
		ok   bool
	}{
		{"same", api.Flavor{Name: "small", Kind: api.ProviderContainer, Spec: small.Spec}, true},
		{"bigger", api.Flavor{Name: "small", Kind: api.ProviderContainer, Spec: api.FlavorSpec{VCPUs: 1, MemoryMiB: 256}}, false},
		{"other provider", api.Flavor{Name: "small", Kind: api.ProviderVM, Spec: small.Spec}, false},
	} {
		t.Run("flavor "+tc.name, func(t *testing.T) {
			if got := FlavorUpToDate(tc.want, small); got != tc.ok {
				t.Errorf("got %v; want %v", got, tc.ok)
			}
		})
	}

	reg := api.Region{Name: "r", Endpoint: "10.0.0.1:9090", Zones: []string{"a"}, Status: &api.RegionStatus{Health: api.HealthUp}}
	if !RegionUpToDate(api.Region{Name: "r", Endpoint: "10.0.0.1:9090", Zones: []string{"a"}}, reg) {
		t.Errorf("region: got a difference; want none (status is the server's)")
	}
	if RegionUpToDate(api.Region{Name: "r", Endpoint: "10.0.0.2:9090", Zones: []string{"a"}}, reg) {
		t.Errorf("region with another endpoint: got no difference; want one")
	}
}

// podDoc is a pod written as a Kubernetes user would: probe fields with
// Kubernetes' names, the scheme in capitals.
const podDoc = `kind: Compute
name: shop
spec:
  flavor: small
  compute:
    image: busybox
    command: [httpd, -f, -p, "8080"]
    ports: [{name: http, containerPort: 8080}]
    scratchVolumes: [{name: shared, path: /shared}]
    readinessProbe:
      httpGet: {path: /ready, port: 8080, scheme: HTTP, httpHeaders: [{name: X-Probe, value: "1"}]}
      initialDelaySeconds: 2
      periodSeconds: 5
      failureThreshold: 2
    livenessProbe:
      exec: {command: [cat, /tmp/healthy]}
    startupProbe:
      tcpSocket: {port: 8080}
      failureThreshold: 30
    initContainers:
    - name: fetch
      image: busybox
      command: [sh, -c, "echo hi > /shared/index.html"]
      volumes: [{scratch: shared, path: /shared}]
    containers:
    - name: proxy
      image: envoy
      ports: [{containerPort: 9090}]
      resources: {milliCPU: 100, memoryMiB: 64}
      restartPolicy: on-failure
      readinessProbe:
        grpc: {port: 9090, service: envoy}
        timeoutSeconds: 3
        successThreshold: 2
`

func TestParsePod(t *testing.T) {
	objs, err := Parse("pod.yaml", []byte(podDoc))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].Resource == nil {
		t.Fatalf("got %d objects; want one resource", len(objs))
	}
	r := objs[0].Resource
	if err := r.Validate(); err != nil {
		t.Fatalf("the parsed pod does not validate: %v", err)
	}
	c := r.Spec.Compute
	rp := c.ReadinessProbe
	if rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Path != "/ready" || rp.HTTPGet.Port != 8080 || rp.HTTPGet.Scheme != "HTTP" ||
		len(rp.HTTPGet.HTTPHeaders) != 1 || rp.InitialDelaySeconds != 2 || *rp.PeriodSeconds != 5 || *rp.FailureThreshold != 2 {
		t.Errorf("got readinessProbe %+v; want httpGet /ready on 8080, delay 2, period 5, failure 2", rp)
	}
	if lp := c.LivenessProbe; lp == nil || lp.Exec == nil || strings.Join(lp.Exec.Command, " ") != "cat /tmp/healthy" {
		t.Errorf("got livenessProbe %+v; want exec cat /tmp/healthy", lp)
	}
	if sp := c.StartupProbe; sp == nil || sp.TCPSocket == nil || sp.TCPSocket.Port != 8080 || *sp.FailureThreshold != 30 {
		t.Errorf("got startupProbe %+v; want tcpSocket 8080, failure 30", sp)
	}
	if len(c.ScratchVolumes) != 1 || c.ScratchVolumes[0] != (api.ScratchVolume{Name: "shared", Path: "/shared"}) {
		t.Errorf("got scratchVolumes %+v", c.ScratchVolumes)
	}
	if len(c.InitContainers) != 1 || c.InitContainers[0].Name != "fetch" || len(c.InitContainers[0].Volumes) != 1 || c.InitContainers[0].Volumes[0].Scratch != "shared" {
		t.Errorf("got initContainers %+v; want fetch mounting scratch shared", c.InitContainers)
	}
	if len(c.Containers) != 1 {
		t.Fatalf("got %d containers; want 1", len(c.Containers))
	}
	p := c.Containers[0]
	if p.Name != "proxy" || p.Resources == nil || *p.Resources != (api.ContainerResources{MilliCPU: 100, MemoryMiB: 64}) || p.RestartPolicy != api.RestartOnFailure {
		t.Errorf("got container %+v; want proxy with 100m, 64MiB, on-failure", p)
	}
	if g := p.ReadinessProbe; g == nil || g.GRPC == nil || g.GRPC.Port != 9090 || g.GRPC.Service != "envoy" || *g.TimeoutSeconds != 3 || *g.SuccessThreshold != 2 {
		t.Errorf("got the proxy's readinessProbe %+v; want grpc 9090 envoy, timeout 3, success 2", g)
	}
}

func TestParsePodRejectsUnknownProbeField(t *testing.T) {
	// A misspelt probe field is an error, not a probe silently without it.
	doc := strings.Replace(podDoc, "failureThreshold: 30", "failureTreshold: 30", 1)
	if _, err := Parse("pod.yaml", []byte(doc)); err == nil || !strings.Contains(err.Error(), "failureTreshold") {
		t.Errorf("got %v; want an error naming failureTreshold", err)
	}
}
