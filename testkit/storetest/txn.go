package storetest

import (
	"errors"
	"testing"

	"github.com/stratahq/strata/internal/store"
)

// testTxnCommit commits every kind of operation at once.
func testTxnCommit(t *testing.T, s *store.Store) {
	ru := mustPut(t, s, "update", "old")
	rd := mustPut(t, s, "delete", "old")
	mustPut(t, s, "delete-any", "old")
	mustPut(t, s, "dp/1", "old")
	mustPut(t, s, "dp/2", "old")

	txn := s.Txn().
		Create("create", []byte("new")).
		Update("update", []byte("new"), ru).
		Put("put", []byte("new")).
		Delete("delete", rd).
		Delete("delete-any", 0).
		Delete("absent", 0).
		DeletePrefix("dp/")
	if got, want := txn.Len(), 7; got != want {
		t.Errorf("Len() = %d; want %d", got, want)
	}
	rev := mustCommit(t, txn)
	for _, k := range []string{"create", "update", "put"} {
		if kv := mustGet(t, s, k); string(kv.Value) != "new" || kv.ModRevision != rev {
			t.Errorf("%s = %q at %d; want %q at %d", k, kv.Value, kv.ModRevision, "new", rev)
		}
	}
	for _, k := range []string{"delete", "delete-any", "absent", "dp/1", "dp/2"} {
		mustAbsent(t, s, k)
	}
}

func testTxnEmpty(t *testing.T, s *store.Store) {
	g := newGuard(t, s, guardKey(s, "empty"))
	for name, txn := range map[string]*store.Txn{
		"no ops":         s.Txn(),
		"only guards":    s.Txn().Guard(g),
		"fenced, no ops": s.Txn().Guard(guard{key: g.key, rev: g.rev + 1000}),
	} {
		if rev, err := txn.Commit(testCtx(t)); rev != 0 || err != nil {
			t.Errorf("%s: Commit = %d, %v; want 0, nil", name, rev, err)
		}
	}
}

// testTxnAtomic fails one operation of many: none may apply.
func testTxnAtomic(t *testing.T, s *store.Store) {
	mustPut(t, s, "taken", "old")
	mustPut(t, s, "kept", "old")
	before := currentRev(t, s)
	_, err := s.Txn().
		Create("new1", []byte("new")).
		Put("kept", []byte("new")).
		Create("taken", []byte("new")).
		Create("new2", []byte("new")).
		Commit(testCtx(t))
	wantTxnErr(t, err, store.ErrExists, "taken")
	wantUnchanged(t, s, before)
	mustAbsent(t, s, "new1")
	mustAbsent(t, s, "new2")
	if kv := mustGet(t, s, "kept"); string(kv.Value) != "old" {
		t.Errorf("kept = %q; want %q", kv.Value, "old")
	}
}

