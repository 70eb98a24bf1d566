package api

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
)

// TestGetSeesOtherWritersAtOnce checks that GET of one resource is
// linearizable: once another writer's write has committed (the master's
// status, another replica's update; here direct writes to etcd), the very
// next GET returns it, with no wait for this replica's caches. A GET served
// from a cache that lags etcd would fail here.
func TestGetSeesOtherWritersAtOnce(t *testing.T) {
	e := newEnv(t, envConfig{sharedCaches: true})
	e.fixtures(t, nil)
	created := decodeAs[api.Resource](t, e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("app"))))
	name := state.ResourceName(DefaultTenant, "app")
	for i := range 20 {
		st := *created.Status
		st.Phase, st.Ready = api.PhaseReady, i+1
		if _, err := e.st.Statuses.Put(waitFor(t), name, &st); err != nil {
			t.Fatal(err)
		}
		label := fmt.Sprint(i)
		it, err := e.st.Resources.Modify(waitFor(t), name, func(r *api.Resource) error {
			r.Labels = map[string]string{"n": label}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/app", nil)))
		if got.Status == nil || got.Status.Ready != i+1 || got.Labels["n"] != label || got.ResourceVersion != it.ModRevision {
			t.Fatalf("GET right after another writer's writes %d: got status %+v, labels %v, rv %d; want ready %d, label n=%s, rv %d",
				i, got.Status, got.Labels, got.ResourceVersion, i+1, label, it.ModRevision)
		}
	}
}
