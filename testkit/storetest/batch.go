package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stratahq/strata/internal/store"
)

// The batch tests expect an etcd with stock --max-txn-ops (128), which is
// what every etcd of Strata's tests runs with.
const stockMaxTxnOps = 128

// testTxnSize checks the size etcd counts against --max-txn-ops: the larger
// of the comparisons (guards and conditional operations) and the
// operations.
func testTxnSize(t *testing.T, s *store.Store) {
	g := guard{key: "/g", rev: 1}
	cases := []struct {
		name string
		txn  *store.Txn
		want int
	}{
		{"empty", s.Txn(), 0},
		{"guard only", s.Txn().Guard(g), 1},
		{"puts: operations", s.Txn().Guard(g).Put("a", nil).Put("b", nil), 2},
		{"creates: guard plus a comparison each", s.Txn().Guard(g).Create("a", nil).Create("b", nil), 3},
		{"updates and conditional deletes compare", s.Txn().Update("a", nil, 5).Delete("b", 7).Delete("c", 0), 3},
		{"unconditional deletes do not", s.Txn().Guard(g, g).Delete("a", 0).DeletePrefix("p/"), 2},
		{"mixed", s.Txn().Guard(g).Create("a", nil).Put("b", nil).Put("c", nil).Put("d", nil), 4},
		{"requires compare and write nothing", s.Txn().Require("a", 1).Require("b", 1).Put("c", nil), 2},
	}
	for _, c := range cases {
		if got := c.txn.Size(); got != c.want {
			t.Errorf("%s: Size() = %d; want %d", c.name, got, c.want)
		}
	}
}

// testTxnOverLimit sends nothing for a transaction over the store's limit.
func testTxnOverLimit(t *testing.T, s *store.Store) {
	if got := s.MaxTxnOps(); got != stockMaxTxnOps {
		t.Fatalf("MaxTxnOps() = %d; want the default %d", got, stockMaxTxnOps)
	}
	before := currentRev(t, s)
	txn := s.Txn()
	for i := range stockMaxTxnOps + 1 {
		txn.Put(fmt.Sprintf("k/%d", i), nil)
	}
	if _, err := txn.Commit(testCtx(t)); !errors.Is(err, store.ErrTooManyOps) {
		t.Errorf("commit of %d puts: err = %v; want ErrTooManyOps", stockMaxTxnOps+1, err)
	}
	wantUnchanged(t, s, before)

	txn = s.Txn()
	for i := range stockMaxTxnOps {
		txn.Put(fmt.Sprintf("k/%d", i), nil)
	}
	mustCommit(t, txn)
}

// testCheckTxnLimit probes etcd with the store's limit.
func testCheckTxnLimit(t *testing.T, s *store.Store) {
	before := currentRev(t, s)
	if err := s.CheckTxnLimit(testCtx(t)); err != nil {
		t.Errorf("CheckTxnLimit at the default %d: %v; want nil", stockMaxTxnOps, err)
	}
	over := store.New(s.Client(), s.Prefix(), store.WithMaxTxnOps(stockMaxTxnOps+1))
	err := over.CheckTxnLimit(testCtx(t))
	if !errors.Is(err, store.ErrTooManyOps) {
		t.Errorf("CheckTxnLimit at %d: err = %v; want ErrTooManyOps", stockMaxTxnOps+1, err)
	}
	// At a tier's start: the limit etcd takes passes, one above it stops
	// the tier with an error naming the setting.
	if err := s.EnsureTxnLimit(testCtx(t)); err != nil {
		t.Errorf("EnsureTxnLimit at the default %d: %v; want nil", stockMaxTxnOps, err)
	}
	if err := over.EnsureTxnLimit(testCtx(t)); !errors.Is(err, store.ErrTooManyOps) || !strings.Contains(err.Error(), "etcd.maxTxnOps is 129") {
		t.Errorf("EnsureTxnLimit at %d: err = %v; want ErrTooManyOps naming etcd.maxTxnOps", stockMaxTxnOps+1, err)
	}
	wantUnchanged(t, s, before)
}

