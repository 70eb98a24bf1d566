package containerd

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/containers"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// The order init containers run in: one at a time, then the rest.
func TestInitTurn(t *testing.T) {
	a := &api.Assignment{ID: "r", Spec: api.ResourceSpec{Compute: &api.ComputeSpec{
		InitContainers: []api.Container{{Name: "a"}, {Name: "b", RestartPolicy: api.RestartNever}},
	}}}
	l := map[string]string{}
	initLabels(a, l)
	if l[labelInits] != "a,b" || l[labelInitsDone] != "0" {
		t.Fatalf("labels %v", l)
	}
	main := containers.Container{ID: "r", Labels: l}
	initA := containers.Container{ID: initID("r", "a"), Labels: map[string]string{labelPod: "r", labelInitIndex: "0"}}
	initB := containers.Container{ID: initID("r", "b"), Labels: map[string]string{labelPod: "r", labelInitIndex: "1"}}
	side := containers.Container{ID: sidecarID("r", "web"), Labels: map[string]string{labelPod: "r"}}
	for _, tc := range []struct {
		done                   string
		pending, a, b, m, side bool
	}{
		{"0", true, true, false, false, false},
		{"1", true, false, true, false, false},
		{"2", false, false, false, true, true},
	} {
		main.Labels[labelInitsDone] = tc.done
		got := []bool{initPending(main), initTurn(initA, main), initTurn(initB, main), initTurn(main, main), initTurn(side, main)}
		want := []bool{tc.pending, tc.a, tc.b, tc.m, tc.side}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("done %s: pending, a, b, main, sidecar = %v; want %v", tc.done, got, want)
		}
	}
	if initIndex(side) != -1 || initIndex(main) != -1 || initIndex(initB) != 1 {
		t.Errorf("initIndex wrong")
	}
	if m := initMember(api.Container{Name: "a"}); m.RestartPolicy != api.RestartOnFailure {
		t.Errorf("init container's default restart policy %q; want on-failure", m.RestartPolicy)
	}
	if m := initMember(api.Container{Name: "b", RestartPolicy: api.RestartNever}); m.RestartPolicy != api.RestartNever {
		t.Errorf("restart policy never kept: %q", m.RestartPolicy)
	}
}

// initPod is a pod whose init containers write into the scratch volume
// "work" and whose main container prints what they wrote.
func (e *testEnv) initPod(id string, inits ...api.Container) *api.Assignment {
	a := e.assignment(id, "sh", "-c", `trap 'exit 0' TERM
echo "main sees $(cat /work/out)"
sleep 3600 & wait`)
	a.Spec.Compute.ScratchVolumes = []api.ScratchVolume{{Name: "work", Path: "/work"}}
	for i := range inits {
		inits[i].Image = "busybox"
		inits[i].Volumes = []api.VolumeMount{{Scratch: "work", Path: "/w"}}
	}
	a.Spec.Compute.InitContainers = inits
	return a
}

func initCmd(script string) []string { return []string{"sh", "-c", script} }

// An init container's output in a scratch volume reaches the main
// container, which starts after it; the done init container is not
// rerun by an agent restart; Delete removes it.
func TestInitContainerScratch(t *testing.T) {
	e := newEnv(t)
	id := "init-" + randomSuffix(t)
	a := e.initPod(id, api.Container{Name: "prep", Command: initCmd(`echo "prepared-by-init" > /w/out; echo init-ran`)})
	a.Spec.Compute.Containers = []api.Container{{Name: "side", Image: "busybox", Command: serveForever()}}
	e.apply(t, a)
	e.waitLogs(t, id, "main sees prepared-by-init")
	st := e.waitStatus(t, id, "ready with prep completed", func(st api.AssignmentStatus) bool {
		return st.Phase == api.PhaseReady && len(st.Containers) == 3 && st.Containers[0].Name == "prep" &&
			st.Containers[0].State == api.ContainerTerminated && st.Containers[0].Reason == api.ReasonCompleted &&
			st.Containers[0].ExitCode != nil && *st.Containers[0].ExitCode == 0 &&
			st.Containers[1].Name == api.MainContainer && st.Containers[1].State == api.ContainerRunning &&
			st.Containers[2].Name == "side" && st.Containers[2].State == api.ContainerRunning
	})
	if st.Containers[0].Restarts != 0 {
		t.Errorf("prep restarts %d; want 0", st.Containers[0].Restarts)
	}
	if got := e.containerLogs(t, id, "prep"); strings.Count(got, "init-ran") != 1 {
		t.Errorf("Logs -c prep: %q; want init-ran once", got)
	}

	// An agent restart, then a sidecar's restart: prep is not rerun.
	e.reopen(t, e.p.cfg)
	if err := e.p.tasks.kill(e.p.nsCtx(e.ctx(t)), sidecarID(id, "side")); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(t, id, "side restarted", func(st api.AssignmentStatus) bool {
		return st.Phase == api.PhaseReady && len(st.Containers) == 3 && st.Containers[2].Restarts == 1 &&
			st.Containers[2].State == api.ContainerRunning
	})
	time.Sleep(300 * time.Millisecond)
	if got := e.containerLogs(t, id, "prep"); strings.Count(got, "init-ran") != 1 {
		t.Errorf("Logs -c prep after agent and sidecar restart: %q; want init-ran once", got)
	}
	if got := strings.Count(e.logs(t, id), "main sees"); got != 1 {
		t.Errorf("main started %d times; want 1", got)
	}

	if err := e.p.Delete(e.ctx(t), &api.Assignment{ID: id}, 0); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	e.checkGone(t, id)
	e.checkGone(t, initID(id, "prep"))
}

