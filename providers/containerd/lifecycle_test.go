package containerd

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/containers"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// maxPushesPerExit bounds the statuses a replica that starts and exits
// once may push: its start, an OOM kill, its exit, with room to spare.
const maxPushesPerExit = 5

// TestExits checks what exits become under each restart policy, and
// that the exit is pushed to watchers.
func TestExits(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name    string
		policy  api.RestartPolicy
		memMiB  int64
		command string
		// wantPhase, wantReason and wantCode describe the replica once
		// it exited (and was not restarted); wantRestarts > 0 instead
		// waits for that many restarts.
		wantPhase    api.Phase
		wantReason   string
		wantCode     int32
		wantRestarts int
	}{
		{name: "never, failure", policy: api.RestartNever, command: "echo bye; exit 3",
			wantPhase: api.PhaseError, wantReason: "exited with code 3", wantCode: 3},
		{name: "never, success", policy: api.RestartNever, command: "exit 0",
			wantPhase: api.PhaseError, wantReason: "exited with code 0", wantCode: 0},
		{name: "on-failure, success", policy: api.RestartOnFailure, command: "exit 0",
			wantPhase: api.PhaseError, wantReason: "exited with code 0", wantCode: 0},
		{name: "on-failure, failure", policy: api.RestartOnFailure, command: "exit 3", wantRestarts: 2},
		{name: "always, success", policy: api.RestartAlways, command: "exit 0", wantRestarts: 2},
		{name: "OOM kill", policy: api.RestartNever, memMiB: 16,
			command:   `x=$(head -c 64m /dev/zero | tr "\0" x); echo "survived ${#x}"`,
			wantPhase: api.PhaseError, wantReason: "OOM-killed (memory limit 16 MiB)", wantCode: 137},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			pushed := e.watch(t, ctx)
			a := e.assignment("exit-"+randomSuffix(t), "sh", "-c", tc.command)
			a.Spec.Compute.RestartPolicy = tc.policy
			if tc.memMiB > 0 {
				a.Flavor.MemoryMiB = tc.memMiB
			}
			e.apply(t, a)

			if tc.wantRestarts > 0 {
				st := e.waitStatus(t, a.ID, "restarted", func(st api.AssignmentStatus) bool { return st.Restarts >= tc.wantRestarts })
				if st.Phase == api.PhaseError {
					t.Errorf("restarting replica: got phase error (%s); want provision or ready", st.Reason)
				}
				return
			}
			st := e.waitStatus(t, a.ID, "exited", func(st api.AssignmentStatus) bool { return st.ExitCode != nil })
			if st.Phase != tc.wantPhase || st.Reason != tc.wantReason || *st.ExitCode != tc.wantCode {
				t.Errorf("exited: got phase %s, reason %q, exit code %d; want %s, %q, %d", st.Phase, st.Reason, *st.ExitCode, tc.wantPhase, tc.wantReason, tc.wantCode)
			}
			if st.Restarts != 0 {
				t.Errorf("exited: got %d restarts; want 0", st.Restarts)
			}
			if tc.memMiB > 0 {
				if len(st.Containers) != 1 || st.Containers[0].Reason != api.ReasonOOMKilled || st.Containers[0].ExitCode == nil || *st.Containers[0].ExitCode != 137 {
					t.Errorf("the container's status: got %+v; want reason %s, exit code 137", st.Containers, api.ReasonOOMKilled)
				}
			}
			// The exit was pushed, not only polled, and among a few
			// statuses: not one per kernel OOM event, which would close
			// a watcher as fallen behind.
			deadline := time.After(waitFor)
			seen := 0
			for {
				select {
				case got, ok := <-pushed:
					if !ok {
						t.Fatalf("Watch: channel closed after %d statuses of %s: the provider pushed more than a watcher buffers", seen, a.ID)
					}
					if got.ID != a.ID {
						continue
					}
					if seen++; seen > maxPushesPerExit {
						t.Fatalf("Watch: %d statuses pushed for %s before its exit; want at most %d", seen, a.ID, maxPushesPerExit)
					}
					if got.Phase == tc.wantPhase && got.Reason == tc.wantReason {
						return
					}
				case <-deadline:
					t.Fatalf("Watch: no %s/%q pushed for %s", tc.wantPhase, tc.wantReason, a.ID)
				}
			}
		})
	}
}

