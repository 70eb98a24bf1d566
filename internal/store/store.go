// Package store is Strata's typed layer over the etcd v3 client.
//
// A Store owns one key prefix (for example "/strata/global/"); every key its
// methods take or return is relative to that prefix. The untyped core (Get,
// List, Txn and the single-key writes) maps etcd's revisions onto optimistic
// concurrency: writers pass the ModRevision they read, and a lost race comes
// back as ErrConflict instead of a silent overwrite. A Guard adds a fencing
// condition to any write, so a deposed leader cannot write after it lost its
// election.
//
// On top of that sit Reflect (list, then watch with resume and relist),
// Collection (a typed view of a sub-prefix) and Cache (an in-memory copy of a
// Collection fed by Reflect).
package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Errors callers branch on. Failed writes wrap them in a *TxnError that names
// the key whose condition failed.
var (
	ErrNotFound  = errors.New("not found")
	ErrExists    = errors.New("already exists")
	ErrConflict  = errors.New("conflict: object was modified") // mod revision mismatch
	ErrFenced    = errors.New("fenced: leadership lost")       // a Guard no longer holds
	ErrCompacted = errors.New("revision compacted")
	// ErrTooManyOps reports a transaction over the operation limit: the
	// store's own (checked before sending) or etcd's --max-txn-ops.
	ErrTooManyOps = errors.New("too many operations in one transaction")
	// ErrInvalidContinue reports a continue token that this store did not
	// issue for this prefix; API servers map it to a client error.
	ErrInvalidContinue = errors.New("invalid continue token")
)

// listPageSize bounds each range request of ListAll and Reflect's lists, so
// that a large prefix never turns into one huge etcd response.
const listPageSize = 1000

// Guard is an extra condition on every write: the write applies only while
// the key exists with this create revision. The election package's leadership
// implements it (its election key), which fences a deposed leader's writes:
// losing the election deletes or replaces that key, and every write that
// carries the guard then fails with ErrFenced.
type Guard interface {
	GuardKey() string // absolute etcd key, NOT under the store prefix
	GuardRev() int64  // expected CreateRevision of that key
}

// KV is one key with its value and revisions. Key is relative to the store
// prefix.
type KV struct {
	Key            string
	Value          []byte
	CreateRevision int64
	ModRevision    int64
	Version        int64
}

// Store is a namespace of etcd keys under one prefix. It is safe for
// concurrent use; it holds no state besides the client, so any number of
// Stores may share one client.
type Store struct {
	cli    *clientv3.Client
	prefix string
	log    *slog.Logger
	limit  *txnLimit
	// progressAsked counts the times a cache of the store asked its watch
	// for a progress request (see Cache.WaitForRev), which tests of the
	// read paths that need none keep at zero.
	progressAsked *atomic.Int64
}

// DefaultMaxTxnOps is stock etcd's --max-txn-ops, the store's limit unless
// WithMaxTxnOps says otherwise.
const DefaultMaxTxnOps = 128

// txnLimit is the most operations one transaction may hold, as etcd counts
// them (see Txn.Size). It starts at the configured value and only goes
// down: when etcd refuses a transaction under it, the configuration is
// wrong for this etcd, and Batch lowers it for the rest of the process.
type txnLimit struct {
	n      atomic.Int64
	warned sync.Once
}

// Option configures a Store.
type Option func(*Store)

// WithLogger sets the logger for background work (Reflect, caches, retries).
func WithLogger(l *slog.Logger) Option {
	return func(s *Store) {
		if l != nil {
			s.log = l
		}
	}
}

// WithMaxTxnOps sets the most operations one transaction may hold, as etcd
// counts them: it must not exceed the etcd server's --max-txn-ops (tiers
// take it from etcd.maxTxnOps). Zero or less keeps DefaultMaxTxnOps.
func WithMaxTxnOps(n int) Option {
	return func(s *Store) {
		if n > 0 {
			s.limit.n.Store(int64(n))
		}
	}
}

