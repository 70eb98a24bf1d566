package provider_test

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/fake"
	"github.com/stratahq/strata/providers/provider"
)

// calls records what Instrument reports.
type calls struct {
	mu  sync.Mutex
	got []string
}

func (c *calls) ObserveCall(prov, op string, took time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := prov + " " + op
	if err != nil {
		s += " failed"
	}
	if took < 0 {
		s += " negative"
	}
	c.got = append(c.got, s)
}

func TestInstrument(t *testing.T) {
	rec := &calls{}
	p := provider.Instrument("f", fake.New(fake.Config{Kinds: []api.ProviderKind{api.ProviderContainer}}), rec)
	ctx := t.Context()
	a := &api.Assignment{ID: "a1", Provider: api.ProviderContainer, Kind: api.KindCompute, Generation: 1}

	if _, err := p.Info(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Apply(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Status(ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.List(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx, a, 0); err != nil {
		t.Fatal(err)
	}
	// A replica the provider does not hold is an answer, not a failure,
	// but the caller still sees ErrNotFound.
	if _, err := p.Status(ctx, "a1"); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("Status of a deleted replica: got %v; want ErrNotFound", err)
	}
	// A kind the provider does not serve is a failure.
	if _, err := p.Apply(ctx, &api.Assignment{ID: "v", Provider: api.ProviderVM}); !errors.Is(err, provider.ErrUnsupported) {
		t.Errorf("Apply of a VM: got %v; want ErrUnsupported", err)
	}
	want := []string{"f info", "f apply", "f status", "f list", "f delete", "f status", "f apply failed"}
	if !slices.Equal(rec.got, want) {
		t.Errorf("observed calls: got %q; want %q", rec.got, want)
	}

	// The optional capabilities pass through to what the provider offers,
	// and answer ErrUnsupported where it offers none.
	if err := p.(provider.Logger).Logs(ctx, "a1", provider.LogOptions{}, &bytes.Buffer{}); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("Logs of a deleted replica: got %v; want the provider's ErrNotFound", err)
	}
	bare := provider.Instrument("b", struct{ provider.Provider }{fake.New(fake.Config{})}, rec)
	if err := bare.(provider.Logger).Logs(ctx, "a1", provider.LogOptions{}, &bytes.Buffer{}); !errors.Is(err, provider.ErrUnsupported) {
		t.Errorf("Logs of a provider without logs: got %v; want ErrUnsupported", err)
	}
	if _, err := bare.(provider.Watcher).Watch(ctx); !errors.Is(err, provider.ErrUnsupported) {
		t.Errorf("Watch of a provider without a watch: got %v; want ErrUnsupported", err)
	}
}
