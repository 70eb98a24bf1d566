package main

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// b10 times one resource of 10,000 replicas in one region through the
// global API, on etcds with stock --max-txn-ops: create → all ready, scale
// to 0 → ready with none, delete → gone (the region has destroyed every
// replica and forgotten the resource). s.o.rounds runs.
func (s *suite) b10(ctx context.Context, c *cluster) error {
	var up, down, gone []time.Duration
	for i := range s.o.rounds {
		u, d, g, err := c.bigResource(ctx, fmt.Sprintf("big-%d", i))
		if err != nil {
			return err
		}
		up, down, gone = append(up, u), append(down, d), append(gone, g)
	}
	ratio := func(d []time.Duration) string {
		if c.b1Rate <= 0 {
			return ""
		}
		at := float64(bigReplicas) / c.b1Rate
		return fmt.Sprintf("%.2f × %d replicas at B1's rate (%s)", spreadDurations(d).med/at, bigReplicas, fmtSecs(at))
	}
	note := fmt.Sprintf("One resource of %d replicas in one region on %d simulated agents; etcd with stock --max-txn-ops (128). No target in #21.", bigReplicas, s.o.agents)
	s.r.add(row{id: "B10", what: c.label("one resource of 10,000 replicas: create → all ready"), figure: spreadDurations(up).format(fmtSecs), ratio: ratio(up)})
	s.r.add(row{id: "B10", what: c.label("one resource of 10,000 replicas: scale to 0 → ready with none"), figure: spreadDurations(down).format(fmtSecs), ratio: ratio(down)})
	s.r.add(row{id: "B10", what: c.label("one resource of 10,000 replicas: delete → gone"), figure: spreadDurations(gone).format(fmtSecs), ratio: ratio(gone), notes: note})
	return nil
}

// bigReplicas is B10's resource's size.
const bigReplicas = 10000

// bigResource is one run of B10 on the resource name.
func (c *cluster) bigResource(ctx context.Context, name string) (up, down, gone time.Duration, err error) {
	const n = bigReplicas
	status := func(cond func(statusView) bool) func() error {
		return func() error {
			var v statusView
			if _, err := c.g.do(ctx, http.MethodGet, "/v1/resources/"+name, nil, &v); err != nil {
				return err
			}
			if !cond(v) {
				return fmt.Errorf("status %+v", v.Status)
			}
			return nil
		}
	}
	allReady := status(func(v statusView) bool { return v.ready(n) })
	none := status(func(v statusView) bool { return v.ready(0) && v.Status.Replicas == 0 })
	notFound := func() error {
		code, err := c.g.do(ctx, http.MethodGet, "/v1/resources/"+name, nil, nil)
		if code == http.StatusNotFound {
			return nil
		}
		return fmt.Errorf("still there (%d, %v)", code, err)
	}
	steps := []struct {
		what, method string
		body         any
		until        func() error
		took         *time.Duration
	}{
		{"ready", http.MethodPost, resource(name, n, nil), allReady, &up},
		{"scaled to 0", http.MethodPut, resource(name, 0, nil), none, &down},
		// Delete from 10,000 replicas: scale up again first (untimed).
		{"ready again", http.MethodPut, resource(name, n, nil), allReady, nil},
		{"gone", http.MethodDelete, nil, notFound, &gone},
	}
	for _, st := range steps {
		path := "/v1/resources/" + name
		if st.method == http.MethodPost {
			path = "/v1/resources"
		}
		start := time.Now()
		if _, err := c.g.do(ctx, st.method, path, st.body, nil); err != nil {
			return 0, 0, 0, err
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		err := waitFor(wctx, 100*time.Millisecond, name+" "+st.what, st.until)
		cancel()
		if err != nil {
			return 0, 0, 0, fmt.Errorf("%w\nregion log:\n%s", err, c.region.tail(10))
		}
		if st.took != nil {
			*st.took = time.Since(start)
		}
	}
	return up, down, gone, nil
}

// hbNodes is how many nodes B8 keeps heartbeating.
const hbNodes = 10000

// hbStartRate is how many of B8's agents start each second.
const hbStartRate = 250
