package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/stratahq/strata/devcluster"
	"github.com/stratahq/strata/e2e/framework"
	globalconsole "github.com/stratahq/strata/global/console"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/testenv"
	"github.com/stratahq/strata/providers/fake"
	"github.com/stratahq/strata/providers/provider"
	regionconsole "github.com/stratahq/strata/region/console"
)

// TestConsole drives the operator consoles in headless Chromium against an
// in-process dev cluster: sign in to region dev-1's console, cordon and
// uncordon nodes from the page and see them change without a reload,
// drain a node that runs replicas and follow its progress panel to
// "succeeded", look at the resources and the live event feed, then sign in
// to the global console and see both regions. Every step leaves a
// full-page screenshot in $STRATA_ARTIFACTS/console/ (or a temporary
// directory).
func TestConsole(t *testing.T) {
	chrome := chromiumPath(t)
	start := time.Now()
	shots := artifactDir(t)

	// The dev cluster keeps its admin token in its data directory; writing
	// it first lets the regions use the same token for their REST API, so
	// that the region console's login is exercised too.
	dir := t.TempDir()
	token := "strata_e2ec0de0_" + randomHex(t, 20)
	framework.WriteFile(t, dir, "admin-token", token+"\n")
	reg := provider.NewRegistry()
	reg.Register("fake", fake.Factory)
	ctx, cancel := context.WithCancel(context.Background())
	c, err := devcluster.Start(ctx, devcluster.Options{
		DataDir:  dir,
		Regions:  []string{"dev-1", "dev-2"},
		Registry: reg,
		// A little latency, so that a drain is visibly in progress.
		Providers:  []config.Provider{{Name: "fake", Options: map[string]any{"applyLatency": "400ms", "deleteLatency": "100ms"}}},
		TuneRegion: func(r *config.Region) { r.API.Token = token },
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = c.Wait()
	})
	t.Logf("dev cluster up in %s", time.Since(start).Round(time.Millisecond))

	regionURL := consoleBase(t, ctx, "http://"+c.Regions["dev-1"].HTTPAddr(), func() http.Handler {
		return regionconsole.Handler(regionconsole.Options{
			Region:       "dev-1",
			Events:       &restEvents{base: "http://" + c.Regions["dev-1"].HTTPAddr(), token: token},
			Token:        token,
			PollInterval: 250 * time.Millisecond,
			Done:         ctx.Done(),
		})
	})
	globalURL := consoleBase(t, ctx, c.GlobalURL(), func() http.Handler {
		return globalconsole.Handler(globalconsole.Options{})
	})
	g := framework.NewClient(c.GlobalURL(), token)

	b := newBrowser(t, chrome, shots)
	step := b.step

	// ---- the region console: sign in, see the nodes ----
	step("sign in to region dev-1", func() {
		b.do(chromedp.Navigate(regionURL + "/console/"))
		// A region's API has no anonymous mode: the console asks for the
		// token.
		if mode := b.waitValue(`document.body.dataset.auth`, 20*time.Second); mode != "login" {
			t.Fatalf("region console auth mode %q; want login", mode)
		}
		b.shot("region-login")
		b.do(chromedp.SendKeys(chromedp.CSS(`#token`), token, chromedp.NodeVisible),
			chromedp.Click(chromedp.CSS(`#login-submit`), chromedp.NodeVisible))
		b.wait(`document.body.dataset.started === "true"`, 20*time.Second)
	})
	step("see the nodes of dev-1, live", func() {
		b.wait(nodeSel("dev-1-a")+` && `+nodeSel("dev-1-b"), 20*time.Second)
		b.wait(`document.querySelector("#live").dataset.state === "live"`, 20*time.Second)
		b.wait(`document.querySelectorAll("article.node .badge").length >= 2`, 20*time.Second)
		// Reloading the page would lose this.
		b.do(chromedp.Evaluate[chromedp.Void](`window.__notReloaded = true`))
		b.shot("nodes")
	})

	// ---- cordon from the page ----
	step("cordon dev-1-a", func() {
		b.do(chromedp.Click(chromedp.CSS(`button[data-action="cordon"][data-node="dev-1-a"]`), chromedp.NodeVisible))
		b.wait(`document.querySelector("#dialog").open`, 5*time.Second)
		b.do(chromedp.SendKeys(chromedp.CSS(`#f-reason`), "kernel upgrade", chromedp.NodeVisible))
		b.shot("cordon-dialog")
		b.do(chromedp.Click(chromedp.CSS(`#dialog button[value="confirm"]`), chromedp.NodeVisible))
		b.wait(`!document.querySelector("#dialog").open`, 10*time.Second)
		b.wait(nodeAttr("dev-1-a", "schedulable", "false"), 10*time.Second)
		note := b.text(`article.node[data-node="dev-1-a"] [data-role="cordon"]`)
		if !strings.Contains(note, "kernel upgrade") || !strings.Contains(note, "operator") {
			t.Errorf("cordon note = %q; want the reason and who cordoned", note)
		}
		b.shot("cordoned")
	})

	// ---- give dev-1-a replicas: only it schedulable, then a resource ----
	step("uncordon dev-1-a, cordon dev-1-b", func() {
		b.confirmAction("uncordon", "dev-1-a")
		b.wait(nodeAttr("dev-1-a", "schedulable", "true"), 10*time.Second)
		b.confirmAction("cordon", "dev-1-b")
		b.wait(nodeAttr("dev-1-b", "schedulable", "false"), 10*time.Second)
	})
	var tenant string
	step("create a resource through the global API", func() {
		createFlavor(t, g)
		var res api.Resource
		g.Must(t, http.MethodPost, "/v1/resources", compute("web", 4, []map[string]any{{"name": "dev-1"}}, nil), http.StatusCreated, &res)
		tenant = res.Tenant
		waitShares(t, g, "web", map[string]int{"dev-1": 4}, 60*time.Second)
		b.wait(nodeAttr("dev-1-a", "replicas", "4"), 20*time.Second)
		b.wait(nodeAttr("dev-1-b", "replicas", "0"), 5*time.Second)
	})
	step("uncordon dev-1-b", func() {
		b.confirmAction("uncordon", "dev-1-b")
		b.wait(nodeAttr("dev-1-b", "schedulable", "true"), 10*time.Second)
	})

	// ---- drain from the page ----
	step("drain dev-1-a", func() {
		b.do(chromedp.Click(chromedp.CSS(`button[data-action="drain"][data-node="dev-1-a"]`), chromedp.NodeVisible))
		b.wait(`document.querySelector("#dialog").open`, 5*time.Second)
		// A bad value is reported inside the dialog, at its field.
		b.do(chromedp.SetValue(chromedp.CSS(`#f-deadline`), "soon"),
			chromedp.Click(chromedp.CSS(`#dialog button[value="confirm"]`), chromedp.NodeVisible))
		b.wait(`!document.querySelector("#dialog .dialog-error").hidden && document.querySelector("#dialog .dialog-error").textContent.includes("deadline")`, 5*time.Second)
		b.wait(`document.querySelector("#f-deadline").getAttribute("aria-invalid") === "true" && document.querySelector("#dialog").open`, 5*time.Second)
		b.do(chromedp.SetValue(chromedp.CSS(`#f-deadline`), "5m"),
			chromedp.SetValue(chromedp.CSS(`#f-maxParallel`), "2"),
			chromedp.SendKeys(chromedp.CSS(`#f-reason`), "hardware replacement", chromedp.NodeVisible))
		b.shot("drain-dialog")
		b.do(chromedp.Click(chromedp.CSS(`#dialog button[value="confirm"]`), chromedp.NodeVisible))
		b.wait(`!document.querySelector("#dialog").open`, 10*time.Second)
		b.wait(`!!document.querySelector('article.node[data-node="dev-1-a"] [data-role="drain"]')`, 10*time.Second)
		if state := b.value(`document.querySelector('article.node[data-node="dev-1-a"]').dataset.drain`); state == api.DrainRunning {
			b.shot("draining")
		} else {
			t.Logf("the drain was %q when first seen", state)
		}
		b.wait(nodeAttr("dev-1-a", "drain", api.DrainSucceeded), 90*time.Second)
		b.wait(nodeAttr("dev-1-a", "replicas", "0")+" && "+nodeAttr("dev-1-b", "replicas", "4"), 20*time.Second)
		moved := b.text(`article.node[data-node="dev-1-a"] [data-role="moved"]`)
		if moved != "4" {
			t.Errorf("drain panel shows %q moved; want 4", moved)
		}
		if b.value(`String(window.__notReloaded === true)`) != "true" {
			t.Errorf("the nodes page reloaded; it should update in place")
		}
		b.shot("drained")
	})

	// ---- resources and their replicas ----
	step("see the resource and its replicas", func() {
		b.do(chromedp.Click(chromedp.CSS(`nav a[href="resources"]`), chromedp.NodeVisible))
		row := fmt.Sprintf(`tr.res-row[data-resource=%q]`, tenant+"/web")
		b.wait(fmt.Sprintf(`!!document.querySelector(%q)`, row+`[data-phase="ready"]`), 20*time.Second)
		b.do(chromedp.Click(chromedp.CSS(row+` button[data-toggle]`), chromedp.NodeVisible))
		b.wait(`document.querySelectorAll(".detail-row .subtable tbody tr").length === 4`, 10*time.Second)
		b.wait(`Array.from(document.querySelectorAll(".detail-row .subtable tbody tr")).every(tr => tr.dataset.node === "dev-1-b")`, 20*time.Second)
		b.shot("resources")
	})

	// ---- the live event feed ----
	step("see the events", func() {
		b.do(chromedp.Click(chromedp.CSS(`nav a[href="events"]`), chromedp.NodeVisible))
		b.wait(`!!document.querySelector('#feed li[data-reason="Cordoned"]') && !!document.querySelector('#feed li[data-reason="Uncordoned"]')`, 20*time.Second)
		b.wait(`document.querySelector("#live").dataset.state === "live"`, 20*time.Second)
		// A new event arrives without a reload.
		before := b.value(`String(document.querySelectorAll("#feed li[data-id]").length)`)
		g.Must(t, http.MethodPost, "/v1/regions/dev-1/nodes/dev-1-b/cordon", map[string]any{"reason": "feed check"}, http.StatusOK, nil)
		b.wait(`Array.from(document.querySelectorAll('#feed li[data-reason="Cordoned"]')).some(li => li.textContent.includes("feed check"))`, 15*time.Second)
		after := b.value(`String(document.querySelectorAll("#feed li[data-id]").length)`)
		if n, _ := strconv.Atoi(after); n <= mustAtoi(before) {
			t.Errorf("the feed had %s events, then %s; want more", before, after)
		}
		b.shot("events")
	})

	// ---- the global console ----
	step("sign in to the global console", func() {
		b.do(chromedp.Navigate(globalURL + "/console/"))
		mode := b.waitValue(`document.body.dataset.auth`, 20*time.Second)
		if mode == "login" {
			b.shot("global-login")
			b.do(chromedp.SendKeys(chromedp.CSS(`#token`), token, chromedp.NodeVisible),
				chromedp.Click(chromedp.CSS(`#login-submit`), chromedp.NodeVisible))
		}
		b.wait(`!!document.querySelector('#regions tr[data-region="dev-1"]') && !!document.querySelector('#regions tr[data-region="dev-2"]')`, 20*time.Second)
		b.wait(`document.querySelector('[data-role="master"]').textContent.length > 0 && document.querySelector('[data-role="version"]').textContent !== "—"`, 10*time.Second)
		b.wait(`!!document.querySelector('#resources tr[data-resource$="/web"]')`, 10*time.Second)
		href := b.value(`document.querySelector('a[data-role="console-link"][data-region="dev-1"]').href`)
		if want := "http://" + c.Regions["dev-1"].HTTPAddr() + "/console/"; href != want {
			t.Errorf("dev-1's console link = %q; want %q", href, want)
		}
		b.shot("global")
	})

	// ---- a phone-sized screen ----
	step("the nodes page on a narrow screen", func() {
		b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
			chromedp.Navigate(regionURL+"/console/"))
		b.wait(nodeSel("dev-1-a"), 20*time.Second)
		b.shot("nodes-narrow")
		b.viewportShot("nodes-narrow-top")
	})

	b.checkErrors()
	t.Logf("screenshots in %s", shots)
}

