package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TxnError reports which condition of a transaction failed. Err is
// ErrExists, ErrConflict, ErrNotFound or ErrFenced; Key is the key relative
// to the store prefix, or the absolute guard key for ErrFenced.
type TxnError struct {
	Key string
	Err error
}

func (e *TxnError) Error() string { return "store: " + e.Key + ": " + e.Err.Error() }

func (e *TxnError) Unwrap() error { return e.Err }

type opKind uint8

const (
	opCreate opKind = iota
	opUpdate
	opPut
	opDelete
	opDeletePrefix
	opRequire
	opUnchanged
	opUnchangedSince
)

type txnOp struct {
	kind   opKind
	key    string // relative to the store prefix
	value  []byte
	modRev int64 // CreateRevision for opRequire
}

// conditional reports whether the operation adds a comparison.
func (op txnOp) conditional() bool {
	switch op.kind {
	case opCreate, opUpdate, opRequire, opUnchanged, opUnchangedSince:
		return true
	case opDelete:
		return op.modRev > 0
	}
	return false
}

// Txn builds one atomic etcd transaction of many operations: either all of
// them apply at one revision or none does. Build it with the chaining methods
// and send it with Commit. A Txn is meant for one Commit and is not safe for
// concurrent use.
//
// etcd caps the size of one transaction (--max-txn-ops, see Size), and so
// does the store: Commit refuses a transaction over the store's limit
// before sending it. Writes that may be larger go through a Batch.
type Txn struct {
	s      *Store
	ops    []txnOp
	guards []Guard
	err    error // first error found while building; Commit returns it
}

// Txn starts an empty transaction.
func (s *Store) Txn() *Txn { return &Txn{s: s} }

// Create adds a write of key that requires the key to be absent.
func (t *Txn) Create(key string, val []byte) *Txn {
	return t.add(txnOp{kind: opCreate, key: key, value: val})
}

// Update adds a write of key that requires its ModRevision to be modRev,
// which must be positive (use Put for an unconditional write).
func (t *Txn) Update(key string, val []byte, modRev int64) *Txn {
	if modRev <= 0 {
		t.fail(fmt.Errorf("store: update %s: mod revision %d is not positive", key, modRev))
	}
	return t.add(txnOp{kind: opUpdate, key: key, value: val, modRev: modRev})
}

// Put adds an unconditional write of key.
func (t *Txn) Put(key string, val []byte) *Txn {
	return t.add(txnOp{kind: opPut, key: key, value: val})
}

// Delete adds a deletion of key. With modRev > 0 it requires the key to be
// at that ModRevision; with 0 it deletes the key if present and is a no-op
// otherwise (unlike Store.Delete, which reports the absence).
func (t *Txn) Delete(key string, modRev int64) *Txn {
	if modRev < 0 {
		t.fail(fmt.Errorf("store: delete %s: negative mod revision %d", key, modRev))
	}
	return t.add(txnOp{kind: opDelete, key: key, modRev: modRev})
}

// Require adds a condition that writes nothing: key must exist with
// CreateRevision createRev, that is, be the same object the caller read,
// however often updated since. It fails with ErrNotFound when the object
// was deleted (or deleted and created again): a write about it, such as a
// replica's status, must not bring back a record of what is gone.
func (t *Txn) Require(key string, createRev int64) *Txn {
	if createRev <= 0 {
		t.fail(fmt.Errorf("store: require %s: create revision %d is not positive", key, createRev))
	}
	return t.add(txnOp{kind: opRequire, key: key, modRev: createRev})
}

// Unchanged adds a condition that writes nothing: key must be at
// ModRevision modRev, or absent for 0. It fails with ErrConflict, so
// that a read-modify-write decided on what it read (a quota admission
// on the tenant's record) starts over when that changed
// (Store.RetryConflicts).
func (t *Txn) Unchanged(key string, modRev int64) *Txn {
	if modRev < 0 {
		t.fail(fmt.Errorf("store: unchanged %s: negative mod revision %d", key, modRev))
	}
	return t.add(txnOp{kind: opUnchanged, key: key, modRev: modRev})
}

