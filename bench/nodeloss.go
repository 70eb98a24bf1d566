package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"time"
)

// b4 kills a real agent holding 100 replicas and times their recovery,
// max(5, rounds) times (a failover figure is a median of at least five),
// each with a new agent process; B6 reads the agent's memory on the way.
func (s *suite) b4(ctx context.Context, c *cluster) error {
	var took []time.Duration
	var rss []float64
	var idle float64
	var steps []b4Steps
	for round := range max(5, s.o.rounds) {
		st, r, i, err := s.b4Run(ctx, c, round)
		if err != nil {
			return fmt.Errorf("B4 run %d: %w", round+1, err)
		}
		log.Printf("bench: %s", b4RunLine(round, st))
		took, rss, idle, steps = append(took, st.global), append(rss, r), i, append(steps, st)
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
		notes: "Median of " + fmt.Sprint(sp.n) + " runs; max " + fmtSecs(sp.hi) + ". Default liveness: heartbeats every 2 s, Suspect after 6 s, Down after 10 s when the probe fails; the clock cannot stop before Down." + b4BreakdownNotes(steps)})
	return nil
}

// b4Run starts agent single-<round>, gives it 100 replicas, kills it and
// returns how long until they were ready elsewhere, its RSS with them and
// before them, with the steps of the way (b4Steps).
func (s *suite) b4Run(ctx context.Context, c *cluster, round int) (steps b4Steps, rss, idle float64, err error) {
	node := fmt.Sprintf("single-%d", round)
	res := fmt.Sprintf("loss-%d", round)
	agent, err := c.startAgent(ctx, node)
	if err != nil {
		return steps, 0, 0, err
	}
	if idle, err = agent.rssMiB(); err != nil {
		return steps, 0, 0, err
	}
	if _, err := c.g.do(ctx, http.MethodPost, "/v1/resources", resource(res, 100, map[string]string{"bench": node}), nil); err != nil {
		return steps, 0, 0, err
	}
	if err := c.waitReady(ctx, res, 100); err != nil {
		return steps, 0, 0, fmt.Errorf("%w\nagent log:\n%s", err, agent.tail(10))
	}
	if rss, err = agent.rssMiB(); err != nil {
		return steps, 0, 0, err
	}
	if s.o.profiles != "" && round == 0 {
		s.prof.heap(ctx, agent.name, "b4-agent-heap-"+c.name+".pprof")
	}
	// Let the replicas go anywhere once their node is gone.
	if _, err := c.g.do(ctx, http.MethodPut, "/v1/resources/"+res, resource(res, 100, nil), nil); err != nil {
		return steps, 0, 0, err
	}
	killed, err := killAtRandomPhase(ctx, agent)
	if err != nil {
		return steps, 0, 0, err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := waitFor(wctx, 100*time.Millisecond, "100 replicas ready elsewhere", func() error {
		n, err := c.readyOffNode(ctx, res, node)
		if err == nil && n < 100 {
			err = fmt.Errorf("%d/100", n)
		}
		return err
	}); err != nil {
		return steps, 0, 0, err
	}
	took := time.Since(killed)
	if steps, err = c.b4Breakdown(ctx, res, node, killed, took); err != nil {
		return steps, 0, 0, fmt.Errorf("where the time went: %w", err)
	}
	// The node will not return: remove it, as an operator would, so that
	// the region forgets the replicas it held at once rather than after
	// controller.destroyTimeout (2 m) when the resource is deleted.
	if _, err := c.regionAPI().do(ctx, http.MethodDelete, "/v1/nodes/"+node, nil, nil); err != nil {
		return steps, 0, 0, fmt.Errorf("remove the dead node: %w", err)
	}
	return steps, rss, idle, c.deleteAll(ctx, res)
}
