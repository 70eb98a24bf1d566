package main

import (
	"context"
	"fmt"
	"log"
	"math"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"
)

// b3HalfFor is how long each run of B3's half load offers its creates.
const b3HalfFor = 15 * time.Second

// halfLoad is B3's half load: creates of resources of replicas each,
// offered at perSec so that they make half of B1's rate in replicas/s,
// and how many of them fill window, at most most (so that the cluster
// holds no more than B1 left it; the window is then shorter).
func halfLoad(b1Rate float64, replicas int, window time.Duration, most int) (perSec float64, n int, err error) {
	if b1Rate <= 0 || replicas <= 0 || most <= 0 {
		return 0, 0, fmt.Errorf("no B1 rate to take half of (B1 measured %.0f replicas/s of resources of %d replicas)", b1Rate, replicas)
	}
	perSec = b1Rate / 2 / float64(replicas)
	n = min(max(1, int(math.Round(perSec*window.Seconds()))), most)
	return perSec, n, nil
}

// halfRun is what one run of B3's half load measured of the load itself.
type halfRun struct {
	accepted float64       // replicas/s: accepted creates from the first send to the last answer
	failed   int           // creates that failed
	catchUp  time.Duration // from the last create's answer to every accepted resource read ready
	ours     float64       // cores the cluster's processes used over the run
	machine  float64       // cores the whole machine used over the run
}

// b3Half samples the API as B3 does while creates of B1's resources are
// offered open loop at half of B1's median rate on this cluster, after
// B1's runs (so that B1's own figures are not touched), s.o.rounds times.
func (s *suite) b3Half(ctx context.Context, c *cluster) error {
	perSec, n, err := halfLoad(c.b1Rate, s.o.replicas, b3HalfFor, s.o.resources)
	if err != nil {
		return err
	}
	var runs []halfRun
	var gets, posts latencies
	server := serverTimes{}
	for round := range s.o.rounds {
		r, err := s.halfRun(ctx, c, round, perSec, n, &gets, &posts, server)
		if err != nil {
			return err
		}
		runs = append(runs, r)
		log.Printf("bench: B3 half load run %d on the %s cluster: %.0f replicas/s accepted of %.0f offered, all ready %s after the last create", round+1, c.name, r.accepted, perSec*float64(s.o.replicas), r.catchUp.Round(time.Millisecond))
		for _, prefix := range []string{fmt.Sprintf("h-%d-", round), fmt.Sprintf("b3p-h%d-", round)} {
			if err := c.deleteAll(ctx, prefix); err != nil {
				return err
			}
		}
	}
	load := halfNote(runs, c.b1Rate, perSec, n, s.o.replicas)
	s.b3Rows(c, "API at half of B1's rate (open loop)", &gets, &posts, load+" "+server.note(), "Sampled in the same runs as the GET row's (its notes give the load).")
	return nil
}

// halfRun is one run of B3's half load: n creates of resources h-<round>-N
// offered at perSec while sampleAPI samples the API, until every accepted
// resource reads ready; server adds what the global replica timed of the
// GETs meanwhile.
func (s *suite) halfRun(ctx context.Context, c *cluster, round int, perSec float64, n int, gets, posts *latencies, server serverTimes) (halfRun, error) {
	prefix := fmt.Sprintf("h-%d-", round)
	server0, cpu0, machine0 := c.getServerTimes(ctx), s.cpuByProc(), machineBusy()
	start := time.Now()
	stop := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Go(func() { c.sampleAPI(ctx, fmt.Sprintf("h%d", round), stop, gets, posts) })
	var creates latencies
	openLoop(ctx, perSec, n, nil, &creates, func(ctx context.Context, i int, _ time.Time) (time.Time, error) {
		_, err := c.g.do(ctx, http.MethodPost, "/v1/resources", resource(fmt.Sprintf("%s%d", prefix, i), s.o.replicas, nil), nil)
		return time.Now(), err
	})
	answered := time.Since(start)
	ok, failed := creates.counts()
	err := c.waitReady(ctx, prefix, ok*s.o.replicas)
	elapsed := time.Since(start)
	close(stop)
	sampling.Wait()
	server.add(c.getServerTimes(ctx).since(server0))
	r := halfRun{accepted: float64(ok*s.o.replicas) / answered.Seconds(), failed: failed, catchUp: elapsed - answered,
		machine: (machineBusy() - machine0) / elapsed.Seconds()}
	for p, v := range s.cpuByProc() {
		r.ours += (v - cpu0[p]) / elapsed.Seconds()
	}
	return r, err
}

// halfNote describes B3's half load over its runs: what was offered, what
// the cluster accepted, how soon after the last create every resource
// read ready (whether the cluster kept up), and the CPU it took.
func halfNote(runs []halfRun, b1Rate, perSec float64, n, replicas int) string {
	var accepted, ours, machine []float64
	var catchUp []time.Duration
	failed := 0
	for _, r := range runs {
		accepted = append(accepted, r.accepted)
		ours = append(ours, r.ours)
		machine = append(machine, r.machine)
		catchUp = append(catchUp, r.catchUp)
		failed += r.failed
	}
	cores := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	var b strings.Builder
	fmt.Fprintf(&b, "An added measurement (the issue's B3 figure is the rows under B1 load). Load: creates of resources of %d replicas offered open loop at %.1f/s, %.0f replicas/s (half of B1's median %.0f/s on this cluster), %d per run over %s. ",
		replicas, perSec, perSec*float64(replicas), b1Rate, n, fmtSecs(float64(n-1)/perSec))
	fmt.Fprintf(&b, "Achieved: %s replicas accepted (from the first create sent to the last answered), %d failed creates; every accepted resource read ready %s after the last create was answered (listed every 250 ms). ",
		spreadFloats(accepted).format(fmtRate), failed, spreadDurations(catchUp).format(fmtSecs))
	fmt.Fprintf(&b, "CPU over each run, in cores: the cluster's processes %s; the whole machine's %d cores, other work included, %s.",
		spreadFloats(ours).format(cores), runtime.NumCPU(), spreadFloats(machine).format(cores))
	return b.String()
}