// testBatchSplits commits batches larger than one transaction: every step
// applies, in as few transactions as fit, and no step is split.
func testBatchSplits(t *testing.T, s *store.Store) {
	g := newGuard(t, s, guardKey(s, "split"))
	cases := []struct {
		name    string
		steps   int
		step    func(txn *store.Txn, key string) // writes keys "<key>/..."
		perTxn  int                              // steps that fit in one transaction
		keysPer int
	}{
		// Guard + one comparison per create: 127 creates.
		{"creates", 1000, func(txn *store.Txn, k string) { txn.Create(k+"/a", []byte("v")) }, stockMaxTxnOps - 1, 1},
		// One comparison in all (the guard): 128 puts.
		{"puts", 1000, func(txn *store.Txn, k string) { txn.Put(k+"/a", []byte("v")) }, stockMaxTxnOps, 1},
		// Three operations, one comparison: 42 steps (126 operations).
		{"steps of three", 300, func(txn *store.Txn, k string) {
			txn.Create(k+"/a", []byte("v")).Put(k+"/b", nil).Put(k+"/c", nil)
		}, stockMaxTxnOps / 3, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prefix := c.name + "/"
			b := s.Batch(g)
			for i := range c.steps {
				c.step(b.Step(fmt.Sprint(i)), fmt.Sprintf("%s%04d", prefix, i))
			}
			res, err := b.Commit(testCtx(t))
			if err != nil {
				t.Fatalf("commit: %v", err)
			}
			wantTxns := (c.steps + c.perTxn - 1) / c.perTxn
			if res.Txns != wantTxns {
				t.Errorf("transactions: got %d; want %d (%d steps, %d per transaction)", res.Txns, wantTxns, c.steps, c.perTxn)
			}
			kvs, _, err := s.ListAll(testCtx(t), prefix)
			if err != nil {
				t.Fatal(err)
			}
			if len(kvs) != c.steps*c.keysPer {
				t.Fatalf("keys written: got %d; want %d", len(kvs), c.steps*c.keysPer)
			}
			stepRev := map[string]int64{}
			revs := map[int64]int{}
			for _, kv := range kvs {
				step, _, _ := strings.Cut(strings.TrimPrefix(kv.Key, prefix), "/")
				if r, ok := stepRev[step]; ok && r != kv.ModRevision {
					t.Errorf("step %s was split: keys at revisions %d and %d", step, r, kv.ModRevision)
				}
				stepRev[step] = kv.ModRevision
				revs[kv.ModRevision]++
			}
			for rev, n := range revs {
				if n > c.perTxn*c.keysPer {
					t.Errorf("revision %d wrote %d keys; want at most %d", rev, n, c.perTxn*c.keysPer)
				}
			}
			if len(revs) != wantTxns {
				t.Errorf("revisions with writes: got %d; want %d", len(revs), wantTxns)
			}
		})
	}
}

// testBatchFencing deposes the leader between two transactions of one
// batch: the later one fails with ErrFenced and writes nothing.
func testBatchFencing(t *testing.T, s *store.Store) {
	g := newGuard(t, s, guardKey(s, "fence"))
	ctx := testCtx(t)
	var afterFirst int64
	b := s.Batch(g).Every(func(_ *store.Txn, prev int64) {
		if prev == 0 {
			return
		}
		// The first transaction applied; the leader loses its key
		// before the second is sent.
		resp, err := s.Client().Delete(ctx, g.key)
		if err != nil {
			t.Errorf("delete guard key: %v", err)
			return
		}
		afterFirst = resp.Header.Revision
	})
	const n = 300
	for i := range n {
		b.Step(fmt.Sprint(i)).Put(fmt.Sprintf("f/%03d", i), []byte("v"))
	}
	res, err := b.Commit(ctx)
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("commit: err = %v; want ErrFenced", err)
	}
	if res.Txns != 1 {
		t.Errorf("transactions applied: got %d; want 1 (before the leader was deposed)", res.Txns)
	}
	applied := 0
	for i, ok := range res.Applied {
		if ok {
			applied++
			if i >= stockMaxTxnOps {
				t.Errorf("step %d applied; want only the first transaction's %d", i, stockMaxTxnOps)
			}
		}
	}
	if applied != stockMaxTxnOps {
		t.Errorf("steps applied: got %d; want %d", applied, stockMaxTxnOps)
	}
	kvs, _, err := s.ListAll(ctx, "f/")
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) != stockMaxTxnOps {
		t.Errorf("keys written: got %d; want %d (the fenced transaction wrote none)", len(kvs), stockMaxTxnOps)
	}
	wantUnchanged(t, s, afterFirst)
}