// New returns a Store for keys under prefix. A non-empty prefix that lacks a
// trailing "/" gets one, so that "/strata/a" cannot see "/strata/ab/...".
func New(cli *clientv3.Client, prefix string, opts ...Option) *Store {
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	s := &Store{cli: cli, prefix: prefix, log: slog.New(slog.DiscardHandler), limit: &txnLimit{}, progressAsked: new(atomic.Int64)}
	s.limit.n.Store(DefaultMaxTxnOps)
	for _, o := range opts {
		o(s)
	}
	return s
}

// Client returns the etcd client, for callers that need etcd features the
// store does not wrap (leases, elections, compaction).
func (s *Store) Client() *clientv3.Client { return s.cli }

// Prefix returns the absolute key prefix of the store.
func (s *Store) Prefix() string { return s.prefix }

// Get reads one key at the latest revision. A missing key gives ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) (KV, error) {
	if key == "" {
		return KV{}, errEmptyKey
	}
	resp, err := s.cli.Get(ctx, s.prefix+key)
	if err != nil {
		return KV{}, wrapErr("get "+key, err)
	}
	if len(resp.Kvs) == 0 {
		return KV{}, fmt.Errorf("store: get %s: %w", key, ErrNotFound)
	}
	return s.kv(resp.Kvs[0]), nil
}

// Revision returns etcd's current revision, read linearizably: it is at
// least the revision of every write that committed before the call. It
// reads one key (the store's prefix itself, counted, not fetched), so it
// costs the member a quorum check and an index lookup, never a range.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	resp, err := s.cli.Get(ctx, s.prefix, clientv3.WithCountOnly())
	if err != nil {
		return 0, wrapErr("read the current revision", err)
	}
	return resp.Header.Revision, nil
}

// ListOptions selects one page of a list.
type ListOptions struct {
	// Limit caps the number of items in the page; 0 means no limit.
	Limit int64
	// Continue is the token of the previous page; it pins the revision and
	// the position, so the prefix must be the same as for that page.
	Continue string
	// Revision reads at a past revision; 0 means the latest. It may be
	// combined with Continue only if it equals the token's revision.
	Revision int64
}

// ListResult is one page of a list.
type ListResult struct {
	Items []KV
	// Continue fetches the next page; it is empty on the last page.
	Continue string
	// Revision is the revision every page of this list is read at.
	Revision int64
}

// List returns keys under prefix in key order, one page at a time. All pages
// of one list are read at the revision of the first page, so the pages
// together are a consistent snapshot however long the client takes between
// them; once etcd compacts that revision, the next page fails with
// ErrCompacted and the caller must start over.
func (s *Store) List(ctx context.Context, prefix string, opts ListOptions) (ListResult, error) {
	if opts.Limit < 0 {
		return ListResult{}, fmt.Errorf("store: list %s: negative limit %d", prefix, opts.Limit)
	}
	start, rev := prefix, opts.Revision
	if opts.Continue != "" {
		tok, err := decodeContinue(opts.Continue)
		if err != nil || !strings.HasPrefix(tok.Key, prefix) {
			return ListResult{}, fmt.Errorf("store: list %s: %w", prefix, ErrInvalidContinue)
		}
		if rev != 0 && rev != tok.Rev {
			return ListResult{}, fmt.Errorf("store: list %s: revision %d differs from the continue token's %d: %w",
				prefix, rev, tok.Rev, ErrInvalidContinue)
		}
		// The token holds the last key returned; "\x00" is the smallest
		// suffix, so the next page starts right after it.
		start, rev = tok.Key+"\x00", tok.Rev
	}
	items, more, rev, err := s.listPage(ctx, prefix, start, rev, opts.Limit)
	if err != nil {
		return ListResult{}, err
	}
	res := ListResult{Items: items, Revision: rev}
	if more && len(items) > 0 {
		res.Continue = encodeContinue(continueToken{Rev: rev, Key: items[len(items)-1].Key})
	}
	return res, nil
}

// ListAll returns every key under prefix, read page by page at one revision,
// and that revision.
func (s *Store) ListAll(ctx context.Context, prefix string) ([]KV, int64, error) {
	var (
		all   []KV
		start = prefix
		rev   int64
	)
	for {
		items, more, r, err := s.listPage(ctx, prefix, start, rev, listPageSize)
		if err != nil {
			return nil, 0, err
		}
		rev = r
		all = append(all, items...)
		if !more || len(items) == 0 {
			return all, rev, nil
		}
		start = items[len(items)-1].Key + "\x00"
	}
}

