package e2e

// End-to-end tests of pods and probes (issue 34) on real containerd,
// through the whole stack: the global REST API, the region, the agent
// and its containerd provider, checked from the API, stratactl, the
// consoles' data and the host (ctr, kill).
//
// The clusters of this file use names no other test uses: the bridge
// e2e-pd0 (e2e-pd0a for the one agent) and the subnet 10.237.0.0/24.

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
)

// podsNet is the network of this file's clusters.
var podsNet = hostNet{Name: "e2e-pd0", Subnet: "10.237.0.0/24", Gateway: "10.237.0.1", Bridge: "e2e-pd0"}

// oneReplica is the one replica of resource name at the global API.
func (c *hostCluster) oneReplica(name string) (api.Replica, error) {
	reps, err := c.replicas(name)
	if err != nil {
		return api.Replica{}, err
	}
	if len(reps) != 1 {
		return api.Replica{}, fmt.Errorf("%d replicas of %s; want 1", len(reps), name)
	}
	return reps[0], nil
}

// containerOf is the status of container name of a replica, nil when the
// replica reports none such.
func containerOf(rep api.Replica, name string) *api.ContainerStatus {
	if rep.Status == nil {
		return nil
	}
	for i := range rep.Status.Containers {
		if rep.Status.Containers[i].Name == name {
			return &rep.Status.Containers[i]
		}
	}
	return nil
}

// podState says what a replica's containers are, for messages.
func podState(rep api.Replica) string {
	if rep.Status == nil {
		return fmt.Sprintf("replica %s: %s, no status", rep.ID, rep.Phase)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "replica %s: %s (%s)", rep.ID, rep.Phase, rep.Status.Reason)
	for _, cs := range rep.Status.Containers {
		fmt.Fprintf(&b, "; %s %s ready=%v restarts=%d reason=%q message=%q", cs.Name, cs.State, cs.Ready, cs.Restarts, cs.Reason, cs.Message)
	}
	return b.String()
}

// waitContainer polls resource name's one replica until its container
// container satisfies ok, and returns the replica.
func (c *hostCluster) waitContainer(name, container string, timeout time.Duration, what string, ok func(rep api.Replica, cs api.ContainerStatus) bool) api.Replica {
	c.t.Helper()
	var rep api.Replica
	framework.Eventually(c.t, timeout, fmt.Sprintf("%s: container %s %s", name, container, what), func() error {
		var err error
		if rep, err = c.oneReplica(name); err != nil {
			return err
		}
		if cs := containerOf(rep, container); cs == nil || !ok(rep, *cs) {
			return fmt.Errorf("%s", podState(rep))
		}
		return nil
	})
	return rep
}

// containerLogs reads the log of one container of a replica through the
// global API (GET .../logs?container=, what stratactl logs -c sends).
func (c *hostCluster) containerLogs(name, replica, container string) (string, error) {
	path := "/v1/resources/" + name + "/logs?replica=" + url.QueryEscape(replica) + "&container=" + url.QueryEscape(container)
	resp, err := c.global.Do(ctxT(c.t), http.MethodGet, path, nil)
	if err != nil {
		return "", err
	}
	if resp.Status != http.StatusOK {
		return "", fmt.Errorf("GET %s: %d %s", path, resp.Status, resp.Body)
	}
	return string(resp.Body), nil
}

// replicaEvents are the reasons of replica id's events at the global API
// (the region's, aggregated), each with the container it names.
func (c *hostCluster) replicaEvents(id string) ([]api.Event, error) {
	var evs struct{ Items []api.Event }
	path := "/v1/events?limit=1000&object=" + url.QueryEscape("replica/"+id)
	if code, err := c.global.Get(path, &evs); err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %v", path, code, err)
	}
	return evs.Items, nil
}

// hasEvent reports whether evs hold an event of reason about container.
func hasEvent(evs []api.Event, reason, container string) bool {
	for _, ev := range evs {
		if ev.Reason == reason && ev.Fields["container"] == container {
			return true
		}
	}
	return false
}

func eventReasons(evs []api.Event) []string {
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		out = append(out, ev.Reason+"("+ev.Fields["container"]+")")
	}
	return out
}