// chromiumPath finds Chromium (or Chrome): $STRATA_CHROMIUM, then
// /usr/bin/chromium, then the usual names on PATH.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("STRATA_CHROMIUM"); p != "" {
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	var err error
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		var p string
		if p, err = exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Missing(t, "chromium (apt-get install chromium)", err)
	return ""
}

func artifactDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("STRATA_ARTIFACTS"); d != "" {
		dir := filepath.Join(d, "console")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.TempDir()
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// consoleBase returns the base URL that serves a tier's console next to
// its REST API: the tier itself when it mounts the console (it answers
// /console/ with a page), else a test server that serves handler() at
// /console/ and proxies everything else to the tier.
func consoleBase(t *testing.T, ctx context.Context, tierURL string, handler func() http.Handler) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, tierURL+"/console/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && strings.Contains(string(body), "data-page=") {
			t.Logf("%s serves its own console", tierURL)
			return tierURL
		}
	}
	target, err := url.Parse(tierURL)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/console/", handler())
	mux.Handle("/", httputil.NewSingleHostReverseProxy(target))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Logf("%s has no console yet: serving it on %s, in front of the tier", tierURL, srv.URL)
	return srv.URL
}

// restEvents reads a region's events through its REST API, for a console
// mounted outside the region.
type restEvents struct {
	base, token string
}

