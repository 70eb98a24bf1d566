package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// readyWithin bounds the wait for a benchmark's replicas to be ready.
const readyWithin = 60 * time.Second

// b1run is what one run of B1 measured.
type b1run struct {
	rate      float64
	elapsed   time.Duration
	accepted  time.Duration
	failed    int64
	regionRSS float64
	account   string // the first run's (b1Account)
}

// b1 creates resources × replicas as fast as 32 clients can and measures
// replicas/s until all are ready, s.o.rounds times (deleting them
// between runs); B3 offers GETs and POSTs open loop meanwhile, and once
// on the idle cluster before, as their baseline.
func (s *suite) b1(ctx context.Context, c *cluster) error {
	for i := range b3Seeds {
		if _, err := c.g.do(ctx, http.MethodPost, "/v1/resources", resource(fmt.Sprintf("seed-%d", i), 1, nil), nil); err != nil {
			return err
		}
	}
	if err := c.waitReady(ctx, "seed-", b3Seeds); err != nil {
		return err
	}
	idleRSS, err := c.region.rssMiB()
	if err != nil {
		return err
	}
	var idleGets, idlePosts latencies
	stop := make(chan struct{})
	time.AfterFunc(b3IdleFor, func() { close(stop) })
	c.sampleAPI(ctx, "idle", stop, &idleGets, &idlePosts)
	if err := c.deleteAll(ctx, "b3p-idle-"); err != nil {
		return err
	}

	var runs []b1run
	var gets, posts latencies
	server := serverTimes{}
	for round := range s.o.rounds {
		r, err := s.b1Run(ctx, c, round, &gets, &posts, server)
		if err != nil {
			return err
		}
		runs = append(runs, r)
		if err := c.deleteAll(ctx, fmt.Sprintf("b1-%d-", round)); err != nil {
			return err
		}
		if err := c.deleteAll(ctx, fmt.Sprintf("b3p-%d-", round)); err != nil {
			return err
		}
	}
	c.b3IdleGets, c.b3IdlePosts = &idleGets, &idlePosts
	s.b1Report(c, runs, idleRSS, &gets, &posts, server)
	var rates []float64
	for _, r := range runs {
		rates = append(rates, r.rate)
	}
	c.b1Rate = spreadFloats(rates).med
	return nil
}

// b1Run is one run of B1, its API sampled by B3; server adds what the
// global replica timed of B3's GETs while they ran (not the cleanup's
// DELETEs after, which read etcd too).
func (s *suite) b1Run(ctx context.Context, c *cluster, round int, gets, posts *latencies, server serverTimes) (b1run, error) {
	total := s.o.resources * s.o.replicas
	if s.o.profiles != "" && round == 0 {
		names := []string{c.globals[0].name, c.globals[1].name, c.region.name, c.sim.name}
		for i := range c.etcdGlobal {
			names = append(names, fmt.Sprintf("%s-etcd-global-%d", c.name, i), fmt.Sprintf("%s-etcd-region-%d", c.name, i))
		}
		go s.prof.cpu(ctx, 15*time.Second, "b1", c.name, names...)
	}
	var acct *b1Account
	if round == 0 {
		var err error
		if acct, err = c.startB1Account(ctx); err != nil {
			return b1run{}, err
		}
	}
	server0 := c.getServerTimes(ctx)
	start := time.Now()
	stop := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Go(func() { c.sampleAPI(ctx, fmt.Sprint(round), stop, gets, posts) })
	failed := c.createMany(ctx, fmt.Sprintf("b1-%d-", round), s.o.resources, s.o.replicas)
	r := b1run{accepted: time.Since(start), failed: failed}
	err := c.waitReady(ctx, fmt.Sprintf("b1-%d-", round), total-int(failed)*s.o.replicas)
	r.elapsed = time.Since(start)
	close(stop)
	sampling.Wait()
	server.add(c.getServerTimes(ctx).since(server0))
	if acct != nil {
		r.account = acct.finish(ctx, c, total, r.elapsed)
		log.Printf("bench: B1 run %d on the %s cluster: %s", round+1, c.name, r.account)
	}
	if err != nil {
		return r, err
	}
	r.rate = float64(total-int(failed)*s.o.replicas) / r.elapsed.Seconds()
	r.regionRSS, err = c.region.rssMiB()
	// Logged as well: a suite that runs out of budget in a later run
	// still tells what this one measured.
	log.Printf("bench: B1 run %d on the %s cluster: %.0f replicas/s, region RSS %.0f MiB", round+1, c.name, r.rate, r.regionRSS)
	if s.o.profiles != "" {
		// The runtime's own account of the RSS just read (heap in use,
		// idle and released, the GC's next goal, stacks), every run: the
		// heap profile alone does not tell what the rest is.
		s.prof.fetch(ctx, c.region.name, "heap?debug=1", fmt.Sprintf("b1-region-memstats-%s-run%d.txt", c.name, round+1))
	}
	if s.o.profiles != "" && round == 0 {
		// What the last collection found live, which set the heap goal
		// the RSS just read grew to, before heapProfile's collection
		// shows what stays.
		s.prof.fetch(ctx, c.region.name, "heap", "b1-region-heap-lastgc-"+c.name+".pprof")
		s.prof.heap(ctx, c.region.name, "b1-region-heap-"+c.name+".pprof")
	}
	return r, err
}

