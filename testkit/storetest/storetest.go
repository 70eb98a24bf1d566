// Package storetest is the conformance suite of package store: every
// behaviour callers rely on, run against a real etcd. A test hands Run a
// function that returns a Store on an empty prefix; the subtests run one
// after another because some of them compact etcd, which every store on it
// notices.
package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stratahq/strata/internal/store"
)

// Run runs the suite. newStore must return a Store on a prefix nothing else
// uses; the stores of one Run may share one etcd.
func Run(t *testing.T, newStore func(t *testing.T) *store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s *store.Store)
	}{
		{"Get", testGet},
		{"Create", testCreate},
		{"Update", testUpdate},
		{"Put", testPut},
		{"Delete", testDelete},
		{"DeletePrefix", testDeletePrefix},
		{"PrefixIsolation", testPrefixIsolation},
		{"ListPagination", testListPagination},
		{"ListSnapshot", testListSnapshot},
		{"ListAtRevision", testListAtRevision},
		{"ListCompacted", testListCompacted},
		{"ListInvalid", testListInvalid},
		{"ListAll", testListAll},
		{"TxnCommit", testTxnCommit},
		{"TxnEmpty", testTxnEmpty},
		{"TxnAtomic", testTxnAtomic},
		{"TxnErrors", testTxnErrors},
		{"TxnRequire", testTxnRequire},
		{"TxnUnchanged", testTxnUnchanged},
		{"TxnUnchangedSince", testTxnUnchangedSince},
		{"TxnInvalid", testTxnInvalid},
		{"TxnDuplicateKey", testTxnDuplicateKey},
		{"GuardFencing", testGuardFencing},
		{"TxnSize", testTxnSize},
		{"TxnOverLimit", testTxnOverLimit},
		{"CheckTxnLimit", testCheckTxnLimit},
		{"BatchSplits", testBatchSplits},
		{"BatchFencing", testBatchFencing},
		{"BatchHalving", testBatchHalving},
		{"BatchGroupFailure", testBatchGroupFailure},
		{"BatchRequire", testBatchRequire},
		{"BatchOversizedStep", testBatchOversizedStep},
		{"BatchEvery", testBatchEvery},
		{"BatchUnchanged", testBatchUnchanged},
		{"BatchBytes", testBatchBytes},
		{"BatchOrder", testBatchOrder},
		{"ReflectListAndWatch", testReflectListAndWatch},
		{"ReflectResume", testReflectResume},
		{"ReflectRelistAfterCompaction", testReflectRelist},
		{"ReflectCancel", testReflectCancel},
		{"CollectionCRUD", testCollectionCRUD},
		{"CollectionList", testCollectionList},
		{"CollectionTxn", testCollectionTxn},
		{"CollectionDecodeError", testCollectionDecodeError},
		{"ModifyConcurrent", testModifyConcurrent},
		{"ModifyOutcomes", testModifyOutcomes},
		{"CacheRead", testCacheRead},
		{"CacheIndex", testCacheIndex},
		{"CacheWaitForRevOutsidePrefix", testCacheWaitOutside},
		{"CacheOnChange", testCacheOnChange},
		{"CacheCompact", testCacheCompact},
		{"CacheWaitForRevAfterOnChange", testCacheWaitForRevAfterOnChange},
		{"CacheRelistDiff", testCacheRelistDiff},
		{"CacheDecodeError", testCacheDecodeError},
		{"CacheConcurrentReads", testCacheConcurrentReads},
		{"SharedWatchRead", testSharedWatchRead},
		{"SharedWatchWaitForRevOutsidePrefix", testSharedWatchWaitOutside},
		{"SharedWatchWaitCurrent", testSharedWatchWaitCurrent},
		{"SharedWatchJoin", testSharedWatchJoin},
		{"SharedWatchRelist", testSharedWatchRelist},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func testGet(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	if kv, err := s.Get(ctx, "missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(missing) = %+v, %v; want ErrNotFound", kv, err)
	}
	rev := mustPut(t, s, "a/b", "v1")
	got := mustGet(t, s, "a/b")
	want := store.KV{Key: "a/b", Value: []byte("v1"), CreateRevision: rev, ModRevision: rev, Version: 1}
	if got.Key != want.Key || string(got.Value) != string(want.Value) || got.CreateRevision != want.CreateRevision ||
		got.ModRevision != want.ModRevision || got.Version != want.Version {
		t.Errorf("Get(a/b) = %+v; want %+v", got, want)
	}
	if _, err := s.Get(ctx, ""); err == nil {
		t.Errorf("Get(\"\") succeeded; want an error")
	}
}

