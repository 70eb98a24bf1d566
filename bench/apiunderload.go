package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// B3's open-loop rates, and what its GETs read.
const (
	b3GetRate  = 100.0            // GETs per second during B1
	b3PostRate = 20.0             // POSTs per second during B1
	b3Seeds    = 50               // resources B3's GETs read
	b3IdleFor  = 10 * time.Second // 200 POSTs at b3PostRate
)

// sampleAPI offers GETs of the seed resources and POSTs of new ones
// (b3p-<tag>-N) open loop until stop.
func (c *cluster) sampleAPI(ctx context.Context, tag string, stop <-chan struct{}, gets, posts *latencies) {
	reader := c.newClient(c.gHTTP[0])
	var wg sync.WaitGroup
	wg.Go(func() {
		openLoop(ctx, b3GetRate, 0, stop, gets, func(ctx context.Context, _ int, _ time.Time) (time.Time, error) {
			// A 404 is an error: every seed exists.
			_, err := reader.do(ctx, http.MethodGet, fmt.Sprintf("/v1/resources/seed-%d", rand.IntN(b3Seeds)), nil, nil)
			return time.Now(), err
		})
	})
	wg.Go(func() {
		openLoop(ctx, b3PostRate, 0, stop, posts, func(ctx context.Context, i int, _ time.Time) (time.Time, error) {
			_, err := reader.do(ctx, http.MethodPost, "/v1/resources", resource(fmt.Sprintf("b3p-%s-%d", tag, i), 1, nil), nil)
			return time.Now(), err
		})
	})
	wg.Wait()
}

// b3Rows adds B3's GET and POST rows for the API sampled under load (what
// names the load), with their ratios to the idle baseline and their notes.
func (s *suite) b3Rows(c *cluster, load string, gets, posts *latencies, getNotes, postNotes string) {
	for _, x := range []struct {
		what  string
		load  *latencies
		idle  *latencies
		limit time.Duration
		rate  float64
		notes string
	}{{"GET one resource", gets, c.b3IdleGets, 50 * time.Millisecond, b3GetRate, getNotes}, {"POST a resource of 1 replica", posts, c.b3IdlePosts, 150 * time.Millisecond, b3PostRate, postNotes}} {
		_, errs := x.load.counts()
		p99 := x.load.p(99)
		ratio := ""
		if x.idle != nil && x.idle.p(99) > 0 {
			ratio = fmt.Sprintf("p99 %.1f × idle (%s)", float64(p99)/float64(x.idle.p(99)), x.idle.summary())
		}
		s.r.add(row{id: "B3", what: c.label(fmt.Sprintf("%s: %s, open loop at %.0f/s", load, x.what, x.rate)), figure: x.load.summary(),
			target: fmt.Sprintf("p99 ≤ %s, 0 errors", ms(x.limit)), ratio: ratio, met: verdict(p99 <= x.limit && errs == 0), notes: x.notes})
	}
}
