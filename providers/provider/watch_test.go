package provider_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/fake"
	"github.com/stratahq/strata/providers/provider"
)

// recv returns the next status on ch, failing the test if none comes or
// ch closes.
func recv(t *testing.T, ch <-chan api.AssignmentStatus) api.AssignmentStatus {
	t.Helper()
	select {
	case st, ok := <-ch:
		if !ok {
			t.Fatal("watch closed; want a status")
		}
		return st
	case <-time.After(waitFor):
		t.Fatalf("no status within %v", waitFor)
	}
	return api.AssignmentStatus{}
}

// closed waits for ch to close, draining it, and returns what it drained.
func closed(t *testing.T, ch <-chan api.AssignmentStatus) []api.AssignmentStatus {
	t.Helper()
	var got []api.AssignmentStatus
	deadline := time.After(waitFor)
	for {
		select {
		case st, ok := <-ch:
			if !ok {
				return got
			}
			got = append(got, st)
		case <-deadline:
			t.Fatalf("watch still open after %v (%d statuses drained); want it closed", waitFor, len(got))
		}
	}
}

func TestWatchers(t *testing.T) {
	t.Run("sends copies in order", func(t *testing.T) {
		w := provider.NewWatchers(4)
		ch, err := w.Watch(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		code := int32(3)
		st := api.AssignmentStatus{ID: "a", Phase: api.PhaseError, ExitCode: &code, Backends: []api.BackendStatus{{Replica: "r"}}}
		w.Send(st)
		w.Send(api.AssignmentStatus{ID: "a", Phase: api.PhaseReady})
		code = 9
		st.Backends[0].Replica = "changed"
		first, second := recv(t, ch), recv(t, ch)
		if first.Phase != api.PhaseError || *first.ExitCode != 3 || first.Backends[0].Replica != "r" {
			t.Errorf("first status: got %+v; want a copy of error, exit code 3, backend r", first)
		}
		if second.Phase != api.PhaseReady {
			t.Errorf("second status: got phase %q; want ready", second.Phase)
		}
	})
	t.Run("a watcher that falls behind is closed, not skipped", func(t *testing.T) {
		w := provider.NewWatchers(4)
		slow, _ := w.Watch(t.Context())
		fast, _ := w.Watch(t.Context())
		for i := range 10 {
			w.Send(api.AssignmentStatus{ID: "a", ObservedGeneration: int64(i + 1)})
			recv(t, fast)
		}
		got := closed(t, slow)
		if len(got) != 4 {
			t.Fatalf("slow watcher: got %d statuses before it closed; want its buffer, 4", len(got))
		}
		for i, st := range got {
			if st.ObservedGeneration != int64(i+1) {
				t.Errorf("slow watcher status %d: got generation %d; want %d (in order, no gap)", i, st.ObservedGeneration, i+1)
			}
		}
		if n := w.Len(); n != 1 {
			t.Errorf("Len: got %d; want 1 (the fast watcher)", n)
		}
	})
	t.Run("ctx ends the watch", func(t *testing.T) {
		w := provider.NewWatchers(4)
		ctx, cancel := context.WithCancel(t.Context())
		ch, _ := w.Watch(ctx)
		cancel()
		closed(t, ch)
		eventually(t, "watcher removed", func() (bool, string) { return w.Len() == 0, fmt.Sprint(w.Len(), " watchers") })
	})
	t.Run("Reset closes and accepts new watchers", func(t *testing.T) {
		w := provider.NewWatchers(4)
		ch, _ := w.Watch(t.Context())
		w.Reset()
		closed(t, ch)
		again, err := w.Watch(t.Context())
		if err != nil {
			t.Fatalf("Watch after Reset: %v", err)
		}
		w.Send(api.AssignmentStatus{ID: "a"})
		recv(t, again)
	})
	t.Run("Close closes and refuses", func(t *testing.T) {
		w := provider.NewWatchers(4)
		ch, _ := w.Watch(t.Context())
		w.Close()
		closed(t, ch)
		if _, err := w.Watch(t.Context()); !errors.Is(err, api.ErrUnavailable) {
			t.Errorf("Watch after Close: got %v; want api.ErrUnavailable", err)
		}
		w.Send(api.AssignmentStatus{ID: "a"}) // nobody to send to; must not panic
	})
}

// TestWatchOverWire checks that what the fake pushes reaches a client over
// the socket: an Apply, a replica killed behind its back, a deletion.
func TestWatchOverWire(t *testing.T) {
	f := fake.New(fake.Config{Kinds: []api.ProviderKind{api.ProviderContainer}})
	c := serve(t, f, filepath.Join(t.TempDir(), "f.sock"))
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := c.Watch(ctx)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	a := pluginAssignment(t, api.ProviderContainer, "w1")
	if _, err := c.Apply(t.Context(), a); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if st := recv(t, ch); st.ID != a.ID || st.Phase != api.PhaseReady {
		t.Errorf("after Apply: got %s %q; want %s ready", st.ID, st.Phase, a.ID)
	}
	if !f.Kill(a.ID) {
		t.Fatalf("Kill %s: the fake does not hold it", a.ID)
	}
	st := recv(t, ch)
	if st.Phase != api.PhaseError || st.ExitCode == nil || *st.ExitCode != 137 {
		t.Errorf("after Kill: got %q (%s), exit code %v; want error with exit code 137", st.Phase, st.Reason, st.ExitCode)
	}
	if err := c.Delete(t.Context(), a, 0); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if st := recv(t, ch); st.Phase != api.PhaseDestroyed {
		t.Errorf("after Delete: got %q; want destroyed", st.Phase)
	}
	cancel()
	closed(t, ch)
}

// endingWatcher is a provider whose watches the test ends, as a provider
// does with a watcher that fell behind.
type endingWatcher struct {
	provider.Provider
	w *provider.Watchers
}

func (e endingWatcher) Watch(ctx context.Context) (<-chan api.AssignmentStatus, error) {
	return e.w.Watch(ctx)
}

func TestWatchOverWireEnds(t *testing.T) {
	f := fake.New(fake.Config{})
	w := provider.NewWatchers(provider.DefaultWatchBuffer)
	c := serve(t, endingWatcher{Provider: f, w: w}, filepath.Join(t.TempDir(), "e.sock"))
	bare := serve(t, noLogs{f}, filepath.Join(t.TempDir(), "n.sock"))

	t.Run("the provider ends the watch", func(t *testing.T) {
		ch, err := c.Watch(t.Context())
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		w.Send(api.AssignmentStatus{ID: "a", Phase: api.PhaseReady})
		w.Reset()
		// What was sent before the end is delivered, then the channel
		// closes: the client watches again and relists.
		if got := closed(t, ch); len(got) != 1 || got[0].ID != "a" {
			t.Errorf("before the end: got %+v; want the status of a", got)
		}
		again, err := c.Watch(t.Context())
		if err != nil {
			t.Fatalf("Watch again: %v", err)
		}
		w.Send(api.AssignmentStatus{ID: "b"})
		if st := recv(t, again); st.ID != "b" {
			t.Errorf("second watch: got %q; want b", st.ID)
		}
	})
	t.Run("a provider that does not watch", func(t *testing.T) {
		if _, err := bare.Watch(t.Context()); !errors.Is(err, provider.ErrUnsupported) {
			t.Errorf("Watch: got %v; want provider.ErrUnsupported", err)
		}
	})
	t.Run("a provider that cannot watch now", func(t *testing.T) {
		w.Close()
		if _, err := c.Watch(t.Context()); !errors.Is(err, api.ErrUnavailable) {
			t.Errorf("Watch: got %v; want api.ErrUnavailable", err)
		}
	})
}

// TestServeStopEndsWatch checks that a watch does not hold a stopping
// server for its grace period: the stream ends at once, and the client
// sees its channel close.
func TestServeStopEndsWatch(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "s.sock")
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- provider.Serve(ctx, fake.New(fake.Config{}), socket, testLogger(t)) }()
	c, conn, err := provider.Dial(socket)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer conn.Close()
	var ch <-chan api.AssignmentStatus
	eventually(t, "watch in place", func() (bool, string) {
		ch, err = c.Watch(t.Context())
		return err == nil, errString(err)
	})
	start := time.Now()
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(waitFor):
		t.Fatalf("Serve did not return within %v", waitFor)
	}
	// Serve waits up to 5s for streams it did not end itself.
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Serve with a watch in flight: returned after %v; want it to end the watch, not wait for it", took)
	}
	closed(t, ch)
}

