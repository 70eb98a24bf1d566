package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/testkit/testenv"
	"github.com/stratahq/strata/testkit/testenv/logcheck"
)

// TestConsole drives the operator consoles that the real strata processes
// serve, in headless Chromium: sign in to region dev-1's console, cordon
// and uncordon nodes from the page and see them change without a reload,
// drain a node that runs replicas and follow its progress panel to
// "succeeded", look at the resources and the live event feed; sign in to
// the global console as the admin, see both regions with their leaders,
// create and revoke a token on the tokens page. Then the new operator's
// path: an admin makes a tenant token with stratactl, the tenant signs in
// to the global console with it, scales, rolls back, pauses and resumes
// and deletes a resource there and sees each action as an event, applies
// a network policy with stratactl and deletes it on the policies page. Every
// step leaves a full-page screenshot (the test logs where), and every line
// the processes logged is checked for repeated keys.
func TestConsole(t *testing.T) {
	chrome := chromiumPath(t)
	ctlBin := framework.Bin(t, "stratactl")
	start := time.Now()
	shots := artifactDir(t)

	t.Setenv("STRATA_LOG_FORMAT", "json") // inherited by the processes: logcheck reads their lines
	c := startCluster(t, clusterOpts{globals: 1, regions: []string{"dev-1", "dev-2"}, agentsPerRegion: 2})
	t.Logf("cluster up in %s", time.Since(start).Round(time.Millisecond))
	regionURL := servedConsole(t, "http://"+c.regions["dev-1"].http)
	globalURL := servedConsole(t, "http://"+c.globalHTTP[0])
	g := c.global(0)

	b := newBrowser(t, chrome, shots)
	regionConsoleSteps(t, b, g, regionURL)
	adminGlobalSteps(t, b, c, globalURL)
	tenantSteps(t, b, c, ctlBin, globalURL)

	// ---- a phone-sized screen ----
	b.step("the nodes page on a narrow screen", func() {
		b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
			chromedp.Navigate(regionURL+"/console/"))
		b.wait(nodeSel("dev-1-a"), 20*time.Second)
		b.shot("nodes-narrow")
		b.viewportShot("nodes-narrow-top")
	})

	b.checkErrors()
	procs := map[string]*framework.Proc{"global-g1": c.globals[0]}
	for _, name := range c.order {
		procs["region-"+name] = c.regions[name].proc
		for node, p := range c.regions[name].agents {
			procs["agent-"+node] = p
		}
	}
	checkJSONLogs(t, procs)
	t.Logf("screenshots in %s", shots)
}

