package api

import (
	"net/http"
	"testing"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/rest"
)

func TestPinnedRevisionSurvivesPruning(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	history := func(m map[string]any) { m["maxRevisionHistory"] = 2 }
	image := func(img string) func(map[string]any) {
		return func(m map[string]any) { m["spec"].(map[string]any)["compute"] = map[string]any{"image": img} }
	}
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("app", history)))
	pinned := decodeAs[api.Revision](t, e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/app/revisions/1/pin", nil)))
	if !pinned.Pinned || pinned.Number != 1 {
		t.Fatalf("pin: got %+v; want revision 1 pinned", pinned)
	}
	for _, img := range []string{"busybox:2", "busybox:3", "busybox:4"} {
		e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/resources/app", computeBody("app", history, image(img))))
	}
	revs := decodeAs[rest.List[api.Revision]](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/app/revisions", nil)))
	var got []int64
	for _, r := range revs.Items {
		got = append(got, r.Number)
	}
	if len(got) != 3 || got[0] != 1 || got[1] != 3 || got[2] != 4 {
		t.Fatalf("revisions after 3 updates with history 2: got %v; want [1 3 4] (1 pinned, 2 pruned)", got)
	}
	e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/app/revisions/1/unpin", nil))
	e.must(t, http.StatusNotFound, e.do(t, "POST", "/v1/resources/app/revisions/2/pin", nil))
	e.must(t, http.StatusBadRequest, e.do(t, "POST", "/v1/resources/app/revisions/x/pin", nil))
	// A rollback to the pinned revision works.
	back := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/app/rollback", map[string]any{"revision": 1})))
	if back.Revision != 5 {
		t.Errorf("rollback: got revision %d; want 5", back.Revision)
	}
}

func TestRolloutPauseResumeCancel(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("app")))
	paused := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/app/rollout/pause", nil)))
	if !paused.Rollout.Paused {
		t.Fatalf("pause: got paused %v; want true", paused.Rollout.Paused)
	}
	again := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/app/rollout/pause", nil)))
	if again.Generation != paused.Generation {
		t.Errorf("pausing twice: generation %d → %d; want no change", paused.Generation, again.Generation)
	}
	resumed := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/app/rollout/resume", nil)))
	if resumed.Rollout.Paused {
		t.Errorf("resume: still paused")
	}
	// No rollout runs: nothing to cancel.
	r := e.must(t, http.StatusConflict, e.do(t, "POST", "/v1/resources/app/rollout/cancel", nil))
	if body := decodeAs[api.ErrorBody](t, r); body.Error.Code != "Conflict" {
		t.Errorf("cancel without a rollout: got %+v; want a Conflict", body)
	}
	e.must(t, http.StatusNotFound, e.do(t, "POST", "/v1/resources/nope/rollout/pause", nil))
}
