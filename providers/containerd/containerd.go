// Package containerd is the container provider: it runs an agent's
// container replicas in containerd, networks them with CNI (a bridge per
// region network, the address the region's IPAM chose), keeps local
// volumes as directories, and supervises restarts.
//
// Everything lives in one containerd namespace per agent and carries the
// labels strata.io/assignment, strata.io/generation and strata.io/kind,
// so that the provider keeps no database: Status and List read containerd
// (and, for volumes, one small JSON file per volume), and a provider made
// after an agent restart finds its replicas where the previous one left
// them. Closing the provider stops its supervision, never its replicas.
//
// A replica is one containerd container named after the assignment id,
// with a snapshot of the same name, a task whose output goes to
// <LogRoot>/<id>.log (appended by a small logger the shim runs, so that
// it outlives agent restarts), and a network namespace
// <NetNSDir>/<namespace>-<id> set up by the CNI conflist
// <CNIConfDir>/<id>.conflist. A pod's other containers (spec.compute.
// containers) are containers <id>.<name> of their own, with their own
// snapshot, task, log file <id>.<name>.log, restarts and back-off,
// joining that network namespace (see pod.go); its scratch volumes are
// directories <StateDir>/scratch/<id>/<name>.
package containerd

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/containerd/containerd/v2/pkg/identifiers"
	"github.com/containerd/errdefs"
)

// Labels on everything the provider creates in containerd. The first
// three are the contract with List; the others carry what Status and the
// supervisor need after an agent restart.
const (
	LabelAssignment = "strata.io/assignment"
	LabelGeneration = "strata.io/generation"
	LabelKind       = "strata.io/kind"

	// labelSpec is a digest of what a replacement container would get
	// (image, command, resources, mounts, network): equal digests mean
	// nothing to recreate.
	labelSpec = "strata.io/spec"
	// labelRestart is the restart policy, read by the supervisor on
	// every exit; changing it needs no new container.
	labelRestart = "strata.io/restart-policy"
	// labelGrace is the stop grace period (a Go duration).
	labelGrace     = "strata.io/stop-grace"
	labelMemoryMiB = "strata.io/memory-mib"
	labelAddress   = "strata.io/address"
	// labelRestarts counts task restarts of this replica.
	labelRestarts = "strata.io/restarts"
	// labelStarted is when the current task started (RFC 3339).
	labelStarted = "strata.io/started"
	// labelLastExit says why the previous task ended, once restarted.
	labelLastExit = "strata.io/last-exit"
	// labelOOM holds the pid of a task the kernel OOM-killed, set from
	// containerd's TaskOOM event.
	labelOOM = "strata.io/oom-pid"
	// labelLastReason is the reason of the previous task's end, as a
	// container status gives it (OOMKilled, Error, Completed,
	// Unhealthy), and labelLastCode its exit code.
	labelLastReason = "strata.io/last-reason"
	labelLastCode   = "strata.io/last-code"
	// labelProbes holds the main container's probes (JSON); changing
	// them needs no new container.
	labelProbes = "strata.io/probes"
	// labelUnhealthy says why the current task is being killed: its
	// liveness or startup probe failed.
	labelUnhealthy = "strata.io/unhealthy"
	// labelError marks a replica that could not be created (bad image,
	// missing volume, CNI failure): the container holds only labels, so
	// that Status and List still know the failure.
	labelError = "strata.io/error"
	// labelUserPrefix prefixes the assignment's own labels.
	labelUserPrefix = "label.strata.io/"
)

// maxIdentifier is containerd's limit on names (namespaces, containers).
const maxIdentifier = 76

func validIdentifier(s string) error { return identifiers.Validate(s) }

// keyedLocks is a mutex per key that a waiter can give up on when its
// context ends (an Apply queued behind a long image pull).
type keyedLocks struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	ch   chan struct{}
	refs int
}

func newKeyedLocks() *keyedLocks { return &keyedLocks{locks: map[string]*keyedLock{}} }

// lock takes key's lock and returns its unlock.
func (k *keyedLocks) lock(ctx context.Context, key string) (func(), error) {
	k.mu.Lock()
	l, ok := k.locks[key]
	if !ok {
		l = &keyedLock{ch: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()
	release := func() {
		k.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// held reports whether someone holds or waits for key's lock: a replica
// being applied, restarted or deleted.
func (k *keyedLocks) held(key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.locks[key]
	return ok
}

// isNotFound reports a containerd NotFound, from the client or the wire.
func isNotFound(err error) bool { return errdefs.IsNotFound(err) }

// keys returns m's keys sorted.
func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
