package api

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

// TestConfigDeleteRacesItsUsers races, round after round, the delete of
// a Config or Secret with a write that makes a resource name it: a
// create, or an update of a resource that did not name it. One of the
// two wins: the delete (the write is refused, 400: it does not exist) or
// the write (the delete is refused, 409: in use). Never both, which
// would leave a resource naming what is gone.
func TestConfigDeleteRacesItsUsers(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	const rounds = 20
	for _, kind := range []string{"config", "secret"} {
		for _, write := range []string{"create", "update"} {
			t.Run(kind+"/"+write, func(t *testing.T) {
				both, writes, deletes := 0, 0, 0
				for i := range rounds {
					obj := fmt.Sprintf("%s-%s-%d", kind, write, i)
					user := "user-" + obj
					e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/"+kind+"s", map[string]any{"name": obj, "data": map[string]string{"k": "v"}}))
					naming := computeBody(user, func(m map[string]any) {
						m["spec"].(map[string]any)["compute"] = map[string]any{
							"image": "busybox", "files": []map[string]any{{kind: obj, "path": "/etc/" + obj}},
						}
					})
					method, path, wantWrite := "POST", "/v1/resources", http.StatusCreated
					if write == "update" {
						e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody(user)))
						method, path, wantWrite = "PUT", "/v1/resources/"+user, http.StatusOK
					}
					var (
						wg       sync.WaitGroup
						del, wr  *response
						dErr, wE error
					)
					start := make(chan struct{})
					wg.Go(func() { <-start; del, dErr = e.send(t.Context(), "DELETE", "/v1/"+kind+"s/"+obj, nil) })
					wg.Go(func() { <-start; wr, wE = e.send(t.Context(), method, path, naming) })
					close(start)
					wg.Wait()
					if dErr != nil || wE != nil {
						t.Fatalf("round %d: delete %v, %s %v", i, dErr, write, wE)
					}
					switch {
					case del.code == http.StatusOK && wr.code == wantWrite:
						both++
					case del.code == http.StatusOK:
						deletes++
						if wr.code != http.StatusBadRequest || !strings.Contains(string(wr.body), "does not exist") {
							t.Errorf("round %d: the delete won; the %s got %s, want 400 does not exist", i, write, wr)
						}
					case wr.code == wantWrite:
						writes++
						if del.code != http.StatusConflict || !strings.Contains(string(del.body), "is used by resource") {
							t.Errorf("round %d: the %s won; the delete got %s, want 409 in use", i, write, del)
						}
					default:
						t.Errorf("round %d: neither won: delete %s, %s %s", i, del, write, wr)
					}
					// Whatever won, the resource names only what exists.
					got := e.do(t, "GET", "/v1/resources/"+user, nil)
					if got.code != http.StatusOK {
						continue // the create was refused
					}
					if res := decodeAs[api.Resource](t, got); len(res.Spec.Compute.Refs()) > 0 {
						if r := e.do(t, "GET", "/v1/"+kind+"s/"+obj, nil); r.code != http.StatusOK {
							t.Errorf("round %d: resource %s names %s %s, which is %s", i, user, kind, obj, r)
						}
					}
				}
				t.Logf("%d rounds: the %s won %d, the delete %d, both %d", rounds, write, writes, deletes, both)
				if both > 0 {
					t.Errorf("in %d of %d rounds both the delete and the %s succeeded", both, rounds, write)
				}
			})
		}
	}
}
