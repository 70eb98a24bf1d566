package provider_test

import (
	"errors"
	"testing"

	"github.com/stratahq/strata/providers/provider"
)

func TestSingleContainerLogs(t *testing.T) {
	for _, c := range []string{"", "main"} {
		if err := provider.SingleContainerLogs("r1", provider.LogOptions{Container: c}); err != nil {
			t.Errorf("container %q: %v; want the main output", c, err)
		}
	}
	err := provider.SingleContainerLogs("r1", provider.LogOptions{Container: "web"})
	if !errors.Is(err, provider.ErrNotFound) || err.Error() != `replica "r1" has no container "web": not found` {
		t.Errorf("container web: %v; want not found naming it", err)
	}
}