// testBatchHalving configures a limit above etcd's: the first refusal
// halves it (logged once), the rest commits, and later batches use the
// lower limit from the start.
func testBatchHalving(t *testing.T, s *store.Store) {
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	high := store.New(s.Client(), s.Prefix(), store.WithMaxTxnOps(1000), store.WithLogger(log))
	g := newGuard(t, s, guardKey(s, "halve"))

	commit := func(name string, n int) store.BatchResult {
		t.Helper()
		b := high.Batch(g)
		for i := range n {
			b.Step(fmt.Sprint(i)).Put(fmt.Sprintf("%s/%04d", name, i), []byte("v"))
		}
		res, err := b.Commit(testCtx(t))
		if err != nil {
			t.Fatalf("%s: commit: %v", name, err)
		}
		kvs, _, err := s.ListAll(testCtx(t), name+"/")
		if err != nil {
			t.Fatal(err)
		}
		if len(kvs) != n {
			t.Errorf("%s: keys written: got %d; want %d", name, len(kvs), n)
		}
		return res
	}
	// 1000 → refused at 600 → 300 → 150 → 75 fits.
	res := commit("first", 600)
	if got := high.MaxTxnOps(); got != 75 {
		t.Errorf("limit after the refusals: got %d; want 75", got)
	}
	if res.Txns != 8 {
		t.Errorf("first batch: got %d transactions; want 8 of 75", res.Txns)
	}
	res = commit("second", 300)
	if res.Txns != 4 {
		t.Errorf("second batch: got %d transactions; want 4 of 75", res.Txns)
	}
	if n := strings.Count(logs.String(), "etcd refused a transaction"); n != 1 {
		t.Errorf("warnings: got %d; want 1\n%s", n, logs.String())
	}
}

// testBatchGroupFailure fails one step's condition: its group stops, the
// other groups apply.
func testBatchGroupFailure(t *testing.T, s *store.Store) {
	mustPut(t, s, "taken", "old")
	b := s.Batch()
	b.Step("a").Put("gf/a1", nil)
	b.Step("b").Put("gf/b1", nil)
	b.Step("a").Put("gf/a2", nil)
	b.Step("b").Create("taken", []byte("new"))
	b.Step("c").Put("gf/c1", nil)
	b.Step("b").Put("gf/b3", nil)
	res, err := b.Commit(testCtx(t))
	var be *store.BatchError
	if !errors.As(err, &be) || !errors.Is(err, store.ErrExists) || be.First != "b" {
		t.Fatalf("commit: err = %v; want a BatchError of group b wrapping ErrExists", err)
	}
	if len(res.Failed) != 1 || !errors.Is(res.Failed["b"], store.ErrExists) {
		t.Errorf("Failed = %v; want only b, ErrExists", res.Failed)
	}
	want := []bool{true, false, true, false, true, false}
	if fmt.Sprint(res.Applied) != fmt.Sprint(want) {
		t.Errorf("Applied = %v; want %v", res.Applied, want)
	}
	for _, k := range []string{"gf/a1", "gf/a2", "gf/c1"} {
		mustGet(t, s, k)
	}
	for _, k := range []string{"gf/b1", "gf/b3"} {
		mustAbsent(t, s, k)
	}
	if kv := mustGet(t, s, "taken"); string(kv.Value) != "old" {
		t.Errorf("taken = %q; want old", kv.Value)
	}
}