// UnchangedSince adds a condition that writes nothing: no key under
// prefix was created or updated after revision rev (a key deleted since
// is gone and does not count). It fails with ErrConflict, so that a
// decision made on a list of prefix at rev (no resource names the
// Config about to be deleted) starts over when the list changed
// (Store.RetryConflicts). etcd reads every key under prefix to decide:
// keep it to rare writes.
func (t *Txn) UnchangedSince(prefix string, rev int64) *Txn {
	if rev <= 0 {
		t.fail(fmt.Errorf("store: unchanged since %s: revision %d is not positive", prefix, rev))
	}
	return t.add(txnOp{kind: opUnchangedSince, key: prefix, modRev: rev})
}

// DeletePrefix adds an unconditional deletion of every key under prefix.
// No other operation of the transaction may touch a key under it.
func (t *Txn) DeletePrefix(prefix string) *Txn {
	t.ops = append(t.ops, txnOp{kind: opDeletePrefix, key: prefix})
	return t
}

// Guard adds conditions that must hold for the transaction to apply; if one
// fails, Commit returns ErrFenced, whatever else failed.
func (t *Txn) Guard(g ...Guard) *Txn {
	for _, g := range g {
		if g == nil {
			t.fail(errors.New("store: nil guard"))
			continue
		}
		t.guards = append(t.guards, g)
	}
	return t
}

// Len returns the number of operations.
func (t *Txn) Len() int { return len(t.ops) }

// Size is the transaction's size as etcd counts it against --max-txn-ops:
// the longest of its three lists. Compare holds one comparison per guard
// and per conditional operation, Success one request per write, and
// Failure (the reads that classify a failure) one per comparison, so Size
// is the larger of the comparisons and the writes.
func (t *Txn) Size() int { return max(t.compares(), t.writes()) }

// writes counts the operations that send a request (all but the
// conditions: Require, Unchanged, UnchangedSince).
func (t *Txn) writes() int {
	n := 0
	for _, op := range t.ops {
		if !op.conditionOnly() {
			n++
		}
	}
	return n
}

// conditionOnly reports whether the operation compares and writes
// nothing.
func (op txnOp) conditionOnly() bool {
	return op.kind == opRequire || op.kind == opUnchanged || op.kind == opUnchangedSince
}

// Room is how many more operations, each with a condition, fit under the
// store's limit; it may be negative.
func (t *Txn) Room() int { return t.s.maxTxnOps() - t.Size() }

func (t *Txn) compares() int {
	n := len(t.guards)
	for _, op := range t.ops {
		if op.conditional() {
			n++
		}
	}
	return n
}

// bytes approximates the request's size: keys and values.
func (t *Txn) bytes() int {
	n := 0
	for _, op := range t.ops {
		n += len(op.key) + len(op.value)
	}
	return n
}

