package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/testkit/testenv"
)

// TestResourcesPagePod renders the resources page with a pod's replicas
// expanded, in headless Chromium against a fake region API: READY
// (ready/running containers) and RESTARTS (their sum) per replica, each
// replica's containers with state, ready, restarts, exit code and reason
// with the message, and the pod's probes as stratactl describe prints
// them.
func TestResourcesPagePod(t *testing.T) {
	res, reps := podFixture()
	mux := http.NewServeMux()
	mux.Handle("/console/", Handler(Options{Region: "dev-1", Token: testToken}))
	serve := func(pattern string, v any) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(v)
		})
	}
	type list struct {
		Items any `json:"items"`
	}
	serve("GET /v1/status", map[string]any{})
	serve("GET /v1/resources", list{[]api.Placement{{Region: "dev-1", Resource: res}}})
	serve("GET /v1/resources/default/shop/replicas", list{reps})
	serve("GET /v1/events", list{[]api.Event{}})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	got := renderRows(t, srv.URL+"/console/resources?open=default/shop", testToken, "resources-pod.png",
		[]string{`[data-role="containers"] tbody tr`, `[data-role="probes"]`}, `(() => {
			const text = (el) => el.textContent.replace(/\s+/g, ' ').trim();
			const cells = (tr, n) => [...tr.children].slice(0, n).map(text).join(' | ');
			const detail = document.querySelector('tr.detail-row');
			return {
				sub: [text(document.querySelector('tr.res-row .res-sub'))],
				header: [cells(detail.querySelector('thead tr'), 8)],
				replicas: [...detail.querySelectorAll('tr[data-replica]')].map((tr) => cells(tr, 6)),
				containers: [...detail.querySelectorAll('[data-role="containers"] tbody tr')].map((tr) => cells(tr, 7)),
				// What the region's own e2e test counts: one row per replica.
				rows: [String(detail.querySelectorAll('.subtable tbody tr').length)],
				probes: [...detail.querySelectorAll('[data-role="probes"] > div')].map(text),
			};
		})()`)
	want := map[string][]string{
		"header": {"Replica | Node | Phase | Ready | Address | Restarts | Reason | Since"},
		"replicas": {
			"shop-aaaa1111 | dev-1-a | ready | 2/2 | — | 1",
			"shop-bbbb2222 | dev-1-b | provision | 0/2 | — | 6",
			"shop-cccc3333 | unscheduled | created | — | — | 0",
		},
		"containers": {
			"shop-aaaa1111 | fetch | terminated | not ready | 0 | 0 | Completed",
			"shop-aaaa1111 | main | running | ready | 0 | — | —",
			"shop-aaaa1111 | proxy | running | ready | 1 | 137 | OOMKilled",
			"shop-bbbb2222 | fetch | terminated | not ready | 0 | 0 | Completed",
			"shop-bbbb2222 | main | running | not ready | 2 | — | Unhealthy: HTTP probe failed with statuscode: 500",
			"shop-bbbb2222 | proxy | waiting | not ready | 4 | 1 | CrashLoopBackOff: back-off 40s restarting failed container proxy, starting",
		},
		"probes": {
			"fetch init busybox",
			"main busyboxReadiness: http-get http://:8080/ready delay=0s timeout=1s period=10s #success=1 #failure=3" +
				"Liveness: exec [cat /tmp/healthy] delay=5s timeout=1s period=10s #success=1 #failure=1",
			"proxy envoyReadiness: grpc :9090 envoy delay=0s timeout=3s period=10s #success=1 #failure=3",
		},
	}
	want["rows"] = []string{"3"}
	// The region's share counts the replica without a node.
	want["sub"] = []string{"Compute· small· 1 unplaced"} // spaced by CSS
	for _, what := range []string{"sub", "header", "replicas", "containers", "probes", "rows"} {
		g, w := got[what], want[what]
		if len(g) != len(w) {
			t.Errorf("%s: got %d rows %q; want %d %q", what, len(g), g, len(w), w)
			continue
		}
		for i := range w {
			if g[i] != w[i] {
				t.Errorf("%s row %d: got %q; want %q", what, i, g[i], w[i])
			}
		}
	}
}

