package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/backoff"
)

// ErrNoChange is returned by a Modify function to skip the write.
var ErrNoChange = errors.New("no change")

// The retry policy of optimistic writes (RetryConflicts). Every conflict
// means another writer won, so the bound only stops a livelock; it is
// generous because one hot key is a lottery: with 8 writers hammering one
// key under the race detector, about one Modify in a thousand needed more
// than 16 attempts (none more than 30). Full jitter spreads the
// contenders, and the delay grows with the attempt so that heavy
// contention thins itself out.
const (
	modifyAttempts = 64
	modifyMaxDelay = 100 * time.Millisecond
)

// Codec turns values into bytes and back.
type Codec[T any] interface {
	Marshal(*T) ([]byte, error)
	Unmarshal([]byte, *T) error
}

// JSON returns a Codec using encoding/json.
func JSON[T any]() Codec[T] { return jsonCodec[T]{} }

type jsonCodec[T any] struct{}

func (jsonCodec[T]) Marshal(v *T) ([]byte, error)   { return json.Marshal(v) }
func (jsonCodec[T]) Unmarshal(b []byte, v *T) error { return json.Unmarshal(b, v) }

// Item is one decoded object of a Collection.
type Item[T any] struct {
	Name           string
	Value          *T
	CreateRevision int64
	ModRevision    int64
}

// Page is one page of Collection.List.
type Page[T any] struct {
	Items []Item[T]
	// Continue fetches the next page; it is empty on the last page.
	Continue string
	// Revision is the revision every page of this list is read at.
	Revision int64
}

// Collection is a typed view of the objects under one prefix of a Store.
// Object names are keys relative to that prefix and may contain "/" (for
// example "tenant/name"), which makes ListPrefix a cheap scoped list.
type Collection[T any] struct {
	s      *Store
	prefix string
	codec  Codec[T]
}

// NewCollection returns the collection under prefix (relative to the store
// prefix, for example "resources/"). A non-empty prefix gets a trailing "/"
// if it lacks one, so that sibling collections never overlap.
func NewCollection[T any](s *Store, prefix string, c Codec[T]) *Collection[T] {
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &Collection[T]{s: s, prefix: prefix, codec: c}
}

// Store returns the store the collection lives in.
func (c *Collection[T]) Store() *Store { return c.s }

// Prefix returns the collection prefix, relative to the store prefix.
func (c *Collection[T]) Prefix() string { return c.prefix }

// Codec returns the codec the collection stores its objects with.
func (c *Collection[T]) Codec() Codec[T] { return c.codec }

// Key returns the store-relative key of an object.
func (c *Collection[T]) Key(name string) string { return c.prefix + name }

// Name returns the object name of a store-relative key; it is the inverse of
// Key.
func (c *Collection[T]) Name(key string) string { return strings.TrimPrefix(key, c.prefix) }

// Decode turns a KV of this collection into an Item.
func (c *Collection[T]) Decode(kv KV) (Item[T], error) {
	v := new(T)
	if err := c.codec.Unmarshal(kv.Value, v); err != nil {
		return Item[T]{}, fmt.Errorf("store: decode %s: %w", kv.Key, err)
	}
	return Item[T]{
		Name:           c.Name(kv.Key),
		Value:          v,
		CreateRevision: kv.CreateRevision,
		ModRevision:    kv.ModRevision,
	}, nil
}

// Get reads one object; a missing one gives ErrNotFound.
func (c *Collection[T]) Get(ctx context.Context, name string) (Item[T], error) {
	if name == "" {
		return Item[T]{}, errEmptyName
	}
	kv, err := c.s.Get(ctx, c.Key(name))
	if err != nil {
		return Item[T]{}, err
	}
	return c.Decode(kv)
}

// List returns one page of the collection, in name order; see Store.List
// for how pages stay consistent. Objects that fail to decode are logged and
// left out, so that one bad record cannot hide all the others.
func (c *Collection[T]) List(ctx context.Context, opts ListOptions) (Page[T], error) {
	res, err := c.s.List(ctx, c.prefix, opts)
	if err != nil {
		return Page[T]{}, err
	}
	return Page[T]{Items: c.decodeAll(res.Items), Continue: res.Continue, Revision: res.Revision}, nil
}

