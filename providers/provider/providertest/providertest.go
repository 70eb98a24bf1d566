// Package providertest is the conformance suite every provider.Provider
// must pass: the fake, in process and over the wire, and the real
// providers (containerd, libvirt, haproxy) on a machine that has them.
//
// A provider's test calls Run with a Harness:
//
//	func TestConformance(t *testing.T) {
//		providertest.Run(t, providertest.Harness{
//			New:          func(t *testing.T) provider.Provider { return newProvider(t) },
//			Kinds:        []api.ProviderKind{api.ProviderContainer},
//			Assignment:   busyboxAssignment,
//			ReadyTimeout: time.Minute,
//			SupportsLogs: true,
//		})
//	}
//
// The suite checks the contract documented on provider.Provider: Apply
// converges and is idempotent, generations are observed, Status and
// Delete of unknown replicas, List for recovery, orphan deletion by ID
// alone, concurrent Applies, Logs, and Watch through the plugin boundary.
// Every subtest uses its own replica ids (random, prefixed "ct-") and
// deletes its replicas in t.Cleanup, so subtests are independent of each
// other and of other runs against the same daemon.
package providertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// Harness is what the suite needs from a provider's test.
type Harness struct {
	// New returns the provider under test. It is called once per subtest
	// and may return the same provider every time (replica ids never
	// repeat); a provider made per call should be closed in t.Cleanup.
	New func(t *testing.T) provider.Provider
	// Kinds are the kinds to exercise; each must be in Info's kinds.
	Kinds []api.ProviderKind
	// Assignment returns a valid assignment of kind with the given id:
	// whatever this provider needs to make it ready (a real image, a
	// network attachment, endpoints...). Its Generation should be 1 (0 is
	// taken as 1); the suite changes nothing else but the Generation.
	Assignment func(t *testing.T, kind api.ProviderKind, id string) *api.Assignment
	// ReadyTimeout bounds the wait for a replica to become ready, and for
	// other polls (default 30s).
	ReadyTimeout time.Duration
	// SupportsLogs says the provider keeps replica output: Logs must then
	// write something for a ready replica. Without it, a provider that
	// implements provider.Logger anyway (a client of a remote provider
	// without logs) must return provider.ErrUnsupported.
	SupportsLogs bool
	// Watches says the provider pushes status changes (provider.Watcher).
	// The Watch subtest serves the provider on a unix socket and watches
	// through the plugin client, as an agent watches a plugin: a ready
	// replica killed behind the provider's back (Kill) and its deletion
	// must be pushed, with no Status or List call meanwhile. Without
	// Watches, Watch through the socket must give provider.ErrUnsupported.
	Watches bool
	// Kill kills replica id behind the provider's back, as `kill -9`,
	// `virsh destroy` or a crash do: its status must then leave ready
	// (phase error, or a restart counted). Without it the Watch subtest
	// checks the deletion only, and says so in the test log. The
	// provider's own rescans, if it has any, should be set far apart
	// (an hour), so that only its events can report the kill in time.
	Kill func(t *testing.T, id string)
	// Exit turns a (an assignment of the kind) into a replica that runs
	// to completion: its process exits with code soon after it starts,
	// and its restart policy is never. With it, the ExitCode subtest
	// checks what a Job's attempts rely on: the exit is reported (phase
	// error with the exit code, no restart), stays reported, and the
	// output stays readable (with SupportsLogs) until the replica is
	// deleted. Without it, the subtest is skipped.
	Exit func(a *api.Assignment, code int32)
}

// callTimeout bounds one call to the provider (beyond ReadyTimeout for
// Apply, which may pull an image before returning).
const callTimeout = 30 * time.Second