// listPage reads up to limit keys in [start, end of prefix) at rev (0 =
// latest) and returns them, whether more follow, and the revision read at.
func (s *Store) listPage(ctx context.Context, prefix, start string, rev, limit int64) ([]KV, bool, int64, error) {
	key, end := s.prefixRange(prefix)
	if start != prefix {
		key = s.prefix + start
	}
	opts := []clientv3.OpOption{clientv3.WithRange(end)}
	if limit > 0 {
		opts = append(opts, clientv3.WithLimit(limit))
	}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := s.cli.Get(ctx, key, opts...)
	if err != nil {
		return nil, false, 0, wrapErr("list "+prefix, err)
	}
	if rev == 0 {
		rev = resp.Header.Revision
	}
	items := make([]KV, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		items[i] = s.kv(kv)
	}
	return items, resp.More, rev, nil
}

// Create writes key only if it does not exist (ErrExists otherwise) and
// returns the revision of the write.
func (s *Store) Create(ctx context.Context, key string, val []byte, g ...Guard) (int64, error) {
	return s.Txn().Guard(g...).Create(key, val).Commit(ctx)
}

// Update writes key only if its ModRevision is still modRev: ErrConflict if
// it changed, ErrNotFound if it is gone.
func (s *Store) Update(ctx context.Context, key string, val []byte, modRev int64, g ...Guard) (int64, error) {
	return s.Txn().Guard(g...).Update(key, val, modRev).Commit(ctx)
}

// Put writes key whatever its state.
func (s *Store) Put(ctx context.Context, key string, val []byte, g ...Guard) (int64, error) {
	return s.Txn().Guard(g...).Put(key, val).Commit(ctx)
}

// Delete removes key. With modRev > 0 it applies only at that ModRevision
// (ErrConflict otherwise); with modRev 0 it is unconditional. Either way a
// missing key gives ErrNotFound, because a caller deleting one object wants
// to know it was not there.
func (s *Store) Delete(ctx context.Context, key string, modRev int64, g ...Guard) (int64, error) {
	resp, err := s.Txn().Guard(g...).Delete(key, modRev).commit(ctx)
	if err != nil {
		return 0, err
	}
	if del := resp.Responses[0].GetResponseDeleteRange(); del == nil || del.Deleted == 0 {
		return 0, &TxnError{Key: key, Err: ErrNotFound}
	}
	return resp.Header.Revision, nil
}

// DeletePrefix removes every key under prefix; "" removes the whole store.
func (s *Store) DeletePrefix(ctx context.Context, prefix string, g ...Guard) (int64, error) {
	return s.Txn().Guard(g...).DeletePrefix(prefix).Commit(ctx)
}

// prefixRange returns the absolute [key, end) range of a relative prefix.
func (s *Store) prefixRange(prefix string) (key, end string) {
	key = s.prefix + prefix
	if key == "" {
		// etcd rejects an empty key; ["\x00", "\x00") means every key.
		return "\x00", "\x00"
	}
	return key, clientv3.GetPrefixRangeEnd(key)
}

func (s *Store) kv(kv *mvccpb.KeyValue) KV {
	key := kv.Key
	if len(key) >= len(s.prefix) && string(key[:len(s.prefix)]) == s.prefix {
		// Trimmed before the conversion: a cache keeps Key's memory for
		// as long as it holds the object, and the store's prefix is
		// the same in every key.
		key = key[len(s.prefix):]
	}
	return KV{
		Key:            string(key),
		Value:          kv.Value,
		CreateRevision: kv.CreateRevision,
		ModRevision:    kv.ModRevision,
		Version:        kv.Version,
	}
}

var errEmptyKey = errors.New("store: empty key")

