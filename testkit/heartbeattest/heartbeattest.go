// Package heartbeattest is the conformance suite every heartbeat.Store
// implementation must pass.
package heartbeattest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/heartbeat"
)

// at is d after a fixed, microsecond-aligned instant, so expected values
// are exact.
func at(d time.Duration) time.Time { return time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC).Add(d) }

// Run runs the suite. newStore must return an empty store, isolated from
// the stores of other calls, using the real clock (default options).
func Run(t *testing.T, newStore func(t *testing.T) heartbeat.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s heartbeat.Store)
	}{
		{"RecordGet", testRecordGet},
		{"ZeroAtUsesClock", testZeroAtUsesClock},
		{"Invalid", testInvalid},
		{"LatestWins", testLatestWins},
		{"ConcurrentWritersNewestWins", testConcurrentWriters},
		{"Batch", testBatch},
		{"List", testList},
		{"StaleBoundaries", testStaleBoundaries},
		{"Forget", testForget},
		{"List10000", testList10000},
		{"ContextCanceled", testContextCanceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func checkBeat(t *testing.T, what string, got, want heartbeat.Beat) {
	t.Helper()
	if got.ID != want.ID || !got.At.Equal(want.At) || got.Seq != want.Seq || !maps.Equal(got.Metrics, want.Metrics) || !maps.Equal(got.Attrs, want.Attrs) {
		t.Errorf("%s: got %+v; want %+v", what, got, want)
	}
}

func ids(bs []heartbeat.Beat) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.ID
	}
	return out
}

func mustRecord(t *testing.T, ctx context.Context, s heartbeat.Store, b heartbeat.Beat) {
	t.Helper()
	if err := s.Record(ctx, b); err != nil {
		t.Fatalf("Record(%s): %v", b.ID, err)
	}
}

func testRecordGet(t *testing.T, s heartbeat.Store) {
	ctx := ctxT(t)
	metrics := map[string]float64{
		"cpu_used":     1.25,
		"mem_used_mib": 4096,
		"replicas":     7,
		"tiny":         math.SmallestNonzeroFloat64,
		"neg":          -3.5e-7,
		"inf":          math.Inf(1),
	}
	attrs := map[string]string{"leader": "r1-b", "empty": "", "spaces and: colons": "a:b c"}
	b := heartbeat.Beat{ID: "n1", At: at(0), Seq: math.MaxUint64, Metrics: metrics, Attrs: attrs}
	mustRecord(t, ctx, s, b)
	want := b
	want.Metrics = maps.Clone(metrics)
	want.Attrs = maps.Clone(attrs)
	metrics["cpu_used"] = 99 // the store must not alias the caller's maps
	attrs["leader"] = "changed"

	got, err := s.Get(ctx, "n1")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	checkBeat(t, "Get", got, want)
	got.Metrics["replicas"] = -1 // nor hand out its own
	got.Attrs["leader"] = "mutated"
	again, _ := s.Get(ctx, "n1")
	checkBeat(t, "Get after mutating a result", again, want)

	// A beat without metrics or attributes reads back with nil maps.
	mustRecord(t, ctx, s, heartbeat.Beat{ID: "bare", At: at(0), Seq: 1})
	got, err = s.Get(ctx, "bare")
	if err != nil {
		t.Fatalf("Get(bare): %v", err)
	}
	if got.Metrics != nil || got.Attrs != nil {
		t.Errorf("Get(bare) Metrics, Attrs = %v, %v; want nil, nil", got.Metrics, got.Attrs)
	}

	// Sub-microsecond precision is dropped, identically in every store.
	mustRecord(t, ctx, s, heartbeat.Beat{ID: "ns", At: at(time.Second + 1500*time.Nanosecond)})
	got, _ = s.Get(ctx, "ns")
	if want := at(time.Second + time.Microsecond); !got.At.Equal(want) {
		t.Errorf("Get(ns).At = %v; want %v", got.At, want)
	}

	if _, err := s.Get(ctx, "nope"); !errors.Is(err, heartbeat.ErrNotFound) {
		t.Errorf("Get(nope) err = %v; want ErrNotFound", err)
	}
}

