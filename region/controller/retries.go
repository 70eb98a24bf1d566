package controller

import (
	"time"

	"github.com/stratahq/strata/internal/backoff"
)

// retries owns the back-off of each resource whose replicas failed, in
// memory: a new leader starts afresh.
type retries struct {
	o     *Options
	byKey map[string]*retry
}

// reset forgets every back-off.
func (rt *retries) reset() { rt.byKey = map[string]*retry{} }

// next is when key's resource may replace a failed replica again.
func (rt *retries) next(key string) time.Time { return rt.byKey[key].next }

type retry struct {
	failures int
	next     time.Time
	// readySince is when the resource was first seen ready again after
	// its last failure: the back-off is forgotten only once it has stayed
	// ready for MaxBackoff (see readyAgain).
	readySince time.Time
}

// allow reports whether key's resource may replace a failed replica
// now, and counts the failure when it may.
func (rt *retries) allow(key string, now time.Time) bool {
	r := rt.byKey[key]
	if r != nil && !r.readySince.IsZero() && now.Sub(r.readySince) >= rt.o.MaxBackoff {
		// Ready for long enough since the last failure: start afresh.
		r = nil
	}
	if r == nil {
		r = &retry{}
		rt.byKey[key] = r
	} else {
		r.readySince = time.Time{}
		if now.Before(r.next) {
			return false
		}
	}
	r.failures++
	r.next = now.Add(backoff.Backoff{Min: rt.o.RetryBackoff, Max: rt.o.MaxBackoff}.Delay(r.failures))
	return true
}

// readyAgain notes that key's resource is ready. Its back-off is
// forgotten only once it has stayed ready for MaxBackoff: a replacement
// becomes ready for a moment before it fails the same way (an OOM kill or
// a crash soon after start), and forgetting the back-off then would
// replace it again at once, in a tight loop, and hide the error. The
// resource is looked at again then, so that the record goes.
func (rt *retries) readyAgain(v *view, key string) {
	r := rt.byKey[key]
	switch {
	case r == nil:
		return
	case r.readySince.IsZero():
		r.readySince = v.now
	case v.now.Sub(r.readySince) >= rt.o.MaxBackoff:
		delete(rt.byKey, key)
		return
	}
	v.changesAt(key, r.readySince.Add(rt.o.MaxBackoff))
}
