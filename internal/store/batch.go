package store

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// maxTxnBytes bounds the keys and values of one batched transaction below
// stock etcd's --max-request-bytes (1.5 MiB), leaving room for the
// request's framing. A single step larger than that goes alone; etcd
// decides.
const maxTxnBytes = 1 << 20

// Batch writes more than one transaction may hold. It is an ordered list of
// steps, each a few operations that must apply together; Commit packs
// consecutive steps into as few transactions as fit under the store's
// limit (MaxTxnOps, counted as etcd counts, see Txn.Size), every one
// carrying the batch's guards, and sends them in order. A later step
// therefore never applies before an earlier one: writers order their steps
// so that every prefix is a valid state (a resource's replicas before its
// summary), and a batch that stops half-way leaves such a state.
//
// Steps belong to groups (one resource, say). When a step's condition
// fails, the rest of its group is dropped and the other groups go on. A
// failed guard (ErrFenced), a failed condition of Every's operations, or
// any error that names no step stops the whole batch.
//
// When etcd refuses a transaction as too large, the store's limit is above
// the server's --max-txn-ops: Commit halves the store's limit (logged once;
// every later transaction of the process uses the lower one) and packs the
// rest again, so the same oversized transaction is never sent twice.
//
// A Batch is meant for one Commit and is not safe for concurrent use.
type Batch struct {
	s      *Store
	guards []Guard
	every  func(t *Txn, prev int64)
	steps  []batchStep
}

type batchStep struct {
	group string
	txn   *Txn
}

// Batch starts an empty batch whose transactions all carry guards g.
func (s *Store) Batch(g ...Guard) *Batch { return &Batch{s: s, guards: g} }

// Guard adds guards to every transaction of the batch.
func (b *Batch) Guard(g ...Guard) *Batch {
	b.guards = append(b.guards, g...)
	return b
}

// Every adds fn's operations to every transaction of the batch, before the
// steps' ones: a fence that moves along with the batch, such as a key
// rewritten at the revision of the previous transaction. prev is the
// revision of the batch's previous transaction, 0 before the first. A
// failed condition of these operations stops the batch.
func (b *Batch) Every(fn func(t *Txn, prev int64)) *Batch {
	b.every = fn
	return b
}

// Step adds a step to group and returns the transaction to put its
// operations in. The step applies atomically, in a transaction shared with
// neighbouring steps; do not Commit it or give it guards of its own. A step
// without operations applies with the transaction it is packed in (with
// Every, it still sends that transaction).
func (b *Batch) Step(group string) *Txn {
	t := b.s.Txn()
	b.steps = append(b.steps, batchStep{group: group, txn: t})
	return t
}

// Len returns the number of steps.
func (b *Batch) Len() int { return len(b.steps) }

// Ops returns the number of operations of all steps.
func (b *Batch) Ops() int {
	n := 0
	for _, st := range b.steps {
		n += len(st.txn.ops)
	}
	return n
}

// BatchResult says what a Commit applied.
type BatchResult struct {
	// Revision is that of the last transaction that applied; 0 if none.
	Revision int64
	// Txns counts the transactions that applied.
	Txns int
	// Applied tells, by step index, which steps applied.
	Applied []bool
	// Failed holds, by group, why the group's remaining steps did not
	// apply.
	Failed map[string]error
}

// BatchError reports the groups of a Commit that did not fully apply. It
// unwraps to the first failure in step order, so errors.Is(err,
// ErrConflict) asks whether that one lost a race.
type BatchError struct {
	Failed map[string]error
	First  string
}

func (e *BatchError) Error() string {
	if len(e.Failed) == 1 {
		return fmt.Sprintf("store: batch: %s: %v", e.First, e.Failed[e.First])
	}
	return fmt.Sprintf("store: batch: %d groups failed, first %s: %v", len(e.Failed), e.First, e.Failed[e.First])
}

func (e *BatchError) Unwrap() error { return e.Failed[e.First] }

// batchRun is the state of one Commit.
type batchRun struct {
	b        *Batch
	res      BatchResult
	first    string
	maxBytes int
}

func (r *batchRun) fail(group string, err error) {
	if r.res.Failed == nil {
		r.res.Failed = map[string]error{}
	}
	if _, dup := r.res.Failed[group]; dup {
		return
	}
	r.res.Failed[group] = err
	if r.first == "" {
		r.first = group
	}
}

func (r *batchRun) failed(group string) bool {
	_, ok := r.res.Failed[group]
	return ok
}