func testZeroAtUsesClock(t *testing.T, s heartbeat.Store) {
	ctx := ctxT(t)
	before := time.Now().Truncate(time.Microsecond)
	mustRecord(t, ctx, s, heartbeat.Beat{ID: "n1", Seq: 1})
	after := time.Now()
	got, err := s.Get(ctx, "n1")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.At.Before(before) || got.At.After(after) {
		t.Errorf("At = %v; want within [%v, %v]", got.At, before, after)
	}
}

func testInvalid(t *testing.T, s heartbeat.Store) {
	ctx := ctxT(t)
	if err := s.Record(ctx, heartbeat.Beat{At: at(0)}); !errors.Is(err, heartbeat.ErrInvalidBeat) {
		t.Errorf("Record(empty id) err = %v; want ErrInvalidBeat", err)
	}
	err := s.RecordBatch(ctx, []heartbeat.Beat{{ID: "ok", At: at(0)}, {At: at(0)}})
	if !errors.Is(err, heartbeat.ErrInvalidBeat) {
		t.Errorf("RecordBatch(with empty id) err = %v; want ErrInvalidBeat", err)
	}
	// Validation happens before anything is written.
	if _, err := s.Get(ctx, "ok"); !errors.Is(err, heartbeat.ErrNotFound) {
		t.Errorf("Get(ok) after rejected batch err = %v; want ErrNotFound", err)
	}
	if err := s.RecordBatch(ctx, nil); err != nil {
		t.Errorf("RecordBatch(nil) = %v; want nil", err)
	}
}

func testLatestWins(t *testing.T, s heartbeat.Store) {
	type rec struct {
		at      time.Duration
		seq     uint64
		metrics map[string]float64
	}
	tests := []struct {
		name string
		recs []rec
		want rec
	}{
		{"newer overwrites", []rec{{0, 1, nil}, {time.Second, 2, nil}}, rec{time.Second, 2, nil}},
		{"older is ignored", []rec{{time.Second, 2, nil}, {0, 1, nil}}, rec{time.Second, 2, nil}},
		{"older by a microsecond is ignored", []rec{{time.Second, 2, nil}, {time.Second - time.Microsecond, 3, nil}}, rec{time.Second, 2, nil}},
		{"same At replaces (idempotent)", []rec{{time.Second, 2, nil}, {time.Second, 2, nil}}, rec{time.Second, 2, nil}},
		{"seq reset after agent restart still wins by At", []rec{{0, 900, nil}, {time.Second, 1, nil}}, rec{time.Second, 1, nil}},
		{
			"metrics of the newer beat replace the old ones",
			[]rec{{0, 1, map[string]float64{"a": 1, "b": 2}}, {time.Second, 2, map[string]float64{"b": 3}}},
			rec{time.Second, 2, map[string]float64{"b": 3}},
		},
		{
			"older beat does not touch metrics",
			[]rec{{time.Second, 2, map[string]float64{"a": 1}}, {0, 1, map[string]float64{"a": 9, "z": 9}}},
			rec{time.Second, 2, map[string]float64{"a": 1}},
		},
	}
	ctx := ctxT(t)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("n%d", i)
			for _, r := range tc.recs {
				mustRecord(t, ctx, s, heartbeat.Beat{ID: id, At: at(r.at), Seq: r.seq, Metrics: r.metrics})
			}
			got, err := s.Get(ctx, id)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			checkBeat(t, "Get", got, heartbeat.Beat{ID: id, At: at(tc.want.at), Seq: tc.want.seq, Metrics: tc.want.metrics})
		})
	}
}