// A new revision of a pod (its init container's spec changed) recreates
// the pod, and its init containers run again before the new main
// container starts: the main container sees what the new init wrote.
func TestInitContainerRerunByNewRevision(t *testing.T) {
	e := newEnv(t)
	id := "initv-" + randomSuffix(t)
	a := e.initPod(id, api.Container{Name: "prep", Env: map[string]string{"REV": "1"}, Command: initCmd(`echo "rev-$REV" > /w/out; echo "init-ran rev-$REV"`)})
	e.apply(t, a)
	e.waitLogs(t, id, "main sees rev-1")
	e.waitStatus(t, id, "ready at revision 1", func(st api.AssignmentStatus) bool { return st.Phase == api.PhaseReady })

	b := *a
	c := *a.Spec.Compute
	c.InitContainers = []api.Container{c.InitContainers[0]}
	c.InitContainers[0].Env = map[string]string{"REV": "2"}
	b.Spec.Compute = &c
	b.Generation = a.Generation + 1
	if _, err := e.p.Apply(e.ctx(t), &b); err != nil {
		t.Fatalf("Apply revision 2: %v", err)
	}
	e.waitLogs(t, id, "main sees rev-2")
	st := e.waitStatus(t, id, "ready at revision 2 with prep completed", func(st api.AssignmentStatus) bool {
		return st.Phase == api.PhaseReady && st.ObservedGeneration == b.Generation && len(st.Containers) == 2 &&
			st.Containers[0].Name == "prep" && st.Containers[0].Reason == api.ReasonCompleted
	})
	if got := e.containerLogs(t, id, "prep"); !strings.Contains(got, "init-ran rev-2") {
		t.Errorf("Logs -c prep at revision 2: %q; want the init container's second run", got)
	}
	t.Logf("revision 2: %s", containerState(st))
}

// containerLogs is the log of container name of replica id.
func (e *testEnv) containerLogs(t testing.TB, id, name string) string {
	t.Helper()
	var b strings.Builder
	if err := e.p.Logs(e.ctx(t), id, provider.LogOptions{Container: name}, &b); err != nil {
		t.Fatalf("Logs %s -c %s: %v", id, name, err)
	}
	return b.String()
}

// An init container that fails twice is retried with back-off; the main
// container waits for it, and starts once it succeeds.
func TestInitContainerRetried(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.RestartBackoff, c.RestartBackoffMax = time.Second, 4*time.Second })
	id := "initr-" + randomSuffix(t)
	a := e.initPod(id,
		api.Container{Name: "first", Command: initCmd(`echo first > /w/out`)},
		api.Container{Name: "flaky", Command: initCmd(`n=$(cat /w/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /w/n
echo "attempt $n"; [ $n -ge 3 ] && echo "flaky-done after $n" > /w/out; [ $n -ge 3 ]`)},
	)
	e.apply(t, a)
	var sawBackoff bool
	st := e.waitStatus(t, id, "waiting for flaky in CrashLoopBackOff", func(st api.AssignmentStatus) bool {
		if len(st.Containers) != 3 {
			return false
		}
		f, m := st.Containers[1], st.Containers[2]
		sawBackoff = st.Phase == api.PhaseProvision && strings.HasPrefix(st.Reason, "init container flaky: ") &&
			st.Containers[0].State == api.ContainerTerminated && f.Name == "flaky" &&
			f.State == api.ContainerWaiting && f.Reason == api.ReasonCrashLoopBackOff && f.Message != "" &&
			m.Name == api.MainContainer && m.State == api.ContainerWaiting
		return sawBackoff
	})
	t.Logf("while waiting: %s", containerState(st))
	if strings.Contains(e.logs(t, id), "main sees") {
		t.Fatalf("main container started before its init containers were done")
	}
	e.waitLogs(t, id, "main sees flaky-done after 3")
	st = e.waitStatus(t, id, "ready", func(st api.AssignmentStatus) bool {
		return st.Phase == api.PhaseReady && len(st.Containers) == 3 && st.Containers[1].State == api.ContainerTerminated
	})
	if f := st.Containers[1]; f.Restarts != 2 || f.Reason != api.ReasonCompleted {
		t.Errorf("flaky: %+v; want Completed after 2 restarts", f)
	}
	if st.Containers[0].Restarts != 0 {
		t.Errorf("first restarted %d times; want 0", st.Containers[0].Restarts)
	}
}

// An init container with restart policy never that fails fails the
// replica, with a reason naming it; the main container never starts.
func TestInitContainerNeverFails(t *testing.T) {
	e := newEnv(t)
	id := "initn-" + randomSuffix(t)
	a := e.initPod(id, api.Container{Name: "check", RestartPolicy: api.RestartNever, Command: initCmd(`echo failing; exit 1`)})
	e.apply(t, a)
	st := e.waitStatus(t, id, "error naming check", func(st api.AssignmentStatus) bool {
		return st.Phase == api.PhaseError && strings.HasPrefix(st.Reason, "init container check: ")
	})
	t.Logf("failed: %s", containerState(st))
	if c := st.Containers[0]; c.Name != "check" || c.State != api.ContainerTerminated || c.ExitCode == nil || *c.ExitCode != 1 {
		t.Errorf("check: %+v; want terminated with exit code 1", c)
	}
	time.Sleep(500 * time.Millisecond)
	if strings.Contains(e.logs(t, id), "main sees") {
		t.Errorf("main container started after its init container failed")
	}
}
