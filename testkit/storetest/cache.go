package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/store"
)

// runCache runs c for the rest of the test and waits until it is synced.
func runCache[T any](t *testing.T, c *store.Cache[T]) {
	t.Helper()
	Go(t, c.Run)
	waitSynced(t, c)
}

// changeLog records a cache's change batches.
type changeLog struct {
	mu      sync.Mutex
	batches [][]string
}

func (l *changeLog) record(changes []store.Change[widget]) {
	batch := make([]string, len(changes))
	for i, ch := range changes {
		batch[i] = fmt.Sprintf("%s %s→%s", ch.Name, color(ch.Old), color(ch.New))
	}
	l.mu.Lock()
	l.batches = append(l.batches, batch)
	l.mu.Unlock()
}

func color(it *store.Item[widget]) string {
	if it == nil {
		return "∅"
	}
	return it.Value.Color
}

// waitBatches waits for the batches recorded so far to equal want.
func (l *changeLog) waitBatches(t *testing.T, want ...[]string) {
	t.Helper()
	Eventually(t, waitTimeout, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !slices.EqualFunc(l.batches, want, slices.Equal) {
			return fmt.Errorf("change batches = %q; want %q", l.batches, want)
		}
		return nil
	})
}

func testCacheRead(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	c := widgets(s)
	for _, n := range []string{"t2/z", "a", "t1/y", "t1/x"} {
		if _, err := c.Create(ctx, n, &widget{Color: "red"}); err != nil {
			t.Fatal(err)
		}
	}
	cache := store.NewCache(c)
	if got := cache.Rev(); got != 0 {
		t.Errorf("Rev() before Run = %d; want 0", got)
	}
	runCache(t, cache)

	if got, want := names(cache.List()), []string{"a", "t1/x", "t1/y", "t2/z"}; !slices.Equal(got, want) {
		t.Errorf("List() = %q; want %q", got, want)
	}
	if got, want := names(cache.ListPrefix("t1/")), []string{"t1/x", "t1/y"}; !slices.Equal(got, want) {
		t.Errorf("ListPrefix(t1/) = %q; want %q", got, want)
	}
	if got := names(cache.ListPrefix("t3/")); len(got) != 0 {
		t.Errorf("ListPrefix(t3/) = %q; want none", got)
	}
	if got := cache.Len(); got != 4 {
		t.Errorf("Len() = %d; want 4", got)
	}

	// Read your writes: once WaitForRev returns, the cache has the write.
	rev, err := c.Put(ctx, "a", &widget{Color: "blue"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.WaitForRev(ctx, rev); err != nil {
		t.Fatalf("WaitForRev(%d): %v", rev, err)
	}
	if it, ok := cache.Get("a"); !ok || it.Value.Color != "blue" || it.ModRevision != rev {
		t.Errorf("Get(a) = %+v, %v; want blue at %d", it, ok, rev)
	}
	rev, err = c.Delete(ctx, "t2/z", 0)
	if err != nil {
		t.Fatal(err)
	}
	rev2, err := c.Create(ctx, "t0", &widget{Color: "green"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.WaitForRev(ctx, rev2); err != nil {
		t.Fatalf("WaitForRev(%d): %v", rev2, err)
	}
	if _, ok := cache.Get("t2/z"); ok {
		t.Errorf("Get(t2/z) found after its delete at %d", rev)
	}
	if got, want := names(cache.List()), []string{"a", "t0", "t1/x", "t1/y"}; !slices.Equal(got, want) {
		t.Errorf("List() = %q; want %q", got, want)
	}
	if got := cache.Rev(); got < rev2 {
		t.Errorf("Rev() = %d; want >= %d", got, rev2)
	}

	// A second Run while one is active is refused.
	if err := cache.Run(ctx); err == nil || strings.Contains(err.Error(), "context") {
		t.Errorf("second Run = %v; want an already-running error", err)
	}
	// WaitForRev gives up with its context.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := cache.WaitForRev(short, rev2+1_000_000); err == nil {
		t.Errorf("WaitForRev of a future revision returned nil; want a context error")
	}
}

// testCacheWaitOutside waits for the revision of a write outside the
// collection, which the watch never reports as an event.
func testCacheWaitOutside(t *testing.T, s *store.Store) {
	cache := store.NewCache(widgets(s))
	runCache(t, cache)
	rev := mustPut(t, s, "elsewhere", "v")
	ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
	defer cancel()
	if err := cache.WaitForRev(ctx, rev); err != nil {
		t.Fatalf("WaitForRev(%d) for a write outside the collection: %v", rev, err)
	}
	if got := cache.Rev(); got < rev {
		t.Errorf("Rev() = %d; want >= %d", got, rev)
	}
}

func testCacheOnChange(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	c := widgets(s)
	if _, err := c.Create(ctx, "a", &widget{Color: "red"}); err != nil {
		t.Fatal(err)
	}
	var log changeLog
	cache := store.NewCache(c, store.WithOnChange(log.record))
	runCache(t, cache)
	log.waitBatches(t, []string{"a ∅→red"})

	a, _ := cache.Get("a")
	txn := s.Txn()
	_ = c.TxnUpdate(txn, "a", &widget{Color: "blue"}, a.ModRevision)
	_ = c.TxnCreate(txn, "b", &widget{Color: "green"})
	mustCommit(t, txn)
	log.waitBatches(t, []string{"a ∅→red"}, []string{"a red→blue", "b ∅→green"})

	if _, err := c.Delete(ctx, "a", 0); err != nil {
		t.Fatal(err)
	}
	log.waitBatches(t, []string{"a ∅→red"}, []string{"a red→blue", "b ∅→green"}, []string{"a blue→∅"})
}

// testCacheCompact checks that WithCompact reworks every value the cache
// decodes, listed or watched, before readers and subscribers see it.
func testCacheCompact(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	c := widgets(s)
	if _, err := c.Create(ctx, "a", &widget{Color: "red"}); err != nil {
		t.Fatal(err)
	}
	upper := func(name string, w *widget) {
		if name != "a" && name != "b" {
			t.Errorf("WithCompact called with name %q; want the object's (a or b)", name)
		}
		w.Color = strings.ToUpper(w.Color)
	}
	var log changeLog
	cache := store.NewCache(c, store.WithCompact(upper), store.WithOnChange(log.record))
	runCache(t, cache)
	if _, err := c.Create(ctx, "b", &widget{Color: "blue"}); err != nil {
		t.Fatal(err)
	}
	log.waitBatches(t, []string{"a ∅→RED"}, []string{"b ∅→BLUE"})
	for name, want := range map[string]string{"a": "RED", "b": "BLUE"} {
		if it, ok := cache.Get(name); !ok || it.Value.Color != want {
			t.Errorf("Get(%q) = %v, %v; want color %s", name, it.Value, ok, want)
		}
	}

	defer func() {
		if recover() == nil {
			t.Error("NewCache with a WithCompact of another type did not panic; want a panic")
		}
	}()
	store.NewCache(c, store.WithCompact(func(string, *int) {}))
}

// testCacheWaitForRevAfterOnChange: WaitForRev returns only once the
// subscribers have been handed the changes up to the revision, so that a
// stream that subscribes after it and then lists the cache never gets a
// change it already had in its list (the region's watches once did, and
// sent an agent an assignment twice).
func testCacheWaitForRevAfterOnChange(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	c := widgets(s)
	var enter, free sync.Once
	entered, release := make(chan struct{}), make(chan struct{})
	cache := store.NewCache(c, store.WithOnChange(func(changes []store.Change[widget]) {
		if slices.ContainsFunc(changes, func(ch store.Change[widget]) bool { return ch.Name == "held" }) {
			enter.Do(func() { close(entered) })
			<-release
		}
	}))
	runCache(t, cache)
	// Registered after runCache's: runs first, so that the cache can stop.
	t.Cleanup(func() { free.Do(func() { close(release) }) })
	rev, err := c.Create(ctx, "held", &widget{Color: "red"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the subscriber was not called with the write")
	}
	// The subscriber is still being told: a cancelled wait must not
	// find the revision reached, although the items already hold it.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := cache.WaitForRev(cancelled, rev); err == nil {
		t.Errorf("WaitForRev(%d) while the subscriber has not returned = nil; want a context error", rev)
	}
	free.Do(func() { close(release) })
	if err := cache.WaitForRev(ctx, rev); err != nil {
		t.Fatalf("WaitForRev(%d) once the subscriber returned: %v", rev, err)
	}
}

// testCacheRelistDiff makes the cache relist after compaction: subscribers
// get the difference from what the cache held before.
func testCacheRelistDiff(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	ps, px := throughProxy(t, s)
	c := widgets(s)
	for _, n := range []string{"a", "b", "c"} {
		if _, err := c.Create(ctx, n, &widget{Color: "red"}); err != nil {
			t.Fatal(err)
		}
	}
	var log changeLog
	cache := store.NewCache(widgets(ps), store.WithOnChange(log.record))
	runCache(t, cache)
	log.waitBatches(t, []string{"a ∅→red", "b ∅→red", "c ∅→red"})
	before, _ := cache.Get("c")

	cut(t, px, ps)
	if _, err := c.Put(ctx, "a", &widget{Color: "blue"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, "b", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "d", &widget{Color: "green"}); err != nil {
		t.Fatal(err)
	}
	rev := compact(t, s)
	px.Restore()

	log.waitBatches(t,
		[]string{"a ∅→red", "b ∅→red", "c ∅→red"},
		[]string{"a red→blue", "b red→∅", "d ∅→green"})
	if err := cache.WaitForRev(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if got, want := names(cache.List()), []string{"a", "c", "d"}; !slices.Equal(got, want) {
		t.Errorf("List() after relist = %q; want %q", got, want)
	}
	if after, _ := cache.Get("c"); after.Value != before.Value {
		t.Errorf("unchanged item c was decoded again on relist; want the same value pointer")
	}
}

func testCacheDecodeError(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	c := widgets(s)
	mustPut(t, s, c.Key("bad"), "{not json")
	if _, err := c.Create(ctx, "good", &widget{Color: "red"}); err != nil {
		t.Fatal(err)
	}
	cache := store.NewCache(c)
	runCache(t, cache)
	if got := names(cache.List()); !slices.Equal(got, []string{"good"}) {
		t.Errorf("List() = %q; want [good] (bad skipped)", got)
	}

	mustPut(t, s, c.Key("good"), "garbage")
	rev, err := c.Put(ctx, "bad", &widget{Color: "fixed"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.WaitForRev(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if got := names(cache.List()); !slices.Equal(got, []string{"bad"}) {
		t.Errorf("List() = %q; want [bad] (good no longer decodes, bad was fixed)", got)
	}
}

// testCacheConcurrentReads reads the cache from several goroutines while
// batches of additions arrive: with additions only, no reader may ever see
// the cache shrink.
func testCacheConcurrentReads(t *testing.T, s *store.Store) {
	const batches, perBatch, readers = 20, 10, 4
	ctx := testCtx(t)
	c := widgets(s)
	cache := store.NewCache(c)
	runCache(t, cache)

	done := make(chan struct{})
	var wg sync.WaitGroup
	for r := range readers {
		wg.Go(func() {
			seen := 0
			for {
				select {
				case <-done:
					return
				default:
				}
				var n int
				if r%2 == 0 {
					n = len(cache.List())
				} else {
					n = len(cache.ListPrefix("w/"))
				}
				if n < seen {
					t.Errorf("reader %d: list has %d items after %d; want no shrinking", r, n, seen)
					return
				}
				seen = n
				cache.Get("w/0000")
				cache.Len()
			}
		})
	}
	var rev int64
	for b := range batches {
		txn := s.Txn()
		for i := range perBatch {
			_ = c.TxnCreate(txn, fmt.Sprintf("w/%04d", b*perBatch+i), &widget{})
		}
		rev = mustCommit(t, txn)
	}
	err := cache.WaitForRev(ctx, rev)
	close(done)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cache.Len(), batches*perBatch; got != want {
		t.Errorf("Len() = %d; want %d", got, want)
	}
}