// newCtl is stratactl in a private home with one context, the cluster's
// global API with the bootstrap token.
func (c *hostCluster) newCtl() *stratactl {
	c.t.Helper()
	home := c.t.TempDir()
	ctl := &stratactl{t: c.t, bin: framework.Bin(c.t, "stratactl"), home: home, config: filepath.Join(home, "config.yaml")}
	ctl.must("", "config", "set-context", "e2e", "--url", c.global.Base, "--token", c.token)
	return ctl
}

// tableRow is the row of a table stratactl printed whose first cell is
// key, as a map from the header's columns; the last column takes the
// rest of the line (a message with spaces). nil when there is none.
func tableRow(out, key string, first ...string) map[string]string {
	var header []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			header = nil
			continue
		}
		if f[0] == "NAME" || f[0] == "REPLICA" {
			header = f
			continue
		}
		if header == nil || f[0] != key || (len(first) > 0 && (len(f) < 2 || f[1] != first[0])) {
			continue
		}
		row := map[string]string{}
		for i, h := range header {
			switch {
			case i >= len(f):
			case i == len(header)-1:
				row[h] = strings.Join(f[i:], " ")
			default:
				row[h] = f[i]
			}
		}
		return row
	}
	return nil
}

// consoleReplicas checks that both consoles are served and reads the
// replicas of resource name as each console's page fetches them: the
// global console's resource page from the global API, the region
// console's resources page from the region's API.
func (c *hostCluster) consoleReplicas(tenant, name string) (global, region []api.Replica, err error) {
	g, err := c.replicas(name)
	if err != nil {
		return nil, nil, err
	}
	var reps struct{ Items []api.Replica }
	path := "/v1/resources/" + url.PathEscape(tenant) + "/" + url.PathEscape(name) + "/replicas"
	if code, err := c.regionAPI.Get(path, &reps); err != nil || code != http.StatusOK {
		return nil, nil, fmt.Errorf("region GET %s: %d %v", path, code, err)
	}
	return g, reps.Items, nil
}

