package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// getWithin gets the next id or fails after timeout.
func getWithin(t *testing.T, q *workQueue, timeout time.Duration) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		id, ok := q.get()
		if ok {
			got <- id
		}
		close(got)
	}()
	select {
	case id := <-got:
		return id
	case <-time.After(timeout):
		q.shutDown()
		<-got
		t.Fatalf("no id within %s", timeout)
		return ""
	}
}

func TestWorkQueueCoalescesAndSerializes(t *testing.T) {
	q := newWorkQueue(time.Millisecond, time.Millisecond)
	q.add("a")
	q.add("a")
	q.add("b")
	if got := getWithin(t, q, time.Second); got != "a" {
		t.Fatalf("first: got %q; want a", got)
	}
	// a is being worked on: adding it again must not hand it to a second
	// worker, only re-run it after done.
	q.add("a")
	if got := getWithin(t, q, time.Second); got != "b" {
		t.Fatalf("second: got %q; want b (a is in flight)", got)
	}
	q.mu.Lock()
	n := len(q.ready)
	q.mu.Unlock()
	if n != 0 {
		t.Fatalf("ready while a is in flight: got %d; want 0", n)
	}
	q.done("a")
	if got := getWithin(t, q, time.Second); got != "a" {
		t.Fatalf("after done: got %q; want a again", got)
	}
	q.done("a")
	q.done("b")
	q.mu.Lock()
	n = len(q.ready)
	q.mu.Unlock()
	if n != 0 {
		t.Errorf("ready at the end: got %d; want 0 (duplicates coalesced)", n)
	}
}

func TestWorkQueueRetryBackoff(t *testing.T) {
	tests := []struct {
		failures int
		want     time.Duration
	}{
		{1, time.Second},
		{2, 2 * time.Second},
		{3, 4 * time.Second},
		{7, time.Minute},
		{20, time.Minute},
	}
	for _, tc := range tests {
		q := newWorkQueue(time.Second, time.Minute)
		var got time.Duration
		for range tc.failures {
			got = q.retry("a")
		}
		if got != tc.want {
			t.Errorf("delay after %d failures: got %s; want %s", tc.failures, got, tc.want)
		}
		q.forget("a")
		if got := q.retry("a"); got != time.Second {
			t.Errorf("delay after forget: got %s; want 1s", got)
		}
	}
}

func TestWorkQueueDelays(t *testing.T) {
	q := newWorkQueue(time.Millisecond, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		q.runDelays(ctx)
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()

	start := time.Now()
	q.addAfter("late", time.Hour)
	q.addAfter("soon", 30*time.Millisecond)
	if got := getWithin(t, q, 5*time.Second); got != "soon" {
		t.Fatalf("got %q; want soon", got)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("soon came after %s; want >= 30ms", d)
	}
	// add supersedes a delayed run: new information is acted on at once.
	q.add("late")
	if got := getWithin(t, q, time.Second); got != "late" {
		t.Fatalf("got %q; want late at once", got)
	}
	q.mu.Lock()
	_, still := q.delayed["late"]
	q.mu.Unlock()
	if still {
		t.Errorf("late still delayed after add")
	}
}

func TestMergeConditions(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	prev := []api.Condition{
		{Type: "CRI", Status: api.ConditionReady, Since: t0},
		{Type: "CNI", Status: api.ConditionReady, Since: t0},
	}
	next := []api.Condition{
		{Type: "CRI", Status: api.ConditionReady},
		{Type: "CNI", Status: api.ConditionWarning, Message: "slow"},
		{Type: "CNI", Status: api.ConditionError, Message: "down"},
		{Type: "provider/x", Status: api.ConditionReady},
	}
	got := mergeConditions(prev, next, t1)
	want := []api.Condition{
		{Type: "CNI", Status: api.ConditionError, Message: "down", Since: t1},
		{Type: "CRI", Status: api.ConditionReady, Since: t0},
		{Type: "provider/x", Status: api.ConditionReady, Since: t1},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d conditions %+v; want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("condition %d: got %+v; want %+v", i, got[i], want[i])
		}
	}
}