// Run runs the suite. Kind-independent subtests come first, then one
// group of subtests per kind in h.Kinds.
func Run(t *testing.T, h Harness) {
	if h.New == nil || h.Assignment == nil || len(h.Kinds) == 0 {
		t.Fatal("providertest: Harness needs New, Assignment and at least one kind")
	}
	if h.ReadyTimeout <= 0 {
		h.ReadyTimeout = 30 * time.Second
	}
	s := &suite{h: h}
	t.Run("Info", s.testInfo)
	t.Run("Health", s.testHealth)
	t.Run("StatusUnknown", s.testStatusUnknown)
	t.Run("DeleteUnknown", s.testDeleteUnknown)
	perKind := []struct {
		name string
		fn   func(t *testing.T, kind api.ProviderKind)
	}{
		{"ApplyReady", s.testApplyReady},
		{"ApplyIdempotent", s.testApplyIdempotent},
		{"GenerationFollows", s.testGenerationFollows},
		{"List", s.testList},
		{"Delete", s.testDelete},
		{"DeleteTwice", s.testDeleteTwice},
		{"DeleteOrphan", s.testDeleteOrphan},
		{"ConcurrentApply", s.testConcurrentApply},
		{"Logs", s.testLogs},
		{"Watch", s.testWatch},
		{"ExitCode", s.testExitCode},
	}
	for _, kind := range h.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			for _, tc := range perKind {
				t.Run(tc.name, func(t *testing.T) { tc.fn(t, kind) })
			}
		})
	}
}

type suite struct{ h Harness }

// ---- kind-independent ----

func (s *suite) testInfo(t *testing.T) {
	p := s.h.New(t)
	info, err := p.Info(callCtx(t))
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	if info.Name == "" {
		t.Errorf("Info name: got empty; want a name")
	}
	for _, k := range s.h.Kinds {
		if !slices.Contains(info.Kinds, k) {
			t.Errorf("Info kinds: got %v; want it to include %q", info.Kinds, k)
		}
	}
}

func (s *suite) testHealth(t *testing.T) {
	p := s.h.New(t)
	cs, err := p.Health(callCtx(t))
	if err != nil {
		t.Fatalf("Health: %v", err)
	}
	if len(cs) == 0 {
		t.Fatalf("Health: got no conditions; want at least one")
	}
	for _, c := range cs {
		if c.Type == "" {
			t.Errorf("Health condition %+v: got empty type; want one", c)
		}
		switch c.Status {
		case api.ConditionReady, api.ConditionWarning, api.ConditionError:
		default:
			t.Errorf("Health condition %q: got status %q; want Ready, Warning or Error", c.Type, c.Status)
		}
	}
}

func (s *suite) testStatusUnknown(t *testing.T) {
	p := s.h.New(t)
	_, err := p.Status(callCtx(t), newID(t, "none"))
	if !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("Status of an unknown id: got %v; want an error wrapping api.ErrNotFound", err)
	}
}

func (s *suite) testDeleteUnknown(t *testing.T) {
	p := s.h.New(t)
	full := s.assignment(t, s.h.Kinds[0], newID(t, "none"))
	tests := []struct {
		name string
		a    *api.Assignment
	}{
		{"full assignment", full},
		{"id only", &api.Assignment{ID: newID(t, "none")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := p.Delete(callCtx(t), tc.a, time.Second); err != nil {
				t.Fatalf("Delete of an unknown replica: got %v; want nil", err)
			}
		})
	}
}

// ---- per kind ----

func (s *suite) testApplyReady(t *testing.T, kind api.ProviderKind) {
	p := s.h.New(t)
	a := s.assignment(t, kind, newID(t, "apply"))
	st := s.apply(t, p, a)
	if st.ID != "" && st.ID != a.ID {
		t.Errorf("Apply status id: got %q; want %q", st.ID, a.ID)
	}
	if st.Phase == api.PhaseDestroyed || (st.Phase != "" && !st.Phase.Valid()) {
		t.Errorf("Apply status phase: got %q; want created, provision, ready or error", st.Phase)
	}
	st = s.waitReady(t, p, a)
	if st.ProviderID == "" {
		t.Errorf("ready status: got empty ProviderID; want the provider's id of the replica")
	}
}