// TestApplyRetriesExited checks that an Apply of the generation a
// stopped replica has is a retry: the task starts again and counts a
// restart.
func TestApplyRetriesExited(t *testing.T) {
	e := newEnv(t)
	a := e.assignment("retry-"+randomSuffix(t), "sh", "-c", "echo run; exit 3")
	a.Spec.Compute.RestartPolicy = api.RestartNever
	e.apply(t, a)
	e.waitStatus(t, a.ID, "exited", func(st api.AssignmentStatus) bool { return st.Phase == api.PhaseError })
	if _, err := e.p.Apply(e.ctx(t), a); err != nil {
		t.Fatalf("Apply again: %v", err)
	}
	st := e.waitStatus(t, a.ID, "exited again", func(st api.AssignmentStatus) bool { return st.Phase == api.PhaseError && st.Restarts == 1 })
	if st.Reason != "exited with code 3" {
		t.Errorf("after the retry: got reason %q; want %q", st.Reason, "exited with code 3")
	}
	// The output of both runs is kept.
	e.waitLogs(t, a.ID, "run\nrun\n")
}

// TestFailedReplicas checks that what keeps a replica from being created
// is its status (phase error, reason), not an error of Apply, and that
// List still reports it.
func TestFailedReplicas(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name       string
		change     func(a *api.Assignment)
		wantReason string
	}{
		{"archive missing", func(a *api.Assignment) { a.Image.Archive = "/nonexistent/image.tar" }, "image: " + errArchiveRefused.Error()},
		{"image not in the archive", func(a *api.Assignment) { a.Image.Ref = "docker.io/library/alpine:3" }, "has no image docker.io/library/alpine:3"},
		{"volume not on this node", func(a *api.Assignment) {
			a.Volumes = []api.VolumeAttachment{{Name: "data", VolumeID: "vol-nowhere", Path: "/data"}}
		}, `volume "data" (vol-nowhere) is not on this node`},
		{"command not found", func(a *api.Assignment) { a.Spec.Compute.Command = []string{"/no/such/binary"} }, "start:"},
		{"address outside its subnet", func(a *api.Assignment) {
			a.Network = &api.NetworkAttachment{Network: "n", Bridge: "st-test9", Subnet: "10.213.9.0/24", Address: "10.9.9.9"}
		}, "network: network n: address 10.9.9.9 is outside subnet"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := e.assignment("fail-" + randomSuffix(t))
			tc.change(a)
			st := e.apply(t, a)
			if st.Phase != api.PhaseError || !strings.Contains(st.Reason, tc.wantReason) {
				t.Errorf("Apply: got phase %s (%s); want error with %q", st.Phase, st.Reason, tc.wantReason)
			}
			ls, err := e.p.List(e.ctx(t))
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			found := false
			for _, l := range ls {
				if l.ID == a.ID {
					found = l.Status.Phase == api.PhaseError && l.Generation == a.Generation
				}
			}
			if !found {
				t.Errorf("List: got %+v; want %s in phase error at generation %d", ls, a.ID, a.Generation)
			}
			if err := e.p.Delete(e.ctx(t), &api.Assignment{ID: a.ID}, time.Second); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			e.checkGone(t, a.ID)
		})
	}
}