// testBatchRequire writes records about objects (a status per
// assignment, say) in steps that require their object: the steps of a
// deleted object fail alone, with ErrNotFound, and nothing of theirs is
// written.
func testBatchRequire(t *testing.T, s *store.Store) {
	live := mustPut(t, s, "br/obj/live", "v")
	gone := mustPut(t, s, "br/obj/gone", "v")
	if _, err := s.Delete(testCtx(t), "br/obj/gone", 0); err != nil {
		t.Fatal(err)
	}
	b := s.Batch()
	b.Step("live").Require("br/obj/live", live).Put("br/status/live", nil)
	b.Step("gone").Require("br/obj/gone", gone).Put("br/status/gone", nil)
	b.Step("live2").Require("br/obj/live", live).Put("br/status/live2", nil)
	res, err := b.Commit(testCtx(t))
	if len(res.Failed) != 1 || !errors.Is(res.Failed["gone"], store.ErrNotFound) || !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("commit: err = %v, failed %v; want ErrNotFound for group gone only", err, res.Failed)
	}
	mustGet(t, s, "br/status/live")
	mustGet(t, s, "br/status/live2")
	mustAbsent(t, s, "br/status/gone")
}

// testBatchOversizedStep fails a step that no transaction can hold; the
// others apply.
func testBatchOversizedStep(t *testing.T, s *store.Store) {
	b := s.Batch()
	b.Step("small").Put("os/small", nil)
	big := b.Step("big")
	for i := range stockMaxTxnOps + 1 {
		big.Put(fmt.Sprintf("os/big/%d", i), nil)
	}
	b.Step("after").Put("os/after", nil)
	res, err := b.Commit(testCtx(t))
	if !errors.Is(err, store.ErrTooManyOps) || len(res.Failed) != 1 || res.Failed["big"] == nil {
		t.Fatalf("commit: err = %v, failed %v; want ErrTooManyOps for group big only", err, res.Failed)
	}
	mustGet(t, s, "os/small")
	mustGet(t, s, "os/after")
	if kvs, _, _ := s.ListAll(testCtx(t), "os/big/"); len(kvs) != 0 {
		t.Errorf("got %d keys of the oversized step; want none", len(kvs))
	}
}

// testBatchEvery moves a fence key along with the batch: every
// transaction rewrites it at the revision of the previous one.
func testBatchEvery(t *testing.T, s *store.Store) {
	start := mustPut(t, s, "fence", "0")
	calls := 0
	b := s.Batch().Every(func(txn *store.Txn, prev int64) {
		calls++
		if prev == 0 {
			prev = start
		}
		txn.Update("fence", []byte(fmt.Sprint(calls)), prev)
	})
	const n = 300
	for i := range n {
		b.Step(fmt.Sprint(i)).Put(fmt.Sprintf("ev/%03d", i), nil)
	}
	res, err := b.Commit(testCtx(t))
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	// The fence takes one operation (and one comparison) per transaction.
	want := (n + stockMaxTxnOps - 2) / (stockMaxTxnOps - 1)
	if res.Txns != want {
		t.Errorf("transactions: got %d; want %d", res.Txns, want)
	}
	kv := mustGet(t, s, "fence")
	if kv.ModRevision != res.Revision || kv.Version != int64(want)+1 {
		t.Errorf("fence at revision %d, version %d; want %d, %d", kv.ModRevision, kv.Version, res.Revision, want+1)
	}

	// A fence moved by someone else stops the batch.
	mustPut(t, s, "fence", "moved")
	stale := kv.ModRevision
	b = s.Batch().Every(func(txn *store.Txn, _ int64) { txn.Update("fence", nil, stale) })
	b.Step("x").Put("ev/stale", nil)
	if _, err := b.Commit(testCtx(t)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("commit behind a moved fence: err = %v; want ErrConflict", err)
	}
	mustAbsent(t, s, "ev/stale")
}

