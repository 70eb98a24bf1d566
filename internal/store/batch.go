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
// carrying the batch's guards, and sends several at once (see Commit).
//
// Steps belong to groups (one resource, say). A step never applies before
// an earlier step of its group, nor before an earlier write of one of its
// keys: writers order each group's steps so that every prefix is a valid
// state (a resource's replicas before its summary), and a batch that
// stops half-way leaves such a state. Steps of different groups that
// share no key may apply in any order. When a step's condition
// fails, the rest of its group is dropped and the other groups go on. A
// failed guard (ErrFenced), a failed condition of Every's operations or
// of Unchanged, or any error that names no step stops the whole batch.
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
	fences []txnOp // Unchanged conditions of every transaction
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

// Unchanged adds to every transaction of the batch the condition that
// key is at ModRevision modRev (absent for 0), as Txn.Unchanged: a fence
// that stays put, such as a key another writer moves to take over. Unlike
// Every's, it does not chain the transactions, so they still go several
// at once. A failed fence stops the batch (ErrConflict).
func (b *Batch) Unchanged(key string, modRev int64) *Batch {
	b.fences = append(b.fences, txnOp{kind: opUnchanged, key: key, modRev: modRev})
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

// maxInFlight bounds the transactions of one Commit that are sent and not
// yet answered. etcd commits proposals that arrive together in one raft
// entry (one fsync on each member), so a batch of many transactions costs
// a few round trips instead of one each.
const maxInFlight = 8

// maxPassedOver bounds the waiting steps pack passes over, because they
// share a group or a key with a transaction in flight, before it stops
// looking for steps it may send.
const maxPassedOver = 1024

// stepState is where a step of a Commit stands.
type stepState uint8

const (
	stepWaiting stepState = iota // not sent, or to send again
	stepSent                     // in a transaction not yet answered
	stepDone                     // applied, or dropped with its group
)

// batchRun is the state of one Commit.
type batchRun struct {
	b        *Batch
	res      BatchResult
	first    int // step index of the first failed group, -1 for none
	maxBytes int
	state    []stepState
	// lo is the first step not done.
	lo int
	// flying counts the transactions sent and not answered; busy what
	// their steps claim: a step that shares a group or a key with one of
	// them waits for its answer, so that each group's steps and each
	// key's writes still apply in the batch's order.
	flying  int
	busy    claims
	answers chan *flight
}

// claims counts the steps that hold each group and key, and the steps.
type claims struct {
	groups, keys map[string]int
	steps        int
}

// add counts step st n more times (n < 0: fewer).
func (c *claims) add(st batchStep, n int) {
	if c.groups == nil {
		c.groups, c.keys = map[string]int{}, map[string]int{}
	}
	c.steps += n
	bump(c.groups, st.group, n)
	for _, op := range st.txn.ops {
		bump(c.keys, op.key, n)
	}
}

func bump(m map[string]int, k string, n int) {
	if m[k] += n; m[k] == 0 {
		delete(m, k)
	}
}

// has reports whether st shares its group or a key with a counted step.
func (c *claims) has(st batchStep) bool {
	if c.groups[st.group] > 0 {
		return true
	}
	for _, op := range st.txn.ops {
		if c.keys[op.key] > 0 {
			return true
		}
	}
	return false
}

// flight is one transaction of a Commit and its answer.
type flight struct {
	t       *Txn
	members []int
	owners  map[string]int // which step each key belongs to
	rev     int64
	err     error
}

func (r *batchRun) fail(step int, err error) {
	group := r.b.steps[step].group
	if r.res.Failed == nil {
		r.res.Failed = map[string]error{}
	}
	if _, dup := r.res.Failed[group]; dup {
		return
	}
	r.res.Failed[group] = err
	if r.first < 0 || step < r.first {
		r.first = step
	}
}

func (r *batchRun) failed(group string) bool {
	_, ok := r.res.Failed[group]
	return ok
}

// Commit sends the steps in transactions that each fit and returns what
// applied. Up to maxInFlight transactions are in flight at once, except
// with Every, whose fence follows the revision of the previous
// transaction: then they go one at a time. A step never goes before an
// earlier step of its group or an earlier write of one of its keys has
// applied, so each group's steps apply in order; steps of different
// groups may apply in any order. The error is a *BatchError when only
// some groups failed; anything else stopped the batch (the result still
// says what applied, also in the transactions that were in flight).
func (b *Batch) Commit(ctx context.Context) (BatchResult, error) {
	r := &batchRun{
		b:        b,
		res:      BatchResult{Applied: make([]bool, len(b.steps))},
		first:    -1,
		maxBytes: maxTxnBytes,
		state:    make([]stepState, len(b.steps)),
		answers:  make(chan *flight, maxInFlight),
	}
	depth := maxInFlight
	if b.every != nil {
		depth = 1
	}
	var stop error
	for {
		if stop == nil && r.flying < depth {
			sent, err := r.sendNext(ctx)
			if err != nil {
				stop = err
			}
			if sent {
				continue
			}
		}
		if r.flying == 0 {
			break
		}
		if err := r.land(<-r.answers); err != nil && stop == nil {
			stop = err
		}
	}
	if stop != nil {
		return r.res, stop
	}
	if len(r.res.Failed) > 0 {
		return r.res, &BatchError{Failed: r.res.Failed, First: b.steps[r.first].group}
	}
	return r.res, nil
}

// sendNext packs the next transaction and sends it; it reports whether it
// sent one (false: nothing is left to send, or what is next waits for a
// transaction in flight).
func (r *batchRun) sendNext(ctx context.Context) (bool, error) {
	t, members, owners, err := r.pack()
	if err != nil || len(members) == 0 {
		return false, err
	}
	f := &flight{t: t, members: members, owners: owners}
	for _, m := range members {
		r.state[m] = stepSent
		r.busy.add(r.b.steps[m], 1)
	}
	r.flying++
	go func() {
		f.rev, f.err = t.Commit(ctx)
		r.answers <- f
	}()
	return true, nil
}

// land records the answer of a transaction in flight. It returns an error
// that stops the batch.
func (r *batchRun) land(f *flight) error {
	r.flying--
	for _, m := range f.members {
		r.busy.add(r.b.steps[m], -1)
	}
	if f.err == nil {
		r.applied(f.members, f.rev)
		return nil
	}
	// Packed again: without the failed group, or smaller.
	for _, m := range f.members {
		r.state[m] = stepWaiting
	}
	return r.recover(f.t, f.members, f.owners, f.err)
}

// applied records the steps of a transaction that applied at rev.
func (r *batchRun) applied(members []int, rev int64) {
	for _, m := range members {
		r.state[m] = stepDone
		r.res.Applied[m] = true
	}
	if rev > 0 { // 0: nothing to send
		r.res.Revision = max(r.res.Revision, rev)
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
		r.maxBytes = max(min(r.maxBytes, t.bytes()/2), 1)
	case errors.Is(err, rpctypes.ErrRequestTooLarge):
		r.fail(members[0], err)
	case errors.As(err, &txnErr) && !errors.Is(err, ErrFenced):
		m, ok := owners[txnErr.Key]
		if !ok {
			return err // Every's operations or Unchanged: the fence moved
		}
		r.fail(m, err)
	default:
		return err
	}
	return nil
}

// pack builds the next transaction: the waiting steps, in order, that fit
// under the limit, passing over those that share a group or a key with a
// transaction in flight or with a step passed over. It returns the
// transaction, the steps in it and which step each key belongs to; no
// steps when there is nothing to send now.
func (r *batchRun) pack() (t *Txn, members []int, owners map[string]int, err error) {
	b := r.b
	limit := b.s.maxTxnOps()
	t = r.fenced()
	if t.err != nil {
		return nil, nil, nil, t.err
	}
	cmps, ops, size := t.compares(), t.writes(), t.bytes()
	if max(cmps, ops) >= limit {
		return nil, nil, nil, fmt.Errorf("store: batch: guards and per-transaction operations leave no room for a step: %w",
			&limitError{size: max(cmps, ops) + 1, limit: limit})
	}
	owners = map[string]int{}
	for r.lo < len(b.steps) && r.state[r.lo] == stepDone {
		r.lo++
	}
	var held claims // steps passed over: what follows them must wait too
	// A batch of one group (a resource of 10,000 replicas) has nothing to
	// send while its transaction flies: looking further than a few
	// transactions' worth would make each answer cost a walk over every
	// step left.
	for j := r.lo; j < len(b.steps) && held.steps <= maxPassedOver; j++ {
		if !r.ready(j, &held) {
			continue
		}
		st := b.steps[j]
		c, o, by := st.txn.compares(), st.txn.writes(), st.txn.bytes()
		if max(cmps+c, ops+o) > limit {
			if len(members) == 0 {
				r.state[j] = stepDone
				r.fail(j, &limitError{size: max(cmps+c, ops+o), limit: limit})
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
	return t, members, owners, nil
}

// fenced starts a transaction with what every one of the batch carries:
// its guards, Every's operations and the Unchanged conditions.
func (r *batchRun) fenced() *Txn {
	b := r.b
	t := b.s.Txn().Guard(b.guards...)
	if b.every != nil {
		b.every(t, r.res.Revision)
	}
	for _, f := range b.fences {
		t.Unchanged(f.key, f.modRev)
	}
	return t
}

// ready reports whether step j may go in the transaction being packed: it
// waits to be sent, its group did not fail, and it shares no group or key
// with a transaction in flight or a step passed over (held, which it then
// joins).
func (r *batchRun) ready(j int, held *claims) bool {
	if r.state[j] != stepWaiting || r.drop(j) {
		return false
	}
	if st := r.b.steps[j]; r.busy.has(st) || held.has(st) {
		held.add(st, 1)
		return false
	}
	return true
}

// drop marks step j done without sending it when its group failed or the
// step cannot be sent, and reports whether it did.
func (r *batchRun) drop(j int) bool {
	st := r.b.steps[j]
	switch {
	case r.failed(st.group):
	case st.txn.err != nil:
		r.fail(j, st.txn.err)
	case len(st.txn.guards) > 0:
		r.fail(j, errors.New("store: batch: a step has guards of its own"))
	default:
		return false
	}
	r.state[j] = stepDone
	return true
}

func touchesAny(t *Txn, keys map[string]int) bool {
	for _, op := range t.ops {
		if _, ok := keys[op.key]; ok {
			return true
		}
	}
	return false
}