// servedConsole checks that the tier at base serves its own console, and
// returns base. Nothing stands in for a tier that does not: that is a
// failure of the tier.
func servedConsole(t *testing.T, base string) string {
	t.Helper()
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get(base + "/console/")
	if err != nil {
		t.Fatalf("GET %s/console/: %v", base, err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "data-page=") {
		t.Fatalf("GET %s/console/: %d, %d bytes; want the console page", base, resp.StatusCode, len(body))
	}
	return base
}

// regionConsoleSteps drive region dev-1's console: nodes, cordon, drain,
// resources, events.
func regionConsoleSteps(t *testing.T, b *browser, g *framework.Client, regionURL string) {
	step := b.step
	step("sign in to region dev-1", func() {
		b.do(chromedp.Navigate(regionURL + "/console/"))
		// A region's API has no anonymous mode: the console asks for the
		// token.
		if mode := b.waitValue(`document.body.dataset.auth`, 20*time.Second); mode != "login" {
			t.Fatalf("region console auth mode %q; want login", mode)
		}
		b.shot("region-login")
		b.signIn(framework.RegionToken)
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
		g.Must(t, http.MethodPost, "/v1/regions/dev-1/nodes/dev-1-b/uncordon", nil, http.StatusOK, nil)
		b.shot("events")
	})
}

// adminGlobalSteps sign in to the global console as the admin: the
// regions with their leaders and console links, then the tokens page.
func adminGlobalSteps(t *testing.T, b *browser, c *procCluster, globalURL string) {
	b.step("sign in to the global console", func() {
		b.do(chromedp.Navigate(globalURL + "/console/"))
		if mode := b.waitValue(`document.body.dataset.auth`, 20*time.Second); mode != "login" {
			t.Fatalf("global console auth mode %q; want login", mode)
		}
		b.shot("global-login")
		if hint := b.text(`#login p.muted`); !strings.Contains(hint, "stratactl tokens create") {
			t.Errorf("the sign-in says %q; want it to name stratactl tokens create", hint)
		}
		b.signIn(c.token)
		b.wait(`!!document.querySelector('#regions tr[data-region="dev-1"]') && !!document.querySelector('#regions tr[data-region="dev-2"]')`, 20*time.Second)
		b.wait(`document.querySelector('[data-role="master"]').textContent.length > 0 && document.querySelector('[data-role="version"]').textContent !== "—"`, 10*time.Second)
		b.wait(`!!document.querySelector('#resources tr[data-resource$="/web"]')`, 10*time.Second)
		// Each region's leader, from its heartbeats (region ids are NAME-r1).
		for _, region := range []string{"dev-1", "dev-2"} {
			b.wait(fmt.Sprintf(`document.querySelector('#regions tr[data-region=%q] [data-role="leader"]').textContent === %q`, region, region+"-r1"), 20*time.Second)
		}
		// Each region's headroom, per flavor of the catalog, from its
		// heartbeats.
		for _, region := range []string{"dev-1", "dev-2"} {
			b.wait(fmt.Sprintf(`!!document.querySelector('#regions tr[data-region=%q] [data-role="headroom"] [data-flavor="small"]')`, region), 20*time.Second)
		}
		href := b.value(`document.querySelector('a[data-role="console-link"][data-region="dev-1"]').href`)
		if want := "http://" + c.regions["dev-1"].http + "/console/"; href != want {
			t.Errorf("dev-1's console link = %q; want %q", href, want)
		}
		b.shot("global")
	})
	b.step("create and revoke a token on the tokens page", func() {
		b.do(chromedp.Click(chromedp.CSS(`nav a[href="tokens"]`), chromedp.NodeVisible))
		b.wait(`document.querySelectorAll('#tokens tr[data-token]').length >= 1`, 20*time.Second)
		b.do(chromedp.Click(chromedp.CSS(`button[data-action="create-token"]`), chromedp.NodeVisible))
		b.wait(`document.querySelector("#dialog").open`, 5*time.Second)
		b.do(chromedp.SendKeys(chromedp.CSS(`#f-name`), "dashboards", chromedp.NodeVisible),
			chromedp.SendKeys(chromedp.CSS(`#f-tenant`), "acme", chromedp.NodeVisible),
			chromedp.SetValue(chromedp.CSS(`#f-role`), "viewer"),
			chromedp.SendKeys(chromedp.CSS(`#f-days`), "7", chromedp.NodeVisible))
		b.shot("token-dialog")
		b.do(chromedp.Click(chromedp.CSS(`#dialog button[value="confirm"]`), chromedp.NodeVisible))
		b.wait(`!document.querySelector("#secret").hidden`, 10*time.Second)
		secret := b.text(`#secret-value`)
		id := b.value(`document.querySelector("#secret").dataset.token`)
		if !strings.HasPrefix(secret, "strata_"+id+"_") || !strings.Contains(b.text(`#secret-config`), "--token "+secret) {
			t.Fatalf("the page shows secret %q for token %s and config line %q", secret, id, b.text(`#secret-config`))
		}
		b.wait(fmt.Sprintf(`!!document.querySelector('#tokens tr[data-token=%q][data-tenant="acme"][data-role="viewer"]')`, id), 10*time.Second)
		b.shot("token-created")
		viewer := framework.NewClient(globalURL, secret)
		if code, err := viewer.Get("/v1/resources", nil); err != nil || code != http.StatusOK {
			t.Fatalf("the new token: GET /v1/resources = %d, %v; want 200", code, err)
		}
		b.do(chromedp.Click(chromedp.CSS(`#secret-dismiss`), chromedp.NodeVisible))
		if s := b.value(`document.querySelector("#secret-value").textContent`); s != "" {
			t.Errorf("the secret stays on the page after Done: %q", s)
		}
		b.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-action="revoke"][data-token=%q]`, id)), chromedp.NodeVisible))
		b.wait(`document.querySelector("#dialog").open`, 5*time.Second)
		b.do(chromedp.Click(chromedp.CSS(`#dialog button[value="confirm"]`), chromedp.NodeVisible))
		b.wait(fmt.Sprintf(`!document.querySelector('#tokens tr[data-token=%q]')`, id), 10*time.Second)
		framework.Eventually(t, 10*time.Second, "the revoked token refused", func() error {
			if code, _ := viewer.Get("/v1/resources", nil); code != http.StatusUnauthorized {
				return fmt.Errorf("GET /v1/resources = %d", code)
			}
			return nil
		})
		b.shot("token-revoked")
	})
	b.step("the tokens page offers tenant-admin and refuses an admin of another tenant", func() {
		b.do(chromedp.Click(chromedp.CSS(`button[data-action="create-token"]`), chromedp.NodeVisible))
		b.wait(`document.querySelector("#dialog").open`, 5*time.Second)
		b.wait(`!!document.querySelector('#f-role option[value="tenant-admin"]')`, 5*time.Second)
		b.do(chromedp.SendKeys(chromedp.CSS(`#f-tenant`), "acme", chromedp.NodeVisible),
			chromedp.SetValue(chromedp.CSS(`#f-role`), "admin"))
		b.expectRefused("400", "/v1/tokens", func() {
			b.do(chromedp.Click(chromedp.CSS(`#dialog button[value="confirm"]`), chromedp.NodeVisible))
			b.wait(`!document.querySelector("#dialog .dialog-error").hidden && document.querySelector("#dialog .dialog-error").textContent.includes("tenant-admin") && document.querySelector('#f-role').getAttribute('aria-invalid') === 'true'`, 10*time.Second)
		})
		b.shot("token-admin-refused")
		b.do(chromedp.SetValue(chromedp.CSS(`#f-role`), "tenant-admin"))
		b.do(chromedp.Click(chromedp.CSS(`#dialog button[value="confirm"]`), chromedp.NodeVisible))
		b.wait(`!document.querySelector("#secret").hidden`, 10*time.Second)
		id := b.value(`document.querySelector("#secret").dataset.token`)
		b.wait(fmt.Sprintf(`!!document.querySelector('#tokens tr[data-token=%q][data-tenant="acme"][data-role="tenant-admin"]')`, id), 10*time.Second)
		b.do(chromedp.Click(chromedp.CSS(`#secret-dismiss`), chromedp.NodeVisible))
	})
	b.step("the alert rules page", func() {
		admin := framework.NewClient(globalURL, c.token)
		admin.Must(t, http.MethodPost, "/v1/alertrules", map[string]any{
			"name": "nodes", "reasons": []string{"NodeDown"},
			"receiver": map[string]any{"type": "alertmanager", "url": "https://hooks.example.com/hook", "secret": "console-test-secret-0123"},
		}, http.StatusCreated, nil)
		b.do(chromedp.Click(chromedp.CSS(`nav a[href="alerts"]`), chromedp.NodeVisible))
		b.wait(`!!document.querySelector('#alertrules tr[data-rule="nodes"]')`, 20*time.Second)
		if row := b.text(`#alertrules tr[data-rule="nodes"]`); !strings.Contains(row, "NodeDown") || !strings.Contains(row, "alertmanager") || strings.Contains(row, "console-test-secret") {
			t.Errorf("the rule's row says %q; want its reason and receiver, not its secret", row)
		}
		b.shot("alerts")
		admin.Must(t, http.MethodDelete, "/v1/alertrules/nodes", nil, http.StatusOK, nil)
	})
}