// testConcurrentWriters models several region API replicas recording the
// same node's beats in any order: the newest must always survive.
func testConcurrentWriters(t *testing.T, s heartbeat.Store) {
	ctx := ctxT(t)
	const writers, each = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, writers+1) // the writers and the newest beat
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range each {
				ms := r.IntN(10_000)
				b := heartbeat.Beat{ID: "n1", At: at(time.Duration(ms) * time.Millisecond), Seq: uint64(ms)}
				if err := s.Record(ctx, b); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	// The newest beat, written concurrently with everything else.
	wg.Go(func() {
		if err := s.Record(ctx, heartbeat.Beat{ID: "n1", At: at(time.Hour), Seq: 424242}); err != nil {
			errs <- err
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Record: %v", err)
	}
	got, err := s.Get(ctx, "n1")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	checkBeat(t, "Get", got, heartbeat.Beat{ID: "n1", At: at(time.Hour), Seq: 424242})
}

func testBatch(t *testing.T, s heartbeat.Store) {
	ctx := ctxT(t)
	var beats []heartbeat.Beat
	for i := range 100 {
		beats = append(beats, heartbeat.Beat{
			ID: fmt.Sprintf("n%03d", i), At: at(time.Duration(i) * time.Millisecond), Seq: uint64(i),
			Metrics: map[string]float64{"replicas": float64(i)},
		})
	}
	// Duplicates inside one batch: the newest wins whatever the order.
	beats = append(beats,
		heartbeat.Beat{ID: "dup", At: at(2 * time.Second), Seq: 2},
		heartbeat.Beat{ID: "dup", At: at(time.Second), Seq: 1},
	)
	if err := s.RecordBatch(ctx, beats); err != nil {
		t.Fatalf("RecordBatch: %v", err)
	}
	for _, want := range beats[:100] {
		got, err := s.Get(ctx, want.ID)
		if err != nil {
			t.Fatalf("Get(%s): %v", want.ID, err)
		}
		checkBeat(t, "Get", got, want)
	}
	got, err := s.Get(ctx, "dup")
	if err != nil {
		t.Fatalf("Get(dup): %v", err)
	}
	checkBeat(t, "Get(dup)", got, heartbeat.Beat{ID: "dup", At: at(2 * time.Second), Seq: 2})
}

func testList(t *testing.T, s heartbeat.Store) {
	ctx := ctxT(t)
	got, err := s.List(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("List(empty) = %v, %v; want [], nil", ids(got), err)
	}
	in := []heartbeat.Beat{
		{ID: "c", At: at(2 * time.Second), Seq: 3, Metrics: map[string]float64{"cpu_used": 0.5}},
		{ID: "a", At: at(time.Second), Seq: 1},
		{ID: "b", At: at(time.Second), Seq: 2},
		{ID: "d", At: at(0), Seq: 4},
	}
	if err := s.RecordBatch(ctx, in); err != nil {
		t.Fatalf("RecordBatch: %v", err)
	}
	got, err = s.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	// Oldest first, ties by ID.
	want := []heartbeat.Beat{in[3], in[1], in[2], in[0]}
	if len(got) != len(want) {
		t.Fatalf("List = %v; want %v", ids(got), ids(want))
	}
	for i := range want {
		checkBeat(t, fmt.Sprintf("List[%d]", i), got[i], want[i])
	}
	times, err := s.Times(ctx)
	if err != nil {
		t.Fatalf("Times: %v", err)
	}
	if len(times) != len(in) {
		t.Fatalf("Times = %v; want the %d IDs of List", times, len(in))
	}
	for _, b := range in {
		if !times[b.ID].Equal(b.At) {
			t.Errorf("Times[%s] = %v; want %v", b.ID, times[b.ID], b.At)
		}
	}
}

func testStaleBoundaries(t *testing.T, s heartbeat.Store) {
	ctx := ctxT(t)
	for i, id := range []string{"a", "b", "c"} {
		mustRecord(t, ctx, s, heartbeat.Beat{ID: id, At: at(time.Duration(i) * time.Second), Seq: uint64(i)})
	}
	tests := []struct {
		name      string
		olderThan time.Time
		want      []string
	}{
		{"before everything", at(-time.Hour), nil},
		{"exactly the oldest beat is not stale", at(0), nil},
		{"a microsecond after the oldest", at(time.Microsecond), []string{"a"}},
		{"a nanosecond after the oldest", at(time.Nanosecond), []string{"a"}},
		{"exactly the middle beat", at(time.Second), []string{"a"}},
		{"just after the middle beat", at(time.Second + time.Microsecond), []string{"a", "b"}},
		{"just before the newest beat", at(2*time.Second - time.Nanosecond), []string{"a", "b"}},
		{"after everything", at(time.Hour), []string{"a", "b", "c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Stale(ctx, tc.olderThan)
			if err != nil {
				t.Fatalf("Stale: %v", err)
			}
			if g := ids(got); fmt.Sprint(g) != fmt.Sprint(tc.want) && !(len(g) == 0 && len(tc.want) == 0) {
				t.Errorf("Stale(%v) = %v; want %v", tc.olderThan, g, tc.want)
			}
			for _, b := range got {
				if !b.At.Before(tc.olderThan) {
					t.Errorf("Stale returned %s at %v, not before %v", b.ID, b.At, tc.olderThan)
				}
			}
		})
	}
}

func testForget(t *testing.T, s heartbeat.Store) {
	ctx := ctxT(t)
	mustRecord(t, ctx, s, heartbeat.Beat{ID: "gone", At: at(0), Metrics: map[string]float64{"x": 1}})
	mustRecord(t, ctx, s, heartbeat.Beat{ID: "kept", At: at(0)})
	if err := s.Forget(ctx, "gone"); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if _, err := s.Get(ctx, "gone"); !errors.Is(err, heartbeat.ErrNotFound) {
		t.Errorf("Get after Forget err = %v; want ErrNotFound", err)
	}
	list, _ := s.List(ctx)
	stale, _ := s.Stale(ctx, at(time.Hour))
	for what, got := range map[string][]heartbeat.Beat{"List": list, "Stale": stale} {
		if fmt.Sprint(ids(got)) != "[kept]" {
			t.Errorf("%s after Forget = %v; want [kept]", what, ids(got))
		}
	}
	if err := s.Forget(ctx, "never-seen"); err != nil {
		t.Errorf("Forget(unknown) = %v; want nil", err)
	}
	// A node re-added under the same name starts clean.
	mustRecord(t, ctx, s, heartbeat.Beat{ID: "gone", At: at(-time.Hour), Seq: 1})
	got, err := s.Get(ctx, "gone")
	if err != nil {
		t.Fatalf("Get after re-record: %v", err)
	}
	checkBeat(t, "Get after re-record", got, heartbeat.Beat{ID: "gone", At: at(-time.Hour), Seq: 1})
}

func testList10000(t *testing.T, s heartbeat.Store) {
	ctx := ctxT(t)
	const n = 10_000
	beats := make([]heartbeat.Beat, n)
	for i := range beats {
		beats[i] = heartbeat.Beat{
			ID:      fmt.Sprintf("node-%05d", i),
			At:      at(time.Duration(i) * time.Microsecond),
			Seq:     uint64(i),
			Metrics: map[string]float64{"cpu_used": float64(i) / 100, "mem_used_mib": float64(i)},
		}
	}
	start := time.Now()
	if err := s.RecordBatch(ctx, beats); err != nil {
		t.Fatalf("RecordBatch(%d): %v", n, err)
	}
	recorded := time.Since(start)
	start = time.Now()
	got, err := s.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	listed := time.Since(start)
	t.Logf("RecordBatch(%d) %v, List %v", n, recorded, listed)
	if len(got) != n {
		t.Fatalf("len(List) = %d; want %d", len(got), n)
	}
	for i := range got {
		if got[i].ID != beats[i].ID || got[i].Seq != beats[i].Seq || !got[i].At.Equal(beats[i].At) ||
			!maps.Equal(got[i].Metrics, beats[i].Metrics) {
			t.Fatalf("List[%d] = %+v; want %+v", i, got[i], beats[i])
		}
	}
	stale, err := s.Stale(ctx, at(n/2*time.Microsecond))
	if err != nil {
		t.Fatalf("Stale: %v", err)
	}
	if len(stale) != n/2 {
		t.Errorf("len(Stale) = %d; want %d", len(stale), n/2)
	}
}

func testContextCanceled(t *testing.T, s heartbeat.Store) {
	// Record something first so a store cannot pass by having no work.
	mustRecord(t, ctxT(t), s, heartbeat.Beat{ID: "n1", At: at(0)})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	b := heartbeat.Beat{ID: "n1", At: at(time.Second)}
	calls := map[string]func() error{
		"Record":      func() error { return s.Record(ctx, b) },
		"RecordBatch": func() error { return s.RecordBatch(ctx, []heartbeat.Beat{b}) },
		"Get":         func() error { _, err := s.Get(ctx, "n1"); return err },
		"List":        func() error { _, err := s.List(ctx); return err },
		"Stale":       func() error { _, err := s.Stale(ctx, at(time.Hour)); return err },
		"Forget":      func() error { return s.Forget(ctx, "n1") },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s(canceled ctx) err = %v; want context.Canceled", name, err)
		}
	}
	// Nothing above may have taken effect.
	got, err := s.Get(ctxT(t), "n1")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if !got.At.Equal(at(0)) {
		t.Errorf("At after canceled calls = %v; want %v", got.At, at(0))
	}
}
