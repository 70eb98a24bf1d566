package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stratahq/strata/internal/store"
)

// fill writes n keys "<prefix>NNNN" = "v" in one batch and returns their
// keys and the last revision.
func fill(t testing.TB, s *store.Store, prefix string, n int) ([]string, int64) {
	t.Helper()
	var ks []string
	b := s.Batch()
	for i := range n {
		k := fmt.Sprintf("%s%04d", prefix, i)
		ks = append(ks, k)
		b.Step(k).Create(k, []byte("v"))
	}
	res, err := b.Commit(testCtx(t))
	if err != nil {
		t.Fatalf("fill %s: %v", prefix, err)
	}
	return ks, res.Revision
}

// listPages lists prefix page by page and checks that every page has the
// same revision.
func listPages(t testing.TB, s *store.Store, prefix string, opts store.ListOptions) (items []store.KV, pages int, rev int64) {
	t.Helper()
	ctx := testCtx(t)
	for {
		res, err := s.List(ctx, prefix, opts)
		if err != nil {
			t.Fatalf("List page %d: %v", pages+1, err)
		}
		pages++
		if pages == 1 {
			rev = res.Revision
		} else if res.Revision != rev {
			t.Errorf("page %d at revision %d; want the first page's %d", pages, res.Revision, rev)
		}
		if opts.Limit > 0 && int64(len(res.Items)) > opts.Limit {
			t.Errorf("page %d has %d items; want at most %d", pages, len(res.Items), opts.Limit)
		}
		items = append(items, res.Items...)
		if res.Continue == "" {
			return items, pages, rev
		}
		if pages > 1000 {
			t.Fatalf("List did not end after %d pages", pages)
		}
		opts.Continue = res.Continue
	}
}

func testListPagination(t *testing.T, s *store.Store) {
	want, rev := fill(t, s, "page/", 25)
	mustPut(t, s, "pagex", "outside the prefix")
	tests := []struct {
		limit     int64
		wantPages int
	}{
		{0, 1}, {1, 25}, {7, 4}, {10, 3}, {25, 1}, {100, 1},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("limit=%d", tc.limit), func(t *testing.T) {
			items, pages, listRev := listPages(t, s, "page/", store.ListOptions{Limit: tc.limit})
			if got := keys(items); !slices.Equal(got, want) {
				t.Errorf("keys = %q; want %q", got, want)
			}
			if pages != tc.wantPages {
				t.Errorf("pages = %d; want %d", pages, tc.wantPages)
			}
			if listRev < rev {
				t.Errorf("revision = %d; want >= %d", listRev, rev)
			}
		})
	}
}

// testListSnapshot writes between pages: the later pages must still show
// the revision of the first.
func testListSnapshot(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	want, _ := fill(t, s, "snap/", 25)
	first, err := s.List(ctx, "snap/", store.ListOptions{Limit: 10})
	if err != nil {
		t.Fatalf("first page: %v", err)
	}
	// Change a listed key, a key of the next page, add keys on both sides
	// of the cursor and delete one ahead of it.
	mustPut(t, s, "snap/0003", "changed")
	mustPut(t, s, "snap/0012", "changed")
	mustPut(t, s, "snap/0012a", "new")
	mustPut(t, s, "snap/0099", "new")
	if _, err := s.Delete(ctx, "snap/0020", 0); err != nil {
		t.Fatalf("delete: %v", err)
	}
	items := first.Items
	rest, _, rev := listPages(t, s, "snap/", store.ListOptions{Limit: 10, Continue: first.Continue})
	items = append(items, rest...)
	if rev != first.Revision {
		t.Errorf("later pages at revision %d; want the first page's %d", rev, first.Revision)
	}
	if got := keys(items); !slices.Equal(got, want) {
		t.Errorf("keys = %q; want the snapshot %q", got, want)
	}
	for _, kv := range items {
		if string(kv.Value) != "v" {
			t.Errorf("%s = %q; want %q as of the snapshot", kv.Key, kv.Value, "v")
		}
	}
	// A new list sees the writes.
	now, _, _ := listPages(t, s, "snap/", store.ListOptions{Limit: 10})
	if got, want := len(now), 26; got != want {
		t.Errorf("new list has %d keys; want %d", got, want)
	}
}

func testListAtRevision(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	r1 := mustPut(t, s, "a", "1")
	mustPut(t, s, "a", "2")
	mustPut(t, s, "b", "1")
	res, err := s.List(ctx, "", store.ListOptions{Revision: r1})
	if err != nil {
		t.Fatalf("List at %d: %v", r1, err)
	}
	if len(res.Items) != 1 || res.Items[0].Key != "a" || string(res.Items[0].Value) != "1" || res.Revision != r1 {
		t.Errorf("List at %d = %+v; want [a=1] at %d", r1, res, r1)
	}
}

func testListCompacted(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	fill(t, s, "c/", 3)
	first, err := s.List(ctx, "c/", store.ListOptions{Limit: 1})
	if err != nil {
		t.Fatalf("first page: %v", err)
	}
	mustPut(t, s, "c/0001", "changed")
	compact(t, s)
	if _, err := s.List(ctx, "c/", store.ListOptions{Limit: 1, Continue: first.Continue}); !errors.Is(err, store.ErrCompacted) {
		t.Errorf("next page after compaction: err = %v; want ErrCompacted", err)
	}
	if _, err := s.List(ctx, "c/", store.ListOptions{Revision: first.Revision}); !errors.Is(err, store.ErrCompacted) {
		t.Errorf("list at compacted revision: err = %v; want ErrCompacted", err)
	}
}

func testListInvalid(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	fill(t, s, "a/", 3)
	page, err := s.List(ctx, "a/", store.ListOptions{Limit: 1})
	if err != nil || page.Continue == "" {
		t.Fatalf("first page = %+v, %v; want a continue token", page, err)
	}
	tests := []struct {
		name   string
		prefix string
		opts   store.ListOptions
	}{
		{"garbage token", "a/", store.ListOptions{Continue: "not a token"}},
		{"token of another prefix", "b/", store.ListOptions{Continue: page.Continue}},
		{"revision differs from token", "a/", store.ListOptions{Continue: page.Continue, Revision: page.Revision - 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.List(ctx, tc.prefix, tc.opts); !errors.Is(err, store.ErrInvalidContinue) {
				t.Errorf("err = %v; want ErrInvalidContinue", err)
			}
		})
	}
	if _, err := s.List(ctx, "a/", store.ListOptions{Limit: -1}); err == nil {
		t.Errorf("negative limit: no error; want one")
	}
}

func testListAll(t *testing.T, s *store.Store) {
	const n = 1100 // more than one internal page
	want, rev := fill(t, s, "many/", n)
	mustPut(t, s, "manyx", "outside the prefix")
	got, listRev, err := s.ListAll(testCtx(t), "many/")
	if err != nil {
		t.Fatalf("ListAll: %v", err)
	}
	if !slices.Equal(keys(got), want) {
		t.Errorf("ListAll returned %d keys; want the %d written, in order", len(got), n)
	}
	if listRev <= rev {
		t.Errorf("ListAll revision = %d; want > %d (after the last write)", listRev, rev)
	}
}