func (r *restEvents) Range(ctx context.Context, q events.Query) ([]events.Event, error) {
	v := url.Values{}
	if q.After != "" {
		v.Set("after", q.After)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(min(q.Limit, 1000)))
	}
	if q.Object != "" {
		v.Set("object", q.Object)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+"/v1/events?"+v.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET /v1/events: %d %s", resp.StatusCode, b)
	}
	var body struct {
		Items []events.Event `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	return body.Items, nil
}

func nodeSel(name string) string {
	return fmt.Sprintf(`!!document.querySelector('article.node[data-node=%q]')`, name)
}

func nodeAttr(name, attr, want string) string {
	return fmt.Sprintf(`(document.querySelector('article.node[data-node=%q]') || {dataset: {}}).dataset[%q] === %q`, name, attr, want)
}

// browser is a headless Chromium tab with the test's helpers.
type browser struct {
	t     *testing.T
	ctx   context.Context
	dir   string
	shots int
	cur   string

	mu   sync.Mutex
	errs []string
}

func newBrowser(t *testing.T, chrome, shots string) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chrome),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 900),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		acancel()
	})
	b := &browser{t: t, ctx: ctx, dir: shots}
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		if errors.Is(err, exec.ErrNotFound) {
			testenv.Missing(t, "chromium", err)
		}
		t.Fatalf("start chromium %s: %v", chrome, err)
	}
	err := chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg := ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil && ev.ExceptionDetails.Exception.Description != "" {
				msg += " " + ev.ExceptionDetails.Exception.Description
			}
			b.errs = append(b.errs, "exception: "+msg)
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range ev.Args {
					if a.Description != "" {
						parts = append(parts, a.Description)
					} else {
						parts = append(parts, string(a.Value))
					}
				}
				b.errs = append(b.errs, "console.error: "+strings.Join(parts, " "))
			}
		case *log.EventEntryAdded:
			e := ev.Entry
			// A 401 to the anonymous probe is how the pages learn that
			// a token is needed; the browser logs it as a failed load.
			if e.Level == log.EntryLevelError && !strings.Contains(e.Text, "401") {
				b.errs = append(b.errs, fmt.Sprintf("%s: %s (%s)", e.Source, e.Text, e.URL))
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// step runs one named step and logs how long it took.
func (b *browser) step(name string, fn func()) {
	b.t.Helper()
	b.cur = name
	start := time.Now()
	fn()
	b.t.Logf("step %-45q %6s", name, time.Since(start).Round(time.Millisecond))
}

func (b *browser) fail(format string, args ...any) {
	b.t.Helper()
	b.shot("FAILED")
	text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 3000) : ""`))
	b.mu.Lock()
	errs := strings.Join(b.errs, "\n  ")
	b.mu.Unlock()
	b.t.Fatalf("step %q: %s\n--- page text:\n%s\n--- browser errors:\n  %s", b.cur, fmt.Sprintf(format, args...), text, errs)
}

