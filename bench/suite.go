package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
)

// suite runs the benchmarks that need a cluster on one cluster per shape,
// in an order where each leaves the next a known state.
type suite struct {
	o    options
	dir  string
	r    *report
	prof profiler

	procs []*proc
}

func (s *suite) strata() string  { return filepath.Join(s.o.bin, "strata") }
func (s *suite) etcdBin() string { return filepath.Join(s.o.bin, "etcd") }

// agentBin is the agent's own binary, the one the packages install and
// the strata-agent unit runs: B4 and B6 measure that process.
func (s *suite) agentBin() string { return filepath.Join(s.o.bin, "strata-agent") }

func (s *suite) run(ctx context.Context) error {
	defer s.stopAll()
	// The short Go benchmarks first, the production cluster (whose B8
	// brings up 10,000 agents) last: a run cut short loses the least.
	if s.o.wants("B7") {
		if err := withBudget(ctx, "B7", "B7", s.b7); err != nil {
			s.r.note("B7 did not finish: %v", err)
		}
	}
	if s.o.wants("B9") {
		if err := withBudget(ctx, "B9", "B9", s.b9); err != nil {
			s.r.note("B9 did not finish: %v", err)
		}
	}
	if s.o.wants("A2") {
		if err := withBudget(ctx, "A2", "A2", s.a2); err != nil {
			s.r.note("A2 did not finish: %v", err)
		}
	}
	// Networks of simulated hosts, real containers and VMs: a machine
	// without them still gets the rest, and a note says why these did
	// not run.
	for _, b := range []struct {
		name, what string
		run        func(context.Context) error
	}{{"N1", "network across hosts", s.n1}, {"N2", "data plane convergence", s.n2}, {"N3", "network policy enforcement", s.n3}, {"C1", "containers", s.c1}, {"V1", "VMs", s.v1}, {"P1", "probe engine CPU", s.p1}, {"P2", "probe failure to HAProxy", s.p2}, {"A1", "autoscaling on a load step", s.a1}, {"DNS1", "name server queries/s against unbound", s.dns1}, {"DNS3", "name server table memory", s.dns3}} {
		if !s.o.wants(b.name) {
			continue
		}
		if err := withBudget(ctx, b.name, b.name, b.run); err != nil {
			s.r.note("%s (%s) did not finish: %v", b.name, b.what, err)
		}
	}
	for _, sh := range []shape{light, production} {
		if !s.o.shapes[sh.name] {
			continue
		}
		// A shape that fails leaves the others to run; the note says
		// where it stopped.
		if err := s.onCluster(ctx, sh); err != nil {
			s.r.note("The %s cluster's benchmarks stopped early: %v", sh.name, err)
		}
	}
	return nil
}

// onCluster runs the cluster benchmarks on a cluster of shape sh, in this
// order (B3 and B6 are measured during B1 and B4, and B3 again at half of
// B1's rate after B1's runs). The light shape runs B0–B3 only: it is
// there to show regressions in the core.
func (s *suite) onCluster(ctx context.Context, sh shape) error {
	all := []struct {
		name  string
		needs []string
		run   func(context.Context, *cluster) error
		prod  bool
	}{
		{"B2", []string{"B2"}, s.b2, false},
		{"B1", []string{"B1", "B3", "B6"}, s.b1, false},
		{"B3half", []string{"B3"}, s.b3Half, false},
		{"B4", []string{"B4", "B6"}, s.b4, true},
		{"B10", []string{"B10"}, s.b10, true},
		{"B5", []string{"B5"}, s.b5, true},
		{"B8", []string{"B8"}, s.b8, true},
	}
	var todo []struct {
		name string
		run  func(context.Context, *cluster) error
	}
	for _, b := range all {
		if s.wantsAny(b.needs...) && (sh.production || !b.prod) {
			todo = append(todo, struct {
				name string
				run  func(context.Context, *cluster) error
			}{b.name, b.run})
		}
	}
	if len(todo) == 0 && !s.o.wants("B0") {
		return nil
	}
	defer s.stopAll()
	var c *cluster
	if err := withBudget(ctx, "cluster", "the "+sh.name+" cluster's start (B0 included)", func(ctx context.Context) (err error) {
		c, err = s.startCluster(ctx, sh)
		return err
	}); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	for _, b := range todo {
		if err := withBudget(ctx, b.name, b.name+" on the "+sh.name+" cluster", func(ctx context.Context) error { return b.run(ctx, c) }); err != nil {
			// The next benchmark may still run on this cluster.
			s.r.note("%s on the %s cluster did not finish: %v", b.name, sh.name, err)
		}
	}
	return nil
}