// tenantSteps are the new operator's path: a tenant token made with
// stratactl, a resource applied with it, and the global console signed in
// with it scaling, rolling back, pausing and resuming, and deleting the
// resource, each seen as an event.
func tenantSteps(t *testing.T, b *browser, c *procCluster, ctlBin, globalURL string) {
	home := t.TempDir()
	ctl := &stratactl{t: t, bin: ctlBin, home: home, config: filepath.Join(home, "config.yaml")}
	var secret, tokenID string
	var alice *framework.Client
	b.step("an admin makes a tenant token with stratactl", func() {
		ctl.must("", "config", "set-context", "admin", "--url", globalURL, "--token", c.token)
		out := ctl.must("", "--tenant", "acme", "tokens", "create", "alice", "--role", "member", "--expires-in", "1d")
		var line string
		for _, l := range strings.Split(out, "\n") {
			l = strings.TrimSpace(l)
			switch {
			case strings.HasPrefix(l, "strata_"):
				secret = l
			case strings.HasPrefix(l, "stratactl config set-context "):
				line = l
			}
		}
		if secret == "" || line != "stratactl config set-context acme --url "+globalURL+" --token "+secret {
			t.Fatalf("tokens create printed:\n%s\nwant the secret and its config line", out)
		}
		tokenID = strings.Split(secret, "_")[1]
		// Its quota, which the console shows it with its usage.
		ctl.must("", "--context", "admin", "tenants", "set-quota", "acme", "--replicas", "10")
		// The line works as printed, and the tenant applies with it.
		ctl.must("", strings.Fields(line)[1:]...)
		if got := ctl.must("", "--tenant", "acme", "tokens", "list"); !strings.Contains(got, tokenID) || !strings.Contains(got, "member") {
			t.Errorf("tokens list --tenant acme:\n%s\nwant %s, a member", got, tokenID)
		}
		ctl.must(shopManifest("v1"), "--context", "acme", "apply", "-f", "-")
		ctl.must(shopManifest("v2"), "--context", "acme", "apply", "-f", "-")
		alice = framework.NewClient(globalURL, secret)
		framework.Eventually(t, 60*time.Second, "shop ready at revision 2", func() error {
			r, err := resourceStatus(alice, "shop")
			if err != nil {
				return err
			}
			if r.Revision != 2 || r.Status.Phase != api.PhaseReady || r.Status.Ready != 2 {
				return fmt.Errorf("revision %d, %s, %d ready", r.Revision, r.Status.Phase, r.Status.Ready)
			}
			return nil
		})
	})
	b.step("the tenant signs in to the global console", func() {
		b.do(chromedp.Click(chromedp.CSS(`nav a[href="./"]`), chromedp.NodeVisible))
		b.wait(`document.body.dataset.page === "overview" && document.body.dataset.started === "true"`, 20*time.Second)
		b.do(chromedp.Click(chromedp.CSS(`#signout`), chromedp.NodeVisible))
		b.wait(`document.body.dataset.auth === "login"`, 10*time.Second)
		b.signIn(secret)
		row := `#resources tr[data-resource="acme/shop"]`
		b.wait(fmt.Sprintf(`!!document.querySelector(%q)`, row), 20*time.Second)
		if n := b.value(`String(document.querySelectorAll('#resources tr[data-resource]').length)`); n != "1" {
			t.Errorf("the tenant sees %s resources; want its one", n)
		}
		quota := `#quota tr[data-quota="replicas"]`
		b.wait(fmt.Sprintf(`!document.querySelector("#quota-card").hidden && !!document.querySelector(%q)`, quota), 20*time.Second)
		if used, limit := b.text(quota+` td:nth-child(2)`), b.text(quota+` td:nth-child(3)`); used != "2" || limit != "10" {
			// What the API says now, and what the tenant holds, to tell a
			// stale page from a wrong usage.
			var q map[string]any
			var res struct{ Items []api.Resource }
			_, qerr := alice.Get("/v1/tenants/acme/quota", &q)
			_, rerr := alice.Get("/v1/resources", &res)
			held := map[string]int{}
			for _, r := range res.Items {
				held[r.Name] = r.Replicas
			}
			t.Errorf("the tenant's replicas quota: got %s of %s (card note %q); want 2 of 10; the API answers %v (%v), the tenant holds %v (%v)",
				used, limit, b.text(`#quota-note`), q, qerr, held, rerr)
		}
		b.do(chromedp.Click(chromedp.CSS(row+` a[data-role="resource-link"]`), chromedp.NodeVisible))
		b.wait(`document.body.dataset.page === "resource" && document.querySelector("#res-title").dataset.revision === "2"`, 20*time.Second)
		b.wait(`document.querySelectorAll('#replicas tr[data-replica]').length === 2 && document.querySelectorAll('#revisions tr[data-revision]').length === 2`, 20*time.Second)
		b.shot("resource")
	})
	b.step("scale shop to 3 from the console", func() {
		b.do(chromedp.Click(chromedp.CSS(`button[data-action="scale"]`), chromedp.NodeVisible))
		b.wait(`document.querySelector("#dialog").open`, 5*time.Second)
		// A bad value is refused in the dialog, at its field.
		b.do(chromedp.SetValue(chromedp.CSS(`#f-replicas`), "-1"),
			chromedp.Click(chromedp.CSS(`#dialog button[value="confirm"]`), chromedp.NodeVisible))
		b.wait(`document.querySelector("#f-replicas").getAttribute("aria-invalid") === "true" && document.querySelector("#dialog").open`, 5*time.Second)
		b.do(chromedp.SetValue(chromedp.CSS(`#f-replicas`), "3"))
		b.shot("scale-dialog")
		b.do(chromedp.Click(chromedp.CSS(`#dialog button[value="confirm"]`), chromedp.NodeVisible))
		b.wait(`!document.querySelector("#dialog").open`, 10*time.Second)
		b.wait(`document.querySelector("#res-title").dataset.replicas === "3"`, 10*time.Second)
		b.wait(`!!document.querySelector('#events li[data-reason="Scaled"]')`, 10*time.Second)
		b.wait(`document.querySelectorAll('#replicas tr[data-replica][data-phase="ready"]').length === 3`, 60*time.Second)
		b.shot("scaled")
	})
	b.step("roll shop back to revision 1 from the console", func() {
		b.do(chromedp.Click(chromedp.CSS(`button[data-action="diff"][data-revision="1"]`), chromedp.NodeVisible))
		b.wait(`!document.querySelector("#diff").hidden && !!document.querySelector("#diff-text .diff-del") && !!document.querySelector("#diff-text .diff-add")`, 5*time.Second)
		if d := b.text(`#diff-text .diff-del`); !strings.Contains(d, "v1") {
			t.Errorf("the diff from r1 removes %q; want r1's line with v1", d)
		}
		b.shot("diff")
		b.do(chromedp.Click(chromedp.CSS(`button[data-action="rollback"][data-revision="1"]`), chromedp.NodeVisible))
		b.wait(`document.querySelector("#dialog").open`, 5*time.Second)
		b.do(chromedp.Click(chromedp.CSS(`#dialog button[value="confirm"]`), chromedp.NodeVisible))
		b.wait(`!document.querySelector("#dialog").open`, 10*time.Second)
		b.wait(`document.querySelector("#res-title").dataset.revision === "3"`, 10*time.Second)
		b.wait(`!!document.querySelector('#events li[data-reason="RolledBack"]')`, 10*time.Second)
		if spec := b.text(`#spec`); !strings.Contains(spec, `"v1"`) {
			t.Errorf("the spec after the rollback:\n%s\nwant v1's", spec)
		}
		b.shot("rolled-back")
	})
	b.step("pause and resume the rollout", func() {
		b.do(chromedp.Click(chromedp.CSS(`button[data-action="pause"]`), chromedp.NodeVisible))
		b.wait(`document.querySelector("#dialog").open`, 5*time.Second)
		b.do(chromedp.Click(chromedp.CSS(`#dialog button[value="confirm"]`), chromedp.NodeVisible))
		b.wait(`document.querySelector("#res-title").dataset.paused === "true" && !!document.querySelector('#events li[data-reason="RolloutPaused"]')`, 10*time.Second)
		b.do(chromedp.Click(chromedp.CSS(`button[data-action="resume"]`), chromedp.NodeVisible))
		b.wait(`document.querySelector("#dialog").open`, 5*time.Second)
		b.do(chromedp.Click(chromedp.CSS(`#dialog button[value="confirm"]`), chromedp.NodeVisible))
		b.wait(`document.querySelector("#res-title").dataset.paused === "false" && !!document.querySelector('#events li[data-reason="RolloutResumed"]')`, 10*time.Second)
		b.shot("events-on-resource")
	})
	b.step("delete shop from the console", func() {
		b.do(chromedp.Click(chromedp.CSS(`button[data-action="delete"]`), chromedp.NodeVisible))
		b.wait(`document.querySelector("#dialog").open`, 5*time.Second)
		// The name must be typed.
		b.do(chromedp.Click(chromedp.CSS(`#dialog button[value="confirm"]`), chromedp.NodeVisible))
		b.wait(`document.querySelector("#f-confirm").getAttribute("aria-invalid") === "true"`, 5*time.Second)
		b.do(chromedp.SendKeys(chromedp.CSS(`#f-confirm`), "shop", chromedp.NodeVisible))
		b.shot("delete-dialog")
		b.do(chromedp.Click(chromedp.CSS(`#dialog button[value="confirm"]`), chromedp.NodeVisible))
		b.wait(`document.body.dataset.page === "overview" && document.body.dataset.started === "true"`, 20*time.Second)
		b.shot("deleted")
		// Every action, as the tenant's events, by its token.
		var evs struct{ Items []api.Event }
		alice.Must(t, http.MethodGet, "/v1/events?object=resource/acme/shop&limit=1000", nil, http.StatusOK, &evs)
		var got []string
		for _, ev := range evs.Items {
			if ev.Region == "" && ev.Fields["token"] == tokenID {
				got = append(got, ev.Reason)
			}
		}
		if want := []string{"Scaled", "RolledBack", "RolloutPaused", "RolloutResumed", "DeletionRequested"}; !slices.Equal(got, want) {
			t.Errorf("the global events of acme/shop by %s: %v; want %v", tokenID, got, want)
		}
		framework.Eventually(t, 60*time.Second, "shop gone", func() error {
			if code, err := alice.Get("/v1/resources/shop", nil); err != nil || code != http.StatusNotFound {
				return fmt.Errorf("GET shop = %d, %v", code, err)
			}
			return nil
		})
	})
	b.step("a network policy applied with stratactl, seen and deleted on the policies page", func() {
		ctl.must("kind: NetworkPolicy\nname: shop-from-lb\nselector: {app: shop}\ningress:\n- from: [{resources: {matchLabels: {app: lb}}}]\n  ports: [{port: 8080}]\n",
			"--context", "acme", "apply", "-f", "-")
		b.do(chromedp.Click(chromedp.CSS(`nav a[href="policies"]`), chromedp.NodeVisible))
		b.wait(`!!document.querySelector('#policies tr[data-policy="shop-from-lb"]')`, 20*time.Second)
		if got := b.text(`#policies tr[data-policy="shop-from-lb"]`); !strings.Contains(got, "app=shop") || !strings.Contains(got, "app=lb → tcp/8080") {
			t.Errorf("the policy's row says %q; want its selector and what it admits", got)
		}
		b.shot("policies")
		b.do(chromedp.Click(chromedp.CSS(`button[data-action="delete"][data-policy="shop-from-lb"]`), chromedp.NodeVisible))
		b.wait(`document.querySelector("#dialog").open`, 5*time.Second)
		b.do(chromedp.Click(chromedp.CSS(`#dialog button[value="confirm"]`), chromedp.NodeVisible))
		b.wait(`!document.querySelector('#policies tr[data-policy="shop-from-lb"]')`, 10*time.Second)
		if got := ctl.must("", "--context", "acme", "get", "netpol"); strings.Contains(got, "shop-from-lb") {
			t.Errorf("get netpol after the console deleted it:\n%s", got)
		}
	})
}