// createMany POSTs n resources prefix0..prefix<n-1> from 32 clients, as
// fast as they are answered, and returns how many failed.
func (c *cluster) createMany(ctx context.Context, prefix string, n, replicas int) int64 {
	names := make(chan int)
	var writers sync.WaitGroup
	var failed atomic.Int64
	for range 32 {
		writers.Go(func() {
			for i := range names {
				if _, err := c.g.do(ctx, http.MethodPost, "/v1/resources", resource(fmt.Sprintf("%s%d", prefix, i), replicas, nil), nil); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	for i := range n {
		names <- i
	}
	close(names)
	writers.Wait()
	return failed.Load()
}

// deleteAll deletes the resources named prefix* from 32 clients and waits
// until the global API lists none (their regions destroyed every replica).
func (c *cluster) deleteAll(ctx context.Context, prefix string) error {
	names, err := c.names(ctx, prefix)
	if err != nil {
		return err
	}
	ch := make(chan string)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for n := range ch {
				_, _ = c.g.do(ctx, http.MethodDelete, "/v1/resources/"+n, nil, nil)
			}
		})
	}
	for _, n := range names {
		ch <- n
	}
	close(ch)
	wg.Wait()
	// Long: on a loaded machine the global tier's cache can lag the
	// deletes of 20,000 replicas by minutes.
	wctx, cancel := context.WithTimeout(ctx, 8*time.Minute)
	defer cancel()
	return waitFor(wctx, time.Second, "resources "+prefix+"* gone", func() error {
		left, err := c.names(ctx, prefix)
		if err == nil && len(left) > 0 {
			err = fmt.Errorf("%d left", len(left))
		}
		return err
	})
}

func (c *cluster) waitReady(ctx context.Context, prefix string, want int) error {
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	return waitFor(wctx, 250*time.Millisecond, fmt.Sprintf("%d replicas of %s* ready", want, prefix), func() error {
		ready, err := c.readyReplicas(ctx, prefix)
		if err == nil && ready < want {
			err = fmt.Errorf("%d/%d ready", ready, want)
		}
		return err
	})
}

// b1Report adds the rows of B1, B3 and (wanted) B6.
func (s *suite) b1Report(c *cluster, runs []b1run, idleRSS float64, gets, posts *latencies, getServer serverTimes) {
	var rates, rss []float64
	var failed int64
	var accepted []time.Duration
	account := ""
	for _, r := range runs {
		if r.account != "" {
			account = " First run: " + r.account + "."
		}
		rates = append(rates, r.rate)
		rss = append(rss, r.regionRSS)
		failed += r.failed
		accepted = append(accepted, r.accepted)
	}
	total := s.o.resources * s.o.replicas
	sp := spreadFloats(rates)
	ratio, ok := "", sp.med >= 5000 && failed == 0
	if c.put128 > 0 {
		ratio = fmt.Sprintf("%.2f × raw etcd puts, 128 clients (same etcd)", sp.med/c.put128)
		ok = ok && sp.med/c.put128 >= 0.5
	}
	s.r.add(row{id: "B1", what: c.label(fmt.Sprintf("throughput: %d replicas (%d × %d) on %d agents, create → all ready", total, s.o.resources, s.o.replicas, s.o.agents)),
		figure: sp.format(fmtRate) + fmt.Sprintf(", %d failed creates", failed), target: "≥ 5,000/s and ≥ 0.5 × etcd", ratio: ratio, met: verdict(ok),
		notes: fmt.Sprintf("Creates accepted in %s.%s", spreadDurations(accepted).format(fmtSecs), account)})
	s.b3Rows(c, "API under B1 load", gets, posts, getServer.note(), "")
	if s.o.wants("B6") && c.shape.production {
		r := spreadFloats(rss)
		s.r.add(row{id: "B6", what: c.label(fmt.Sprintf("memory: region process with %d nodes and %d replicas", s.o.agents, total)),
			figure: r.format(fmtMiB) + " RSS", target: "≤ 256 MiB", ratio: fmt.Sprintf("%.2f × the same region before B1 (%.0f MiB)", r.med/idleRSS, idleRSS), met: verdict(r.med <= 256)})
	}
}

// names lists the resources named prefix*.
func (c *cluster) names(ctx context.Context, prefix string) ([]string, error) {
	var out []string
	err := c.eachResource(ctx, func(name string, _ statusView) {
		if len(name) >= len(prefix) && name[:len(prefix)] == prefix {
			out = append(out, name)
		}
	})
	return out, err
}