// wantsAny reports whether the options ask for one of ids.
func (s *suite) wantsAny(ids ...string) bool {
	return slices.ContainsFunc(ids, s.o.wants)
}

func (s *suite) stopAll() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.procs[i].kill()
	}
	s.procs = nil
}

// start runs `strata args...` as process name.
func (s *suite) start(name string, args ...string) (*proc, error) {
	return s.startBin(name, s.strata(), args...)
}

// startBin runs bin as process name; stopAll ends it.
func (s *suite) startBin(name, bin string, args ...string) (*proc, error) {
	p, err := start(s.dir, name, bin, args...)
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, p)
	return p, nil
}

// label is a row's description with the cluster's shape.
func (c *cluster) label(what string) string { return fmt.Sprintf("*%s*: %s", c.name, what) }

func resource(name string, replicas int, selector map[string]string) map[string]any {
	r := map[string]any{
		"name": name, "kind": "Compute", "replicas": replicas,
		"spec":     map[string]any{"flavor": "tiny", "compute": map[string]any{"image": "busybox"}},
		"schedule": map[string]any{"regions": []map[string]any{{"name": "bench"}}},
	}
	if selector != nil {
		r["schedule"].(map[string]any)["nodeSelector"] = selector
	}
	return r
}

type statusView struct {
	Status *struct {
		Phase    string `json:"phase"`
		Ready    int    `json:"ready"`
		Replicas int    `json:"replicas"`
	} `json:"status"`
}

func (v statusView) ready(n int) bool {
	return v.Status != nil && v.Status.Phase == "ready" && v.Status.Ready == n
}

// readyReplicas sums the ready replicas of the resources named prefix*.
func (c *cluster) readyReplicas(ctx context.Context, prefix string) (int, error) {
	ready := 0
	err := c.eachResource(ctx, func(name string, v statusView) {
		if strings.HasPrefix(name, prefix) && v.Status != nil && v.Status.Phase == "ready" {
			ready += v.Status.Ready
		}
	})
	return ready, err
}

// eachResource calls f with every resource the global API lists.
func (c *cluster) eachResource(ctx context.Context, f func(name string, v statusView)) error {
	cont := ""
	for {
		var page struct {
			Items []struct {
				Name string `json:"name"`
				statusView
			} `json:"items"`
			Continue string `json:"continue"`
		}
		path := "/v1/resources?limit=1000"
		if cont != "" {
			path += "&continue=" + cont
		}
		if _, err := c.g.do(ctx, http.MethodGet, path, nil, &page); err != nil {
			return err
		}
		for _, it := range page.Items {
			f(it.Name, it.statusView)
		}
		if page.Continue == "" {
			return nil
		}
		cont = page.Continue
	}
}

// readyOffNode counts the running, ready replicas of resource that are
// not on node.
func (c *cluster) readyOffNode(ctx context.Context, resource, node string) (int, error) {
	var reps struct {
		Items []struct {
			Node    string `json:"node"`
			Phase   string `json:"phase"`
			Desired string `json:"desired"`
		} `json:"items"`
	}
	if _, err := c.g.do(ctx, http.MethodGet, "/v1/resources/"+resource+"/replicas", nil, &reps); err != nil {
		return 0, err
	}
	n := 0
	for _, r := range reps.Items {
		if r.Desired == "running" && r.Phase == "ready" && r.Node != node {
			n++
		}
	}
	return n, nil
}
