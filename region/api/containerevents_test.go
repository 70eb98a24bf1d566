package api

import (
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/proto/apiproto"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// The region turns what changed in a replica's containers into events:
// ProbeFailed (turned unready), Restarted and Unhealthy (a liveness
// restart), BackOff (CrashLoopBackOff); each names the container and its
// resource.
func TestContainerEvents(t *testing.T) {
	e := newEnv(t)
	e.putAssignments(testAssignment("a1", "acme", "web", "n1"))
	report := func(cs ...api.ContainerStatus) {
		t.Helper()
		st := &api.AssignmentStatus{ID: "a1", ObservedGeneration: 1, Phase: api.PhaseProvision, Containers: cs}
		if _, err := e.agent.ReportStatus(e.ctx(), &agentv1.ReportStatusRequest{Node: "n1", Statuses: []*resourcev1.AssignmentStatus{apiproto.AssignmentStatusToPB(st)}}); err != nil {
			t.Fatal(err)
		}
	}
	running := func(name string, ready bool, restarts int) api.ContainerStatus {
		return api.ContainerStatus{Name: name, State: api.ContainerRunning, Ready: ready, Restarts: restarts}
	}
	report(running("main", true, 0), running("log", true, 0))
	for _, r := range []string{"ProbeFailed", "Restarted", "Unhealthy", "BackOff"} {
		if n := e.countEvents(r, "replica/a1"); n != 0 {
			t.Fatalf("%d %s events for healthy containers; want none", n, r)
		}
	}

	log := running("log", false, 0)
	log.Message = "HTTP probe failed with statuscode: 500"
	report(running("main", true, 0), log)
	ev := e.waitEvent("ProbeFailed", "replica/a1")
	if ev.Fields["container"] != "log" || ev.Fields["resource"] != "acme/web" || !strings.Contains(ev.Message, "statuscode: 500") {
		t.Errorf("ProbeFailed %+v; want container log, resource acme/web, the probe's message", ev)
	}

	code := int32(137)
	main := running("main", false, 1)
	main.Reason, main.ExitCode, main.Message = api.ReasonUnhealthy, &code, "liveness probe failed: connection refused"
	report(main, log)
	ev = e.waitEvent("Restarted", "replica/a1")
	if ev.Fields["container"] != "main" || ev.Fields["reason"] != api.ReasonUnhealthy || !strings.Contains(ev.Message, "exit code 137") {
		t.Errorf("Restarted %+v; want container main, reason Unhealthy, the exit code", ev)
	}
	ev = e.waitEvent("Unhealthy", "replica/a1")
	if ev.Fields["container"] != "main" || !strings.Contains(ev.Message, "connection refused") {
		t.Errorf("Unhealthy %+v; want container main with the probe's message", ev)
	}
	if n := e.countEvents("BackOff", "replica/a1"); n != 0 {
		t.Errorf("%d BackOff events before the back-off; want none", n)
	}

	main = api.ContainerStatus{Name: "main", State: api.ContainerWaiting, Restarts: 1, Reason: api.ReasonCrashLoopBackOff,
		Message: "back-off 40s restarting failed container main", NextStartAt: time.Date(2026, 12, 2, 19, 31, 2, 0, time.UTC)}
	report(main, log)
	ev = e.waitEvent("BackOff", "replica/a1")
	if ev.Fields["container"] != "main" || !strings.Contains(ev.Message, "back-off 40s restarting failed container main, next start at 19:31:02Z") {
		t.Errorf("BackOff %+v; want container main with the back-off's message", ev)
	}
}