func TestMemTotal(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    int64
		wantErr bool
	}{
		{"normal", "MemTotal:       16318412 kB\nMemFree:  1 kB\n", 15935, false},
		{"missing", "MemFree:  1 kB\n", 0, true},
		{"garbage", "MemTotal: lots kB\n", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "meminfo")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := memTotalMiB(path)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("memTotalMiB: got %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestFreeDiskOfMissingDir(t *testing.T) {
	got, err := freeDiskMiB(filepath.Join(t.TempDir(), "not", "yet"))
	if err != nil || got <= 0 {
		t.Errorf("freeDiskMiB: got %d, %v; want the parent's free space", got, err)
	}
}

func TestSameStatus(t *testing.T) {
	code := int32(1)
	other := int32(2)
	base := api.AssignmentStatus{ID: "a", Phase: api.PhaseReady, ObservedGeneration: 1, Containers: []api.ContainerStatus{
		{Name: api.MainContainer, State: api.ContainerRunning, Ready: true},
		{Name: "web", State: api.ContainerRunning, Ready: true, Message: "HTTP probe failed with statuscode: 500"},
	}}
	tests := []struct {
		name   string
		change func(*api.AssignmentStatus)
		want   bool
	}{
		{"timestamps only", func(s *api.AssignmentStatus) { s.Since, s.UpdatedAt = time.Now(), time.Now() }, true},
		{"phase", func(s *api.AssignmentStatus) { s.Phase = api.PhaseError }, false},
		{"reason", func(s *api.AssignmentStatus) { s.Reason = "x" }, false},
		{"generation", func(s *api.AssignmentStatus) { s.ObservedGeneration = 2 }, false},
		{"exit code set", func(s *api.AssignmentStatus) { s.ExitCode = &code }, false},
		{"backends", func(s *api.AssignmentStatus) { s.Backends = []api.BackendStatus{{Address: "10.0.0.1"}} }, false},
		// A pod's sidecar restarted between two polls: the replica's own
		// fields are as they were, its containers are not.
		{"a container's restarts", func(s *api.AssignmentStatus) { s.Containers[1].Restarts = 1 }, false},
		{"a container's state", func(s *api.AssignmentStatus) { s.Containers[1].State = api.ContainerWaiting }, false},
		{"a container's readiness", func(s *api.AssignmentStatus) { s.Containers[1].Ready = false }, false},
		{"a container's reason", func(s *api.AssignmentStatus) { s.Containers[1].Reason = api.ReasonCrashLoopBackOff }, false},
		{"a container's exit code", func(s *api.AssignmentStatus) { s.Containers[1].ExitCode = &code }, false},
		{"a container more", func(s *api.AssignmentStatus) { s.Containers = append(s.Containers, api.ContainerStatus{Name: "log"}) }, false},
		// A message's words alone (a probe's failure from one check to
		// the next) are not worth a report.
		{"a container's message", func(s *api.AssignmentStatus) { s.Containers[1].Message = "HTTP probe failed with statuscode: 503" }, true},
		{"a container's start", func(s *api.AssignmentStatus) { s.Containers[1].StartedAt = time.Now() }, true},
	}
	for _, tc := range tests {
		s := base
		s.Containers = slices.Clone(base.Containers)
		tc.change(&s)
		if got := sameStatus(base, s); got != tc.want {
			t.Errorf("%s: got %v; want %v", tc.name, got, tc.want)
		}
	}
	a, b := base, base
	a.ExitCode, b.ExitCode = &code, &other
	if sameStatus(a, b) {
		t.Errorf("different exit codes: got same; want different")
	}
}

// TestWorkQueueOwnsRetries runs one worker over reconciles that fail,
// ask to run again at once, and ask to run again later: the queue, not
// the reconcile, decides when each id comes back.
func TestWorkQueueOwnsRetries(t *testing.T) {
	q := newWorkQueue(20*time.Millisecond, 20*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		q.shutDown()
		wg.Wait()
	}()
	var mu sync.Mutex
	runs := map[string][]time.Time{}
	reconcile := func(_ context.Context, id string) (result, error) {
		mu.Lock()
		defer mu.Unlock()
		runs[id] = append(runs[id], time.Now())
		n := len(runs[id])
		switch {
		case id == "fails" && n < 3:
			return result{}, errors.New("provider unavailable")
		case id == "again" && n < 2:
			return result{Requeue: true}, nil
		case id == "later" && n < 2:
			return result{RequeueAfter: 30 * time.Millisecond}, nil
		}
		return result{}, nil
	}
	wg.Go(func() { q.runDelays(ctx) })
	wg.Go(func() { q.work(ctx, reconcile, slog.New(slog.DiscardHandler)) })
	q.add("fails")
	q.add("again")
	q.add("later")
	want := map[string]int{"fails": 3, "again": 2, "later": 2}
	eventually(t, 5*time.Second, "every id reconciled to its end", func() error {
		mu.Lock()
		defer mu.Unlock()
		for id, n := range want {
			if got := len(runs[id]); got < n {
				return fmt.Errorf("%s: %d runs; want %d", id, got, n)
			}
		}
		return nil
	})
	time.Sleep(100 * time.Millisecond) // nothing more may come
	mu.Lock()
	defer mu.Unlock()
	for id, n := range want {
		if got := len(runs[id]); got != n {
			t.Errorf("%s: got %d runs; want %d", id, got, n)
		}
	}
	if r := runs["fails"]; len(r) == 3 && r[1].Sub(r[0]) < 20*time.Millisecond {
		t.Errorf("fails: retried after %s; want the backoff, 20ms", r[1].Sub(r[0]))
	}
	if r := runs["later"]; len(r) == 2 && r[1].Sub(r[0]) < 30*time.Millisecond {
		t.Errorf("later: ran again after %s; want RequeueAfter, 30ms", r[1].Sub(r[0]))
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if n := q.failures["fails"]; n != 0 {
		t.Errorf("failures of fails after a success: got %d; want 0 (backoff reset)", n)
	}
}