// Commit sends the transaction and returns the revision it applied at. A
// transaction without operations sends nothing and returns (0, nil).
//
// When a condition fails, nothing is applied and the error is a *TxnError
// naming the first failing condition: a guard (ErrFenced) before any
// operation, then operations in the order they were added.
func (t *Txn) Commit(ctx context.Context) (int64, error) {
	resp, err := t.commit(ctx)
	if err != nil || resp == nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

func (t *Txn) add(op txnOp) *Txn {
	if op.key == "" {
		t.fail(errEmptyKey)
	}
	t.ops = append(t.ops, op)
	return t
}

func (t *Txn) fail(err error) {
	if t.err == nil {
		t.err = err
	}
}

// check is one compared key: when the transaction fails, the Else branch
// reads every compared key, and check decides locally whether its condition
// was the one that failed. That classifies the failure in the same round trip
// instead of a second read that could race with other writers.
type check struct {
	key    string // as reported in TxnError
	kind   opKind
	guard  bool
	expect int64 // CreateRevision for guards and requires, ModRevision for updates and deletes
}

func (c check) eval(kv *mvccpb.KeyValue) error {
	switch {
	case c.guard:
		return sameObject(kv, c.expect, ErrFenced)
	case c.kind == opCreate:
		if kv != nil {
			return ErrExists
		}
	case c.kind == opRequire:
		return sameObject(kv, c.expect, ErrNotFound)
	case c.kind == opUnchanged:
		if (kv == nil && c.expect != 0) || (kv != nil && kv.ModRevision != c.expect) {
			return ErrConflict
		}
	case c.kind == opUnchangedSince:
		// kv is the newest key under the prefix, if any.
		if kv != nil && kv.ModRevision > c.expect {
			return ErrConflict
		}
	default: // update, or delete at a revision
		if kv == nil {
			return ErrNotFound
		}
		if kv.ModRevision != c.expect {
			return ErrConflict
		}
	}
	return nil
}

// sameObject is nil when kv is the object created at createRev, else
// err.
func sameObject(kv *mvccpb.KeyValue, createRev int64, err error) error {
	if kv == nil || kv.CreateRevision != createRev {
		return err
	}
	return nil
}

// commit sends the transaction; it returns (nil, nil) for an empty one.
// Store.Delete needs the raw response to see whether a key was deleted.
func (t *Txn) commit(ctx context.Context) (*clientv3.TxnResponse, error) {
	if t.err != nil {
		return nil, t.err
	}
	if len(t.ops) == 0 {
		return nil, nil
	}
	if err := t.checkOverlap(); err != nil {
		return nil, err
	}
	if size, limit := t.Size(), t.s.maxTxnOps(); size > limit {
		return nil, &limitError{size: size, limit: limit}
	}
	req, err := t.build()
	if err != nil {
		return nil, err
	}
	txn := t.s.cli.Txn(ctx).If(req.cmps...).Then(req.then...)
	if len(req.els) > 0 {
		txn = txn.Else(req.els...)
	}
	resp, err := txn.Commit()
	if err != nil {
		return nil, wrapErr(fmt.Sprintf("txn of %d ops", len(t.ops)), err)
	}
	if resp.Succeeded {
		return resp, nil
	}
	return nil, t.failure(resp, req.checks)
}

// txnRequest is a transaction in etcd's terms: the comparisons (and what
// each checks), the operations, and the reads that classify a failure.
type txnRequest struct {
	cmps   []clientv3.Cmp
	checks []check
	then   []clientv3.Op
	els    []clientv3.Op
}

func (r *txnRequest) compare(c check, abs string, cmp clientv3.Cmp) {
	// Keys only: classification needs revisions, not values.
	r.compareRead(c, cmp, clientv3.OpGet(abs, clientv3.WithKeysOnly()))
}

// compareRead adds cmp, with read as the Else read that classifies its
// failure.
func (r *txnRequest) compareRead(c check, cmp clientv3.Cmp, read clientv3.Op) {
	r.cmps = append(r.cmps, cmp)
	r.checks = append(r.checks, c)
	r.els = append(r.els, read)
}

// build turns the guards and operations into a txnRequest. Guards go
// first so that a fenced writer always learns it is fenced, not that its
// data was stale.
func (t *Txn) build() (*txnRequest, error) {
	r := &txnRequest{then: make([]clientv3.Op, 0, len(t.ops))}
	for _, g := range t.guards {
		key, rev := g.GuardKey(), g.GuardRev()
		if key == "" || rev <= 0 {
			return nil, fmt.Errorf("store: invalid guard %q at create revision %d", key, rev)
		}
		r.compare(check{key: key, guard: true, expect: rev}, key,
			clientv3.Compare(clientv3.CreateRevision(key), "=", rev))
	}
	for _, op := range t.ops {
		t.buildOp(r, op)
	}
	return r, nil
}

func (t *Txn) buildOp(r *txnRequest, op txnOp) {
	abs := t.s.prefix + op.key
	switch op.kind {
	case opCreate:
		r.compare(check{key: op.key, kind: op.kind}, abs,
			clientv3.Compare(clientv3.CreateRevision(abs), "=", 0))
		r.then = append(r.then, clientv3.OpPut(abs, string(op.value)))
	case opUpdate:
		r.compare(check{key: op.key, kind: op.kind, expect: op.modRev}, abs,
			clientv3.Compare(clientv3.ModRevision(abs), "=", op.modRev))
		r.then = append(r.then, clientv3.OpPut(abs, string(op.value)))
	case opPut:
		r.then = append(r.then, clientv3.OpPut(abs, string(op.value)))
	case opDelete:
		if op.modRev > 0 {
			r.compare(check{key: op.key, kind: op.kind, expect: op.modRev}, abs,
				clientv3.Compare(clientv3.ModRevision(abs), "=", op.modRev))
		}
		r.then = append(r.then, clientv3.OpDelete(abs))
	case opDeletePrefix:
		key, end := t.s.prefixRange(op.key)
		r.then = append(r.then, clientv3.OpDelete(key, clientv3.WithRange(end)))
	case opRequire:
		r.compare(check{key: op.key, kind: op.kind, expect: op.modRev}, abs,
			clientv3.Compare(clientv3.CreateRevision(abs), "=", op.modRev))
	case opUnchanged:
		// An absent key compares as ModRevision 0.
		r.compare(check{key: op.key, kind: op.kind, expect: op.modRev}, abs,
			clientv3.Compare(clientv3.ModRevision(abs), "=", op.modRev))
	case opUnchangedSince:
		// A range comparison holds when every key in the range passes
		// (an empty range passes); the Else read is the newest key.
		key, end := t.s.prefixRange(op.key)
		r.compareRead(check{key: op.key, kind: op.kind, expect: op.modRev},
			clientv3.Compare(clientv3.ModRevision(key), "<", op.modRev+1).WithRange(end),
			clientv3.OpGet(key, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(1),
				clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend)))
	}
}