// wrapErr adds context to an etcd error and maps compaction onto
// ErrCompacted and an oversized transaction onto ErrTooManyOps, keeping
// the etcd error in the chain too.
func wrapErr(op string, err error) error {
	if errors.Is(err, rpctypes.ErrCompacted) {
		return fmt.Errorf("store: %s: %w: %w", op, ErrCompacted, err)
	}
	if errors.Is(err, rpctypes.ErrTooManyOps) {
		return fmt.Errorf("store: %s: %w: %w", op, ErrTooManyOps, err)
	}
	return fmt.Errorf("store: %s: %w", op, err)
}

// continueToken is what a continue string encodes. It is opaque to callers
// but not secret: it only repeats the last key they were given.
type continueToken struct {
	Rev int64  `json:"r"`
	Key string `json:"k"`
}

func encodeContinue(t continueToken) string {
	b, _ := json.Marshal(t) // cannot fail: an int and a string
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(s string) (continueToken, error) {
	var t continueToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return t, err
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return t, err
	}
	if t.Rev <= 0 || t.Key == "" {
		return t, errors.New("incomplete token")
	}
	return t, nil
}

// MaxTxnOps is the most operations one transaction may hold now: the
// configured limit, or lower once etcd refused a transaction under it.
func (s *Store) MaxTxnOps() int { return s.maxTxnOps() }

func (s *Store) maxTxnOps() int { return int(s.limit.n.Load()) }

// lowerTxnLimit halves the limit below a transaction of size ops that etcd
// refused as too large, and returns the new limit. The limit is shared by
// every user of the store and never goes back up: the server will refuse
// that size again.
func (s *Store) lowerTxnLimit(size int) int {
	want := int64(max(size/2, 1))
	for {
		cur := s.limit.n.Load()
		if cur <= want {
			return int(cur)
		}
		if s.limit.n.CompareAndSwap(cur, want) {
			s.limit.warned.Do(func() {
				s.log.Warn("etcd refused a transaction as too large: the configured etcd.maxTxnOps is above the server's --max-txn-ops; using a lower limit from now on",
					"refused", size, "limit", want)
			})
			s.log.Debug("store: transaction limit lowered", "refused", size, "limit", want)
			return int(want)
		}
	}
}

// EnsureTxnLimit checks at a tier's start that etcd takes transactions as
// large as the store is configured for (etcd.maxTxnOps). A limit above the
// server's --max-txn-ops is an error naming both; failing to ask (etcd
// briefly away) is only logged, since Batch lowers the limit anyway if etcd
// ever refuses a transaction as too large.
func (s *Store) EnsureTxnLimit(ctx context.Context) error {
	err := s.CheckTxnLimit(ctx)
	switch {
	case errors.Is(err, ErrTooManyOps):
		return fmt.Errorf("etcd.maxTxnOps is %d but etcd refuses transactions that large: set etcd.maxTxnOps no higher than the etcd server's --max-txn-ops (128 unless set): %w",
			s.MaxTxnOps(), err)
	case err != nil && ctx.Err() == nil:
		s.log.Warn("could not check etcd.maxTxnOps against etcd", "maxTxnOps", s.MaxTxnOps(), "err", err)
	}
	return nil
}

// CheckTxnLimit sends a harmless transaction of exactly the store's limit
// (comparisons and reads of one key under the prefix, no writes), so that a
// limit above the etcd server's --max-txn-ops fails at start rather than on
// the first large write. It checks the member the client talks to; a
// member with a lower limit found later makes Batch lower the limit.
func (s *Store) CheckTxnLimit(ctx context.Context) error {
	n := s.maxTxnOps()
	key := s.prefix + "txn-limit-probe"
	cmps := make([]clientv3.Cmp, n)
	reads := make([]clientv3.Op, n)
	for i := range n {
		cmps[i] = clientv3.Compare(clientv3.CreateRevision(key), ">", -1)
		reads[i] = clientv3.OpGet(key, clientv3.WithCountOnly())
	}
	_, err := s.cli.Txn(ctx).If(cmps...).Then(reads...).Else(reads...).Commit()
	if errors.Is(err, rpctypes.ErrTooManyOps) {
		return fmt.Errorf("store: etcd refused a transaction of %d operations (the store's limit): %w: %w", n, ErrTooManyOps, err)
	}
	if err != nil {
		return wrapErr("probe transaction limit", err)
	}
	return nil
}