func testCreate(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	rev, err := s.Create(ctx, "obj", []byte("v1"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if kv := mustGet(t, s, "obj"); kv.CreateRevision != rev || string(kv.Value) != "v1" {
		t.Errorf("after Create: got %q created at %d; want %q created at %d", kv.Value, kv.CreateRevision, "v1", rev)
	}
	before := currentRev(t, s)
	_, err = s.Create(ctx, "obj", []byte("v2"))
	wantTxnErr(t, err, store.ErrExists, "obj")
	wantUnchanged(t, s, before)
	if kv := mustGet(t, s, "obj"); string(kv.Value) != "v1" {
		t.Errorf("after failed Create: got %q; want %q", kv.Value, "v1")
	}
}

func testUpdate(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	r1 := mustPut(t, s, "obj", "v1")
	r2 := mustPut(t, s, "obj", "v2")
	tests := []struct {
		name    string
		key     string
		modRev  int64
		wantErr error // nil: success
	}{
		{"stale revision", "obj", r1, store.ErrConflict},
		{"absent key", "missing", r2, store.ErrNotFound},
		{"current revision", "obj", r2, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := currentRev(t, s)
			rev, err := s.Update(ctx, tc.key, []byte("v3"), tc.modRev)
			if tc.wantErr != nil {
				wantTxnErr(t, err, tc.wantErr, tc.key)
				wantUnchanged(t, s, before)
				return
			}
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			if kv := mustGet(t, s, tc.key); kv.ModRevision != rev || string(kv.Value) != "v3" {
				t.Errorf("after Update: got %q at %d; want %q at %d", kv.Value, kv.ModRevision, "v3", rev)
			}
		})
	}
	if _, err := s.Update(ctx, "obj", []byte("v4"), 0); err == nil || errors.Is(err, store.ErrConflict) {
		t.Errorf("Update at revision 0 = %v; want an argument error", err)
	}
}

func testPut(t *testing.T, s *store.Store) {
	r1 := mustPut(t, s, "obj", "v1")
	r2 := mustPut(t, s, "obj", "v2")
	kv := mustGet(t, s, "obj")
	if string(kv.Value) != "v2" || kv.CreateRevision != r1 || kv.ModRevision != r2 || kv.Version != 2 {
		t.Errorf("after two Puts: got %+v; want v2 created at %d, modified at %d, version 2", kv, r1, r2)
	}
}

func testDelete(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	tests := []struct {
		name    string
		exists  bool
		modRev  func(first, current int64) int64
		wantErr error
	}{
		{"unconditional", true, func(_, _ int64) int64 { return 0 }, nil},
		{"at current revision", true, func(_, cur int64) int64 { return cur }, nil},
		{"at stale revision", true, func(first, _ int64) int64 { return first }, store.ErrConflict},
		{"absent, unconditional", false, func(_, _ int64) int64 { return 0 }, store.ErrNotFound},
		{"absent, at a revision", false, func(first, _ int64) int64 { return first }, store.ErrNotFound},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := fmt.Sprintf("del/%d", i)
			first := mustPut(t, s, key, "v1")
			current := mustPut(t, s, key, "v2")
			if !tc.exists {
				if _, err := s.Delete(ctx, key, 0); err != nil {
					t.Fatalf("setup delete: %v", err)
				}
			}
			before := currentRev(t, s)
			rev, err := s.Delete(ctx, key, tc.modRev(first, current))
			if tc.wantErr != nil {
				wantTxnErr(t, err, tc.wantErr, key)
				wantUnchanged(t, s, before)
				return
			}
			if err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if rev <= before {
				t.Errorf("Delete returned revision %d; want > %d", rev, before)
			}
			mustAbsent(t, s, key)
		})
	}
}

func testDeletePrefix(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	for _, k := range []string{"dp/a", "dp/b/c", "dpx", "other"} {
		mustPut(t, s, k, "v")
	}
	rev, err := s.DeletePrefix(ctx, "dp/")
	if err != nil {
		t.Fatalf("DeletePrefix: %v", err)
	}
	kvs, listRev, err := s.ListAll(ctx, "")
	if err != nil {
		t.Fatalf("ListAll: %v", err)
	}
	if got, want := keys(kvs), []string{"dpx", "other"}; !slices.Equal(got, want) {
		t.Errorf("keys after DeletePrefix(dp/) = %q; want %q", got, want)
	}
	if listRev < rev {
		t.Errorf("list revision %d is before the delete's %d", listRev, rev)
	}
	if _, err := s.DeletePrefix(ctx, "nothing-here/"); err != nil {
		t.Errorf("DeletePrefix of an empty prefix: %v; want success", err)
	}
}

func testPrefixIsolation(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	// The same prefix without its slash names the same store...
	same := store.New(s.Client(), s.Prefix()[:len(s.Prefix())-1])
	if same.Prefix() != s.Prefix() {
		t.Errorf("New(%q).Prefix() = %q; want %q", s.Prefix()[:len(s.Prefix())-1], same.Prefix(), s.Prefix())
	}
	// ...and a sibling whose prefix extends it without the slash is apart.
	sibling := store.New(s.Client(), s.Prefix()[:len(s.Prefix())-1]+"x/")
	mustPut(t, s, "k", "mine")
	mustPut(t, sibling, "k", "sibling")
	t.Cleanup(func() { _, _ = sibling.DeletePrefix(ctx, "") })

	if kv := mustGet(t, same, "k"); string(kv.Value) != "mine" {
		t.Errorf("same-prefix store sees %q; want %q", kv.Value, "mine")
	}
	kvs, _, err := s.ListAll(ctx, "")
	if err != nil {
		t.Fatalf("ListAll: %v", err)
	}
	if got := keys(kvs); !slices.Equal(got, []string{"k"}) {
		t.Errorf("ListAll = %q; want [k] only", got)
	}
	if _, err := s.DeletePrefix(ctx, ""); err != nil {
		t.Fatalf("DeletePrefix(\"\"): %v", err)
	}
	if kv := mustGet(t, sibling, "k"); string(kv.Value) != "sibling" {
		t.Errorf("sibling after DeletePrefix(\"\") = %q; want %q", kv.Value, "sibling")
	}
}

// keys returns the keys of kvs, in order.
func keys(kvs []store.KV) []string {
	out := make([]string, len(kvs))
	for i, kv := range kvs {
		out[i] = kv.Key
	}
	return out
}
