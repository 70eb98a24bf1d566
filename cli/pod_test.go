package cli_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// podManifest is a pod with an init container, a sidecar and probes, in
// Kubernetes' spelling (the scheme in capitals).
const podManifest = `kind: Compute
name: shop
spec:
  flavor: small
  compute:
    image: busybox
    command: [httpd, -f, -p, "8080"]
    ports: [{name: http, containerPort: 8080}]
    scratchVolumes: [{name: shared, path: /www}]
    readinessProbe:
      httpGet: {path: /ready, port: 8080, scheme: HTTP}
    livenessProbe:
      exec: {command: [cat, /tmp/healthy]}
      initialDelaySeconds: 5
      failureThreshold: 1
    startupProbe:
      tcpSocket: {port: 8080}
      periodSeconds: 2
      failureThreshold: 30
    initContainers:
    - name: fetch
      image: busybox
      command: [sh, -c, "echo hi > /shared/index.html"]
      volumes: [{scratch: shared, path: /shared}]
    containers:
    - name: proxy
      image: envoy
      ports: [{containerPort: 9090}]
      resources: {milliCPU: 100, memoryMiB: 64}
      restartPolicy: on-failure
      readinessProbe:
        grpc: {port: 9090, service: envoy}
        timeoutSeconds: 3
schedule: {regions: [{name: dev-1}]}
`

// probedManifest is one container with probes: its spec prints as a
// container's always did, its probes added.
const probedManifest = `kind: Compute
name: probed
spec:
  flavor: small
  compute:
    image: busybox
    readinessProbe:
      httpGet: {path: "/healthz?full=1", port: 8443, scheme: HTTPS, host: 127.0.0.1}
      successThreshold: 2
    livenessProbe:
      grpc: {port: 9090}
`

// podReplicas are two replicas of shop as their nodes report them: one
// serving, one whose sidecar crash-loops.
func podReplicas(spec api.ResourceSpec) []api.Replica {
	code := func(c int32) *int32 { return &c }
	rep := func(id, node string, phase api.Phase, cs ...api.ContainerStatus) api.Replica {
		return api.Replica{
			Assignment: api.Assignment{ID: id, Tenant: "default", Resource: "shop", Kind: api.KindCompute, Revision: 1, Node: node,
				Desired: api.DesiredRunning, Spec: spec, CreatedAt: now.Add(-10 * time.Minute)},
			Region: "dev-1", Phase: phase,
			Status: &api.AssignmentStatus{ID: id, Node: node, Phase: phase, Containers: cs},
		}
	}
	return []api.Replica{
		rep("shop-aaaa1111", "dev-1-a", api.PhaseReady,
			api.ContainerStatus{Name: "fetch", State: api.ContainerTerminated, ExitCode: code(0), Reason: api.ReasonCompleted, StartedAt: now.Add(-9 * time.Minute)},
			api.ContainerStatus{Name: "main", State: api.ContainerRunning, Ready: true, StartedAt: now.Add(-9 * time.Minute)},
			api.ContainerStatus{Name: "proxy", State: api.ContainerRunning, Ready: true, Restarts: 1, ExitCode: code(137), Reason: api.ReasonOOMKilled, StartedAt: now.Add(-5 * time.Minute)}),
		rep("shop-bbbb2222", "dev-1-b", api.PhaseProvision,
			api.ContainerStatus{Name: "fetch", State: api.ContainerTerminated, ExitCode: code(0), Reason: api.ReasonCompleted, StartedAt: now.Add(-8 * time.Minute)},
			api.ContainerStatus{Name: "main", State: api.ContainerRunning, Ready: false, Restarts: 2, Reason: api.ReasonUnhealthy,
				Message: "HTTP probe failed with statuscode: 500", StartedAt: now.Add(-2 * time.Minute)},
			api.ContainerStatus{Name: "proxy", State: api.ContainerWaiting, Restarts: 4, ExitCode: code(1), Reason: api.ReasonCrashLoopBackOff,
				Message: "back-off 40s restarting failed container proxy", NextStartAt: now.Add(40 * time.Second)}),
	}
}

// TestPod applies a pod manifest and shows it: describe prints each
// container with its probes and each replica's container statuses; get
// replicas adds READY and sums the containers' restarts. A container
// with probes and no pod prints as before, its probes added.
func TestPod(t *testing.T) {
	e := newEnv(t)
	e.load()
	e.must(podManifest, "apply", "-f", "-")
	e.srv.Mu.Lock()
	res := e.srv.Resources["default/shop"]
	e.srv.Replicas["shop"] = podReplicas(res.Spec)
	e.srv.Mu.Unlock()

	e.must(probedManifest, "apply", "-f", "-")

	var b strings.Builder
	for _, args := range [][]string{
		{"describe", "resource", "shop"},
		{"describe", "resource", "probed"},
		{"get", "replicas", "shop"},
		{"get", "replicas", "shop", "-o", "wide"},
	} {
		r := e.run("", args...)
		fmt.Fprintf(&b, "$ stratactl %s\n%s%s(exit %d)\n\n", strings.Join(args, " "), r.stdout, r.stderr, r.code)
	}
	golden(t, "pod.txt", b.String())

	// What apply sent is what the manifest says, Kubernetes' spelling read.
	c := res.Spec.Compute
	if c == nil || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Port != 8080 ||
		len(c.InitContainers) != 1 || len(c.Containers) != 1 || c.Containers[0].ReadinessProbe == nil || c.Containers[0].ReadinessProbe.GRPC == nil {
		t.Fatalf("got compute %+v; want the pod's containers and probes", c)
	}
	// Applying the same manifest again changes nothing: the pod compares
	// equal to what the server holds.
	if out := e.must(podManifest, "apply", "-f", "-"); !strings.Contains(out, "unchanged") {
		t.Errorf("second apply: got %q; want unchanged", out)
	}
}