// testPluginWatch watches through a plugin binary: a replica that exits
// by itself is pushed, a plugin that dies ends the watch, and watching
// again works once it is restarted.
func testPluginWatch(t *testing.T, bin, dir string) {
	p := startPlugin(t, provider.PluginConfig{Name: "watched", Binary: bin, DataDir: dir, Options: map[string]any{"applyLatency": "1ms"}})
	ch, err := p.Watch(t.Context())
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	a := pluginAssignment(t, api.ProviderContainer, "exits")
	a.Labels = map[string]string{fake.LabelFail: fake.FailExit}
	if _, err := p.Apply(t.Context(), a); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	for st := recv(t, ch); st.Phase != api.PhaseError; st = recv(t, ch) {
		if st.ID != a.ID || st.Phase != api.PhaseReady {
			t.Fatalf("before the exit: got %s %q; want %s ready", st.ID, st.Phase, a.ID)
		}
	}

	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatalf("kill plugin: %v", err)
	}
	closed(t, ch)
	eventually(t, "watching the restarted plugin", func() (bool, string) {
		ch, err = p.Watch(t.Context())
		return err == nil, errString(err)
	})
	b := pluginAssignment(t, api.ProviderContainer, "after")
	if _, err := p.Apply(t.Context(), b); err != nil {
		t.Fatalf("Apply after the restart: %v", err)
	}
	if st := recv(t, ch); st.ID != b.ID || st.Phase != api.PhaseReady {
		t.Errorf("after the restart: got %s %q; want %s ready", st.ID, st.Phase, b.ID)
	}
}
