package state

import (
	"context"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/proto/apiproto"
	"github.com/stratahq/strata/testkit/etcdtest"
)

// TestJSONStoredBeforeStillReads stores an assignment as the releases
// before the binary codec did, then reads it with this one through a
// list, a cache and a modification, which rewrites it in binary; the JSON
// collection of an older release cannot read that any more (hence the
// two-pass upgrade of docs/operations.md).
func TestJSONStoredBeforeStillReads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := store.New(etcdtest.Client(t, etcdtest.Embedded(t)), "/strata/region/")
	old := store.NewCollection(s, "assignments/", store.JSON[api.Assignment]())
	if _, err := old.Put(ctx, "a1", &api.Assignment{ID: "a1", Node: "n1", Labels: map[string]string{"app": "web"}}); err != nil {
		t.Fatal(err)
	}
	st := New(s)
	if _, err := st.Assignments.Put(ctx, "a2", &api.Assignment{ID: "a2", Node: "n2"}); err != nil {
		t.Fatal(err)
	}

	items, _, err := st.Assignments.ListAll(ctx)
	if err != nil || len(items) != 2 || items[0].Value.Labels["app"] != "web" || items[1].Value.Node != "n2" {
		t.Fatalf("list: %v, %d items; want a1 (JSON) and a2 (binary)", err, len(items))
	}
	c := store.NewCache(st.Assignments)
	go func() { _ = c.Run(ctx) }()
	select {
	case <-c.Synced():
	case <-ctx.Done():
		t.Fatal("cache never synced")
	}
	if it, ok := c.Get("a1"); !ok || it.Value.Node != "n1" {
		t.Fatalf("cache: a1 = %v, %v; want the JSON value", it.Value, ok)
	}

	if _, err := st.Assignments.Modify(ctx, "a1", func(a *api.Assignment) error { a.Node = "n3"; return nil }); err != nil {
		t.Fatal(err)
	}
	kv, err := s.Get(ctx, "assignments/a1")
	if err != nil || apiproto.IsJSON(kv.Value) {
		t.Fatalf("a1 after a modification: %q, %v; want binary", kv.Value, err)
	}
	if it, err := st.Assignments.Get(ctx, "a1"); err != nil || it.Value.Node != "n3" || it.Value.Labels["app"] != "web" {
		t.Fatalf("a1 read back: %+v, %v", it.Value, err)
	}
	if _, err := old.Get(ctx, "a1"); err == nil {
		t.Error("a JSON-only collection decoded a binary value")
	}
}