// TestGenerations checks what a new generation recreates: nothing when
// only labels, restart policy or grace period change; the container (not
// its volume) when the spec does.
func TestGenerations(t *testing.T) {
	e := newEnv(t)
	vol := &api.Assignment{ID: "vol-" + randomSuffix(t), Kind: api.KindVolume, Provider: api.ProviderContainer, Generation: 1,
		Spec: api.ResourceSpec{Volume: &api.VolumeSpec{SizeMiB: 8}}}
	e.apply(t, vol)
	a := e.assignment("gen-"+randomSuffix(t), "sh", "-c", `echo "$GREETING" >> /data/log; trap 'exit 0' TERM; sleep 3600 & wait`)
	a.Spec.Compute.Env = map[string]string{"GREETING": "one"}
	a.Volumes = []api.VolumeAttachment{{Name: "data", VolumeID: vol.ID, Path: "/data"}}
	e.apply(t, a)
	first := e.containerInfo(t, a.ID)
	firstPid := e.pid(t, a.ID)

	inPlace := *a
	inPlace.Generation = 2
	inPlace.Labels = map[string]string{"team": "blue"}
	inPlace.Spec.Compute = ptr(*a.Spec.Compute)
	inPlace.Spec.Compute.RestartPolicy = api.RestartOnFailure
	inPlace.Spec.Compute.StopGracePeriod = api.D(2 * time.Second)
	st, err := e.p.Apply(e.ctx(t), &inPlace)
	if err != nil {
		t.Fatalf("Apply generation 2: %v", err)
	}
	if st.Phase != api.PhaseReady || st.ObservedGeneration != 2 {
		t.Errorf("generation 2: got phase %s, observed generation %d; want ready, 2", st.Phase, st.ObservedGeneration)
	}
	second := e.containerInfo(t, a.ID)
	if !second.CreatedAt.Equal(first.CreatedAt) || e.pid(t, a.ID) != firstPid {
		t.Errorf("generation 2 (labels and policy only): container or task recreated; want both kept")
	}
	for k, want := range map[string]string{LabelGeneration: "2", labelRestart: "on-failure", labelGrace: "2s", labelUserPrefix + "team": "blue"} {
		if got := second.Labels[k]; got != want {
			t.Errorf("generation 2 label %s: got %q; want %q", k, got, want)
		}
	}

	replaced := inPlace
	replaced.Generation = 3
	replaced.Spec.Compute = ptr(*inPlace.Spec.Compute)
	replaced.Spec.Compute.Env = map[string]string{"GREETING": "two"}
	if st, err := e.p.Apply(e.ctx(t), &replaced); err != nil || st.Phase != api.PhaseReady {
		t.Fatalf("Apply generation 3: got %s (%s), %v; want ready", st.Phase, st.Reason, err)
	}
	third := e.containerInfo(t, a.ID)
	if third.CreatedAt.Equal(first.CreatedAt) {
		t.Errorf("generation 3 (new env): container kept; want it recreated")
	}
	// The volume outlived the container: both runs wrote to it.
	eventually(t, "volume holds both runs", func() (bool, string) {
		b, _ := os.ReadFile(filepath.Join(e.p.volumes.dir(vol.ID), "log"))
		return string(b) == "one\ntwo\n", string(b)
	})

	// A stale generation changes nothing.
	if st, err := e.p.Apply(e.ctx(t), a); err != nil || st.ObservedGeneration != 3 {
		t.Errorf("Apply of stale generation 1: got observed generation %d, %v; want 3", st.ObservedGeneration, err)
	}

	// Dropping a label is an in-place change too.
	unlabelled := replaced
	unlabelled.Generation, unlabelled.Labels = 4, nil
	if _, err := e.p.Apply(e.ctx(t), &unlabelled); err != nil {
		t.Fatalf("Apply generation 4: %v", err)
	}
	fourth := e.containerInfo(t, a.ID)
	if _, ok := fourth.Labels[labelUserPrefix+"team"]; ok || !fourth.CreatedAt.Equal(third.CreatedAt) || fourth.Labels[LabelGeneration] != "4" {
		t.Errorf("generation 4 (label dropped): got labels %v, recreated %v; want team gone, generation 4, same container",
			fourth.Labels, !fourth.CreatedAt.Equal(third.CreatedAt))
	}
}

