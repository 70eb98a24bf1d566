package api

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/rest"
)

// writers is how many clients write one object at once.
const writers = 20

// putAll sends writers PUTs at once, body(i) for the i-th, through the
// env's server or, for odd i, through others[i/2 % len(others)], and
// returns how many answered each status.
func (e *testEnv) putAll(t *testing.T, path string, body func(i int) map[string]any, others ...*httptest.Server) map[int]int {
	t.Helper()
	codes := make([]int, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range writers {
		wg.Go(func() {
			<-start
			var opts []reqOption
			if len(others) > 0 && i%2 == 1 {
				opts = append(opts, via(others[i/2%len(others)]))
			}
			r, err := e.send(t.Context(), "PUT", path, body(i), opts...)
			if err != nil {
				errs[i] = err
				return
			}
			codes[i] = r.code
			if r.code != http.StatusOK && r.code != http.StatusConflict {
				errs[i] = fmt.Errorf("PUT %s: got %s", path, r)
			}
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	got := map[int]int{}
	for _, c := range codes {
		got[c]++
	}
	return got
}

// TestConcurrentPuts races PUTs to one resource and to one flavor, round
// after round, past the resource's revision history: a PUT without a
// resourceVersion is retried by the server until it lands (20 successes),
// one with the resourceVersion all read succeeds once (1 success, 19
// conflicts). Nothing answers 404: pruning old revisions never fails a
// write.
func TestConcurrentPuts(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	const history = 3
	withHistory := func(m map[string]any) { m["maxRevisionHistory"] = history }
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("app", withHistory)))

	resourceBody := func(round, i int, version int64) map[string]any {
		return computeBody("app", withHistory, func(m map[string]any) {
			m["spec"].(map[string]any)["compute"] = map[string]any{"image": fmt.Sprintf("busybox:%d.%d", round, i)}
			if version != 0 {
				m["resourceVersion"] = version
			}
		})
	}
	flavorBody := func(round, i int, version int64) map[string]any {
		m := map[string]any{"kind": "container", "spec": map[string]any{"vcpus": 0.5, "memoryMiB": 256 + 20*round + i}}
		if version != 0 {
			m["resourceVersion"] = version
		}
		return m
	}
	type object struct {
		name    string
		path    string
		body    func(round, i int, version int64) map[string]any
		version func(t *testing.T) int64
	}
	objects := []object{
		{"resource", "/v1/resources/app", resourceBody, func(t *testing.T) int64 {
			return decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/app", nil))).ResourceVersion
		}},
		{"flavor", "/v1/flavors/small", flavorBody, func(t *testing.T) int64 {
			return decodeAs[api.Flavor](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/flavors/small", nil))).ResourceVersion
		}},
	}
	round := 0
	for _, o := range objects {
		t.Run(o.name, func(t *testing.T) {
			for range 3 {
				round++
				got := e.putAll(t, o.path, func(i int) map[string]any { return o.body(round, i, 0) })
				if want := map[int]int{http.StatusOK: writers}; !maps.Equal(got, want) {
					t.Errorf("round %d without resourceVersion: got statuses %v; want %v", round, got, want)
				}
				round++
				v := o.version(t)
				got = e.putAll(t, o.path, func(i int) map[string]any { return o.body(round, i, v) })
				if want := map[int]int{http.StatusOK: 1, http.StatusConflict: writers - 1}; !maps.Equal(got, want) {
					t.Errorf("round %d with resourceVersion %d: got statuses %v; want %v", round, v, got, want)
				}
			}
		})
	}

	// Every write that made a revision is counted, and the history is
	// back within its bound once the writes are done.
	r := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/app", nil)))
	if want := int64(1 + 3*(writers+1)); r.Revision != want {
		t.Errorf("got revision %d; want %d (1, then %d writes of a new spec)", r.Revision, want, 3*(writers+1))
	}
	revs := decodeAs[rest.List[api.Revision]](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/app/revisions", nil)))
	var numbers []int64
	for _, rv := range revs.Items {
		numbers = append(numbers, rv.Number)
	}
	if len(numbers) > history || !slices.Contains(numbers, r.Revision) {
		t.Errorf("got revisions %v; want at most %d, the current one (%d) among them", numbers, history, r.Revision)
	}
}

// via sends a request to srv rather than the env's server.
func via(srv *httptest.Server) reqOption {
	return func(r *http.Request) {
		u, err := url.Parse(srv.URL)
		if err == nil {
			r.URL.Scheme, r.URL.Host, r.Host = u.Scheme, u.Host, u.Host
		}
	}
}

// replica starts another API replica on the env's etcd, with caches of its
// own, as a second global replica behind a load balancer would be.
func (e *testEnv) replica(t *testing.T, id string) *httptest.Server {
	t.Helper()
	svc, err := New(Options{State: e.st, ID: id, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = svc.Run(ctx) })
	srv := httptest.NewServer(rest.Guard(svc.Handler(), rest.GuardOptions{}))
	t.Cleanup(func() {
		srv.Close()
		cancel()
		wg.Wait()
	})
	poll(t, "replica "+id+" ready", func() error { return svc.Ready(ctx) })
	return srv
}

// TestConcurrentPutsTwoReplicas is TestConcurrentPuts' resource case with
// the writers split over two API replicas, whose races only etcd sees.
func TestConcurrentPutsTwoReplicas(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	other := e.replica(t, "global-2")
	const history = 3
	withHistory := func(m map[string]any) { m["maxRevisionHistory"] = history }
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("app", withHistory)))
	body := func(round, i int, version int64) map[string]any {
		return computeBody("app", withHistory, func(m map[string]any) {
			m["spec"].(map[string]any)["compute"] = map[string]any{"image": fmt.Sprintf("busybox:%d.%d", round, i)}
			if version != 0 {
				m["resourceVersion"] = version
			}
		})
	}
	for round := range 3 {
		got := e.putAll(t, "/v1/resources/app", func(i int) map[string]any { return body(2*round, i, 0) }, other)
		if want := map[int]int{http.StatusOK: writers}; !maps.Equal(got, want) {
			t.Errorf("round %d without resourceVersion: got statuses %v; want %v", 2*round, got, want)
		}
		v := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/app", nil))).ResourceVersion
		got = e.putAll(t, "/v1/resources/app", func(i int) map[string]any { return body(2*round+1, i, v) }, other)
		if want := map[int]int{http.StatusOK: 1, http.StatusConflict: writers - 1}; !maps.Equal(got, want) {
			t.Errorf("round %d with resourceVersion %d: got statuses %v; want %v", 2*round+1, v, got, want)
		}
	}
}
