package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stratahq/strata/providers/fake"
)

// TestConsoleJob opens a Job's page in the global console, in a real
// browser, over a cluster on the fake provider: a job of 2 completions
// whose attempts exit 0 shows both attempts succeeded with exit code 0,
// and a job whose attempts exit 1 shows Failed with each exit code.
func TestConsoleJob(t *testing.T) {
	chrome := chromiumPath(t)
	shots := artifactDir(t)
	c := startCluster(t, clusterOpts{globals: 1, regions: []string{"dev-1"}, agentsPerRegion: 1})
	globalURL := servedConsole(t, "http://"+c.globalHTTP[0])
	g := c.global(0)
	createFlavor(t, g)
	job := func(name string, code int, spec map[string]any) map[string]any {
		return map[string]any{
			"name": name, "kind": "Job",
			"spec": map[string]any{"flavor": "small", "job": spec, "compute": map[string]any{"image": "busybox",
				"env": map[string]string{fake.EnvFail: fake.FailExit, fake.EnvExitCode: fmt.Sprint(code)}}},
			"schedule": map[string]any{"regions": []map[string]any{{"name": "dev-1"}}},
		}
	}
	g.Must(t, http.MethodPost, "/v1/resources", job("nightly", 0, map[string]any{"completions": 2}), http.StatusCreated, nil)
	g.Must(t, http.MethodPost, "/v1/resources", job("broken", 1, map[string]any{"backoffLimit": 1}), http.StatusCreated, nil)

	b := newBrowser(t, chrome, shots)
	b.step("sign in to the global console", func() {
		b.do(chromedp.Navigate(globalURL + "/console/"))
		if mode := b.waitValue(`document.body.dataset.auth`, 20*time.Second); mode != "login" {
			t.Fatalf("global console auth mode %q; want login", mode)
		}
		b.signIn(c.token)
		b.wait(`!!document.querySelector('#resources tr[data-resource$="/nightly"]')`, 20*time.Second)
	})
	page := func(name string) string {
		return globalURL + "/console/resource?" + url.Values{"tenant": {"default"}, "name": {name}}.Encode()
	}
	b.step("a succeeded job's attempts", func() {
		b.do(chromedp.Navigate(page("nightly")))
		b.wait(`document.querySelectorAll('#job-attempts tr[data-phase="Succeeded"][data-exit-code="0"]').length === 2`, 60*time.Second)
		if note := b.text(`#job-note`); note != "Succeeded · 2/2 succeeded · 0 active · 0 failed" {
			t.Errorf("job note %q; want Succeeded · 2/2 succeeded · 0 active · 0 failed", note)
		}
		b.shot("job-succeeded")
	})
	b.step("a failed job's attempts and exit codes", func() {
		b.do(chromedp.Navigate(page("broken")))
		b.wait(`document.querySelectorAll('#job-attempts tr[data-phase="Failed"][data-exit-code="1"]').length === 2`, 60*time.Second)
		b.wait(`document.querySelector('#job-note').textContent.startsWith("Failed (BackoffLimitExceeded)")`, 10*time.Second)
		b.shot("job-failed")
	})
	b.checkErrors()
}
