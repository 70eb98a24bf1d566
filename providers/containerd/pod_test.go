package containerd

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// podAssignment is a pod whose main container writes a file into the
// scratch volume "www" and fetches it over localhost from its sidecar
// "web", busybox httpd serving the same volume on 127.0.0.1:8080.
func (e *testEnv) podAssignment(id string) *api.Assignment {
	a := e.assignment(id, "sh", "-c", `trap 'exit 0' TERM
echo hello-from-scratch > /shared/hello.txt
until timeout 2 wget -q -O /tmp/got http://127.0.0.1:8080/hello.txt; do sleep 0.2; done
echo "got $(cat /tmp/got)"
sleep 3600 & wait`)
	a.Spec.Compute.ScratchVolumes = []api.ScratchVolume{{Name: "www", Path: "/shared"}}
	a.Spec.Compute.Containers = []api.Container{{
		Name: "web", Image: "busybox",
		Command:   []string{"sh", "-c", `trap 'exit 0' TERM; echo "serving"; httpd -f -p 127.0.0.1:8080 -h /www & wait`},
		Volumes:   []api.VolumeMount{{Scratch: "www", Path: "/www"}},
		Resources: &api.ContainerResources{MemoryMiB: 32},
	}}
	return a
}

// containerState is a status's container statuses, for messages.
func containerState(st api.AssignmentStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s (%s)", st.Phase, st.Reason)
	for _, c := range st.Containers {
		fmt.Fprintf(&b, "; %s %s ready=%v restarts=%d %s", c.Name, c.State, c.Ready, c.Restarts, c.Message)
	}
	return b.String()
}

// podRunning reports whether st is ready with main and web running and
// ready, main not restarted and web restarted webRestarts times.
func podRunning(st api.AssignmentStatus, webRestarts int) bool {
	if st.Phase != api.PhaseReady || len(st.Containers) != 2 {
		return false
	}
	m, w := st.Containers[0], st.Containers[1]
	return m.Name == api.MainContainer && w.Name == "web" &&
		m.State == api.ContainerRunning && w.State == api.ContainerRunning && m.Ready && w.Ready &&
		m.Restarts == 0 && w.Restarts == webRestarts
}

func (e *testEnv) waitPod(t *testing.T, id string, webRestarts int) api.AssignmentStatus {
	t.Helper()
	var st api.AssignmentStatus
	eventually(t, fmt.Sprintf("%s running, web restarted %d times", id, webRestarts), func() (bool, string) {
		var err error
		st, err = e.p.Status(e.ctx(t), id)
		if err != nil {
			return false, err.Error()
		}
		return podRunning(st, webRestarts), containerState(st)
	})
	return st
}

// A pod's sidecar shares the main container's localhost and scratch
// volume; killing it restarts it alone; an agent restart finds it; the
// replica's Delete removes it with its log and the scratch volume.
func TestPodSidecar(t *testing.T) {
	e := newEnv(t)
	id := "pod-" + randomSuffix(t)
	e.apply(t, e.podAssignment(id))
	e.waitLogs(t, id, "got hello-from-scratch")
	e.waitPod(t, id, 0)
	var b bytes.Buffer
	if err := e.p.Logs(e.ctx(t), id, provider.LogOptions{Container: "web"}, &b); err != nil || !strings.Contains(b.String(), "serving") {
		t.Fatalf("Logs -c web: %q, %v; want the sidecar's output", b.String(), err)
	}
	web := sidecarID(id, "web")
	rec, err := e.p.tasks.container(e.p.nsCtx(e.ctx(t)), web)
	if err != nil || rec == nil {
		t.Fatalf("sidecar container %s: %v, %v", web, rec, err)
	}
	spec, err := e.p.client.LoadContainer(e.p.nsCtx(e.ctx(t)), web)
	if err != nil {
		t.Fatal(err)
	}
	s, err := spec.Spec(e.p.nsCtx(e.ctx(t)))
	if err != nil {
		t.Fatal(err)
	}
	if got := *s.Linux.Resources.Memory.Limit; got != 32<<20 {
		t.Errorf("sidecar memory limit %d; want its own 32 MiB", got)
	}

	if err := e.p.tasks.kill(e.p.nsCtx(e.ctx(t)), web); err != nil {
		t.Fatalf("kill sidecar: %v", err)
	}
	st := e.waitPod(t, id, 1)
	if got := strings.Count(e.logs(t, id), "got hello"); got != 1 {
		t.Errorf("main container's log has %d fetches; want 1 (it did not restart): %s", got, containerState(st))
	}

	// An agent restart: List shows the replica alone, its status both
	// containers, and the new supervisor restarts the sidecar.
	e.reopen(t, e.p.cfg)
	ls, err := e.p.List(e.ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || ls[0].ID != id || len(ls[0].Status.Containers) != 2 {
		t.Fatalf("List after reopen: %+v; want %s alone, with 2 containers", ls, id)
	}
	e.waitPod(t, id, 1)
	if err := e.p.tasks.kill(e.p.nsCtx(e.ctx(t)), web); err != nil {
		t.Fatalf("kill sidecar: %v", err)
	}
	e.waitPod(t, id, 2)

	if err := e.p.Delete(e.ctx(t), &api.Assignment{ID: id}, 0); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	e.checkGone(t, id)
	e.checkGone(t, web)
	if _, err := os.Stat(e.p.scratchDir(id, "www")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("scratch volume: %v; want it removed", err)
	}
}