// shopManifest is the tenant's resource, version marks its revision.
func shopManifest(version string) string {
	return `kind: Compute
name: shop
replicas: 2
spec:
  flavor: small
  compute:
    image: busybox
    env:
      VERSION: ` + version + `
schedule:
  regions:
  - name: dev-2
`
}

// stratactl runs the real CLI in a private home, against one config file.
type stratactl struct {
	t                 *testing.T
	bin, home, config string
}

func (s *stratactl) must(stdin string, args ...string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, append([]string{"--config", s.config}, args...)...)
	cmd.Env = []string{"HOME=" + s.home, "XDG_CONFIG_HOME=" + filepath.Join(s.home, "xdg"), "PATH=" + os.Getenv("PATH")}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		s.t.Fatalf("stratactl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// checkJSONLogs fails t for a line of a process's log that is not one
// JSON record, or that repeats a key.
func checkJSONLogs(t *testing.T, procs map[string]*framework.Proc) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(procs)) {
		lines := 0
		sc := bufio.NewScanner(bytes.NewReader(procs[name].Log()))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if bytes.HasPrefix(line, []byte("=== ")) || len(bytes.TrimSpace(line)) == 0 {
				continue // the framework's line at each start
			}
			lines++
			dups, err := logcheck.Line(line)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if len(dups) > 0 {
				t.Errorf("%s: a record repeats %s: %s", name, strings.Join(dups, ", "), line)
			}
		}
		t.Logf("%s: %d JSON records, none with a repeated key", name, lines)
	}
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

