package main

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// Liveness and election defaults the failover targets are measured with.
const (
	downAfter    = 10 * time.Second // nodes.downAfter's default
	beatInterval = 2 * time.Second  // nodes.heartbeatInterval's default
	leaseTTL     = 3 * time.Second  // the election lease's default
)

// b5 SIGKILLs the master and times the new master's first propagation,
// max(5, rounds) times, restarting the killed replica each time; then,
// with two region replicas, the region leader's failover (b5Region).
func (s *suite) b5(ctx context.Context, c *cluster) error {
	var took []time.Duration
	var steps []map[string]time.Duration
	for round := range max(5, s.o.rounds) {
		d, st, err := s.b5Run(ctx, c, round)
		if err != nil {
			return fmt.Errorf("B5 run %d: %w", round+1, err)
		}
		log.Printf("bench: %s", b5RunLine("master", round, st))
		took, steps = append(took, d), append(steps, st)
	}
	sp := spreadDurations(took)
	s.r.add(row{id: "B5", what: c.label("master failover: SIGKILL the master → a create through the load balancer propagated by the new master"), figure: sp.format(fmtSecs),
		target: "≤ 3 s (median of ≥ 5)", ratio: fmt.Sprintf("%.2f × the lease TTL (%s)", sp.med/leaseTTL.Seconds(), leaseTTL), met: verdict(sp.med <= 3),
		notes: fmt.Sprintf("Election lease TTL %s (the default); max %s. The client dials haproxy (TCP, TLS passed through, /readyz checked every 500 ms) in front of the two global replicas, as docs/operations.md lays out; the region dials both replicas (its global.endpoint list).", leaseTTL, fmtSecs(sp.hi)) + b5BreakdownNotes(steps)})
	if len(c.regions) >= 2 {
		return s.b5Region(ctx, c)
	}
	return nil
}

func (s *suite) b5Run(ctx context.Context, c *cluster, round int) (time.Duration, map[string]time.Duration, error) {
	master := -1
	if err := waitFor(ctx, 50*time.Millisecond, "a master", func() error {
		for i, h := range c.gHTTP {
			v, err := c.newClient(h).metric(ctx, `strata_global_is_master{tier="global"}`)
			if err == nil && v == 1 {
				master = i
				return nil
			}
		}
		return fmt.Errorf("none")
	}); err != nil {
		return 0, nil, err
	}
	if err := c.waitEstablished(ctx, c.gHTTP[master]); err != nil {
		return 0, nil, err
	}
	other := 1 - master
	// The survivor's metrics are read from it; the create goes through
	// the load balancer, as a client's would.
	survivor, lb := c.newClient(c.gHTTP[other]), c.newClient(c.gLB)
	const propagations = `strata_global_propagations_total{tier="global"}`
	before, err := survivor.metric(ctx, propagations)
	if err != nil {
		return 0, nil, err
	}
	name := fmt.Sprintf("after-failover-%d", round)
	steps, stopWatch, err := c.watchB5Steps(ctx, "global", name)
	if err != nil {
		return 0, nil, err
	}
	defer stopWatch()
	_ = c.globals[master].cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	steps.kill(killed)
	<-c.globals[master].done
	// The create may reach the dead replica before the load balancer
	// marks it down, or the survivor before it leads: retried until
	// accepted, as a client would.
	if err := waitFor(ctx, 20*time.Millisecond, "a create through the load balancer", func() error {
		_, err := lb.do(ctx, http.MethodPost, "/v1/resources", resource(name, 1, nil), nil)
		return err
	}); err != nil {
		return 0, nil, err
	}
	posted := time.Now()
	if err := waitFor(ctx, 10*time.Millisecond, "the new master propagates", func() error {
		v, err := survivor.metric(ctx, propagations)
		if err == nil && v <= before {
			err = fmt.Errorf("no propagation yet")
		}
		return err
	}); err != nil {
		return 0, nil, err
	}
	seen := time.Now()
	took := seen.Sub(killed)
	steps.res.sample(name, killed, posted, seen, 0)
	p, err := c.restart(ctx, fmt.Sprintf("%s-global-%d-r%d", c.name, master+1, round+1), "global", c.gCfgs[master], c.gHTTP[master], "lb-global", master)
	c.globals[master] = p
	v := steps.values()
	// The figure is the propagation, not the resource's readiness.
	for _, k := range []string{b2Assigned, b2Reported, b2Shared, b2GlobalDone} {
		delete(v, k)
	}
	return took, v, err
}

// waitEstablished waits until the master at httpAddr has led for a
// lease TTL. The run before elected it moments ago, and a standby
// revokes a dead leader's lease only once it has seen the leader's
// address serve at least a second into its term (internal/election's
// guards against a false verdict): killed younger, its lease runs out
// instead, which is a master lost right after a failover, not the loss
// of an established master the figure is about.
func (c *cluster) waitEstablished(ctx context.Context, httpAddr string) error {
	var st struct {
		LeaderSince time.Time `json:"leaderSince"`
	}
	if _, err := c.newClient(httpAddr).do(ctx, http.MethodGet, "/v1/status", nil, &st); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(st.LeaderSince.Add(leaseTTL))):
		return nil
	}
}