func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail("%v", err)
	}
}

// wait polls a JavaScript predicate until it is true. A page that is
// navigating (a click on a link) replaces the document the predicate runs
// in; the poll then starts again in the new one.
func (b *browser) wait(expr string, timeout time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		ctx, cancel := context.WithTimeout(b.ctx, left+5*time.Second)
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr,
			chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(left)))
		cancel()
		if err == nil {
			return
		}
		if navigating(err) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		b.fail("waiting for %s: %v", expr, err)
	}
}

func navigating(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Cannot find context with specified id") ||
		strings.Contains(msg, "Execution context was destroyed") ||
		strings.Contains(msg, "Inspected target navigated or closed")
}

// waitValue polls a JavaScript string expression until it is not empty.
func (b *browser) waitValue(expr string, timeout time.Duration) string {
	b.t.Helper()
	b.wait("!!("+expr+")", timeout)
	return b.value(expr)
}

func (b *browser) value(expr string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.fail("evaluating %s: %v", expr, err)
	}
	return v
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return strings.TrimSpace(b.value(fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, sel)))
}

// confirmAction clicks a node's action button and confirms the dialog.
func (b *browser) confirmAction(action, node string) {
	b.t.Helper()
	b.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-action=%q][data-node=%q]`, action, node)), chromedp.NodeVisible))
	b.wait(`document.querySelector("#dialog").open`, 5*time.Second)
	b.do(chromedp.Click(chromedp.CSS(`#dialog button[value="confirm"]`), chromedp.NodeVisible))
	b.wait(`!document.querySelector("#dialog").open`, 10*time.Second)
}

// shot saves a full-page screenshot as NN-name.png.
func (b *browser) shot(name string) {
	b.t.Helper()
	b.shots++
	// Let transitions (bars, highlights) settle.
	time.Sleep(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	p := filepath.Join(b.dir, fmt.Sprintf("%02d-%s.png", b.shots, name))
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
	}
}

// viewportShot saves what the screen shows, as NN-name.png.
func (b *browser) viewportShot(name string) {
	b.t.Helper()
	b.shots++
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(b.dir, fmt.Sprintf("%02d-%s.png", b.shots, name)), png, 0o644); err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
	}
}

// checkErrors fails the test on script exceptions, console errors and
// browser errors (a violated content security policy shows up here).
func (b *browser) checkErrors() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errs {
		b.t.Errorf("browser: %s", e)
	}
}
