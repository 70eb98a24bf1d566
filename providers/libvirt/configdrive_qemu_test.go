package libvirt

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// testConfigDrive boots a VM with a Config file, a Secret file and
// variables from both, whose command checks them in the guest (content,
// modes, read-only) and exits with the number of the first check that
// fails: its exit code, read from the exit disk, must be 0. The host's
// copies are the provider's only (0600 in a directory others cannot
// list), the secret's value is nowhere on the console, and all of it
// goes with the replica.
func (e *qemuEnv) testConfigDrive(t *testing.T) {
	const secret = "s3cr3t-'value\"with$quotes"
	a := e.vm(t, "cfg")
	a.Spec.Compute.Command = []string{"sh", "-c", strings.Join([]string{
		`[ "$(cat /etc/app/greeting)" = "hello vm" ] || exit 11`,
		`[ "$(cat /etc/app/level)" = "3" ] || exit 12`,
		`[ "$(cat /run/secrets/db/password)" = "$WANT" ] || exit 13`,
		`[ "$(stat -c %a /etc/app/greeting)" = 444 ] || exit 14`,
		`[ "$(stat -c %a /run/secrets/db/password)" = 400 ] || exit 15`,
		`touch /etc/app/new 2>/dev/null && exit 16`,
		`echo x >/run/secrets/db/password 2>/dev/null && exit 17`,
		`[ "$GREETING" = "hello vm" ] || exit 18`,
		`[ "$DB_PASSWORD" = "$WANT" ] || exit 19`,
		`[ "$PWD" = /etc/app ] || exit 20`,
		`exit 0`,
	}, "\n")}
	a.Spec.Compute.WorkingDir = "/etc/app"
	a.Spec.Compute.RestartPolicy = api.RestartNever
	d := &provider.ConfigData{
		Env: map[string]string{"GREETING": "hello vm", "DB_PASSWORD": secret, "WANT": secret},
		Files: []provider.File{
			{Dir: "/etc/app", Name: "greeting", Data: []byte("hello vm")},
			{Dir: "/etc/app", Name: "level", Data: []byte("3")},
			{Dir: "/run/secrets/db", Name: "password", Data: []byte(secret), Secret: true},
		},
	}
	t.Cleanup(func() { _ = e.p.Delete(context.WithoutCancel(t.Context()), &api.Assignment{ID: a.ID}, 0) })
	start := time.Now()
	if _, err := e.p.ApplyConfig(t.Context(), a, d); err != nil {
		t.Fatalf("ApplyConfig: %v", err)
	}
	for _, f := range []string{e.p.drives.path(a.ID), e.p.drives.exitPath(a.ID)} {
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: got %v, %v; want a file only its owner reads", f, fi.Mode(), err)
		}
	}
	if fi, err := os.Stat(e.p.drives.dir); err != nil || fi.Mode().Perm()&0o044 != 0 {
		t.Errorf("%s: got %v, %v; want a directory nobody else lists", e.p.drives.dir, fi.Mode(), err)
	}
	var st api.AssignmentStatus
	eventually(t, 4*time.Minute, "the VM's command to exit", func() (bool, string) {
		var err error
		st, err = e.p.Status(t.Context(), a.ID)
		if err != nil {
			return false, err.Error()
		}
		// Stopped: with an exit code, or crashed (which has none).
		return st.ExitCode != nil || st.Reason == "crashed", fmt.Sprintf("phase %q (%s)", st.Phase, st.Reason)
	})
	t.Logf("boot, checks and power off took %v", time.Since(start).Round(time.Millisecond))
	log, _ := os.ReadFile(e.p.console.path(a.ID))
	if st.ExitCode == nil {
		t.Fatalf("got phase %q (%s) and no exit code; console:\n%s", st.Phase, st.Reason, log)
	}
	if *st.ExitCode != 0 || st.Phase != api.PhaseError || st.Restarts != 0 {
		t.Fatalf("got phase %q (%s), exit code %d, %d restarts; want exit code 0 (else the number of the failed check), no restart; console:\n%s",
			st.Phase, st.Reason, *st.ExitCode, st.Restarts, log)
	}
	if strings.Contains(string(log), "s3cr3t") {
		t.Errorf("the secret's value is on the console:\n%s", log)
	}
	if !strings.Contains(string(log), "mounted 1 file(s) read-only at /run/secrets/db") {
		t.Errorf("console: got no line of the secret's mount in\n%s", log)
	}
	if err := e.p.Delete(t.Context(), a, time.Second); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	for _, f := range []string{e.p.drives.path(a.ID), e.p.drives.exitPath(a.ID)} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("after Delete: %s: got %v; want it removed", f, err)
		}
	}
}