func (s *suite) testApplyIdempotent(t *testing.T, kind api.ProviderKind) {
	p := s.h.New(t)
	a := s.assignment(t, kind, newID(t, "again"))
	s.apply(t, p, a)
	first := s.waitReady(t, p, a)

	again := s.apply(t, p, clone(a))
	if again.ProviderID != "" && again.ProviderID != first.ProviderID {
		t.Errorf("second Apply: got ProviderID %q; want %q (the same replica)", again.ProviderID, first.ProviderID)
	}
	second := s.status(t, p, a.ID)
	if second.Phase != api.PhaseReady {
		t.Errorf("after a second Apply: got phase %q (%s); want ready", second.Phase, second.Reason)
	}
	if second.ProviderID != first.ProviderID {
		t.Errorf("after a second Apply: got ProviderID %q; want %q (nothing recreated)", second.ProviderID, first.ProviderID)
	}
	if second.Restarts != first.Restarts {
		t.Errorf("after a second Apply: got %d restarts; want %d (nothing restarted)", second.Restarts, first.Restarts)
	}
	if !first.Since.IsZero() && !second.Since.Equal(first.Since) {
		t.Errorf("after a second Apply: got ready since %v; want %v (nothing recreated)", second.Since, first.Since)
	}
}

func (s *suite) testGenerationFollows(t *testing.T, kind api.ProviderKind) {
	p := s.h.New(t)
	a := s.assignment(t, kind, newID(t, "gen"))
	s.apply(t, p, a)
	s.waitReady(t, p, a)

	next := clone(a)
	next.Generation = a.Generation + 1
	s.apply(t, p, next)
	st := s.waitReady(t, p, next)
	if st.ObservedGeneration != next.Generation {
		t.Errorf("after Apply of generation %d: got ObservedGeneration %d; want %d", next.Generation, st.ObservedGeneration, next.Generation)
	}
	l, ok := s.listed(t, p, a.ID)
	if !ok {
		t.Fatalf("List: got no %s; want it listed", a.ID)
	}
	if l.Generation != next.Generation {
		t.Errorf("List %s: got generation %d; want %d", a.ID, l.Generation, next.Generation)
	}
}

func (s *suite) testList(t *testing.T, kind api.ProviderKind) {
	p := s.h.New(t)
	as := []*api.Assignment{
		s.assignment(t, kind, newID(t, "list")),
		s.assignment(t, kind, newID(t, "list")),
	}
	as[1].Generation = as[0].Generation + 2
	for _, a := range as {
		s.apply(t, p, a)
	}
	for _, a := range as {
		s.waitReady(t, p, a)
	}
	for _, a := range as {
		l, ok := s.listed(t, p, a.ID)
		if !ok {
			t.Errorf("List: got no %s; want it listed", a.ID)
			continue
		}
		if l.Generation != a.Generation {
			t.Errorf("List %s: got generation %d; want %d", a.ID, l.Generation, a.Generation)
		}
		if l.Kind != a.Kind {
			t.Errorf("List %s: got kind %q; want %q", a.ID, l.Kind, a.Kind)
		}
		if l.Status.ID != "" && l.Status.ID != a.ID {
			t.Errorf("List %s: got status of %q; want its own", a.ID, l.Status.ID)
		}
	}
}

func (s *suite) testDelete(t *testing.T, kind api.ProviderKind) {
	p := s.h.New(t)
	a := s.assignment(t, kind, newID(t, "del"))
	s.apply(t, p, a)
	s.waitReady(t, p, a)
	if err := p.Delete(callCtx(t), clone(a), time.Second); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	s.checkGone(t, p, a.ID)
}

func (s *suite) testDeleteTwice(t *testing.T, kind api.ProviderKind) {
	p := s.h.New(t)
	a := s.assignment(t, kind, newID(t, "del2"))
	s.apply(t, p, a)
	s.waitReady(t, p, a)
	for i := 1; i <= 2; i++ {
		if err := p.Delete(callCtx(t), clone(a), time.Second); err != nil {
			t.Fatalf("Delete #%d: got %v; want nil", i, err)
		}
	}
	s.checkGone(t, p, a.ID)
}