// Commit sends the steps in order, in transactions that each fit, and
// returns what applied. The error is a *BatchError when only some groups
// failed; anything else stopped the batch (the result still says what
// applied before it).
func (b *Batch) Commit(ctx context.Context) (BatchResult, error) {
	r := &batchRun{b: b, res: BatchResult{Applied: make([]bool, len(b.steps))}, maxBytes: maxTxnBytes}
	for i := 0; i < len(b.steps); {
		t, members, owners, next, err := r.pack(i)
		if err != nil {
			return r.res, err
		}
		if len(members) == 0 {
			i = next
			continue
		}
		rev, err := t.Commit(ctx)
		if err == nil {
			r.applied(members, rev)
			i = next
			continue
		}
		// Packed again from i: without the failed group, or smaller.
		if err := r.recover(t, members, owners, err); err != nil {
			return r.res, err
		}
	}
	if len(r.res.Failed) > 0 {
		return r.res, &BatchError{Failed: r.res.Failed, First: r.first}
	}
	return r.res, nil
}

// applied records the steps of a transaction that applied at rev.
func (r *batchRun) applied(members []int, rev int64) {
	for _, m := range members {
		r.res.Applied[m] = true
	}
	if rev > 0 { // 0: nothing to send
		r.res.Revision = rev
		r.res.Txns++
	}
}

// recover handles the failure of transaction t of the steps members
// (owners: which step each key belongs to) so that packing again goes on:
// a limit learnt, or the failed group dropped. It returns an error that
// stops the batch.
func (r *batchRun) recover(t *Txn, members []int, owners map[string]int, err error) error {
	var (
		overLocal *limitError
		txnErr    *TxnError
	)
	switch {
	case errors.As(err, &overLocal):
		// Another user of the store lowered the limit since this
		// transaction was packed: pack again under the new one.
	case errors.Is(err, ErrTooManyOps) && t.Size() > 1:
		r.b.s.lowerTxnLimit(t.Size())
	case errors.Is(err, rpctypes.ErrRequestTooLarge) && len(members) > 1:
		r.maxBytes = max(t.bytes()/2, 1)
	case errors.Is(err, rpctypes.ErrRequestTooLarge):
		r.fail(r.b.steps[members[0]].group, err)
	case errors.As(err, &txnErr) && !errors.Is(err, ErrFenced):
		m, ok := owners[txnErr.Key]
		if !ok {
			return err // Every's operations: the fence moved
		}
		r.fail(r.b.steps[m].group, err)
	default:
		return err
	}
	return nil
}

// pack builds the transaction of the steps from index from on that fit
// under the limit. It returns the transaction, the steps in it, which step
// each key belongs to, and where the next transaction starts.
func (r *batchRun) pack(from int) (t *Txn, members []int, owners map[string]int, next int, err error) {
	b := r.b
	limit := b.s.maxTxnOps()
	t = b.s.Txn().Guard(b.guards...)
	if b.every != nil {
		b.every(t, r.res.Revision)
	}
	if t.err != nil {
		return nil, nil, nil, 0, t.err
	}
	cmps, ops, size := t.compares(), t.writes(), t.bytes()
	if max(cmps, ops) >= limit {
		return nil, nil, nil, 0, fmt.Errorf("store: batch: guards and per-transaction operations leave no room for a step: %w",
			&limitError{size: max(cmps, ops) + 1, limit: limit})
	}
	owners = map[string]int{}
	j := from
	for ; j < len(b.steps); j++ {
		st := b.steps[j]
		switch {
		case r.failed(st.group):
			continue
		case st.txn.err != nil:
			r.fail(st.group, st.txn.err)
			continue
		case len(st.txn.guards) > 0:
			r.fail(st.group, errors.New("store: batch: a step has guards of its own"))
			continue
		}
		c, o, by := st.txn.compares(), st.txn.writes(), st.txn.bytes()
		if max(cmps+c, ops+o) > limit {
			if len(members) == 0 {
				r.fail(st.group, &limitError{size: max(cmps+c, ops+o), limit: limit})
				continue
			}
			break
		}
		if len(members) > 0 && (size+by > r.maxBytes || touchesAny(st.txn, owners)) {
			// Full, or a key written twice: a transaction cannot hold
			// it twice, so the later write goes in the next one.
			break
		}
		t.ops = append(t.ops, st.txn.ops...)
		for _, op := range st.txn.ops {
			owners[op.key] = j
		}
		cmps, ops, size = cmps+c, ops+o, size+by
		members = append(members, j)
	}
	return t, members, owners, j, nil
}

func touchesAny(t *Txn, keys map[string]int) bool {
	for _, op := range t.ops {
		if _, ok := keys[op.key]; ok {
			return true
		}
	}
	return false
}
