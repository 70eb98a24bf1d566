package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

// TestJobREST creates a Job through the REST API, reads it back with its
// defaults, and checks that bad job specs are refused with a 400 naming
// the field.
func TestJobREST(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	r := e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources",
		`{"name":"backup","kind":"Job","spec":{"flavor":"small","compute":{"image":"busybox","command":["sh","-c","exit 0"]},"job":{"completions":3,"parallelism":2}}}`))
	got := decodeAs[api.Resource](t, r)
	j := got.Spec.Job
	if got.Kind != api.KindJob || got.Replicas != 1 || j == nil || j.Completions != 3 || j.Parallelism != 2 || j.Backoff() != api.DefaultJobBackoffLimit || j.TTL.Duration != api.DefaultJobTTL {
		t.Fatalf("got %+v (job %+v); want a Job of 1 replica, completions 3, parallelism 2, default backoff limit and TTL", got, j)
	}
	if rp := got.Spec.Compute.RestartPolicy; rp != api.RestartNever {
		t.Errorf("restart policy: got %q; want never", rp)
	}
	list := decodeAs[ResourceList](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources?kind=Job", nil)))
	if len(list.Items) != 1 || list.Items[0].Name != "backup" {
		t.Errorf("kind=Job: got %d items; want backup only", len(list.Items))
	}

	tests := []struct {
		name, job, compute, extra string
		field, msg                string
		flavor                    string // default small
	}{
		{"negative backoff", `{"backoffLimit":-1}`, "", "", "spec.job.backoffLimit", "between 0 and 100", ""},
		{"bad schedule", `{"schedule":"61 * * * *"}`, "", "", "spec.job.schedule", "minute", ""},
		{"six fields", `{"schedule":"0 * * * * *"}`, "", "", "spec.job.schedule", "want 5", ""},
		{"policy without schedule", `{"concurrencyPolicy":"Forbid"}`, "", "", "spec.job.concurrencyPolicy", "scheduled jobs only", ""},
		{"unknown policy", `{"schedule":"@daily"}`, "", "", "spec.job.schedule", "fields", ""},
		{"bad policy", `{"schedule":"0 3 * * *","concurrencyPolicy":"Sometimes"}`, "", "", "spec.job.concurrencyPolicy", "not one of", ""},
		{"too many completions", `{"completions":1001}`, "", "", "spec.job.completions", "between 1 and 1000", ""},
		{"negative deadline", `{"activeDeadline":"-1s"}`, "", "", "spec.job.activeDeadline", "negative", ""},
		{"restart always", `{}`, `,"restartPolicy":"always"`, "", "spec.compute.restartPolicy", "never restarted", ""},
		{"two replicas", `{}`, "", `,"replicas":2`, "replicas", "one region", ""},
		{"unknown field", `{"completion":3}`, "", "", "spec.job.completion", "unknown", ""},
		{"vm without command", `{}`, "", "", "spec.compute.command", "needs a command", "vmx"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			flavor := tc.flavor
			if flavor == "" {
				flavor = "small"
			}
			body := `{"name":"bad","kind":"Job"` + tc.extra + `,"spec":{"flavor":"` + flavor + `","compute":{"image":"busybox"` + tc.compute + `},"job":` + tc.job + `}}`
			r := e.must(t, http.StatusBadRequest, e.do(t, "POST", "/v1/resources", body))
			eb := decodeAs[api.ErrorBody](t, r).Error
			if eb.Field != tc.field || !strings.Contains(eb.Message, tc.msg) {
				t.Errorf("got field %q, message %q; want field %q, a message with %q", eb.Field, eb.Message, tc.field, tc.msg)
			}
		})
	}
	// A VM Job with a command: its guest runs it and powers off.
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", `{"name":"vmimg","kind":"Image","spec":{"image":{"kernel":"/srv/vm/vmlinuz"}}}`))
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", `{"name":"vmjob","kind":"Job","spec":{"flavor":"vmx","compute":{"image":"vmimg","command":["sh","-c","exit 0"]},"job":{}}}`))
}