// failure names the first condition that failed, from the Else reads of
// a failed transaction.
func (t *Txn) failure(resp *clientv3.TxnResponse, checks []check) error {
	for i, c := range checks {
		var kv *mvccpb.KeyValue
		if rr := resp.Responses[i].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
			kv = rr.Kvs[0]
		}
		if err := c.eval(kv); err != nil {
			return &TxnError{Key: c.key, Err: err}
		}
	}
	// The Else reads run at the revision the conditions were evaluated at,
	// so one of them must explain the failure.
	return fmt.Errorf("store: txn of %d ops failed but every condition holds", len(t.ops))
}

// checkOverlap rejects two operations on one key before sending, because
// etcd refuses the whole transaction with an error that does not say which
// key was duplicated.
func (t *Txn) checkOverlap() error {
	keys := make(map[string]struct{}, len(t.ops))
	var prefixes []string
	for _, op := range t.ops {
		switch {
		case op.conditionOnly():
			// etcd takes any number of comparisons of a key, and
			// compares before it writes.
			continue
		case op.kind == opDeletePrefix:
			prefixes = append(prefixes, op.key)
			continue
		}
		if _, dup := keys[op.key]; dup {
			return fmt.Errorf("store: txn: key %s appears in more than one operation", op.key)
		}
		keys[op.key] = struct{}{}
	}
	for i, p := range prefixes {
		for k := range keys {
			if strings.HasPrefix(k, p) {
				return fmt.Errorf("store: txn: key %s is under deleted prefix %q", k, p)
			}
		}
		for j, q := range prefixes {
			if i != j && strings.HasPrefix(q, p) {
				return fmt.Errorf("store: txn: deleted prefixes %q and %q overlap", p, q)
			}
		}
	}
	return nil
}

// limitError is a transaction the store refused to send: it is over the
// store's limit, not (as far as the store knows) over etcd's.
type limitError struct{ size, limit int }

func (e *limitError) Error() string {
	return fmt.Sprintf("store: txn of size %d is over the limit of %d operations per transaction", e.size, e.limit)
}

func (e *limitError) Unwrap() error { return ErrTooManyOps }