// consoleAsset is a static file a console serves, which must be there.
func consoleAsset(t *testing.T, base, file string) string {
	t.Helper()
	resp, err := hostHTTP.Get(base + "/console/static/" + file)
	if err != nil {
		t.Fatalf("GET %s/console/static/%s: %v", base, file, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/console/static/%s: %s", base, file, resp.Status)
	}
	return string(b)
}

// TestPodsLivenessRestartsAndBacksOff runs a container whose exec
// liveness probe passes for a few seconds and then fails, with the
// provider's own crash-loop back-off (10 s doubling): the agent kills it,
// waits 10 s, starts it again, kills it again and waits 20 s. Each step
// is seen at the global API (state, restarts, reason, message), the
// events Unhealthy, Restarted and BackOff are listed, and the restarts
// and the back-off show in stratactl get replicas and describe and in
// what both consoles render from.
func TestPodsLivenessRestartsAndBacksOff(t *testing.T) {
	c := startHostCluster(t, hostClusterOpts{region: "e2e-pd", network: podsNet, agents: 1, productBackoff: true})
	c.flavor("small", 0.5, 128)
	c.image()
	// Alive for 4 s after each start; the probe then fails at once.
	res := c.create(hostCompute("flaky", 1, `touch /tmp/alive; echo started; sleep 4; rm /tmp/alive; exec sleep 3600`, map[string]any{
		"livenessProbe": map[string]any{
			"exec":          map[string]any{"command": []string{"test", "-f", "/tmp/alive"}},
			"periodSeconds": 1, "failureThreshold": 1,
		},
	}))
	backedOff := func(delay string) func(api.Replica, api.ContainerStatus) bool {
		return func(rep api.Replica, cs api.ContainerStatus) bool {
			return cs.State == api.ContainerWaiting && cs.Reason == api.ReasonCrashLoopBackOff &&
				strings.Contains(cs.Message, "back-off "+delay+" restarting failed container main") && !cs.NextStartAt.IsZero()
		}
	}

	// The first failure: killed, waiting 10 s, not restarted yet.
	rep := c.waitContainer("flaky", api.MainContainer, 90*time.Second, "in its first back-off (10s)", backedOff("10s"))
	id := rep.ID
	cs := containerOf(rep, api.MainContainer)
	if cs.Restarts != 0 || !strings.Contains(cs.Message, "liveness probe failed") {
		t.Errorf("first back-off: %s; want 0 restarts and the liveness probe's failure in the message", podState(rep))
	}
	if want := "CrashLoopBackOff: back-off 10s restarting failed container main, next start at " + cs.NextStartAt.UTC().Format("15:04:05Z"); !strings.Contains(rep.Status.Reason, want) {
		t.Errorf("first back-off: the replica's reason %q; want it to say CrashLoopBackOff and when the next start is", rep.Status.Reason)
	}
	// Since when the replica is not ready: the exit, as the agent saw it
	// (a few milliseconds after the provider scheduled the restart).
	exited := rep.Status.Since

	// The restart, 10 s after the exit: the last exit says why.
	rep = c.waitContainer("flaky", api.MainContainer, 30*time.Second, "restarted once", func(_ api.Replica, cs api.ContainerStatus) bool {
		return cs.State == api.ContainerRunning && cs.Restarts == 1
	})
	cs = containerOf(rep, api.MainContainer)
	if cs.Reason != api.ReasonUnhealthy {
		t.Errorf("after the restart: %s; want the last exit's reason %s", podState(rep), api.ReasonUnhealthy)
	}
	waited := cs.StartedAt.Sub(exited)
	if exited.IsZero() || waited < 9500*time.Millisecond || waited > 20*time.Second {
		t.Errorf("the restart started %s after the exit (exit at %s, start at %s); want the 10s back-off", waited, exited, cs.StartedAt)
	}
	t.Logf("restarted %s after the exit", waited.Round(time.Millisecond))

	// The second failure: the back-off doubled.
	rep = c.waitContainer("flaky", api.MainContainer, 30*time.Second, "in its second back-off (20s)", backedOff("20s"))
	if cs := containerOf(rep, api.MainContainer); cs.Restarts != 1 {
		t.Errorf("second back-off: %s; want 1 restart", podState(rep))
	}

	framework.Eventually(t, 30*time.Second, "the events Unhealthy, Restarted and BackOff of main", func() error {
		evs, err := c.replicaEvents(id)
		if err != nil {
			return err
		}
		for _, reason := range []string{"Unhealthy", "Restarted", "BackOff"} {
			if !hasEvent(evs, reason, api.MainContainer) {
				return fmt.Errorf("no %s event of container main among %v", reason, eventReasons(evs))
			}
		}
		for _, ev := range evs {
			t.Logf("event %s %s: %s", ev.Reason, ev.Object, ev.Message)
		}
		return nil
	})

	// The CLI, while the second back-off lasts (or a later one).
	ctl := c.newCtl()
	framework.Eventually(t, 40*time.Second, "stratactl shows the restart and the back-off", func() error {
		out := ctl.must("", "get", "replicas", "flaky", "-o", "wide")
		row := tableRow(out, id)
		if row == nil || row["READY"] != "0/1" || row["RESTARTS"] == "0" || row["RESTARTS"] == "" ||
			!strings.Contains(row["REASON"], "CrashLoopBackOff: back-off ") {
			return fmt.Errorf("get replicas flaky -o wide:\n%s\nwant %s with READY 0/1, its restarts and the back-off as its reason (row %v)", out, id, row)
		}
		out = ctl.must("", "describe", "resource", "flaky")
		row = tableRow(out, id, api.MainContainer)
		if row == nil || row["STATE"] != "waiting" || row["RESTARTS"] == "0" || row["REASON"] != api.ReasonCrashLoopBackOff ||
			!strings.Contains(row["MESSAGE"], "next start in") {
			return fmt.Errorf("describe resource flaky:\n%s\nwant main waiting in CrashLoopBackOff with its restarts and next start (row %v)", out, row)
		}
		t.Logf("stratactl describe resource flaky, main: %v", row)
		return nil
	})

	// The consoles: both are served with the pod view (READY, RESTARTS,
	// the containers' reasons: webconsole's common.js), and the replicas
	// each one's page fetches carry the restarts and the back-off.
	for _, base := range []string{c.global.Base, c.regionAPI.Base} {
		servedConsole(t, base)
		if js := consoleAsset(t, base, "common.js"); !strings.Contains(js, "export function containerRestarts") || !strings.Contains(js, "export function containersReady") || !strings.Contains(js, "export function containerMessage") {
			t.Errorf("%s serves a common.js without the pod view", base)
		}
	}
	framework.Eventually(t, 40*time.Second, "the consoles' data shows the restart and the back-off", func() error {
		global, region, err := c.consoleReplicas(res.Tenant, "flaky")
		if err != nil {
			return err
		}
		for console, reps := range map[string][]api.Replica{"global": global, "region": region} {
			if len(reps) != 1 || reps[0].ID != id {
				return fmt.Errorf("the %s console's replicas: %v; want %s", console, hostIDs(reps), id)
			}
			cs := containerOf(reps[0], api.MainContainer)
			if cs == nil || cs.Restarts < 1 || cs.Reason != api.ReasonCrashLoopBackOff || cs.NextStartAt.IsZero() {
				return fmt.Errorf("the %s console's replica: %s; want main's restarts and its back-off", console, podState(reps[0]))
			}
		}
		return nil
	})
}

// TestPodsInitSidecarMain runs a pod: an init container writes a file
// into a scratch volume, a sidecar serves that volume on the pod's
// localhost, the main container fetches the file from it and prints it.
// The main container's log (REST and stratactl logs) carries the file,
// the sidecar's and the init container's logs are read with -c; killing
// the sidecar's task on the host restarts the sidecar alone: its restarts
// go to 1, the main container's stay 0 and its process is the same, the
// init container does not run again.
func TestPodsInitSidecarMain(t *testing.T) {
	c := startHostCluster(t, hostClusterOpts{region: "e2e-pd", network: podsNet, agents: 1})
	c.flavor("small", 0.5, 128)
	c.image()
	content := "pod-file-" + hostRandom(t)
	shared := []map[string]any{{"scratch": "shared", "path": "/shared"}}
	c.create(hostCompute("pod", 1,
		// busybox wget -T crashes here: timeout bounds each try.
		`until out=$(timeout 5 wget -qO- http://127.0.0.1:8081/file); do sleep 0.5; done; echo "main got: $out"; exec sleep 3600`,
		map[string]any{
			"scratchVolumes": []map[string]any{{"name": "shared"}},
			"initContainers": []map[string]any{{
				"name": "prep", "image": "busybox", "volumes": shared,
				"command": []string{"sh", "-c", "echo " + content + " > /shared/file; echo init-ran"},
			}},
			"containers": []map[string]any{{
				"name": "web", "image": "busybox", "volumes": shared,
				"command": []string{"sh", "-c", "echo serving; exec httpd -f -v -p 127.0.0.1:8081 -h /shared"},
			}},
		}))
	reps := c.waitReady("pod", 1, 90*time.Second)
	id := reps[0].ID
	rep := c.waitContainer("pod", "web", 30*time.Second, "running, prep completed, main running", func(rep api.Replica, web api.ContainerStatus) bool {
		prep, main := containerOf(rep, "prep"), containerOf(rep, api.MainContainer)
		return prep != nil && prep.State == api.ContainerTerminated && prep.Reason == api.ReasonCompleted &&
			main != nil && main.State == api.ContainerRunning && main.Ready && web.State == api.ContainerRunning && web.Ready
	})
	var names []string
	for _, cs := range rep.Status.Containers {
		names = append(names, cs.Name)
	}
	if strings.Join(names, ",") != "prep,main,web" {
		t.Errorf("containers %s; want prep, main, web in that order", podState(rep))
	}
	for _, name := range []string{"prep", api.MainContainer, "web"} {
		if cs := containerOf(rep, name); cs.Restarts != 0 {
			t.Errorf("container %s restarted before anything was killed: %s", name, podState(rep))
		}
	}

	// The main container printed the file the init container wrote,
	// which it fetched from the sidecar over the pod's localhost.
	c.waitLogs("pod", id, 30*time.Second, "main got: "+content)
	ctl := c.newCtl()
	if out := ctl.must("", "logs", "pod", "--replica", id, "-c", api.MainContainer); !strings.Contains(out, "main got: "+content) {
		t.Errorf("stratactl logs -c main:\n%s\nwant the file's content", out)
	}
	framework.Eventually(t, 20*time.Second, "the sidecar's log (served the file)", func() error {
		out := ctl.must("", "logs", "pod", "--replica", id, "-c", "web")
		if !strings.Contains(out, "serving") || !strings.Contains(out, "response:200") {
			return fmt.Errorf("stratactl logs -c web: %q; want serving and the answer to the main container's request", out)
		}
		return nil
	})
	if out := ctl.must("", "logs", "pod", "--replica", id, "-c", "prep"); strings.Count(out, "init-ran") != 1 {
		t.Errorf("stratactl logs -c prep: %q; want init-ran once", out)
	}
	out := ctl.must("", "get", "replicas", "pod")
	if row := tableRow(out, id); row == nil || row["READY"] != "2/2" || row["RESTARTS"] != "0" {
		t.Errorf("get replicas pod:\n%s\nwant %s READY 2/2 (prep apart), RESTARTS 0", out, id)
	}

	// Kill the sidecar's process on the host.
	ns := c.ns[c.nodes[0]]
	webID := id + ".web"
	tasks, err := framework.CtrTasks(ns)
	if err != nil {
		t.Fatal(err)
	}
	mainTask, webTask := tasks[id], tasks[webID]
	if mainTask.PID == 0 || webTask.PID == 0 || mainTask.Status != "RUNNING" || webTask.Status != "RUNNING" {
		t.Fatalf("tasks of %s: %v; want %s and %s running", ns, tasks, id, webID)
	}
	if err := syscall.Kill(webTask.PID, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the sidecar's pid %d: %v", webTask.PID, err)
	}
	framework.Eventually(t, 30*time.Second, "a new sidecar task", func() error {
		tasks, err := framework.CtrTasks(ns)
		if err != nil {
			return err
		}
		if w := tasks[webID]; w.PID == 0 || w.PID == webTask.PID || w.Status != "RUNNING" {
			return fmt.Errorf("sidecar task %+v; want a new one running (the killed one was pid %d)", w, webTask.PID)
		}
		return nil
	})
	rep = c.waitContainer("pod", "web", 30*time.Second, "restarted once", func(rep api.Replica, web api.ContainerStatus) bool {
		return rep.Phase == api.PhaseReady && web.State == api.ContainerRunning && web.Ready && web.Restarts == 1
	})
	if main := containerOf(rep, api.MainContainer); main.Restarts != 0 || main.State != api.ContainerRunning {
		t.Errorf("after the sidecar's kill: %s; want main running, never restarted", podState(rep))
	}
	if prep := containerOf(rep, "prep"); prep.Restarts != 0 || prep.State != api.ContainerTerminated {
		t.Errorf("after the sidecar's kill: %s; want prep terminated, never restarted", podState(rep))
	}
	tasks, err = framework.CtrTasks(ns)
	if err != nil {
		t.Fatal(err)
	}
	if m := tasks[id]; m.PID != mainTask.PID || m.Status != "RUNNING" {
		t.Errorf("main task %+v after the sidecar's kill; want pid %d still running", m, mainTask.PID)
	}
	if out, err := c.containerLogs("pod", id, "prep"); err != nil || strings.Count(out, "init-ran") != 1 {
		t.Errorf("prep's log after the sidecar's kill: %q, %v; want init-ran once (it did not run again)", out, err)
	}
	if out, err := c.logs("pod", id); err != nil || strings.Count(out, "main got: ") != 1 {
		t.Errorf("main's log after the sidecar's kill: %q, %v; want one fetch (it did not run again)", out, err)
	}
	out = ctl.must("", "get", "replicas", "pod")
	if row := tableRow(out, id); row == nil || row["READY"] != "2/2" || row["RESTARTS"] != "1" {
		t.Errorf("get replicas pod after the sidecar's kill:\n%s\nwant %s READY 2/2, RESTARTS 1", out, id)
	}
	framework.Eventually(t, 20*time.Second, "a Restarted event of web", func() error {
		evs, err := c.replicaEvents(id)
		if err != nil {
			return err
		}
		if !hasEvent(evs, "Restarted", "web") {
			return fmt.Errorf("no Restarted event of web among %v", eventReasons(evs))
		}
		if hasEvent(evs, "Restarted", api.MainContainer) || hasEvent(evs, "Restarted", "prep") {
			return fmt.Errorf("events %v; want only web restarted", eventReasons(evs))
		}
		return nil
	})
}