func (s *suite) testDeleteOrphan(t *testing.T, kind api.ProviderKind) {
	p := s.h.New(t)
	a := s.assignment(t, kind, newID(t, "orphan"))
	s.apply(t, p, a)
	s.waitReady(t, p, a)
	// An orphan is found by List after a restart: the agent knows its id
	// and nothing else.
	if err := p.Delete(callCtx(t), &api.Assignment{ID: a.ID}, time.Second); err != nil {
		t.Fatalf("Delete with only the id: %v", err)
	}
	s.checkGone(t, p, a.ID)
}

func (s *suite) testConcurrentApply(t *testing.T, kind api.ProviderKind) {
	const n = 5
	p := s.h.New(t)
	as := make([]*api.Assignment, n)
	for i := range as {
		as[i] = s.assignment(t, kind, newID(t, "conc"))
		id := as[i].ID
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), callTimeout)
			defer cancel()
			if err := p.Delete(ctx, &api.Assignment{ID: id}, time.Second); err != nil {
				t.Errorf("clean-up: Delete %s: %v", id, err)
			}
		})
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, a := range as {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), callTimeout+s.h.ReadyTimeout)
			defer cancel()
			_, errs[i] = p.Apply(ctx, clone(a))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent Apply of %s: %v", as[i].ID, err)
		}
	}
	if t.Failed() {
		return
	}
	for _, a := range as {
		s.waitReady(t, p, a)
	}
}

func (s *suite) testLogs(t *testing.T, kind api.ProviderKind) {
	p := s.h.New(t)
	l, isLogger := p.(provider.Logger)
	if !s.h.SupportsLogs {
		if !isLogger {
			t.Skip("the provider keeps no logs")
		}
		a := s.assignment(t, kind, newID(t, "logs"))
		s.apply(t, p, a)
		s.waitReady(t, p, a)
		err := l.Logs(callCtx(t), a.ID, provider.LogOptions{}, &bytes.Buffer{})
		if !errors.Is(err, provider.ErrUnsupported) {
			t.Fatalf("Logs of a provider without logs: got %v; want provider.ErrUnsupported", err)
		}
		return
	}
	if !isLogger {
		t.Fatalf("Harness says SupportsLogs, but %T does not implement provider.Logger", p)
	}
	a := s.assignment(t, kind, newID(t, "logs"))
	s.apply(t, p, a)
	s.waitReady(t, p, a)

	t.Run("all", func(t *testing.T) {
		// Output may lag the replica's start: poll for it.
		var buf bytes.Buffer
		s.eventually(t, "Logs writes something", func() (bool, string) {
			buf.Reset()
			if err := l.Logs(callCtx(t), a.ID, provider.LogOptions{}, &buf); err != nil {
				return false, err.Error()
			}
			return buf.Len() > 0, "no output"
		})
	})
	t.Run("follow ends with ctx", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- l.Logs(ctx, a.ID, provider.LogOptions{Follow: true}, io.Discard) }()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				t.Fatalf("following Logs ended with %v; want nil once its context is done", err)
			}
		case <-time.After(callTimeout):
			t.Fatalf("following Logs did not return within %v of its context ending", callTimeout)
		}
	})
}

// testExitCode runs replicas to completion and reads their exit codes.
func (s *suite) testExitCode(t *testing.T, kind api.ProviderKind) {
	if s.h.Exit == nil || kind == api.ProviderLoadbalancer {
		t.Skip("the provider runs nothing to completion (no Harness.Exit), or the kind does not")
	}
	p := s.h.New(t)
	for _, code := range []int32{0, 3} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			a := s.assignment(t, kind, newID(t, "exit"))
			s.h.Exit(a, code)
			s.apply(t, p, a)
			var st api.AssignmentStatus
			s.eventually(t, fmt.Sprintf("%s exited", a.ID), func() (bool, string) {
				st = s.status(t, p, a.ID)
				return st.ExitCode != nil, fmt.Sprintf("phase %q (%s)", st.Phase, st.Reason)
			})
			if st.Phase != api.PhaseError || *st.ExitCode != code || st.Restarts != 0 || st.ObservedGeneration != a.Generation {
				t.Fatalf("exited: got phase %q, exit code %d, %d restarts, generation %d; want error, %d, 0, %d",
					st.Phase, *st.ExitCode, st.Restarts, st.ObservedGeneration, code, a.Generation)
			}
			if l, ok := p.(provider.Logger); ok && s.h.SupportsLogs {
				var buf bytes.Buffer
				if err := l.Logs(callCtx(t), a.ID, provider.LogOptions{}, &buf); err != nil {
					t.Fatalf("Logs of an exited replica: %v", err)
				}
			}
			// Listed as it is, for an agent that restarts: still exited.
			if ls, ok := s.listed(t, p, a.ID); !ok || ls.Status.ExitCode == nil || *ls.Status.ExitCode != code {
				t.Fatalf("List after the exit: got %+v (listed %v); want its exit code %d", ls.Status, ok, code)
			}
		})
	}
}

