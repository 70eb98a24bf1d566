package store

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// fakeRunner is a cache that is synced once its channel is closed and whose
// Run returns err at once (or waits for ctx when err is nil).
type fakeRunner struct {
	synced chan struct{}
	err    error
}

func (f *fakeRunner) Run(ctx context.Context) error {
	if f.err != nil {
		return f.err
	}
	<-ctx.Done()
	return nil
}

func (f *fakeRunner) Synced() <-chan struct{} { return f.synced }

func TestCacheSet(t *testing.T) {
	a, b := &fakeRunner{synced: make(chan struct{})}, &fakeRunner{synced: make(chan struct{})}
	set := NewCacheSet("region", a, b)
	if set.IsSynced() {
		t.Error("IsSynced with no cache synced: got true; want false")
	}
	close(a.synced)
	if set.IsSynced() {
		t.Error("IsSynced with one cache of two synced: got true; want false")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := set.WaitSynced(ctx); !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "region caches not loaded") {
		t.Errorf("WaitSynced, cancelled: got %v; want context.Canceled named for the region", err)
	}
	close(b.synced)
	if !set.IsSynced() || set.WaitSynced(t.Context()) != nil {
		t.Error("every cache synced: IsSynced false or WaitSynced failed")
	}
	boom := errors.New("boom")
	failing := NewCacheSet("global", a, &fakeRunner{synced: b.synced, err: boom})
	if err := failing.Run(t.Context()); !errors.Is(err, boom) {
		t.Errorf("Run with a failing cache: got %v; want boom", err)
	}
}