// ListPrefixPage is List for the objects whose name starts with
// namePrefix (one tenant's); a Continue token is valid for the same
// prefix only.
func (c *Collection[T]) ListPrefixPage(ctx context.Context, namePrefix string, opts ListOptions) (Page[T], error) {
	res, err := c.s.List(ctx, c.prefix+namePrefix, opts)
	if err != nil {
		return Page[T]{}, err
	}
	return Page[T]{Items: c.decodeAll(res.Items), Continue: res.Continue, Revision: res.Revision}, nil
}

// ListAll returns every object and the revision it was read at.
func (c *Collection[T]) ListAll(ctx context.Context) ([]Item[T], int64, error) {
	return c.ListPrefix(ctx, "")
}

// ListPrefix returns every object whose name starts with namePrefix, and the
// revision it was read at.
func (c *Collection[T]) ListPrefix(ctx context.Context, namePrefix string) ([]Item[T], int64, error) {
	kvs, rev, err := c.s.ListAll(ctx, c.prefix+namePrefix)
	if err != nil {
		return nil, 0, err
	}
	return c.decodeAll(kvs), rev, nil
}

func (c *Collection[T]) decodeAll(kvs []KV) []Item[T] {
	items := make([]Item[T], 0, len(kvs))
	for _, kv := range kvs {
		it, err := c.Decode(kv)
		if err != nil {
			c.s.log.Error("store: skipping undecodable object", "key", c.s.prefix+kv.Key,
				"mod_revision", kv.ModRevision, "err", err)
			continue
		}
		items = append(items, it)
	}
	return items
}

// Create writes a new object (ErrExists if it exists) and returns the
// revision of the write.
func (c *Collection[T]) Create(ctx context.Context, name string, v *T, g ...Guard) (int64, error) {
	t := c.s.Txn().Guard(g...)
	if err := c.TxnCreate(t, name, v); err != nil {
		return 0, err
	}
	return t.Commit(ctx)
}

// Update writes an object read at modRev: ErrConflict if it changed since,
// ErrNotFound if it is gone.
func (c *Collection[T]) Update(ctx context.Context, name string, v *T, modRev int64, g ...Guard) (int64, error) {
	t := c.s.Txn().Guard(g...)
	if err := c.TxnUpdate(t, name, v, modRev); err != nil {
		return 0, err
	}
	return t.Commit(ctx)
}

// Put writes an object whatever its state.
func (c *Collection[T]) Put(ctx context.Context, name string, v *T, g ...Guard) (int64, error) {
	t := c.s.Txn().Guard(g...)
	if err := c.TxnPut(t, name, v); err != nil {
		return 0, err
	}
	return t.Commit(ctx)
}

// Delete removes an object, at modRev if it is positive; see Store.Delete.
func (c *Collection[T]) Delete(ctx context.Context, name string, modRev int64, g ...Guard) (int64, error) {
	if name == "" {
		return 0, errEmptyName
	}
	return c.s.Delete(ctx, c.Key(name), modRev, g...)
}

// TxnCreate adds a Create of the object to t. An error (bad name, marshal
// failure) is also recorded in t, so Commit fails even if the caller ignores
// it.
func (c *Collection[T]) TxnCreate(t *Txn, name string, v *T) error {
	b, err := c.encode(t, name, v)
	if err == nil {
		t.Create(c.Key(name), b)
	}
	return err
}

// TxnUpdate adds an Update of the object at modRev to t; errors as for
// TxnCreate.
func (c *Collection[T]) TxnUpdate(t *Txn, name string, v *T, modRev int64) error {
	b, err := c.encode(t, name, v)
	if err == nil {
		t.Update(c.Key(name), b, modRev)
	}
	return err
}

// TxnPut adds a Put of the object to t; errors as for TxnCreate.
func (c *Collection[T]) TxnPut(t *Txn, name string, v *T) error {
	b, err := c.encode(t, name, v)
	if err == nil {
		t.Put(c.Key(name), b)
	}
	return err
}

// TxnDelete adds a Delete of the object to t; see Txn.Delete for modRev.
func (c *Collection[T]) TxnDelete(t *Txn, name string, modRev int64) {
	if name == "" {
		t.fail(errEmptyName)
		return
	}
	t.Delete(c.Key(name), modRev)
}

// TxnRequire adds to t the condition that the object exists with
// CreateRevision createRev; see Txn.Require.
func (c *Collection[T]) TxnRequire(t *Txn, name string, createRev int64) {
	if name == "" {
		t.fail(errEmptyName)
		return
	}
	t.Require(c.Key(name), createRev)
}