// TestVolumes checks that a volume outlives the replicas using it, that a
// read-only mount is, and that deleting the Volume replica removes it.
func TestVolumes(t *testing.T) {
	e := newEnv(t)
	vol := &api.Assignment{ID: "vol-" + randomSuffix(t), Kind: api.KindVolume, Provider: api.ProviderContainer, Generation: 1,
		Spec: api.ResourceSpec{Volume: &api.VolumeSpec{SizeMiB: 32, Format: api.VolumeDir}}}
	st := e.apply(t, vol)
	if st.Phase != api.PhaseReady || st.ObservedGeneration != 1 {
		t.Fatalf("Apply volume: got phase %s (%s) at generation %d; want ready at 1", st.Phase, st.Reason, st.ObservedGeneration)
	}
	mount := []api.VolumeAttachment{{Name: "data", VolumeID: vol.ID, Path: "/data"}}

	writer := e.assignment("writer-"+randomSuffix(t), "sh", "-c", `echo kept > /data/file; echo written; trap 'exit 0' TERM; sleep 3600 & wait`)
	writer.Volumes = mount
	e.apply(t, writer)
	e.waitLogs(t, writer.ID, "written")
	if err := e.p.Delete(e.ctx(t), writer, time.Second); err != nil {
		t.Fatalf("Delete writer: %v", err)
	}

	reader := e.assignment("reader-"+randomSuffix(t), "sh", "-c", `cat /data/file; echo x > /data/other || echo read-only`)
	reader.Spec.Compute.RestartPolicy = api.RestartNever
	reader.Volumes = []api.VolumeAttachment{{Name: "data", VolumeID: vol.ID, Path: "/data", ReadOnly: true}}
	e.apply(t, reader)
	e.waitStatus(t, reader.ID, "exits", func(st api.AssignmentStatus) bool { return st.ExitCode != nil })
	// stdout and stderr reach the log through separate pipes: wait for
	// both.
	e.waitLogs(t, reader.ID, "kept", "read-only", "Read-only file system")

	ls, err := e.p.List(e.ctx(t))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var listed *provider.Listed
	for i := range ls {
		if ls[i].ID == vol.ID {
			listed = &ls[i]
		}
	}
	if listed == nil || listed.Kind != api.KindVolume || listed.Generation != 1 || listed.Status.Phase != api.PhaseReady {
		t.Errorf("List: got %+v; want volume %s ready at generation 1", listed, vol.ID)
	}
	if err := e.p.Logs(e.ctx(t), vol.ID, provider.LogOptions{}, &bytes.Buffer{}); !errors.Is(err, provider.ErrUnsupported) {
		t.Errorf("Logs of a volume: got %v; want provider.ErrUnsupported", err)
	}

	// Deleting a Compute replica by id alone never takes its volume.
	if err := e.p.Delete(e.ctx(t), &api.Assignment{ID: reader.ID}, time.Second); err != nil {
		t.Fatalf("Delete reader: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.p.volumes.dir(vol.ID), "file")); err != nil {
		t.Errorf("volume after its replicas were deleted: %v; want the file kept", err)
	}
	if err := e.p.Delete(e.ctx(t), vol, time.Second); err != nil {
		t.Fatalf("Delete volume: %v", err)
	}
	if _, err := os.Stat(e.p.volumes.dir(vol.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("volume directory after Delete: got %v; want it removed", err)
	}
	if _, err := e.p.Status(e.ctx(t), vol.ID); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("Status of a deleted volume: got %v; want not found", err)
	}
}

// TestRecovery checks that a provider made after another closed (an
// agent restart) finds the replicas, which kept running, adopts them
// without recreating anything, and restarts a task that exited while no
// provider watched.
func TestRecovery(t *testing.T) {
	e := newEnv(t)
	type before struct {
		created time.Time
		pid     uint32
		status  api.AssignmentStatus
	}
	was := map[string]before{}
	var as []*api.Assignment
	for i := range 5 {
		a := e.assignment("rec-" + randomSuffix(t))
		a.Generation = int64(i + 1)
		st := e.apply(t, a)
		as = append(as, a)
		was[a.ID] = before{created: e.containerInfo(t, a.ID).CreatedAt, pid: e.pid(t, a.ID), status: st}
	}
	if err := e.p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// While no provider runs, one task dies: the next provider's sweep
	// restarts it (policy always).
	victim := as[0].ID
	if err := syscall.Kill(int(was[victim].pid), syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s: %v", victim, err)
	}

	b := e.open(t, e.p.cfg)
	e.p = b
	ls, err := b.List(e.ctx(t))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(ls) != len(as) {
		t.Fatalf("List: got %d replicas; want %d", len(ls), len(as))
	}
	for _, l := range ls {
		w, ok := was[l.ID]
		if !ok {
			t.Errorf("List: got unknown %s", l.ID)
			continue
		}
		if l.Generation != w.status.ObservedGeneration || l.Kind != api.KindCompute || l.Status.ProviderID != w.status.ProviderID {
			t.Errorf("List %s: got generation %d, kind %s, provider id %s; want %d, Compute, %s",
				l.ID, l.Generation, l.Kind, l.Status.ProviderID, w.status.ObservedGeneration, w.status.ProviderID)
		}
	}
	st := e.waitStatus(t, victim, "restarted by the new provider", func(st api.AssignmentStatus) bool { return st.Phase == api.PhaseReady && st.Restarts == 1 })
	if st.ObservedGeneration != 1 {
		t.Errorf("restarted %s: got generation %d; want 1", victim, st.ObservedGeneration)
	}
	for _, a := range as {
		st, err := b.Apply(e.ctx(t), a)
		if err != nil || st.Phase != api.PhaseReady {
			t.Fatalf("Apply %s after the restart: got %s (%s), %v; want ready", a.ID, st.Phase, st.Reason, err)
		}
		if st.ProviderID != was[a.ID].status.ProviderID {
			t.Errorf("Apply %s: got provider id %s; want %s", a.ID, st.ProviderID, was[a.ID].status.ProviderID)
		}
		if got := e.containerInfo(t, a.ID).CreatedAt; !got.Equal(was[a.ID].created) {
			t.Errorf("Apply %s after the restart: container created at %v; want the one of %v", a.ID, got, was[a.ID].created)
		}
		if a.ID != victim && e.pid(t, a.ID) != was[a.ID].pid {
			t.Errorf("Apply %s after the restart: task restarted; want it kept", a.ID)
		}
	}
}

// TestLogs checks tails and following.
func TestLogs(t *testing.T) {
	e := newEnv(t)
	a := e.assignment("logs-"+randomSuffix(t), "sh", "-c",
		`for i in 1 2 3 4 5; do echo line $i; done; echo oops >&2; trap 'exit 0' TERM; while :; do sleep 0.2; echo tick; done`)
	e.apply(t, a)
	e.waitLogs(t, a.ID, "oops", "tick")

	var tail bytes.Buffer
	if err := e.p.Logs(e.ctx(t), a.ID, provider.LogOptions{TailLines: 2}, &tail); err != nil {
		t.Fatalf("Logs tail: %v", err)
	}
	if lines := strings.Split(strings.TrimRight(tail.String(), "\n"), "\n"); len(lines) != 2 || lines[1] != "tick" {
		t.Errorf("tail 2: got %q; want 2 lines ending with tick", tail.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var mu sync.Mutex
	var followed bytes.Buffer
	err := e.p.Logs(ctx, a.ID, provider.LogOptions{Follow: true, TailLines: 1}, writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return followed.Write(b)
	}))
	if err != nil {
		t.Fatalf("Logs follow: %v; want nil when its context ends", err)
	}
	if n := strings.Count(followed.String(), "tick"); n < 3 {
		t.Errorf("followed 1.5s of a tick every 0.2s: got %q; want several ticks", followed.String())
	}
	if err := e.p.Logs(e.ctx(t), "nope-"+randomSuffix(t), provider.LogOptions{}, &bytes.Buffer{}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("Logs of an unknown replica: got %v; want not found", err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// TestHealth checks the conditions on a working node.
func TestHealth(t *testing.T) {
	e := newEnv(t)
	// The supervisor subscribes in the background.
	var cs []api.Condition
	eventually(t, "every condition ready (CSI as the host's disk allows)", func() (bool, string) {
		var err error
		cs, err = e.p.Health(e.ctx(t))
		if err != nil {
			return false, err.Error()
		}
		// The volume root is on this host's disk: CSI is Ready only
		// when that disk has room, and says LowSpace when it has not.
		wantCSI, wantCSIReason := api.ConditionReady, "VolumesWritable"
		if free, total, err := statfsFree(e.p.cfg.VolumeRoot); err != nil {
			return false, err.Error()
		} else if lowSpace(free, total) {
			wantCSI, wantCSIReason = api.ConditionWarning, "LowSpace"
		}
		for _, c := range cs {
			want, reason := api.ConditionReady, c.Reason
			if c.Type == api.ConditionCSI {
				want, reason = wantCSI, wantCSIReason
			}
			if c.Status != want || c.Reason != reason {
				return false, c.Type + " " + string(c.Status) + " " + c.Reason + ": " + c.Message
			}
		}
		return true, ""
	})
	var types []string
	for _, c := range cs {
		types = append(types, c.Type)
		if c.Since.IsZero() || c.Message == "" {
			t.Errorf("condition %s: got since %v, message %q; want both", c.Type, c.Since, c.Message)
		}
	}
	want := []string{api.ConditionCRI, api.ConditionCNI, api.ConditionCSI, "provider/containerd"}
	if strings.Join(types, ",") != strings.Join(want, ",") {
		t.Errorf("condition types: got %v; want %v", types, want)
	}

	broken, err := New(context.Background(), Config{Namespace: e.ns, Address: "/nonexistent.sock", CNIBinDir: t.TempDir()},
		WithDataDir(t.TempDir()), WithNode("node-test"))
	if err != nil {
		t.Fatalf("New with a bad address: %v; want the error in Health", err)
	}
	defer broken.Close()
	// containerd's dialer waits for its socket until the deadline.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	cs, err = broken.Health(ctx)
	if err != nil {
		t.Fatalf("Health: %v", err)
	}
	got := map[string]api.ConditionStatus{}
	for _, c := range cs {
		got[c.Type] = c.Status
	}
	if got[api.ConditionCRI] != api.ConditionError || got[api.ConditionCNI] != api.ConditionError {
		t.Errorf("without containerd and plugins: got %v; want CRI and CNI in Error", got)
	}
}

// containerInfo returns containerd's record of container id.
func (e *testEnv) containerInfo(t testing.TB, id string) containers.Container {
	t.Helper()
	c, err := e.p.tasks.container(e.p.nsCtx(e.ctx(t)), id)
	if err != nil || c == nil {
		t.Fatalf("container %s: %v", id, err)
	}
	return *c
}

// pid returns the pid of id's task.
func (e *testEnv) pid(t testing.TB, id string) uint32 {
	t.Helper()
	ti, err := e.p.tasks.task(e.p.nsCtx(e.ctx(t)), id)
	if err != nil || ti == nil {
		t.Fatalf("task %s: %+v, %v", id, ti, err)
	}
	return ti.pid
}

func ptr[T any](v T) *T { return &v }

// TestSpec checks what a replica's spec turns into: command and args,
// environment, working directory, hostname, CPU and memory limits, and
// its own network namespace.
func TestSpec(t *testing.T) {
	e := newEnv(t)
	a := e.assignment("spec-" + randomSuffix(t))
	a.Spec.Compute.Command = nil
	// Without a command, args replace the image's cmd (it has no
	// entrypoint).
	a.Spec.Compute.Args = []string{"sh", "-c", `echo "cwd=$(pwd) foo=$FOO host=$(hostname)"; cat /etc/hosts`}
	a.Spec.Compute.Env = map[string]string{"FOO": "bar"}
	a.Spec.Compute.WorkingDir = "/tmp"
	a.Spec.Compute.RestartPolicy = api.RestartNever
	a.Flavor = api.FlavorSpec{VCPUs: 1.5, MemoryMiB: 48}
	e.apply(t, a)
	e.waitLogs(t, a.ID, "cwd=/tmp foo=bar host="+a.ID, "localhost")

	ctr, err := e.p.client.LoadContainer(e.p.nsCtx(e.ctx(t)), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := ctr.Spec(e.p.nsCtx(e.ctx(t)))
	if err != nil {
		t.Fatal(err)
	}
	r := spec.Linux.Resources
	if r == nil || r.Memory == nil || r.Memory.Limit == nil || *r.Memory.Limit != 48<<20 {
		t.Errorf("memory limit: got %+v; want 48 MiB", r)
	}
	if r == nil || r.CPU == nil || r.CPU.Quota == nil || r.CPU.Period == nil || *r.CPU.Quota != 150000 || *r.CPU.Period != 100000 {
		t.Errorf("CPU: got %+v; want a quota of 150000 per 100000 µs", r.CPU)
	}
	var netns string
	for _, ns := range spec.Linux.Namespaces {
		if ns.Type == "network" {
			netns = ns.Path
		}
	}
	if netns != e.p.network.netnsPath(a.ID) {
		t.Errorf("network namespace: got %q; want %q", netns, e.p.network.netnsPath(a.ID))
	}
}

// TestImportOnce checks that concurrent Applies of one archive import it
// once, that a provider made later finds it imported, and that an
// archive can come from a URL.
func TestImportOnce(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	as := make([]*api.Assignment, 4)
	errs := make([]error, len(as))
	for i := range as {
		as[i] = e.assignment("imp-" + randomSuffix(t))
		t.Cleanup(func() {
			if err := e.p.Delete(context.Background(), as[i], time.Second); err != nil {
				t.Errorf("Delete: %v", err)
			}
		})
		wg.Go(func() {
			var st api.AssignmentStatus
			st, errs[i] = e.p.Apply(e.ctx(t), as[i])
			if errs[i] == nil && st.Phase != api.PhaseReady {
				errs[i] = errors.New("phase " + string(st.Phase) + ": " + st.Reason)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Apply %s: %v", as[i].ID, err)
		}
	}
	if imports := importCount(e.p); imports != 1 {
		t.Errorf("imports after %d concurrent Applies: got %d; want 1", len(as), imports)
	}

	// The replicas keep running; each provider after this one takes
	// them over (the clean-ups delete through e.p, the last one).
	later := e.reopen(t, e.p.cfg)
	a := e.assignment("imp-later-" + randomSuffix(t))
	t.Cleanup(func() { e.p.Delete(context.Background(), a, time.Second) }) //nolint:errcheck // checked by the namespace clean-up
	if st, err := later.Apply(e.ctx(t), a); err != nil || st.Phase != api.PhaseReady {
		t.Fatalf("Apply with a new provider: got %s (%s), %v; want ready", st.Phase, st.Reason, err)
	}
	if imports := importCount(later); imports != 0 {
		t.Errorf("imports by a provider made after the import: got %d; want 0", imports)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, e.archive) }))
	defer srv.Close()
	// The server is on loopback: the operator allows its URL and address.
	cfg := e.p.cfg
	cfg.ArchiveURLs, cfg.ArchiveNetworks = []string{srv.URL + "/"}, []string{"127.0.0.1/32"}
	byURL := e.reopen(t, cfg)
	u := e.assignment("imp-url-" + randomSuffix(t))
	u.Image.Archive = srv.URL + "/busybox-oci.tar"
	t.Cleanup(func() { e.p.Delete(context.Background(), u, time.Second) }) //nolint:errcheck // checked by the namespace clean-up
	if st, err := byURL.Apply(e.ctx(t), u); err != nil || st.Phase != api.PhaseReady {
		t.Fatalf("Apply of an archive by URL: got %s (%s), %v; want ready", st.Phase, st.Reason, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.p.cfg.StateDir, "images")); len(ents) != 1 {
		t.Errorf("downloaded archives: got %d; want 1 in the cache", len(ents))
	}
}

func importCount(p *Provider) int {
	p.images.mu.Lock()
	defer p.images.mu.Unlock()
	return p.images.imports
}

// A sidecar above its own memory limit is OOM-killed alone: its status
// says OOMKilled with exit code 137 and it restarts (with back-off),
// while the main container keeps running, not restarted.
func TestSidecarOOMKilled(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.RestartBackoff, c.RestartBackoffMax = time.Second, 2*time.Second })
	a := e.assignment("oom-"+randomSuffix(t), "sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait")
	a.Spec.Compute.Containers = []api.Container{{
		Name: "hog", Image: "busybox",
		Command:   []string{"sh", "-c", `x=$(head -c 64m /dev/zero | tr "\0" x); echo "survived ${#x}"`},
		Resources: &api.ContainerResources{MemoryMiB: 16},
	}}
	e.apply(t, a)
	st := e.waitStatus(t, a.ID, "hog OOM-killed and restarted", func(st api.AssignmentStatus) bool {
		if len(st.Containers) != 2 {
			return false
		}
		h := st.Containers[1]
		return h.Name == "hog" && h.Restarts >= 1 && h.ExitCode != nil && *h.ExitCode == 137 &&
			(h.Reason == api.ReasonOOMKilled || strings.Contains(h.Message, api.ReasonOOMKilled))
	})
	m := st.Containers[0]
	if m.Name != api.MainContainer || m.State != api.ContainerRunning || m.Restarts != 0 {
		t.Errorf("main: %+v; want running, never restarted", m)
	}
	t.Logf("%s", containerState(st))
}
