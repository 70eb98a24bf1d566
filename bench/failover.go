package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"syscall"
	"time"
)

// Liveness and election defaults the failover targets are measured with.
const (
	downAfter = 10 * time.Second // nodes.downAfter's default
	leaseTTL  = 3 * time.Second  // the election lease's default
)

// b4 kills a real agent holding 100 replicas and times their recovery,
// max(5, rounds) times (a failover figure is a median of at least five),
// each with a new agent process; B6 reads the agent's memory on the way.
func (s *suite) b4(ctx context.Context, c *cluster) error {
	var took []time.Duration
	var rss []float64
	var idle float64
	for round := range max(5, s.o.rounds) {
		d, r, i, err := s.b4Run(ctx, c, round)
		if err != nil {
			return fmt.Errorf("B4 run %d: %w", round+1, err)
		}
		took, rss, idle = append(took, d), append(rss, r), i
	}
	if s.o.wants("B6") {
		r := spreadFloats(rss)
		s.r.add(row{id: "B6", what: c.label("memory: one agent process with 100 replicas (fake provider)"),
			figure: r.format(fmtMiB) + " RSS", target: "≤ 30 MiB", ratio: fmt.Sprintf("%.2f × the same agent with none (%.0f MiB)", r.med/idle, idle), met: verdict(r.med <= 30)})
	}
	if !s.o.wants("B4") {
		return nil
	}
	sp := spreadDurations(took)
	s.r.add(row{id: "B4", what: c.label("node loss: SIGKILL an agent with 100 replicas → all ready elsewhere"), figure: sp.format(fmtSecs),
		target: "≤ 10 s", ratio: fmt.Sprintf("%.2f × downAfter (%s)", sp.med/downAfter.Seconds(), downAfter), met: verdict(sp.med <= 10),
		notes: "Median of " + fmt.Sprint(sp.n) + " runs; max " + fmtSecs(sp.hi) + ". Default liveness: heartbeats every 2 s, Suspect after 6 s, Down after 10 s when the probe fails; the clock cannot stop before Down."})
	return nil
}

// b4Run starts agent single-<round>, gives it 100 replicas, kills it and
// returns how long until they were ready elsewhere, its RSS with them and
// before them.
func (s *suite) b4Run(ctx context.Context, c *cluster, round int) (took time.Duration, rss, idle float64, err error) {
	node := fmt.Sprintf("single-%d", round)
	res := fmt.Sprintf("loss-%d", round)
	agent, err := c.startAgent(ctx, node)
	if err != nil {
		return 0, 0, 0, err
	}
	if idle, err = agent.rssMiB(); err != nil {
		return 0, 0, 0, err
	}
	if _, err := c.g.do(ctx, http.MethodPost, "/v1/resources", resource(res, 100, map[string]string{"bench": node}), nil); err != nil {
		return 0, 0, 0, err
	}
	if err := c.waitReady(ctx, res, 100); err != nil {
		return 0, 0, 0, fmt.Errorf("%w\nagent log:\n%s", err, agent.tail(10))
	}
	if rss, err = agent.rssMiB(); err != nil {
		return 0, 0, 0, err
	}
	// Let the replicas go anywhere once their node is gone.
	if _, err := c.g.do(ctx, http.MethodPut, "/v1/resources/"+res, resource(res, 100, nil), nil); err != nil {
		return 0, 0, 0, err
	}
	_ = agent.cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	<-agent.done
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := waitFor(wctx, 100*time.Millisecond, "100 replicas ready elsewhere", func() error {
		n, err := c.readyOffNode(ctx, res, node)
		if err == nil && n < 100 {
			err = fmt.Errorf("%d/100", n)
		}
		return err
	}); err != nil {
		return 0, 0, 0, err
	}
	took = time.Since(killed)
	// The node will not return: remove it, as an operator would, so that
	// the region forgets the replicas it held at once rather than after
	// controller.destroyTimeout (2 m) when the resource is deleted.
	if _, err := c.regionAPI().do(ctx, http.MethodDelete, "/v1/nodes/"+node, nil, nil); err != nil {
		return 0, 0, 0, fmt.Errorf("remove the dead node: %w", err)
	}
	return took, rss, idle, c.deleteAll(ctx, res)
}

