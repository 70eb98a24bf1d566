package api

import (
	"errors"
	"strings"
	"testing"
)

// TestValidateImageRefs checks image references by the distribution
// grammar wherever a spec gives one (an Image's ref, a Compute's image,
// an override's image): what a node cannot parse is a 400 naming the
// field, not a pull that fails later on the node.
func TestValidateImageRefs(t *testing.T) {
	digest := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	tests := []struct {
		ref  string
		want string // a part of the message; "" valid
	}{
		{"busybox", ""},
		{"docker.io/library/busybox:1.36", ""},
		{"localhost:5000/a/b@" + digest, ""},
		{"busybox:1.36@" + digest, ""},
		{"registry.example.com:65535/team/app_x.y-z:v1.2_3", ""},
		{"[::1]:5000/a", ""},
		{"web", ""}, // an Image resource's name is a reference too
		{"WEB", "must be lowercase"},
		{"a..b", `the name "a..b" must be lower-case path components`},
		{"busybox:", `the tag "" must be 1 to 128`},
		{"busybox:-x", `the tag "-x"`},
		{"busybox@sha256:abc", `the digest "sha256:abc" is not algorithm:hex`},
		{"busybox@sha256:" + strings.Repeat("a", 40), "invalid checksum digest length"},
		{"registry:99999/x", "registry port 99999 is not between 1 and 65535"},
		{"registry:0/x", "registry port 0"},
		{"/busybox", "the name"},
		{"a b", "is not an OCI image reference"},
		{strings.Repeat("a", 64), "invalid repository name"},
	}
	for _, tt := range tests {
		for _, c := range []struct {
			where string
			r     *Resource
			field string
		}{
			{"Image", &Resource{Name: "img", Kind: KindImage, Spec: ResourceSpec{Image: &ImageSpec{Ref: tt.ref}}}, "spec.image.ref"},
			{"Compute", &Resource{Name: "web", Kind: KindCompute, Replicas: 1, Spec: ResourceSpec{Flavor: "small", Compute: &ComputeSpec{Image: tt.ref}}}, "spec.compute.image"},
			{"override", &Resource{Name: "web", Kind: KindCompute, Replicas: 1, Spec: ResourceSpec{Flavor: "small", Compute: &ComputeSpec{Image: "busybox"}},
				Overrides: map[string]SpecOverride{"eu": {Image: tt.ref}}}, "overrides.eu.image"},
		} {
			t.Run(c.where+" "+tt.ref, func(t *testing.T) {
				err := c.r.Validate()
				if tt.want == "" {
					if err != nil {
						t.Fatalf("Validate: got %v; want nil", err)
					}
					return
				}
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Validate: got %v; want an invalid %s saying %q", err, c.field, tt.want)
				}
			})
		}
	}
}