// testWatch watches through the plugin boundary: the provider served on
// a unix socket by provider.Serve, watched through provider.Dial's client.
func (s *suite) testWatch(t *testing.T, kind api.ProviderKind) {
	p := s.h.New(t)
	c := serveOnSocket(t, p)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := c.Watch(ctx)
	if !s.h.Watches {
		if !errors.Is(err, provider.ErrUnsupported) {
			t.Fatalf("Watch of a provider that does not watch: got %v; want provider.ErrUnsupported", err)
		}
		return
	}
	// A provider may need a moment to follow its own events (containerd's
	// supervisor subscribing): until then it answers unavailable.
	if errors.Is(err, api.ErrUnavailable) {
		s.eventually(t, "Watch in place", func() (bool, string) {
			ch, err = c.Watch(ctx)
			return !errors.Is(err, api.ErrUnavailable), fmt.Sprint(err)
		})
	}
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	a := s.assignment(t, kind, newID(t, "watch"))
	s.apply(t, c, a)
	ready := s.waitReady(t, c, a)

	// From here on the suite calls neither Status nor List: what it
	// learns comes through the watch.
	if s.h.Kill == nil {
		t.Log("the harness has no Kill: a replica killed behind the provider's back is not checked")
	} else {
		s.h.Kill(t, a.ID)
		st := s.pushed(t, ch, a.ID, "the kill", func(st api.AssignmentStatus) bool {
			return st.Phase != api.PhaseReady || st.Restarts > ready.Restarts
		})
		if st.Phase == api.PhaseDestroyed {
			t.Errorf("after the kill: got phase destroyed; want error (or a restart): the replica is still the provider's")
		}
	}
	if err := c.Delete(callCtx(t), clone(a), time.Second); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	s.pushed(t, ch, a.ID, "the deletion", func(st api.AssignmentStatus) bool { return st.Phase == api.PhaseDestroyed })
}

// pushed waits, up to ReadyTimeout, for a status of id on ch that done
// accepts, and returns it.
func (s *suite) pushed(t *testing.T, ch <-chan api.AssignmentStatus, id, what string, done func(api.AssignmentStatus) bool) api.AssignmentStatus {
	t.Helper()
	deadline := time.After(s.h.ReadyTimeout)
	var last []string
	for {
		select {
		case st, ok := <-ch:
			if !ok {
				t.Fatalf("%s: watch closed before it was pushed (seen: %v)", what, last)
			}
			if st.ID != id {
				continue
			}
			if done(st) {
				return st
			}
			last = append(last, fmt.Sprintf("%s (%s) restarts %d", st.Phase, st.Reason, st.Restarts))
		case <-deadline:
			t.Fatalf("%s: not pushed within %v (seen for %s: %v)", what, s.h.ReadyTimeout, id, last)
		}
	}
}

