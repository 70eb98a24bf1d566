package provider_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/fake"
	"github.com/stratahq/strata/providers/provider"
)

// configRecorder is the fake with ApplyConfig: it records the data.
type configRecorder struct {
	provider.Provider
	got chan *provider.ConfigData
}

func (r configRecorder) ApplyConfig(ctx context.Context, a *api.Assignment, d *provider.ConfigData) (api.AssignmentStatus, error) {
	r.got <- d
	return r.Apply(ctx, a)
}

// TestApplyConfigOverTheWire checks that a plugin's client carries the
// data of Configs and Secrets to the served provider's ApplyConfig, and
// that a provider without it answers ErrUnsupported.
func TestApplyConfigOverTheWire(t *testing.T) {
	f := fake.New(fake.Config{Kinds: []api.ProviderKind{api.ProviderContainer}})
	rec := configRecorder{Provider: f, got: make(chan *provider.ConfigData, 1)}
	c := serve(t, rec, filepath.Join(t.TempDir(), "r.sock"))
	want := &provider.ConfigData{
		Env:      map[string]string{"A": "1"},
		Files:    []provider.File{{Dir: "/etc/app", Name: "k", Data: []byte("v")}, {Dir: "/run/s", Name: "p", Data: []byte{0, 1}, Secret: true}},
		PullAuth: &provider.RegistryAuth{Host: "r.example", Username: "u", Password: "pw"},
		Containers: map[string]provider.ContainerData{
			"side": {Env: map[string]string{"B": "2"}, Files: []provider.File{{Dir: "/etc/side", Name: "s", Data: []byte("w"), Secret: true}}},
			"init": {Env: map[string]string{"C": "3"}},
		},
	}
	a := &api.Assignment{ID: "c1", Kind: api.KindCompute, Provider: api.ProviderContainer, Generation: 1, Spec: api.ResourceSpec{Compute: &api.ComputeSpec{Image: "busybox"}}}
	if _, err := c.ApplyConfig(t.Context(), a, want); err != nil {
		t.Fatalf("ApplyConfig: %v", err)
	}
	if got := <-rec.got; !reflect.DeepEqual(got, want) {
		t.Errorf("the provider got %+v; want %+v", got, want)
	}

	bare := serve(t, f, filepath.Join(t.TempDir(), "b.sock"))
	if _, err := bare.ApplyConfig(t.Context(), a, want); !errors.Is(err, provider.ErrUnsupported) {
		t.Errorf("ApplyConfig to a provider without it: got %v; want ErrUnsupported", err)
	}
}
