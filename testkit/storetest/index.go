package storetest

import (
	"slices"
	"testing"

	"github.com/stratahq/strata/internal/store"
)

// byColor indexes widgets by color, and by "big" when their count is
// over 5.
func byColor(_ string, w *widget) []string {
	out := []string{w.Color}
	if w.Count > 5 {
		out = append(out, "big")
	}
	return out
}

// testCacheIndex checks WithIndex, ByIndex, IndexLen and Range: the index
// follows creates, updates and deletes seen by the watch, and pages by
// name within a prefix.
func testCacheIndex(t *testing.T, s *store.Store) {
	ctx := t.Context()
	coll := widgets(s)
	// Some before the cache lists, some after: both paths feed the index.
	put := func(name, color string, count int) int64 {
		t.Helper()
		rev, err := coll.Put(ctx, name, &widget{Color: color, Count: count})
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	put("a/1", "red", 1)
	put("a/2", "blue", 9)
	cache := store.NewCache(coll, store.WithIndex("color", byColor))
	runCache(t, cache)
	put("a/3", "red", 7)
	put("b/1", "red", 1)
	put("a/4", "red", 2)
	put("a/2", "red", 3) // blue -> red, no longer big
	if _, err := coll.Delete(ctx, "a/1", 0); err != nil {
		t.Fatal(err)
	}
	rev := put("a/5", "green", 1)
	if err := cache.WaitForRev(ctx, rev); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		value, prefix, after string
		limit                int
		want                 []string
	}{
		{"red", "", "", 0, []string{"a/2", "a/3", "a/4", "b/1"}},
		{"red", "a/", "", 0, []string{"a/2", "a/3", "a/4"}},
		{"red", "a/", "", 2, []string{"a/2", "a/3"}},
		{"red", "a/", "a/3", 2, []string{"a/4"}},
		{"red", "b/", "", 0, []string{"b/1"}},
		{"big", "", "", 0, []string{"a/3"}},
		{"blue", "", "", 0, []string{}},
		{"green", "a/", "", 0, []string{"a/5"}},
	}
	for _, tt := range tests {
		got := names(cache.ByIndex("color", tt.value, tt.prefix, tt.after, tt.limit, nil))
		if !slices.Equal(got, tt.want) {
			t.Errorf("ByIndex(%q, prefix %q, after %q, limit %d): got %q; want %q", tt.value, tt.prefix, tt.after, tt.limit, got, tt.want)
		}
		if n := cache.IndexLen("color", tt.value); tt.prefix == "" && tt.after == "" && tt.limit == 0 && n != len(tt.want) {
			t.Errorf("IndexLen(%q): got %d; want %d", tt.value, n, len(tt.want))
		}
	}
	odd := func(it store.Item[widget]) bool { return it.Value.Count%2 == 1 }
	if got, want := names(cache.ByIndex("color", "red", "", "", 0, odd)), []string{"a/2", "a/3", "b/1"}; !slices.Equal(got, want) {
		t.Errorf("ByIndex with keep: got %q; want %q", got, want)
	}
	for _, tt := range []struct {
		prefix, after string
		limit         int
		keep          func(store.Item[widget]) bool
		want          []string
	}{
		{"a/", "", 0, nil, []string{"a/2", "a/3", "a/4", "a/5"}},
		{"a/", "a/2", 2, nil, []string{"a/3", "a/4"}},
		{"a/", "a/5", 2, nil, []string{}},
		{"", "", 0, odd, []string{"a/2", "a/3", "a/5", "b/1"}},
		{"b/", "a/9", 0, nil, []string{"b/1"}},
	} {
		if got := names(cache.Range(tt.prefix, tt.after, tt.limit, tt.keep)); !slices.Equal(got, tt.want) {
			t.Errorf("Range(prefix %q, after %q, limit %d): got %q; want %q", tt.prefix, tt.after, tt.limit, got, tt.want)
		}
	}
	t.Run("unknown index panics", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("got no panic for an index the cache does not have")
			}
		}()
		cache.ByIndex("size", "x", "", "", 0, nil)
	})
}