// podFixture is a pod resource (an init container, a sidecar, probes)
// and three replicas: one serving, one whose main container fails its
// readiness probe while the sidecar crash-loops, one not reporting yet.
func podFixture() (api.Resource, []api.Replica) {
	intp := func(n int) *int { return &n }
	spec := api.ResourceSpec{Flavor: "small", Compute: &api.ComputeSpec{
		Image: "busybox",
		Probes: api.Probes{
			ReadinessProbe: &api.Probe{HTTPGet: &api.HTTPGetAction{Path: "/ready", Port: 8080, Scheme: "HTTP"}},
			LivenessProbe:  &api.Probe{Exec: &api.ExecAction{Command: []string{"cat", "/tmp/healthy"}}, InitialDelaySeconds: 5, FailureThreshold: intp(1)},
		},
		InitContainers: []api.Container{{Name: "fetch", Image: "busybox"}},
		Containers: []api.Container{{Name: "proxy", Image: "envoy",
			Probes: api.Probes{ReadinessProbe: &api.Probe{GRPC: &api.GRPCAction{Port: 9090, Service: "envoy"}, TimeoutSeconds: intp(3)}}}},
	}}
	now := time.Now()
	res := api.Resource{Name: "shop", Tenant: "default", Kind: api.KindCompute, Replicas: 3, Revision: 1, Spec: spec,
		Status: &api.ResourceStatus{Phase: api.PhaseProvision, Ready: 1, Replicas: 3,
			Regions: map[string]api.RegionShare{"dev-1": {Phase: api.PhaseProvision, Ready: 1, Replicas: 3, Unplaced: 1}}}}
	code := func(c int32) *int32 { return &c }
	rep := func(id, node string, phase api.Phase, cs ...api.ContainerStatus) api.Replica {
		return api.Replica{
			Assignment: api.Assignment{ID: id, Tenant: "default", Resource: "shop", Revision: 1, Node: node, Spec: spec, CreatedAt: now.Add(-10 * time.Minute)},
			Region:     "dev-1", Phase: phase,
			Status: &api.AssignmentStatus{ID: id, Node: node, Phase: phase, Containers: cs},
		}
	}
	reps := []api.Replica{
		rep("shop-aaaa1111", "dev-1-a", api.PhaseReady,
			api.ContainerStatus{Name: "fetch", State: api.ContainerTerminated, ExitCode: code(0), Reason: api.ReasonCompleted},
			api.ContainerStatus{Name: "main", State: api.ContainerRunning, Ready: true, StartedAt: now.Add(-9 * time.Minute)},
			api.ContainerStatus{Name: "proxy", State: api.ContainerRunning, Ready: true, Restarts: 1, ExitCode: code(137), Reason: api.ReasonOOMKilled}),
		rep("shop-bbbb2222", "dev-1-b", api.PhaseProvision,
			api.ContainerStatus{Name: "fetch", State: api.ContainerTerminated, ExitCode: code(0), Reason: api.ReasonCompleted},
			api.ContainerStatus{Name: "main", State: api.ContainerRunning, Restarts: 2, Reason: api.ReasonUnhealthy, Message: "HTTP probe failed with statuscode: 500"},
			api.ContainerStatus{Name: "proxy", State: api.ContainerWaiting, Restarts: 4, ExitCode: code(1), Reason: api.ReasonCrashLoopBackOff,
				Message: "back-off 40s restarting failed container proxy", NextStartAt: time.Now().Add(-time.Second)}),
		rep("shop-cccc3333", "", api.PhaseCreated),
	}
	reps[2].Status = nil
	return res, reps
}

// renderRows opens url in headless Chromium (signed in with token, when
// set, as the sign-in keeps it in the tab's sessionStorage), waits until every one of
// the CSS selectors in wait is visible, leaves a screenshot named shot in
// the test's artifacts and returns what the expression rows evaluates to:
// lists of rows by name.
func renderRows(t *testing.T, url, token, shot string, wait []string, rows string) map[string][]string {
	t.Helper()
	chrome := os.Getenv("STRATA_CHROMIUM")
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if chrome != "" {
			break
		}
		chrome, _ = exec.LookPath(name)
	}
	if chrome == "" {
		testenv.Missing(t, "chromium (apt-get install chromium)", exec.ErrNotFound)
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chrome), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	defer acancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, tcancel := context.WithTimeout(bctx, 60*time.Second)
	defer tcancel()
	if err := chromedp.Do(ctx); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			testenv.Missing(t, "chromium", err)
		}
		t.Fatalf("start chromium %s: %v", chrome, err)
	}
	var steps []chromedp.Action[chromedp.Void]
	if token != "" {
		u, err := neturl.Parse(url)
		if err != nil {
			t.Fatal(err)
		}
		tok, _ := json.Marshal(token)
		steps = append(steps, chromedp.Navigate(u.Scheme+"://"+u.Host+"/console/static/logo.svg"),
			chromedp.Evaluate[chromedp.Void](`sessionStorage.setItem('strata.console.token', `+string(tok)+`)`))
	}
	steps = append(steps, chromedp.Navigate(url))
	for _, sel := range wait {
		steps = append(steps, chromedp.WaitVisible(chromedp.CSS(sel)))
	}
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	err := chromedp.Do(wctx, steps...)
	wcancel()
	if png, serr := chromedp.Run(ctx, chromedp.FullScreenshot(100)); serr == nil {
		if werr := os.WriteFile(filepath.Join(t.ArtifactDir(), shot), png, 0o644); werr != nil {
			t.Error(werr)
		}
	}
	if err != nil {
		text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 3000)`))
		t.Fatalf("waiting for %q: %v\n--- page text:\n%s", wait, err, text)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string][]string](rows))
	if err != nil {
		t.Fatal(err)
	}
	return got
}