// testTxnErrors checks that Commit names the condition that failed.
func testTxnErrors(t *testing.T, s *store.Store) {
	r1 := mustPut(t, s, "obj", "v1")
	r2 := mustPut(t, s, "obj", "v2")
	mustPut(t, s, "other", "v")
	live := newGuard(t, s, guardKey(s, "live"))
	stale := newGuard(t, s, guardKey(s, "stale"))
	newGuard(t, s, stale.key) // recreated: stale no longer holds

	tests := []struct {
		name    string
		build   func(txn *store.Txn)
		wantErr error
		wantKey string
	}{
		{"create existing", func(txn *store.Txn) {
			txn.Create("fresh", nil).Create("obj", nil)
		}, store.ErrExists, "obj"},
		{"update stale", func(txn *store.Txn) {
			txn.Put("fresh", nil).Update("obj", nil, r1)
		}, store.ErrConflict, "obj"},
		{"update absent", func(txn *store.Txn) {
			txn.Update("missing", nil, r2)
		}, store.ErrNotFound, "missing"},
		{"delete stale", func(txn *store.Txn) {
			txn.Delete("obj", r1)
		}, store.ErrConflict, "obj"},
		{"delete absent at a revision", func(txn *store.Txn) {
			txn.Delete("missing", r2)
		}, store.ErrNotFound, "missing"},
		{"first failing op is reported", func(txn *store.Txn) {
			txn.Update("other", nil, r1).Create("obj", nil)
		}, store.ErrConflict, "other"},
		{"stale guard", func(txn *store.Txn) {
			txn.Guard(stale).Put("fresh", nil)
		}, store.ErrFenced, stale.key},
		{"fenced before a failing op", func(txn *store.Txn) {
			txn.Create("obj", nil).Guard(live, stale)
		}, store.ErrFenced, stale.key},
		{"live guard, failing op", func(txn *store.Txn) {
			txn.Guard(live).Create("obj", nil)
		}, store.ErrExists, "obj"},
		{"require absent", func(txn *store.Txn) {
			txn.Require("missing", r1).Put("fresh", nil)
		}, store.ErrNotFound, "missing"},
		{"require another incarnation", func(txn *store.Txn) {
			// obj was created at r1; r2 is only its latest update.
			txn.Put("fresh", nil).Require("obj", r2)
		}, store.ErrNotFound, "obj"},
		{"unchanged stale", func(txn *store.Txn) {
			txn.Unchanged("obj", r1).Put("fresh", nil)
		}, store.ErrConflict, "obj"},
		{"unchanged absent but present", func(txn *store.Txn) {
			txn.Put("fresh", nil).Unchanged("obj", 0)
		}, store.ErrConflict, "obj"},
		{"unchanged present but absent", func(txn *store.Txn) {
			txn.Unchanged("missing", r2).Put("fresh", nil)
		}, store.ErrConflict, "missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := currentRev(t, s)
			txn := s.Txn()
			tc.build(txn)
			_, err := txn.Commit(testCtx(t))
			wantTxnErr(t, err, tc.wantErr, tc.wantKey)
			wantUnchanged(t, s, before)
			mustAbsent(t, s, "fresh")
		})
	}
	// Deleting an absent key without a revision is not a failure.
	if _, err := s.Txn().Delete("missing", 0).Put("fresh", nil).Commit(testCtx(t)); err != nil {
		t.Errorf("unconditional delete of an absent key: %v; want success", err)
	}
}

// testTxnUnchanged: an Unchanged holds while its key stays at the
// revision named (absent for 0), writes nothing itself, and may name a
// key the transaction also writes.
func testTxnUnchanged(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	rev := mustPut(t, s, "u/obj", "v1")
	if _, err := s.Txn().Unchanged("u/obj", rev).Unchanged("u/none", 0).Put("u/a", []byte("a")).Commit(ctx); err != nil {
		t.Fatalf("unchanged key and absent key: %v; want success", err)
	}
	if kv := mustGet(t, s, "u/obj"); kv.ModRevision != rev {
		t.Errorf("u/obj mod revision after an unchanged: got %d; want %d (untouched)", kv.ModRevision, rev)
	}
	if _, err := s.Txn().Unchanged("u/obj", rev).Put("u/obj", []byte("v2")).Commit(ctx); err != nil {
		t.Fatalf("unchanged and put one key: %v; want success", err)
	}
	// Another writer came in between: the same condition now fails.
	_, err := s.Txn().Unchanged("u/obj", rev).Put("u/obj", []byte("v3")).Commit(ctx)
	wantTxnErr(t, err, store.ErrConflict, "u/obj")
	if got := string(mustGet(t, s, "u/obj").Value); got != "v2" {
		t.Errorf("u/obj: got %q; want v2", got)
	}
}