// serveOnSocket serves p on a unix socket until the test ends and returns
// the plugin client of it, as an agent configured with the socket has.
func serveOnSocket(t *testing.T, p provider.Provider) *provider.Client {
	t.Helper()
	// t.TempDir's path can outgrow a socket address (108 bytes).
	dir, err := os.MkdirTemp("", "providertest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "p.sock")
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	served := make(chan error, 1)
	go func() { served <- provider.Serve(ctx, p, socket, nil) }()
	c, conn, err := provider.Dial(socket)
	if err != nil {
		cancel()
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	deadline := time.Now().Add(callTimeout)
	for {
		_, err := c.Info(callCtx(t))
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("provider served on %s does not answer: %v", socket, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ---- helpers ----

// assignment asks the harness for an assignment and checks what the suite
// relies on.
func (s *suite) assignment(t *testing.T, kind api.ProviderKind, id string) *api.Assignment {
	t.Helper()
	a := s.h.Assignment(t, kind, id)
	if a == nil || a.ID != id {
		t.Fatalf("Harness.Assignment(%q, %q): got %+v; want an assignment with that id", kind, id, a)
	}
	if a.Generation == 0 {
		a.Generation = 1
	}
	return a
}

// apply applies a and deletes its replica when the test ends.
func (s *suite) apply(t *testing.T, p provider.Provider, a *api.Assignment) api.AssignmentStatus {
	t.Helper()
	t.Cleanup(func() {
		// t.Context is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), callTimeout)
		defer cancel()
		if err := p.Delete(ctx, &api.Assignment{ID: a.ID}, time.Second); err != nil {
			t.Errorf("clean-up: Delete %s: %v", a.ID, err)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout+s.h.ReadyTimeout)
	defer cancel()
	st, err := p.Apply(ctx, clone(a))
	if err != nil {
		t.Fatalf("Apply %s (generation %d): %v", a.ID, a.Generation, err)
	}
	return st
}

// waitReady polls Status until the replica is ready at a's generation.
func (s *suite) waitReady(t *testing.T, p provider.Provider, a *api.Assignment) api.AssignmentStatus {
	t.Helper()
	var st api.AssignmentStatus
	s.eventually(t, fmt.Sprintf("%s ready at generation %d", a.ID, a.Generation), func() (bool, string) {
		var err error
		st, err = p.Status(callCtx(t), a.ID)
		if err != nil {
			return false, "Status: " + err.Error()
		}
		done := st.Phase == api.PhaseReady && st.ObservedGeneration >= a.Generation
		return done, fmt.Sprintf("phase %q (%s), observed generation %d", st.Phase, st.Reason, st.ObservedGeneration)
	})
	return st
}

func (s *suite) status(t *testing.T, p provider.Provider, id string) api.AssignmentStatus {
	t.Helper()
	st, err := p.Status(callCtx(t), id)
	if err != nil {
		t.Fatalf("Status %s: %v", id, err)
	}
	return st
}

func (s *suite) listed(t *testing.T, p provider.Provider, id string) (provider.Listed, bool) {
	t.Helper()
	ls, err := p.List(callCtx(t))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, l := range ls {
		if l.ID == id {
			return l, true
		}
	}
	return provider.Listed{}, false
}

// checkGone checks that a deleted replica is neither listed nor known:
// Delete returns once the replica is gone.
func (s *suite) checkGone(t *testing.T, p provider.Provider, id string) {
	t.Helper()
	if _, err := p.Status(callCtx(t), id); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("Status after Delete: got %v; want an error wrapping api.ErrNotFound", err)
	}
	if l, ok := s.listed(t, p, id); ok {
		t.Errorf("List after Delete: got %s (phase %q); want it absent", id, l.Status.Phase)
	}
}

// eventually polls cond, with growing pauses, until it reports done or
// ReadyTimeout passes.
func (s *suite) eventually(t *testing.T, what string, cond func() (done bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(s.h.ReadyTimeout)
	pause := 10 * time.Millisecond
	for {
		done, state := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not done after %v: %s", what, s.h.ReadyTimeout, state)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("%s: test ended: %s", what, state)
		case <-time.After(pause):
		}
		pause = min(pause*2, 500*time.Millisecond)
	}
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

// newID returns a replica id no other subtest or run uses: real providers
// share their daemon with other tests.
func newID(t *testing.T, tag string) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("random id: %v", err)
	}
	return "ct-" + tag + "-" + hex.EncodeToString(b)
}

func clone(a *api.Assignment) *api.Assignment {
	c := *a
	return &c
}