// startAgent starts a real agent process for node (label bench=<node>)
// with the shape's fake provider, and waits for it to be Up.
func (c *cluster) startAgent(ctx context.Context, node string) (*proc, error) {
	sec := "insecure: true"
	if c.shape.production {
		dir := filepath.Join(c.s.dir, c.name+"-"+node)
		if err := c.nodeCerts(dir, node); err != nil {
			return nil, err
		}
		sec = fmt.Sprintf("tls: {ca: %q, cert: %q, key: %q}", filepath.Join(dir, "ca.pem"), filepath.Join(dir, node+".pem"), filepath.Join(dir, node+"-key.pem"))
	}
	before, err := c.nodesUp(ctx)
	if err != nil {
		return nil, err
	}
	cfg := c.s.write(c.name+"-"+node+".yaml", fmt.Sprintf(`node:
  name: %s
  zone: z0
  labels: {bench: %s}
  milliCPU: 64000
  memoryMiB: 65536
region: {endpoint: %q}
listen: {grpc: %q}
dataDir: %s
providers: [{name: fake, options: {applyLatency: %s, applyJitter: %s}}]
%s
log: {level: warn}
`, node, node, c.rGRPC, freeAddr(), filepath.Join(c.s.dir, c.name+"-"+node+"-data"), c.shape.fake.ApplyLatency, c.shape.fake.ApplyJitter, sec))
	p, err := c.s.start(c.name+"-agent-"+node, "agent", "--config", cfg)
	if err != nil {
		return nil, err
	}
	if err := c.waitNodesUp(ctx, before+1, time.Minute); err != nil {
		return nil, fmt.Errorf("%w\nagent log:\n%s", err, p.tail(10))
	}
	return p, nil
}

// b5 SIGKILLs the master and times the new master's first propagation,
// max(5, rounds) times, restarting the killed replica each time.
func (s *suite) b5(ctx context.Context, c *cluster) error {
	var took []time.Duration
	for round := range max(5, s.o.rounds) {
		d, err := s.b5Run(ctx, c, round)
		if err != nil {
			return fmt.Errorf("B5 run %d: %w", round+1, err)
		}
		took = append(took, d)
	}
	sp := spreadDurations(took)
	s.r.add(row{id: "B5", what: c.label("master failover: SIGKILL the master → the new master's first propagation"), figure: sp.format(fmtSecs),
		target: "≤ 3 s (median of ≥ 5)", ratio: fmt.Sprintf("%.2f × the lease TTL (%s)", sp.med/leaseTTL.Seconds(), leaseTTL), met: verdict(sp.med <= 3),
		notes: fmt.Sprintf("Election lease TTL %s (the default); max %s. The region dials both global replicas directly (no load balancer in front of them); the region-leader failover of #21 is not measured.", leaseTTL, fmtSecs(sp.hi))})
	return nil
}

func (s *suite) b5Run(ctx context.Context, c *cluster, round int) (time.Duration, error) {
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
		return 0, err
	}
	other := 1 - master
	g := c.newClient(c.gHTTP[other])
	const propagations = `strata_global_propagations_total{tier="global"}`
	before, err := g.metric(ctx, propagations)
	if err != nil {
		return 0, err
	}
	_ = c.globals[master].cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	<-c.globals[master].done
	// The create may meet the survivor before it leads: retried until
	// accepted, as a client behind a load balancer would.
	name := fmt.Sprintf("after-failover-%d", round)
	if err := waitFor(ctx, 20*time.Millisecond, "a create through the survivor", func() error {
		_, err := g.do(ctx, http.MethodPost, "/v1/resources", resource(name, 1, nil), nil)
		return err
	}); err != nil {
		return 0, err
	}
	if err := waitFor(ctx, 10*time.Millisecond, "the new master propagates", func() error {
		v, err := g.metric(ctx, propagations)
		if err == nil && v <= before {
			err = fmt.Errorf("no propagation yet")
		}
		return err
	}); err != nil {
		return 0, err
	}
	took := time.Since(killed)
	p, err := s.start(fmt.Sprintf("%s-global-%d-r%d", c.name, master+1, round+1), "global", "--config", c.gCfgs[master])
	if err != nil {
		return 0, err
	}
	c.globals[master] = p
	restarted := c.newClient(c.gHTTP[master])
	return took, waitFor(ctx, 100*time.Millisecond, "the restarted global", func() error {
		_, err := restarted.do(ctx, http.MethodGet, "/readyz", nil, nil)
		return err
	})
}
