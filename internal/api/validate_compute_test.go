package api

import (
	"errors"
	"testing"
)

// TestValidateSecurityContext checks the ids of a container's user: in
// Kubernetes' range, and not root with runAsNonRoot.
func TestValidateSecurityContext(t *testing.T) {
	id := func(v int64) *int64 { return &v }
	tests := []struct {
		name  string
		sc    SecurityContext
		field string // "" valid
	}{
		{"user and group", SecurityContext{RunAsUser: id(1000), RunAsGroup: id(1000), RunAsNonRoot: true}, ""},
		{"root", SecurityContext{RunAsUser: id(0), RunAsGroup: id(0)}, ""},
		{"non-root with the image's user", SecurityContext{RunAsNonRoot: true}, ""},
		{"group alone", SecurityContext{RunAsGroup: id(100)}, ""},
		{"largest id", SecurityContext{RunAsUser: id(MaxUserID), RunAsGroup: id(MaxUserID)}, ""},
		{"negative user", SecurityContext{RunAsUser: id(-1)}, "spec.compute.securityContext.runAsUser"},
		{"negative group", SecurityContext{RunAsGroup: id(-5)}, "spec.compute.securityContext.runAsGroup"},
		{"user too large", SecurityContext{RunAsUser: id(MaxUserID + 1)}, "spec.compute.securityContext.runAsUser"},
		{"group too large", SecurityContext{RunAsGroup: id(1 << 40)}, "spec.compute.securityContext.runAsGroup"},
		{"non-root as root", SecurityContext{RunAsUser: id(0), RunAsNonRoot: true}, "spec.compute.securityContext.runAsUser"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := tt.sc
			r := &Resource{Name: "web", Kind: KindCompute, Replicas: 1, Spec: ResourceSpec{Flavor: "small", Compute: &ComputeSpec{Image: "busybox", SecurityContext: &sc}}}
			err := r.Validate()
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
