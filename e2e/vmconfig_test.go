package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
)

// vmJob is a Job of the test VM image whose guest runs command.
func vmJob(name, command string, job map[string]any) map[string]any {
	return map[string]any{
		"name": name, "kind": "Job",
		"spec": map[string]any{
			"flavor":  vmFlavor,
			"compute": map[string]any{"image": vmImage, "command": []string{"sh", "-c", command}, "stopGracePeriod": "1s"},
			"job":     job,
		},
	}
}

// TestVMConfigsSecretsAndJobs runs, through every tier (global and
// region on their own etcd, an agent with the libvirt plugin on the
// machine's libvirtd, guests under TCG), the three VMs that show what a
// VM gets from Strata beyond a boot, all at once to keep the boots few:
//   - a Compute mounting a Config and a Secret as files and taking a key
//     of the Secret as a variable: its guest (the config drive) sees the
//     Config's content, the Secret's (compared by digest, so that the
//     value is never printed), mode 0400, read-only mounts;
//   - a Job whose guest exits 0: succeeded, its attempt's exit code 0;
//   - a Job whose guest exits 7 with backoffLimit 1: failed after 2
//     attempts, each with exit code 7, their consoles readable after.
//
// The Secret's value is in no tier's log nor on any console.
func TestVMConfigsSecretsAndJobs(t *testing.T) {
	h := requireVMHost(t)
	start := time.Now()
	c := startVMCluster(t, h, "e2e-v3", "10.233.3.0/24", "vm-c")
	c.createVMImage(t)
	g := c.global(0)
	const secret = "e2e-VM-Secret-7c3a"
	sum := sha256.Sum256([]byte(secret))
	g.Must(t, http.MethodPost, "/v1/configs", map[string]any{"name": "vm-conf", "data": map[string]string{"app.conf": "greeting=hello-vm"}}, http.StatusCreated, nil)
	g.Must(t, http.MethodPost, "/v1/secrets", map[string]any{"name": "vm-db", "data": map[string]string{"password": secret}}, http.StatusCreated, nil)

	cmd := strings.Join([]string{
		`echo "conf=$(cat /etc/app/app.conf)"`,
		`echo "pwsum=$(sha256sum </run/secrets/db/password | cut -d' ' -f1)"`,
		`[ "$(cat /run/secrets/db/password)" = "$DB_PASSWORD" ] && echo env-matches`,
		`echo "mode=$(stat -c %A /run/secrets/db/password)"`,
		`touch /etc/app/new 2>/dev/null || echo files-read-only`,
		`sleep 3600`,
	}, "; ")
	g.Must(t, http.MethodPost, "/v1/resources", map[string]any{
		"name": vmResource, "kind": "Compute", "replicas": 1,
		"spec": map[string]any{"flavor": vmFlavor, "compute": map[string]any{
			"image": vmImage, "command": []string{"sh", "-c", cmd},
			"files":   []map[string]any{{"config": "vm-conf", "path": "/etc/app"}, {"secret": "vm-db", "path": "/run/secrets/db"}},
			"envFrom": []map[string]any{{"secret": "vm-db", "key": "password", "name": "DB_PASSWORD"}},
		}},
		"schedule": map[string]any{"regions": []map[string]any{{"name": vmRegion}}},
	}, http.StatusCreated, nil)
	g.Must(t, http.MethodPost, "/v1/resources", vmJob("vm-ok", "echo job-ran; exit 0", map[string]any{"completions": 1}), http.StatusCreated, nil)
	g.Must(t, http.MethodPost, "/v1/resources", vmJob("vm-fails", "echo job-failing; exit 7", map[string]any{"backoffLimit": 1}), http.StatusCreated, nil)

	c.waitReady(t, 5*time.Minute)
	rep := c.theReplica(t)
	var log string
	want := []string{"conf=greeting=hello-vm", "pwsum=" + hex.EncodeToString(sum[:]), "env-matches", "mode=-r--------", "files-read-only"}
	framework.Eventually(t, 2*time.Minute, "the guest's checks of its files on its console", func() error {
		var err error
		if log, err = c.logsOf(vmResource, "replica="+rep.ID); err != nil {
			return err
		}
		for _, w := range want {
			if !strings.Contains(log, w) {
				return fmt.Errorf("no %q on the console:\n%s", w, lastLines(log, 30))
			}
		}
		return nil
	})
	t.Logf("the VM saw its files %v after the start", time.Since(start).Round(time.Second))

	ok := waitJob(t, g, "vm-ok", api.JobSucceeded, 5*time.Minute)
	if j := ok.Status.Job; j.Succeeded != 1 || j.Failed != 0 || len(j.Runs) != 1 || len(j.Runs[0].Attempts) != 1 {
		t.Errorf("vm-ok: job %+v; want 1 succeeded attempt", j)
	} else if a := j.Runs[0].Attempts[0]; a.Phase != api.AttemptSucceeded || a.ExitCode == nil || *a.ExitCode != 0 {
		t.Errorf("vm-ok: attempt %+v; want succeeded with exit code 0", a)
	}
	failed := waitJob(t, g, "vm-fails", api.JobFailed, 8*time.Minute)
	j := failed.Status.Job
	if failed.Status.Phase != api.PhaseError || j.Reason != api.ReasonBackoffLimitExceeded || j.Failed != 2 || j.Succeeded != 0 || len(j.Runs[0].Attempts) != 2 {
		t.Fatalf("vm-fails: got phase %s, job %+v; want error, BackoffLimitExceeded, 2 failed attempts", failed.Status.Phase, j)
	}
	for _, a := range j.Runs[0].Attempts {
		if a.ExitCode == nil || *a.ExitCode != 7 || a.Reason != "exited with code 7" {
			t.Errorf("vm-fails: attempt %+v; want exit code 7", a)
		}
		framework.Eventually(t, 30*time.Second, "the console of attempt "+a.ID, func() error {
			l, err := c.logsOf("vm-fails", "replica="+a.ID)
			if err == nil && !strings.Contains(l, "job-failing") {
				err = fmt.Errorf("no job-failing on the console:\n%s", lastLines(l, 20))
			}
			return err
		})
	}
	t.Logf("both jobs ended %v after the start", time.Since(start).Round(time.Second))

	// The secret's value is in no tier's log (debug level), nor on the
	// console.
	if strings.Contains(log, secret) {
		t.Errorf("the secret's value is on the console")
	}
	procs := append([]*framework.Proc{}, c.globals...)
	for _, r := range c.regions {
		procs = append(procs, r.proc)
		for _, a := range r.agents {
			procs = append(procs, a)
		}
	}
	if len(procs) != 3 {
		t.Fatalf("%d processes; want global, region and agent", len(procs))
	}
	for _, p := range procs {
		if l := p.Log(); len(l) == 0 || strings.Contains(string(l), secret) {
			t.Errorf("the log of %s is empty or holds the secret value", p.Name)
		}
	}
}
