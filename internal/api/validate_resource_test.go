package api

import (
	"errors"
	"testing"
)

func TestValidateReplicas(t *testing.T) {
	compute := func() Resource {
		return Resource{Name: "web", Kind: KindCompute, Spec: ResourceSpec{Flavor: "small", Compute: &ComputeSpec{Image: "busybox"}}}
	}
	volume := func() Resource {
		return Resource{Name: "data", Kind: KindVolume, Spec: ResourceSpec{Volume: &VolumeSpec{SizeMiB: 64}}}
	}
	image := func() Resource {
		return Resource{Name: "img", Kind: KindImage, Spec: ResourceSpec{Image: &ImageSpec{Ref: "docker.io/library/busybox:1"}}}
	}
	for _, tc := range []struct {
		name     string
		r        Resource
		replicas int
		field    string // "" for valid
	}{
		{"compute", compute(), 3, ""},
		{"compute at the limit", compute(), MaxReplicas, ""},
		{"negative", compute(), -1, "replicas"},
		{"above the limit", compute(), MaxReplicas + 1, "replicas"},
		{"volume of one", volume(), 1, ""},
		{"volume of two", volume(), 2, "replicas"},
		{"image of none", image(), 0, ""},
		{"image of one", image(), 1, "replicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			r.Replicas = tc.replicas
			for what, err := range map[string]error{"ValidateReplicas": ValidateReplicas(r.Kind, r.Replicas), "Validate": r.Validate()} {
				var fe *FieldError
				switch {
				case tc.field == "" && err != nil:
					t.Errorf("%s: got %v; want nil", what, err)
				case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
					t.Errorf("%s: got %v; want an error on %q", what, err, tc.field)
				}
			}
		})
	}
	// Replicas are checked first: their error names "replicas" even when
	// the rest is wrong too.
	r := volume()
	r.Name, r.Replicas = "", 2
	var fe *FieldError
	if err := r.Validate(); !errors.As(err, &fe) || fe.Field != "replicas" {
		t.Errorf("a bad name and bad replicas: got %v; want the replicas error", err)
	}
}
