package provider_test

import (
	"context"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratahq/strata/providers/fake"
	"github.com/stratahq/strata/providers/provider"
)

// podProvider is a fake that advertises pods and probes and records the
// options of the Logs it serves.
type podProvider struct {
	*fake.Fake
	logs chan provider.LogOptions
}

func (p *podProvider) Info(ctx context.Context) (provider.Info, error) {
	info, err := p.Fake.Info(ctx)
	info.Features = []string{provider.FeaturePods, provider.FeatureProbes}
	return info, err
}

func (p *podProvider) Logs(_ context.Context, _ string, opts provider.LogOptions, w io.Writer) error {
	p.logs <- opts
	_, err := io.WriteString(w, opts.Container)
	return err
}

func TestFeaturesAndLogContainerOverTheWire(t *testing.T) {
	p := &podProvider{Fake: fake.New(fake.Config{}), logs: make(chan provider.LogOptions, 1)}
	c := serve(t, p, filepath.Join(t.TempDir(), "p.sock"))
	info, err := c.Info(t.Context())
	if err != nil || !slices.Equal(info.Features, []string{"pods", "probes"}) || !info.HasFeature(provider.FeatureProbes) || info.HasFeature("gpus") {
		t.Errorf("Info over the wire: got %+v, %v; want features pods and probes", info, err)
	}
	var b strings.Builder
	if err := c.Logs(t.Context(), "r1", provider.LogOptions{Container: "sidecar", TailLines: 3}, &b); err != nil {
		t.Fatalf("Logs over the wire: %v", err)
	}
	if got := <-p.logs; got.Container != "sidecar" || got.TailLines != 3 {
		t.Errorf("Logs options over the wire: got %+v; want container sidecar, tail 3", got)
	}
	if b.String() != "sidecar" {
		t.Errorf("Logs output: got %q; want %q", b.String(), "sidecar")
	}
}