// artifactDir is where the screenshots go: $STRATA_ARTIFACTS/console
// (CI keeps it), else the test's artifact directory (kept under the
// output directory with go test -artifacts).
func artifactDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("STRATA_ARTIFACTS"); d != "" {
		dir := filepath.Join(d, "console")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.ArtifactDir()
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
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
	// refused, when set, is a failed load a step causes on purpose: its
	// status and the path of its URL ("400 /v1/tokens").
	refused string
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
			if e.Level == log.EntryLevelError && !strings.Contains(e.Text, "401") && !b.isRefused(e) {
				b.errs = append(b.errs, fmt.Sprintf("%s: %s (%s)", e.Source, e.Text, e.URL))
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// isRefused reports whether e is the failed load b.refused expects.
func (b *browser) isRefused(e *log.Entry) bool {
	status, path, ok := strings.Cut(b.refused, " ")
	return ok && strings.Contains(e.Text, "status of "+status) && strings.HasSuffix(e.URL, path)
}

// expectRefused runs fn, during which a failed load of path with status
// is what fn means to cause, not a browser error.
func (b *browser) expectRefused(status, path string, fn func()) {
	b.mu.Lock()
	b.refused = status + " " + path
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.refused = ""
		b.mu.Unlock()
	}()
	fn()
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

// signIn types a token into the console's sign-in and waits for the page.
func (b *browser) signIn(token string) {
	b.t.Helper()
	b.wait(`!document.querySelector("#login").hidden`, 10*time.Second)
	b.do(chromedp.SendKeys(chromedp.CSS(`#token`), token, chromedp.NodeVisible),
		chromedp.Click(chromedp.CSS(`#login-submit`), chromedp.NodeVisible))
	b.wait(`document.body.dataset.started === "true" && document.querySelector("#login").hidden`, 20*time.Second)
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
