package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// b9Big and b9Small are the sizes of B9's two tenants; b9Matches of
// their resources carry the label the list selects.
const (
	b9Big     = 10000
	b9Small   = 10
	b9Matches = 10
)

// b9 measures a list with a label selector that matches 10 resources, in
// a tenant of 10,000 and in a tenant of 10, on one global API process
// with its own etcd: the list is served from the cache's label index, so
// its cost follows the matches, not the tenant.
func (s *suite) b9(ctx context.Context) error {
	token := "strata_bench009_0123456789abcdef0123456789abcdef01234567"
	eps, err := s.startEtcd(ctx, "etcd-b9", 1)
	if err != nil {
		return err
	}
	ep := eps[0]
	_, redis, err := s.startRedis(ctx, "redis-b9")
	if err != nil {
		return err
	}
	h, g := freeAddr(), freeAddr()
	cfg := s.write("b9.yaml", fmt.Sprintf(`id: b9
listen: {http: %q, grpc: %q}
etcd: {endpoints: [%q]}
redis: {addr: %q}
api: {bootstrapToken: %q}
insecure: true
log: {level: warn}
`, h, g, ep, redis, token))
	p, err := s.start("global-b9", "global", "--config", cfg)
	if err != nil {
		return err
	}
	defer p.kill()
	c := newClient("http://"+h, token, nil)
	if err := waitFor(ctx, 100*time.Millisecond, "global API (B9)", func() error {
		_, err := c.do(ctx, http.MethodGet, "/readyz", nil, nil)
		return err
	}); err != nil {
		return err
	}
	if _, err := c.do(ctx, http.MethodPost, "/v1/flavors", map[string]any{
		"name": "tiny", "kind": "container", "spec": map[string]any{"vcpus": 0.1, "memoryMiB": 64},
	}, nil); err != nil {
		return err
	}
	start := time.Now()
	if err := b9Fill(ctx, c, "big", b9Big); err != nil {
		return err
	}
	if err := b9Fill(ctx, c, "small", b9Small); err != nil {
		return err
	}
	filled := time.Since(start)

	// A second of each first, unmeasured: the process settles after the
	// creates (the master's first passes, garbage collection). Then
	// s.o.rounds rounds of each, alternating.
	b9Measure(ctx, c, "small", time.Second)
	b9Measure(ctx, c, "big", time.Second)
	var smallLat, bigLat []time.Duration
	var smallRates, bigRates, ratios []float64
	for range s.o.rounds {
		small := b9Measure(ctx, c, "small", b9Duration)
		big := b9Measure(ctx, c, "big", b9Duration)
		if small.err != nil || big.err != nil {
			return fmt.Errorf("B9 lists: %v, %v", small.err, big.err)
		}
		smallLat, bigLat = append(smallLat, small.lat...), append(bigLat, big.lat...)
		smallRates, bigRates = append(smallRates, small.rate), append(bigRates, big.rate)
		ratios = append(ratios, big.rate/small.rate)
	}
	p99 := pct(bigLat, 99)
	ratio := spreadFloats(ratios)
	s.r.add(row{id: "B9", what: fmt.Sprintf("list with a selector matching %d, tenant of %d (baseline)", b9Matches, b9Small),
		figure: fmt.Sprintf("%s, p99 %s (%d samples)", spreadFloats(smallRates).format(fmtRate), ms(pct(smallLat, 99)), len(smallLat)), ratio: "(the baseline)"})
	s.r.add(row{id: "B9", what: fmt.Sprintf("list with a selector matching %d, tenant of %d", b9Matches, b9Big),
		figure: fmt.Sprintf("%s, p99 %s (%d samples)", spreadFloats(bigRates).format(fmtRate), ms(p99), len(bigLat)), target: "p99 ≤ 20 ms, ≥ 0.8 × baseline req/s",
		ratio: fmt.Sprintf("%s × baseline", ratio.format(func(v float64) string { return fmt.Sprintf("%.2f", v) })), met: verdict(p99 <= 20*time.Millisecond && ratio.med >= 0.8),
		notes: fmt.Sprintf("%d clients, %s per tenant and round, same process; closed loop (a throughput figure: p99 is each answer's own time); %d resources created in %s.", b9Clients, b9Duration, b9Big+b9Small, filled.Round(time.Second))})
	return nil
}

// b9Clients GET at once, each as fast as answered, for b9Duration.
const (
	b9Clients  = 16
	b9Duration = 5 * time.Second
)

// b9Fill creates n resources in tenant, b9Matches of them labelled
// sel=hit, 32 at a time.
func b9Fill(ctx context.Context, c *client, tenant string, n int) error {
	var (
		next   atomic.Int64
		failed atomic.Value
		wg     sync.WaitGroup
	)
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				labels := map[string]string{"app": fmt.Sprintf("app-%d", i%50)}
				if i%(n/b9Matches) == 0 {
					labels["sel"] = "hit"
				}
				body := map[string]any{"name": fmt.Sprintf("r-%05d", i), "kind": "Compute", "labels": labels, "replicas": 0,
					"spec": map[string]any{"flavor": "tiny", "compute": map[string]any{"image": "busybox"}}}
				if _, err := c.do(ctx, http.MethodPost, "/v1/resources?tenant="+tenant, body, nil); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return err
	}
	return ctx.Err()
}

type b9Result struct {
	lat  []time.Duration
	rate float64
	err  error
}

// b9Measure lists tenant's resources with the selector from b9Clients
// clients for d, checking every answer holds the b9Matches.
func b9Measure(ctx context.Context, c *client, tenant string, d time.Duration) b9Result {
	path := "/v1/resources?tenant=" + tenant + "&selector=" + url.QueryEscape("sel=hit")
	var (
		mu     sync.Mutex
		lat    []time.Duration
		failed atomic.Value
		wg     sync.WaitGroup
	)
	dctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	for range b9Clients {
		wg.Go(func() {
			for dctx.Err() == nil {
				var page struct {
					Items []struct{} `json:"items"`
				}
				t0 := time.Now()
				_, err := c.do(dctx, http.MethodGet, path, nil, &page)
				if dctx.Err() != nil {
					return
				}
				if err == nil && len(page.Items) != b9Matches {
					err = fmt.Errorf("tenant %s: got %d resources; want %d", tenant, len(page.Items), b9Matches)
				}
				if err != nil {
					failed.Store(err)
					return
				}
				mu.Lock()
				lat = append(lat, time.Since(t0))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	all := lat
	res := b9Result{lat: all, rate: float64(len(all)) / time.Since(start).Seconds()}
	res.err, _ = failed.Load().(error)
	return res
}