// testTxnUnchangedSince: an UnchangedSince holds while no key under its
// prefix is created or updated after the revision named, whatever is
// deleted, writes nothing itself, and a key beside the prefix does not
// count.
func testTxnUnchangedSince(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	if _, err := s.Txn().UnchangedSince("us/none/", 1).Put("us/a", []byte("a")).Commit(ctx); err != nil {
		t.Fatalf("unchanged since, an empty prefix: %v; want success", err)
	}
	mustPut(t, s, "us/p/1", "v1")
	rev := mustPut(t, s, "us/p/2", "v1")
	mustPut(t, s, "us/pp", "beside")
	if _, err := s.Delete(ctx, "us/p/1", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Txn().UnchangedSince("us/p/", rev).Put("us/b", []byte("b")).Commit(ctx); err != nil {
		t.Fatalf("unchanged since, with a key beside written and one deleted after: %v; want success", err)
	}
	for _, write := range []string{"us/p/2", "us/p/3"} { // an update, then a create
		t.Run(write, func(t *testing.T) {
			mustPut(t, s, write, "later")
			before := currentRev(t, s)
			_, err := s.Txn().UnchangedSince("us/p/", rev).Put("us/c", []byte("c")).Commit(ctx)
			wantTxnErr(t, err, store.ErrConflict, "us/p/")
			wantUnchanged(t, s, before)
			mustAbsent(t, s, "us/c")
		})
	}
}

// testTxnRequire: a Require holds while its object lives, however often
// it is updated, writes nothing itself, and may name a key the
// transaction also writes.
func testTxnRequire(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	created := mustPut(t, s, "obj", "v1")
	updated := mustPut(t, s, "obj", "v2")
	if _, err := s.Txn().Require("obj", created).Put("status", []byte("s1")).Commit(ctx); err != nil {
		t.Fatalf("require a live object: %v; want success", err)
	}
	if kv := mustGet(t, s, "obj"); kv.ModRevision != updated {
		t.Errorf("obj mod revision after a require: got %d; want %d (untouched)", kv.ModRevision, updated)
	}
	if _, err := s.Txn().Require("obj", created).Update("obj", []byte("v3"), updated).Commit(ctx); err != nil {
		t.Errorf("require and update one key: %v; want success", err)
	}
	if _, err := s.Delete(ctx, "obj", 0); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "obj", "again")
	before := currentRev(t, s)
	_, err := s.Txn().Require("obj", created).Put("status", []byte("s2")).Commit(ctx)
	wantTxnErr(t, err, store.ErrNotFound, "obj")
	wantUnchanged(t, s, before)
}

// testTxnInvalid covers transactions rejected before they are sent.
func testTxnInvalid(t *testing.T, s *store.Store) {
	tests := []struct {
		name  string
		build func(txn *store.Txn)
	}{
		{"update at revision 0", func(txn *store.Txn) { txn.Update("k", nil, 0) }},
		{"require at revision 0", func(txn *store.Txn) { txn.Require("k", 0) }},
		{"unchanged since revision 0", func(txn *store.Txn) { txn.UnchangedSince("p/", 0) }},
		{"delete at negative revision", func(txn *store.Txn) { txn.Delete("k", -1) }},
		{"empty key", func(txn *store.Txn) { txn.Put("", nil) }},
		{"nil guard", func(txn *store.Txn) { txn.Guard(nil).Put("k", nil) }},
		{"guard without revision", func(txn *store.Txn) { txn.Guard(guard{key: "/g"}).Put("k", nil) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := currentRev(t, s)
			txn := s.Txn().Put("ok", nil)
			tc.build(txn)
			_, err := txn.Commit(testCtx(t))
			var te *store.TxnError
			if err == nil || errors.As(err, &te) {
				t.Errorf("Commit = %v; want an argument error", err)
			}
			wantUnchanged(t, s, before)
		})
	}
}

