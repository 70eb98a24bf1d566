package api

import (
	"errors"
	"strings"
	"testing"
)

// TestSecurityValidateProviderStrings checks that the strings a spec hands
// to a node's providers (paths, URLs, a health check's path, command lines)
// are refused at the API, naming the field, when the provider would fail
// on them or they would escape their place in a file.
func TestSecurityValidateProviderStrings(t *testing.T) {
	image := func(mod func(*ImageSpec)) *Resource {
		r := &Resource{Name: "img", Kind: KindImage, Spec: ResourceSpec{Image: &ImageSpec{Ref: "docker.io/library/busybox:latest", Archive: "/srv/images/busybox.tar"}}}
		mod(r.Spec.Image)
		return r
	}
	lb := func(mod func(*LoadbalancerSpec)) *Resource {
		r := &Resource{Name: "lb", Kind: KindLoadbalancer, Replicas: 1, Spec: ResourceSpec{Loadbalancer: &LoadbalancerSpec{
			Listeners:   []Listener{{Port: 30080, Protocol: "http"}},
			Selector:    map[string]string{"app": "web"},
			HealthCheck: &HealthCheck{Type: "http", Path: "/healthz"},
		}}}
		mod(r.Spec.Loadbalancer)
		return r
	}
	compute := func(mod func(*ComputeSpec)) *Resource {
		r := &Resource{Name: "web", Kind: KindCompute, Replicas: 1, Spec: ResourceSpec{Flavor: "small", Compute: &ComputeSpec{Image: "busybox"}}}
		mod(r.Spec.Compute)
		return r
	}
	tests := []struct {
		name  string
		r     *Resource
		field string // "" valid
	}{
		{"archive path", image(func(i *ImageSpec) {}), ""},
		{"archive file URL", image(func(i *ImageSpec) { i.Archive = "file:///srv/images/busybox.tar" }), ""},
		{"archive https URL", image(func(i *ImageSpec) { i.Archive = "https://images.example.com/busybox.tar?sig=x" }), ""},
		{"archive name in the node's image directories", image(func(i *ImageSpec) { i.Archive = "busybox-oci.tar" }), ""},
		{"archive relative path in the node's image directories", image(func(i *ImageSpec) { i.Archive = "busybox/oci.tar" }), ""},
		{"archive relative with ..", image(func(i *ImageSpec) { i.Archive = "../../etc/shadow" }), "spec.image.archive"},
		{"archive file URL of a relative name", image(func(i *ImageSpec) { i.Archive = "file://busybox-oci.tar" }), "spec.image.archive"},
		{"archive empty file URL", image(func(i *ImageSpec) { i.Archive = "file://" }), "spec.image.archive"},
		{"archive with ..", image(func(i *ImageSpec) { i.Archive = "/srv/images/../../etc/shadow" }), "spec.image.archive"},
		{"archive file URL with ..", image(func(i *ImageSpec) { i.Archive = "file:///srv/../etc/shadow" }), "spec.image.archive"},
		{"archive URL with ..", image(func(i *ImageSpec) { i.Archive = "http://x/a/%2e%2e/b" }), "spec.image.archive"},
		{"archive URL with credentials", image(func(i *ImageSpec) { i.Archive = "https://u:p@images.example.com/a.tar" }), "spec.image.archive"},
		{"archive gopher", image(func(i *ImageSpec) { i.Archive = "gopher://x/a.tar" }), "spec.image.archive"},
		{"archive newline", image(func(i *ImageSpec) { i.Archive = "/srv/images/a.tar\n" }), "spec.image.archive"},
		{"kernel name in the node's image directories", image(func(i *ImageSpec) { i.Archive, i.Ref, i.Kernel = "", "", "vmlinuz" }), ""},
		{"kernel relative with ..", image(func(i *ImageSpec) { i.Archive, i.Ref, i.Kernel = "", "", "../vmlinuz" }), "spec.image.kernel"},
		{"initrd with ..", image(func(i *ImageSpec) { i.Archive, i.Ref, i.Kernel, i.Initrd = "", "", "/srv/vmlinuz", "/srv/../x" }), "spec.image.initrd"},
		{"disk NUL", image(func(i *ImageSpec) { i.Archive, i.Ref, i.Disk = "", "", "/srv/disk\x00.qcow2" }), "spec.image.disk"},
		{"cmdline escape", image(func(i *ImageSpec) { i.Archive, i.Ref, i.Kernel, i.Cmdline = "", "", "/srv/vmlinuz", "quiet\x1b[2J" }), "spec.image.cmdline"},
		{"ref with a newline", image(func(i *ImageSpec) { i.Ref = "busybox\nlatest" }), "spec.image.ref"},
		{"health check path", lb(func(l *LoadbalancerSpec) {}), ""},
		{"health check path with a newline", lb(func(l *LoadbalancerSpec) { l.HealthCheck.Path = "/ok\n    stats socket /tmp/x level admin" }), "spec.loadbalancer.healthCheck.path"},
		{"health check path with CR", lb(func(l *LoadbalancerSpec) { l.HealthCheck.Path = "/ok\r" }), "spec.loadbalancer.healthCheck.path"},
		{"health check path with a space", lb(func(l *LoadbalancerSpec) { l.HealthCheck.Path = "/ok HTTP/1.0" }), "spec.loadbalancer.healthCheck.path"},
		{"health check path with a quote", lb(func(l *LoadbalancerSpec) { l.HealthCheck.Path = `/ok"` }), "spec.loadbalancer.healthCheck.path"},
		{"health check path with #", lb(func(l *LoadbalancerSpec) { l.HealthCheck.Path = "/ok#x" }), "spec.loadbalancer.healthCheck.path"},
		{"health check path too long", lb(func(l *LoadbalancerSpec) { l.HealthCheck.Path = "/" + strings.Repeat("a", MaxCheckPathLen) }), "spec.loadbalancer.healthCheck.path"},
		{"shell script command", compute(func(c *ComputeSpec) { c.Command = []string{"sh", "-c", "echo a\necho b"} }), ""},
		{"command NUL", compute(func(c *ComputeSpec) { c.Command = []string{"sh\x00x"} }), "spec.compute.command[0]"},
		{"args NUL", compute(func(c *ComputeSpec) { c.Args = []string{"a", "b\x00"} }), "spec.compute.args[1]"},
		{"env NUL", compute(func(c *ComputeSpec) { c.Env = map[string]string{"A": "x\x00y"} }), "spec.compute.env.A"},
		{"working dir newline", compute(func(c *ComputeSpec) { c.WorkingDir = "/app\n" }), "spec.compute.workingDir"},
		{"volume path newline", compute(func(c *ComputeSpec) {
			c.Volumes = []VolumeMount{{Volume: "data", Path: "/data\n"}}
		}), "spec.compute.volumes[0].path"},
		{"kernel args NUL", compute(func(c *ComputeSpec) { c.KernelArgs = "quiet\x00" }), "spec.compute.kernelArgs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.r.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate: got %v; want nil", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate: got %v; want an invalid %s", err, tt.field)
			}
		})
	}
}