// restart starts replica i of tier again with its configuration and
// waits until it is ready (its /readyz at httpAddr answers 200) and, in
// production, until the balancer lb in front of the tier sends it
// connections again. The next failover is then the loss of one replica
// with another one serving, as in a deployment whose killed replica came
// back long before the next failure. Without the wait it was two at
// once: the balancer, which counts a replica in after two checks, still
// counted the restarted one out when the next run killed the other, and
// held the create's refused connection for its turn-around time (one
// second) before it tried again.
func (c *cluster) restart(ctx context.Context, name, tier, cfg, httpAddr, lb string, i int) (*proc, error) {
	p, err := c.s.start(name, tier, "--config", cfg)
	if err != nil {
		return nil, err
	}
	restarted := c.newClient(httpAddr)
	if err := waitFor(ctx, 100*time.Millisecond, "the restarted "+name, func() error {
		_, err := restarted.do(ctx, http.MethodGet, "/readyz", nil, nil)
		return err
	}); err != nil || !c.shape.production {
		return p, err
	}
	return p, waitFor(ctx, 50*time.Millisecond, lb+" sends connections to the restarted "+name, func() error {
		return c.lbServing(lb, i)
	})
}

// b5Region SIGKILLs the region's leader and times a new resource's way
// to ready, max(5, rounds) times, restarting the killed replica each
// time (production: two region replicas behind haproxy).
func (s *suite) b5Region(ctx context.Context, c *cluster) error {
	var took []time.Duration
	var steps []map[string]time.Duration
	for round := range max(5, s.o.rounds) {
		d, st, err := s.b5RegionRun(ctx, c, round)
		if err != nil {
			return fmt.Errorf("B5 region run %d: %w", round+1, err)
		}
		log.Printf("bench: %s", b5RunLine("region", round, st))
		took, steps = append(took, d), append(steps, st)
	}
	sp := spreadDurations(took)
	s.r.add(row{id: "B5", what: c.label("region-leader failover: SIGKILL the region's leader → a new resource ready"), figure: sp.format(fmtSecs),
		target: "≤ 3 s (median of ≥ 5)", ratio: fmt.Sprintf("%.2f × the lease TTL (%s)", sp.med/leaseTTL.Seconds(), leaseTTL), met: verdict(sp.med <= 3),
		notes: fmt.Sprintf("Election lease TTL %s (the default); max %s. Two region replicas behind haproxy (TCP, TLS passed through, /readyz checked every 500 ms), which every agent dials and both replicas advertise; the resource (one replica, created through the global API) is placed by the new leader on an agent that reconnected through the balancer, and the clock stops when the global API reports it ready.", leaseTTL, fmtSecs(sp.hi)) + b5BreakdownNotes(steps)})
	return nil
}

func (s *suite) b5RegionRun(ctx context.Context, c *cluster, round int) (time.Duration, map[string]time.Duration, error) {
	leader, err := c.findRegionLeader(ctx)
	if err != nil {
		return 0, nil, err
	}
	name := fmt.Sprintf("after-region-failover-%d", round)
	steps, stopWatch, err := c.watchB5Steps(ctx, "region", name)
	if err != nil {
		return 0, nil, err
	}
	defer stopWatch()
	// Every agent follows its assignments through one of the replicas:
	// once their counts add up to the sum before the kill again, the
	// dead one's agents are back.
	var agents float64
	var replicas []*client
	for _, h := range c.rHTTPs {
		r := newClient(c.scheme()+h, regionToken, c.tlsClient)
		v, _ := r.metric(ctx, agentsFollowing)
		agents, replicas = agents+v, append(replicas, r)
	}
	_ = c.regions[leader].cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	steps.kill(killed)
	<-c.regions[leader].done
	actx, stopAgents := context.WithCancel(ctx)
	var polls sync.WaitGroup
	polls.Go(func() { steps.followAgents(actx, replicas, agents) })
	if err := waitFor(ctx, 20*time.Millisecond, "a create", func() error {
		_, err := c.g.do(ctx, http.MethodPost, "/v1/resources", resource(name, 1, nil), nil)
		return err
	}); err != nil {
		stopAgents()
		return 0, nil, err
	}
	posted := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := waitFor(wctx, 20*time.Millisecond, name+" ready", func() error {
		var v statusView
		_, err := c.g.do(ctx, http.MethodGet, "/v1/resources/"+name, nil, &v)
		if err == nil && !v.ready(1) {
			err = fmt.Errorf("not ready")
		}
		return err
	}); err != nil {
		stopAgents()
		return 0, nil, err
	}
	seen := time.Now()
	took := seen.Sub(killed)
	steps.res.sample(name, killed, posted, seen, 0)
	// The agents' count may come after the figure: wait for it a little.
	time.AfterFunc(5*time.Second, stopAgents)
	polls.Wait()
	stopAgents()
	p, err := c.restart(ctx, fmt.Sprintf("%s-region-%d-r%d", c.name, leader+1, round+1), "region", c.rCfgs[leader], c.rHTTPs[leader], "lb-region", leader)
	c.regions[leader] = p
	if err != nil {
		return 0, nil, err
	}
	if _, err := c.findRegionLeader(ctx); err != nil {
		return 0, nil, err
	}
	return took, steps.values(), c.deleteAll(ctx, name)
}

// killAtRandomPhase SIGKILLs agent at a random moment of its heartbeat
// cycle and returns when: the loss cannot be Down before downAfter less
// the last beat's age, and the steps before the kill take about as long
// each run, so without the wait every kill would land at about the same
// age and bias the figure by up to an interval either way.
func killAtRandomPhase(ctx context.Context, agent *proc) (time.Time, error) {
	select {
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	case <-time.After(rand.N(beatInterval)):
	}
	_ = agent.cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	<-agent.done
	return killed, nil
}
