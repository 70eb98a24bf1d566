package main

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// B2's open-loop rate and sample count.
const (
	b2Rate    = 5.0 // creates per second, one replica each
	b2Samples = 210 // over all runs, so that p99 rests on ≥ 200
)

// b2 measures create → ready of one replica on an idle cluster, open
// loop: a create is sent every 1/b2Rate s whatever the earlier ones do,
// and each is timed from its scheduled send to the first GET that reads
// it ready, less the fake provider's start time for that replica.
func (s *suite) b2(ctx context.Context, c *cluster) error {
	var all latencies
	var p99s []float64
	per := (b2Samples + s.o.rounds - 1) / s.o.rounds
	steps, err := c.watchB2Steps(ctx, "lat-")
	if err != nil {
		return err
	}
	defer steps.stop()
	for round := range s.o.rounds {
		var lat latencies
		openLoop(ctx, b2Rate, per, nil, &lat, func(ctx context.Context, i int, at time.Time) (time.Time, error) {
			return c.createReady(ctx, fmt.Sprintf("lat-%d-%d", round, i), at, steps)
		})
		p99s = append(p99s, lat.p(99).Seconds())
		all.merge(&lat)
	}
	p99 := all.p(99)
	_, errs := all.counts()
	ratio := ""
	if c.put1 != nil && c.put1.p(99) > 0 {
		ratio = fmt.Sprintf("p99 %.1f × one etcd put's p99 (%s)", float64(p99)/float64(c.put1.p(99)), ms(c.put1.p(99)))
	}
	sub := "the fake provider answers at once"
	if c.shape.fake.ApplyJitter > 0 {
		sub = fmt.Sprintf("each sample less its replica's fake start time (%s–%s)", c.shape.fake.ApplyLatency, c.shape.fake.ApplyLatency+c.shape.fake.ApplyJitter)
	}
	s.r.add(row{id: "B2", what: c.label("create → ready at the global API, 1 replica, idle, open loop"),
		figure: all.summary(), target: "p99 ≤ 100 ms, 0 errors", ratio: ratio, met: verdict(p99 <= 100*time.Millisecond && errs == 0),
		notes: fmt.Sprintf("%d runs of %d creates offered at %.0f/s; p99 per run %s; %s; readiness polled every 5 ms; %s.", s.o.rounds, per, b2Rate, spreadFloats(p99s).format(fmtMs), sub, steps.summary())})
	return nil
}

// createReady creates a resource of one replica, waits for it to read
// ready, deletes it, and returns when it was seen ready less the fake
// provider's start time for its replica; steps gets its times.
func (c *cluster) createReady(ctx context.Context, name string, scheduled time.Time, steps *b2Steps) (time.Time, error) {
	if _, err := c.g.do(ctx, http.MethodPost, "/v1/resources", resource(name, 1, nil), nil); err != nil {
		return time.Time{}, err
	}
	posted := time.Now()
	wctx, cancel := context.WithTimeout(ctx, readyWithin)
	defer cancel()
	err := waitFor(wctx, 5*time.Millisecond, name+" ready", func() error {
		var v statusView
		if _, err := c.g.do(ctx, http.MethodGet, "/v1/resources/"+name, nil, &v); err != nil {
			return err
		}
		if !v.ready(1) {
			return fmt.Errorf("not ready")
		}
		return nil
	})
	ready := time.Now()
	if err != nil {
		return ready, err
	}
	if c.shape.fake.ApplyJitter > 0 || c.shape.fake.ApplyLatency > 0 {
		var reps struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
		}
		if _, err := c.g.do(ctx, http.MethodGet, "/v1/resources/"+name+"/replicas", nil, &reps); err != nil {
			return ready, err
		}
		if len(reps.Items) != 1 {
			return ready, fmt.Errorf("%s: %d replicas; want 1", name, len(reps.Items))
		}
		fake := c.shape.fake.ApplyLatencyOf(reps.Items[0].ID)
		steps.sample(name, scheduled, posted, ready, fake)
		ready = ready.Add(-fake)
	} else {
		steps.sample(name, scheduled, posted, ready, 0)
	}
	_, err = c.g.do(ctx, http.MethodDelete, "/v1/resources/"+name, nil, nil)
	return ready, err
}
