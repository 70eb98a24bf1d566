package containerd

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
	"github.com/stratahq/strata/providers/provider/providertest"
)

// TestConformance runs the provider contract's suite against containerd:
// busybox replicas from the image archive, on a bridge of their own.
func TestConformance(t *testing.T) {
	e := newEnv(t)
	freshBridge(t, "st-conf0")
	var next atomic.Int32
	var mu sync.Mutex
	var ids []string
	providertest.Run(t, providertest.Harness{
		New:   func(*testing.T) provider.Provider { return e.p },
		Kinds: []api.ProviderKind{api.ProviderContainer},
		Assignment: func(_ *testing.T, _ api.ProviderKind, id string) *api.Assignment {
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
			a := e.assignment(id)
			// Replica ids never repeat within a run, nor do addresses
			// while their replicas live.
			host := 10 + next.Add(1)%200
			a.Network = &api.NetworkAttachment{
				Network: "conformance",
				Bridge:  "st-conf0",
				Subnet:  "10.213.1.0/24",
				Gateway: "10.213.1.1",
				Address: fmt.Sprintf("10.213.1.%d", host),
			}
			return a
		},
		ReadyTimeout: time.Minute,
		SupportsLogs: true,
		Watches:      true,
		Exit: func(a *api.Assignment, code int32) {
			a.Spec.Compute.Command = []string{"sh", "-c", fmt.Sprintf("echo done; exit %d", code)}
			a.Spec.Compute.RestartPolicy = api.RestartNever
		},
		// SIGKILL to the container's process, as the OOM killer or an
		// operator would: only containerd's exit event can tell.
		Kill: func(t *testing.T, id string) {
			if err := syscall.Kill(int(e.pid(t, id)), syscall.SIGKILL); err != nil {
				t.Fatalf("kill %s: %v", id, err)
			}
		},
	})
	// The suite's ConcurrentApply leaves its replicas to the provider's
	// test: delete whatever remains.
	for _, id := range ids {
		if err := e.p.Delete(e.ctx(t), &api.Assignment{ID: id}, time.Second); err != nil {
			t.Errorf("Delete %s: %v", id, err)
		}
	}
	t.Run("NothingLeft", func(t *testing.T) {
		for _, id := range ids {
			e.checkGone(t, id)
		}
		if snaps := e.activeSnapshots(t); len(snaps) > 0 {
			t.Errorf("snapshots: got %v; want none but image layers", snaps)
		}
		if _, err := readBridge("st-conf0"); err == nil {
			t.Errorf("bridge st-conf0: got present; want removed with its last replica")
		}
	})
}
