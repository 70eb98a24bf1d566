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

func TestValidateRolloutTimes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ro    RolloutPolicy
		field string // "" for valid
	}{
		{"unset", RolloutPolicy{}, ""},
		{"min ready", RolloutPolicy{MinReadySeconds: 30}, ""},
		{"both", RolloutPolicy{MinReadySeconds: 30, ProgressDeadlineSeconds: 120}, ""},
		{"negative min ready", RolloutPolicy{MinReadySeconds: -1}, "rollout.minReadySeconds"},
		{"negative deadline", RolloutPolicy{ProgressDeadlineSeconds: -1}, "rollout.progressDeadlineSeconds"},
		{"min ready beyond a week", RolloutPolicy{MinReadySeconds: MaxRolloutSeconds + 1, ProgressDeadlineSeconds: MaxRolloutSeconds}, "rollout.minReadySeconds"},
		{"deadline beyond a week", RolloutPolicy{ProgressDeadlineSeconds: MaxRolloutSeconds + 1}, "rollout.progressDeadlineSeconds"},
		{"deadline not after min ready", RolloutPolicy{MinReadySeconds: 60, ProgressDeadlineSeconds: 60}, "rollout.progressDeadlineSeconds"},
		{"default deadline not after min ready", RolloutPolicy{MinReadySeconds: 600}, "rollout.progressDeadlineSeconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Resource{Name: "web", Kind: KindCompute, Replicas: 1, Rollout: tc.ro,
				Spec: ResourceSpec{Flavor: "small", Compute: &ComputeSpec{Image: "busybox"}}}
			err := r.Validate()
			var fe *FieldError
			switch {
			case tc.field == "" && err != nil:
				t.Errorf("got %v; want nil", err)
			case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
				t.Errorf("got %v; want an error on %q", err, tc.field)
			}
		})
	}
	if got := (RolloutPolicy{}).ProgressDeadline(); got != DefaultProgressDeadline {
		t.Errorf("default progress deadline %s; want %s", got, DefaultProgressDeadline)
	}
}

func TestScheduleReserve(t *testing.T) {
	for _, tc := range []struct {
		reserve string
		k       int
		ok      bool
	}{
		{"", 0, true}, {"N+1", 1, true}, {"N+2", 2, true}, {"N+9", 9, true},
		{"N+0", 0, false}, {"N+10", 0, false}, {"n+1", 0, false}, {"N-1", 0, false}, {"1", 0, false}, {"N+", 0, false},
	} {
		s := ScheduleRule{Reserve: tc.reserve}
		k, ok := s.ReserveLosses()
		if k != tc.k || ok != tc.ok {
			t.Errorf("ReserveLosses(%q) = %d, %v; want %d, %v", tc.reserve, k, ok, tc.k, tc.ok)
		}
		var fe *FieldError
		err := s.validate()
		switch {
		case tc.ok && err != nil:
			t.Errorf("validate(%q): %v", tc.reserve, err)
		case !tc.ok && (!errors.As(err, &fe) || fe.Field != "reserve"):
			t.Errorf("validate(%q) = %v; want an error on reserve", tc.reserve, err)
		}
	}
}
