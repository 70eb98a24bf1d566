package framework

import (
	"sync"
	"testing"
	"time"
)

// Sample calls fn every interval on its own goroutine until the returned
// stop is called or the test ends; stop waits for a call in progress and
// may be called more than once. fn must be safe to run concurrently with
// the test (guard what it records).
func Sample(t testing.TB, every time.Duration, fn func()) (stop func()) {
	t.Helper()
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			fn()
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() { close(quit) })
		<-done
	}
	t.Cleanup(stop)
	return stop
}