// TxnUnchanged adds Txn.Unchanged for the named object: it must still be
// at modRev (absent for 0).
func (c *Collection[T]) TxnUnchanged(t *Txn, name string, modRev int64) {
	if name == "" {
		t.fail(errEmptyName)
		return
	}
	t.Unchanged(c.Key(name), modRev)
}

// TxnUnchangedSince adds Txn.UnchangedSince for the objects whose names
// start with namePrefix: none written after rev.
func (c *Collection[T]) TxnUnchangedSince(t *Txn, namePrefix string, rev int64) {
	t.UnchangedSince(c.Key(namePrefix), rev)
}

func (c *Collection[T]) encode(t *Txn, name string, v *T) ([]byte, error) {
	var err error
	switch {
	case name == "":
		err = errEmptyName
	case v == nil:
		err = fmt.Errorf("store: %s: nil value", c.Key(name))
	}
	if err != nil {
		t.fail(err)
		return nil, err
	}
	b, err := c.codec.Marshal(v)
	if err != nil {
		err = fmt.Errorf("store: encode %s: %w", c.Key(name), err)
		t.fail(err)
		return nil, err
	}
	return b, nil
}

// Modify is a read-modify-write of one object: it reads the object, lets fn
// change it, and writes it back at the revision it read. When another writer
// wins in between it starts over with a fresh read (RetryConflicts).
//
// fn gets a freshly decoded value on every attempt, so it may run more than
// once and must not carry state between runs. If fn returns ErrNoChange,
// nothing is written and Modify returns the object as stored; any other
// error aborts Modify and is returned as is. A missing object gives
// ErrNotFound; a failed guard gives ErrFenced without retrying.
func (c *Collection[T]) Modify(ctx context.Context, name string, fn func(*T) error, g ...Guard) (Item[T], error) {
	if name == "" {
		return Item[T]{}, errEmptyName
	}
	var out Item[T]
	err := c.s.RetryConflicts(ctx, "modify "+c.Key(name), func() error {
		kv, err := c.s.Get(ctx, c.Key(name))
		if err != nil {
			return err
		}
		it, err := c.Decode(kv)
		if err != nil {
			return err
		}
		if err := fn(it.Value); errors.Is(err, ErrNoChange) {
			// Decode again: fn may have changed the value before it
			// decided there was nothing to write.
			out, err = c.Decode(kv)
			return err
		} else if err != nil {
			return err
		}
		rev, err := c.Update(ctx, name, it.Value, it.ModRevision, g...)
		if err != nil {
			return err
		}
		it.ModRevision = rev
		out = it
		return nil
	})
	if err != nil {
		return Item[T]{}, err
	}
	return out, nil
}

// RetryConflicts runs write, an optimistic read-modify-write, until it
// returns anything but ErrConflict: each conflict means another writer
// won between write's read and its commit, and write starts over from a
// fresh read. It pauses a short jittered while between attempts and gives
// up after modifyAttempts, with the last conflict, naming what. This is
// the one retry policy of optimistic writes (Modify, and the API's own
// read-modify-writes that write more than one object).
func (s *Store) RetryConflicts(ctx context.Context, what string, write func() error) error {
	for attempt := 1; ; attempt++ {
		err := write()
		if !errors.Is(err, ErrConflict) {
			return err
		}
		if attempt == modifyAttempts {
			return fmt.Errorf("store: %s: gave up after %d attempts: %w", what, attempt, err)
		}
		s.log.Debug("store: write conflict; retrying", "what", what, "attempt", attempt, "err", err)
		if err := backoff.Sleep(ctx, modifyDelay(attempt)); err != nil {
			return err
		}
	}
}

// modifyBackoff spreads the retries of RetryConflicts: uniform in [0, d), d
// doubling from 1ms up to modifyMaxDelay.
var modifyBackoff = backoff.Backoff{Min: time.Millisecond, Max: modifyMaxDelay, Jitter: backoff.Full}

// modifyDelay is the pause after the attempt-th conflict: uniform in
// [0, min(2^attempt ms, modifyMaxDelay)).
func modifyDelay(attempt int) time.Duration { return modifyBackoff.Delay(attempt + 1) }

var errEmptyName = errors.New("store: empty object name")
