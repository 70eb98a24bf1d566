package api

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/etcdserver"
)

// etcdCalls counts a client's unary etcd calls (not its watch and
// keepalive streams) by etcdserver.Method, the label the tier's
// strata_etcd_request_duration_seconds gives them.
type etcdCalls struct {
	mu sync.Mutex
	n  map[string]int
}

// dialOptions are the options of a client whose calls c counts; none
// for a nil c.
func (c *etcdCalls) dialOptions() []grpc.DialOption {
	if c == nil {
		return nil
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		c.mu.Lock()
		if c.n == nil {
			c.n = map[string]int{}
		}
		c.n[etcdserver.Method(method, req)]++
		c.mu.Unlock()
		return invoker(ctx, method, req, reply, cc, opts...)
	})}
}

// during returns the calls made while fn ran.
func (c *etcdCalls) during(fn func()) map[string]int {
	c.mu.Lock()
	before := maps.Clone(c.n)
	c.mu.Unlock()
	fn()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for m, n := range c.n {
		if d := n - before[m]; d > 0 {
			out[m] = d
		}
	}
	return out
}

// TestEtcdRoundTripsOfAWrite pins how many etcd calls the API makes per
// request of a resource's write path: a POST is one transaction (its
// admission, revision, status and idempotency record folded into it),
// with no read before it, also with an idempotency key; a GET is one
// linearizable read; a DELETE reads the resource and writes it.
func TestEtcdRoundTripsOfAWrite(t *testing.T) {
	calls := &etcdCalls{}
	e := newEnv(t, envConfig{sharedCaches: true, etcdCalls: calls})
	e.fixtures(t, nil)
	// What the calls of a request do not include: the flavor read from
	// etcd while the replica's cache has not seen it yet (another
	// replica may have just written it), and the admin token's last use,
	// recorded in the background once a minute at most.
	poll(t, "the flavor in the cache", func() error {
		if _, ok := e.svc.Resources().flavors.Get("small"); !ok {
			return fmt.Errorf("flavor small not in the cache yet")
		}
		return nil
	})
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("warm")))
	poll(t, "the token's use recorded", func() error {
		toks, _, err := e.st.Tokens.ListAll(t.Context())
		for _, it := range toks {
			if err == nil && it.Value.LastUsedAt.IsZero() {
				err = fmt.Errorf("token %s not marked used yet", it.Name)
			}
		}
		return err
	})
	for _, tc := range []struct {
		name         string
		method, path string
		body         any
		opts         []reqOption
		code         int
		want         map[string]int
	}{
		{"POST", "POST", "/v1/resources", computeBody("app"), nil, http.StatusCreated, map[string]int{"Txn": 1}},
		{"POST with an idempotency key", "POST", "/v1/resources", computeBody("keyed"), []reqOption{withHeader("Idempotency-Key", "k1")}, http.StatusCreated, map[string]int{"Txn": 1}},
		// A retry: the write fails on the key's record, which is read, and
		// the answer is the resource as it is now.
		{"POST again with the key", "POST", "/v1/resources", computeBody("keyed"), []reqOption{withHeader("Idempotency-Key", "k1")}, http.StatusCreated,
			map[string]int{"Txn": 1, "Range": 1, "Txn (read)": 1}},
		{"GET", "GET", "/v1/resources/app", nil, nil, http.StatusOK, map[string]int{"Txn (read)": 1}},
		{"DELETE", "DELETE", "/v1/resources/app", nil, nil, http.StatusAccepted, map[string]int{"Txn (read)": 1, "Txn": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := calls.during(func() { e.must(t, tc.code, e.do(t, tc.method, tc.path, tc.body, tc.opts...)) })
			if !maps.Equal(got, tc.want) {
				t.Errorf("etcd calls of %s %s: got %v; want %v", tc.method, tc.path, got, tc.want)
			}
		})
	}
}

// TestIdempotentRetryOutlivesItsChecks: a create is written before its
// idempotency key is looked up, so a retry that the checks would now
// refuse (the quota the first request filled) must still answer as the
// first request did, while a new request is refused.
func TestIdempotentRetryOutlivesItsChecks(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	e.setQuota(t, "team-r", map[string]any{"quota": map[string]any{"replicas": 1}})
	in := func(name string) map[string]any {
		return computeBody(name, func(m map[string]any) { m["tenant"] = "team-r" })
	}
	key := withHeader("Idempotency-Key", "fill-quota")
	first := decodeAs[api.Resource](t, e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", in("one"), key)))
	again := decodeAs[api.Resource](t, e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", in("one"), key)))
	if again.UID != first.UID {
		t.Errorf("retry: got uid %s; want the first request's %s", again.UID, first.UID)
	}
	e.must(t, http.StatusForbidden, e.do(t, "POST", "/v1/resources", in("two"), withHeader("Idempotency-Key", "over-quota")))
}