func testTxnDuplicateKey(t *testing.T, s *store.Store) {
	r := mustPut(t, s, "a", "v")
	tests := []struct {
		name  string
		build func(txn *store.Txn)
	}{
		{"create and put", func(txn *store.Txn) { txn.Create("b", nil).Put("b", nil) }},
		{"update and delete", func(txn *store.Txn) { txn.Update("a", nil, r).Delete("a", 0) }},
		{"put twice", func(txn *store.Txn) { txn.Put("a", nil).Put("c", nil).Put("a", nil) }},
		{"key under deleted prefix", func(txn *store.Txn) { txn.DeletePrefix("x/").Put("x/1", nil) }},
		{"nested deleted prefixes", func(txn *store.Txn) { txn.DeletePrefix("x/y/").DeletePrefix("x/") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := currentRev(t, s)
			txn := s.Txn()
			tc.build(txn)
			_, err := txn.Commit(testCtx(t))
			var te *store.TxnError
			if err == nil || errors.As(err, &te) {
				t.Errorf("Commit = %v; want a duplicate-key error", err)
			}
			wantUnchanged(t, s, before)
		})
	}
}

// testGuardFencing runs every write with a guard whose key was deleted, one
// whose key was recreated, and a live one.
func testGuardFencing(t *testing.T, s *store.Store) {
	ctx := testCtx(t)
	deleted := newGuard(t, s, guardKey(s, "deleted"))
	if _, err := s.Client().Delete(ctx, deleted.key); err != nil {
		t.Fatalf("delete guard key: %v", err)
	}
	recreated := newGuard(t, s, guardKey(s, "leader"))
	live := newGuard(t, s, recreated.key)
	if live.rev == recreated.rev {
		t.Fatalf("recreated guard key kept create revision %d", live.rev)
	}
	coll := store.NewCollection(s, "widgets/", store.JSON[widget]())

	writes := []struct {
		name  string
		setup func(t *testing.T) // unguarded preparation
		write func(g store.Guard) error
	}{
		{"Create", nil, func(g store.Guard) error {
			_, err := s.Create(ctx, "g/create", []byte("v"), g)
			return err
		}},
		{"Update", func(t *testing.T) { mustPut(t, s, "g/update", "v0") }, func(g store.Guard) error {
			kv, err := s.Get(ctx, "g/update")
			if err != nil {
				return err
			}
			_, err = s.Update(ctx, "g/update", []byte("v"), kv.ModRevision, g)
			return err
		}},
		{"Put", nil, func(g store.Guard) error {
			_, err := s.Put(ctx, "g/put", []byte("v"), g)
			return err
		}},
		{"Delete", func(t *testing.T) { mustPut(t, s, "g/delete", "v0") }, func(g store.Guard) error {
			_, err := s.Delete(ctx, "g/delete", 0, g)
			return err
		}},
		{"DeletePrefix", func(t *testing.T) { mustPut(t, s, "g/prefix/1", "v0") }, func(g store.Guard) error {
			_, err := s.DeletePrefix(ctx, "g/prefix/", g)
			return err
		}},
		{"Txn", nil, func(g store.Guard) error {
			_, err := s.Txn().Put("g/txn1", nil).Put("g/txn2", nil).Guard(g).Commit(ctx)
			return err
		}},
		{"Modify", func(t *testing.T) {
			if _, err := coll.Put(ctx, "g", &widget{Color: "red"}); err != nil {
				t.Fatal(err)
			}
		}, func(g store.Guard) error {
			_, err := coll.Modify(ctx, "g", func(w *widget) error { w.Count++; return nil }, g)
			return err
		}},
	}
	for _, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			if w.setup != nil {
				w.setup(t)
			}
			for _, fenced := range []guard{deleted, recreated} {
				before := currentRev(t, s)
				wantTxnErr(t, w.write(fenced), store.ErrFenced, fenced.key)
				wantUnchanged(t, s, before)
			}
			if err := w.write(live); err != nil {
				t.Errorf("write with live guard: %v; want success", err)
			}
		})
	}
}