// testBatchUnchanged fences every transaction of a batch with a key that
// does not move with it: each requires the key at one revision, and the
// batch stops once someone else moved it.
func testBatchUnchanged(t *testing.T, s *store.Store) {
	start := mustPut(t, s, "still", "0")
	const n = 300
	b := s.Batch().Unchanged("still", start)
	for i := range n {
		b.Step(fmt.Sprint(i)).Put(fmt.Sprintf("un/%03d", i), nil)
	}
	res, err := b.Commit(testCtx(t))
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	// The fence takes one comparison per transaction, no operation.
	if want := (n + stockMaxTxnOps - 1) / stockMaxTxnOps; res.Txns != want {
		t.Errorf("transactions: got %d; want %d", res.Txns, want)
	}
	if kv := mustGet(t, s, "still"); kv.ModRevision != start {
		t.Errorf("fence at revision %d; want it left at %d", kv.ModRevision, start)
	}

	// A fence moved by someone else stops the batch.
	mustPut(t, s, "still", "moved")
	b = s.Batch().Unchanged("still", start)
	b.Step("x").Put("un/stale", nil)
	if _, err := b.Commit(testCtx(t)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("commit behind a moved fence: err = %v; want ErrConflict", err)
	}
	mustAbsent(t, s, "un/stale")
}

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// testBatchBytes writes more than stock etcd's --max-request-bytes (1.5
// MiB) in one batch: it is split by size as well as by count.
func testBatchBytes(t *testing.T, s *store.Store) {
	b := s.Batch()
	val := bytes.Repeat([]byte("x"), 20<<10)
	const n = 100 // 2 MiB in all, under the operation limit
	for i := range n {
		b.Step(fmt.Sprint(i)).Put(fmt.Sprintf("bb/%03d", i), val)
	}
	res, err := b.Commit(testCtx(t))
	if err != nil {
		t.Fatalf("commit of %d values of 20 KiB: %v", n, err)
	}
	if res.Txns < 2 {
		t.Errorf("transactions: got %d; want at least 2", res.Txns)
	}
	if kvs, _, _ := s.ListAll(testCtx(t), "bb/"); len(kvs) != n {
		t.Errorf("keys written: got %d; want %d", len(kvs), n)
	}
}

// testBatchOrder commits groups that span several transactions, steps of
// other groups that write one key in turn, and a group that fails half-way:
// whatever transactions are in flight together, each group's steps apply
// in their order, the last write of the shared key is the one that stays,
// and the failed group's later steps apply nowhere.
func testBatchOrder(t *testing.T, s *store.Store) {
	mustPut(t, s, "bo/taken", "old")
	const groups, per = 6, 150
	b := s.Batch()
	for g := range groups {
		for i := range per {
			b.Step(fmt.Sprint("g", g)).Put(fmt.Sprintf("bo/g%d/%03d", g, i), []byte("v"))
		}
		b.Step(fmt.Sprint("shared", g)).Put("bo/shared", []byte(fmt.Sprint(g)))
		if g == 2 {
			b.Step("bad").Put("bo/bad/1", nil)
			b.Step("bad").Create("bo/taken", []byte("new"))
			b.Step("bad").Put("bo/bad/3", nil)
		}
	}
	res, err := b.Commit(testCtx(t))
	var be *store.BatchError
	if !errors.As(err, &be) || be.First != "bad" || len(be.Failed) != 1 || !errors.Is(err, store.ErrExists) {
		t.Fatalf("commit: err = %v; want a BatchError of group bad wrapping ErrExists", err)
	}
	if min := (groups*(per+1) + 2) / stockMaxTxnOps; res.Txns < min {
		t.Errorf("transactions: got %d; want at least %d", res.Txns, min)
	}
	for g := range groups {
		kvs, _, err := s.ListAll(testCtx(t), fmt.Sprintf("bo/g%d/", g))
		if err != nil {
			t.Fatal(err)
		}
		if len(kvs) != per {
			t.Fatalf("group %d: %d keys written; want %d", g, len(kvs), per)
		}
		for i := 1; i < len(kvs); i++ { // listed in key order: step order
			if kvs[i].ModRevision < kvs[i-1].ModRevision {
				t.Errorf("group %d: step %d applied at revision %d, before step %d at %d",
					g, i, kvs[i].ModRevision, i-1, kvs[i-1].ModRevision)
			}
		}
	}
	if kv := mustGet(t, s, "bo/shared"); string(kv.Value) != fmt.Sprint(groups-1) {
		t.Errorf("bo/shared = %q; want %d (the last write)", kv.Value, groups-1)
	}
	mustAbsent(t, s, "bo/bad/3")
	if kv := mustGet(t, s, "bo/taken"); string(kv.Value) != "old" {
		t.Errorf("bo/taken = %q; want old", kv.Value)
	}
}
