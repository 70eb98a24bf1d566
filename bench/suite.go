package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// suite runs the benchmarks that need a cluster on one shared cluster,
// in an order where each leaves the next a known state.
type suite struct {
	o   options
	dir string
	r   *report

	etcdPut128 float64 // B0's 128-client put rate, B1's baseline

	procs   []*proc
	globals []*proc
	gHTTP   []string
	gGRPC   []string
	region  *proc
	rHTTP   string
	rGRPC   string
	sim     *proc
	single  *proc // one real agent process (B4, B6)
	g       *client
	token   string
}

func (s *suite) strata() string  { return filepath.Join(s.o.bin, "strata") }
func (s *suite) etcdBin() string { return filepath.Join(s.o.bin, "etcd") }

func (s *suite) run(ctx context.Context) error {
	defer s.stopAll()
	if s.wantsAny("B0", "B1") {
		if err := s.b0(ctx); err != nil {
			return fmt.Errorf("B0: %w", err)
		}
	}
	if s.wantsAny("B1", "B2", "B3", "B4", "B5", "B6", "B8") {
		if err := s.startCluster(ctx); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		// On the cluster, in this order (B3 and B6 read B1's and B4's
		// runs).
		for _, b := range []struct {
			name  string
			needs []string
			run   func(context.Context) error
		}{
			{"B2", []string{"B2"}, s.b2},
			{"B1", []string{"B1", "B3", "B6"}, s.b1},
			{"B4", []string{"B4", "B6"}, s.b4},
			{"B8", []string{"B8"}, s.b8},
			{"B5", []string{"B5"}, s.b5},
		} {
			if !s.wantsAny(b.needs...) {
				continue
			}
			if err := b.run(ctx); err != nil {
				return fmt.Errorf("%s: %w", b.name, err)
			}
		}
	}
	if s.o.wants("B7") {
		if err := s.b7(ctx); err != nil {
			return fmt.Errorf("B7: %w", err)
		}
	}
	if s.o.wants("B9") {
		if err := s.b9(ctx); err != nil {
			return fmt.Errorf("B9: %w", err)
		}
	}
	// Networks of simulated hosts, real containers and VMs: a machine
	// without them still gets the rest, and a note says why these did
	// not run.
	for _, b := range []struct {
		name, what string
		run        func(context.Context) error
	}{{"N1", "network across hosts", s.n1}, {"N2", "data plane convergence", s.n2}, {"C1", "containers", s.c1}, {"V1", "VMs", s.v1}} {
		if !s.o.wants(b.name) {
			continue
		}
		if err := b.run(ctx); err != nil {
			s.r.note("%s (%s) did not run: %v", b.name, b.what, err)
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
}

func (s *suite) start(name string, args ...string) (*proc, error) {
	p, err := start(s.dir, name, s.strata(), args...)
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, p)
	return p, nil
}

// startEtcd starts a real etcd server with the flags every benchmark
// etcd uses.
func (s *suite) startEtcd(ctx context.Context, name string) (*proc, string, error) {
	c, peer := "http://"+freeAddr(), "http://"+freeAddr()
	p, err := start(s.dir, name, s.etcdBin(),
		"--name", name, "--data-dir", filepath.Join(s.dir, name),
		"--listen-client-urls", c, "--advertise-client-urls", c,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", name+"="+peer,
		"--quota-backend-bytes", fmt.Sprint(8<<30),
		"--auto-compaction-mode", "revision", "--auto-compaction-retention", "100000",
		"--log-level", "error")
	if err != nil {
		return nil, "", err
	}
	s.procs = append(s.procs, p)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, "", err
	}
	defer cli.Close()
	err = waitFor(ctx, 50*time.Millisecond, "etcd "+name, func() error {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := cli.Get(cctx, "probe")
		return err
	})
	return p, c, err
}

// b0 measures raw etcd puts: the baseline B1 is compared with.
func (s *suite) b0(ctx context.Context) error {
	p, ep, err := s.startEtcd(ctx, "etcd-b0")
	if err != nil {
		return err
	}
	defer p.kill()
	value := strings.Repeat("x", 512)
	for _, clients := range []int{1, 16, 128} {
		// Separate connections, as separate processes would have.
		conns := min(clients, 16)
		clis := make([]*clientv3.Client, conns)
		for i := range clis {
			if clis[i], err = clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}); err != nil {
				return err
			}
			defer clis[i].Close()
		}
		var n atomic.Int64
		dur := 4 * time.Second
		dctx, cancel := context.WithTimeout(ctx, dur)
		var wg sync.WaitGroup
		start := time.Now()
		for w := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cli := clis[w%conns]
				for i := 0; dctx.Err() == nil; i++ {
					if _, err := cli.Put(dctx, fmt.Sprintf("/bench/%d/%d", w, i), value); err == nil {
						n.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		cancel()
		rate := float64(n.Load()) / time.Since(start).Seconds()
		if clients == 128 {
			s.etcdPut128 = rate
		}
		s.r.add(row{id: "B0", what: fmt.Sprintf("raw etcd puts, %d concurrent client(s), 512 B", clients), figure: fmt.Sprintf("%.0f puts/s", rate)})
	}
	return nil
}

// startCluster brings up two global replicas (for B5), one region, the
// simulated agents and one real agent.
//
// The tiers run in insecure mode (plaintext gRPC on loopback): the
// simulated agents share one connection, as a multiplexing proxy would,
// which a node certificate (good for one node) cannot carry; the figures
// are comparable with earlier runs, which were plaintext too.
func (s *suite) startCluster(ctx context.Context) error {
	s.token = "strata_bench001_0123456789abcdef0123456789abcdef01234567"
	_, gEtcd, err := s.startEtcd(ctx, "etcd-global")
	if err != nil {
		return err
	}
	_, rEtcd, err := s.startEtcd(ctx, "etcd-region")
	if err != nil {
		return err
	}
	redis, err := s.startRedis(ctx)
	if err != nil {
		return err
	}
	for i := range 2 {
		h, g := freeAddr(), freeAddr()
		s.gHTTP, s.gGRPC = append(s.gHTTP, h), append(s.gGRPC, g)
		cfg := s.write(fmt.Sprintf("g%d.yaml", i+1), fmt.Sprintf(`id: g%d
listen: {http: %q, grpc: %q}
etcd: {endpoints: [%q]}
redis: {addr: %q}
api: {bootstrapToken: %q}
insecure: true
log: {level: warn}
`, i+1, h, g, gEtcd, redis, s.token))
		p, err := s.start(fmt.Sprintf("global-%d", i+1), "global", "--config", cfg)
		if err != nil {
			return err
		}
		s.globals = append(s.globals, p)
	}
	s.rHTTP, s.rGRPC = freeAddr(), freeAddr()
	// Every node gets a block of the network: a /12 holds a /24 for
	// each of 4,096 nodes (the default /16 has room for 256).
	rcfg := s.write("region.yaml", fmt.Sprintf(`name: bench
id: bench-r1
listen: {http: %q, grpc: %q}
etcd: {endpoints: [%q]}
global: {endpoint: %q}
zones: [z0, z1, z2]
network: {subnet: 10.64.0.0/12, gateway: 10.64.0.1, nodeMask: 24}
api: {token: strata-bench-region-token-0123456789}
insecure: true
log: {level: warn}
`, s.rHTTP, s.rGRPC, rEtcd, strings.Join(s.gGRPC, ",")))
	if s.region, err = s.start("region", "region", "--config", rcfg); err != nil {
		return err
	}
	s.g = newClient("http://"+s.gHTTP[0], s.token)
	if err := waitFor(ctx, 100*time.Millisecond, "global API", func() error {
		_, err := s.g.do(ctx, http.MethodGet, "/readyz", nil, nil)
		return err
	}); err != nil {
		return err
	}
	if s.sim, err = s.start("sim-agents", "sim-agents", "--count", fmt.Sprint(s.o.agents), "--region", s.rGRPC, "--prefix", "sim", "--insecure"); err != nil {
		return err
	}
	acfg := s.write("agent.yaml", fmt.Sprintf(`node:
  name: single
  zone: z0
  labels: {bench: single}
  milliCPU: 64000
  memoryMiB: 65536
region: {endpoint: %q}
listen: {grpc: %q}
dataDir: %s
providers: [{name: fake}]
insecure: true
log: {level: warn}
`, s.rGRPC, freeAddr(), filepath.Join(s.dir, "single")))
	if s.single, err = s.start("agent-single", "agent", "--config", acfg); err != nil {
		return err
	}
	want := s.o.agents + 1
	if err := waitFor(ctx, 500*time.Millisecond, fmt.Sprintf("%d nodes Up", want), func() error {
		var regions struct {
			Items []struct {
				Status *struct {
					NodesUp int `json:"nodesUp"`
				} `json:"status"`
			} `json:"items"`
		}
		if _, err := s.g.do(ctx, http.MethodGet, "/v1/regions", nil, &regions); err != nil {
			return err
		}
		if len(regions.Items) != 1 || regions.Items[0].Status == nil || regions.Items[0].Status.NodesUp < want {
			return fmt.Errorf("not yet: %+v", regions.Items)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("%w\nregion log:\n%s\nsim log:\n%s", err, s.region.tail(10), s.sim.tail(10))
	}
	_, err = s.g.do(ctx, http.MethodPost, "/v1/flavors", map[string]any{
		"name": "tiny", "kind": "container", "spec": map[string]any{"vcpus": 0.1, "memoryMiB": 64},
	}, nil)
	return err
}

func (s *suite) startRedis(ctx context.Context) (string, error) {
	addr := freeAddr()
	_, port, _ := strings.Cut(addr, ":")
	p, err := start(s.dir, "redis", "redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err != nil {
		return "", err
	}
	s.procs = append(s.procs, p)
	return addr, waitFor(ctx, 50*time.Millisecond, "redis", func() error {
		c, err := (&netDialer{}).dial(addr)
		if err == nil {
			c.Close()
		}
		return err
	})
}

func (s *suite) write(name, body string) string {
	p := filepath.Join(s.dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		panic(err)
	}
	return p
}

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

// b2 measures create → ready of one replica, idle.
func (s *suite) b2(ctx context.Context) error {
	var lat []time.Duration
	for i := range 40 {
		name := fmt.Sprintf("lat-%d", i)
		start := time.Now()
		if _, err := s.g.do(ctx, http.MethodPost, "/v1/resources", resource(name, 1, nil), nil); err != nil {
			return err
		}
		err := waitFor(ctx, 2*time.Millisecond, name+" ready", func() error {
			var v statusView
			if _, err := s.g.do(ctx, http.MethodGet, "/v1/resources/"+name, nil, &v); err != nil {
				return err
			}
			if !v.ready(1) {
				return fmt.Errorf("not ready")
			}
			return nil
		})
		if err != nil {
			return err
		}
		lat = append(lat, time.Since(start))
		if _, err := s.g.do(ctx, http.MethodDelete, "/v1/resources/"+name, nil, nil); err != nil {
			return err
		}
	}
	p50, p99 := pct(lat, 50), pct(lat, 99)
	s.r.add(row{id: "B2", what: "create → ready at the global API, 1 replica, idle (p50 / p99)",
		figure: fmt.Sprintf("%s / %s", ms(p50), ms(p99)), target: "p99 ≤ 200 ms", met: verdict(p99 <= 200*time.Millisecond),
		notes: fmt.Sprintf("%d sequential creates; each polled every 2 ms.", len(lat))})
	return nil
}

// b1 creates resources × replicas as fast as the API takes them and
// measures replicas/s until all are ready; B3 samples the API meanwhile.
func (s *suite) b1(ctx context.Context) error {
	total := s.o.resources * s.o.replicas
	var gets, posts samples
	start := time.Now()
	if s.o.profiles != "" {
		go s.profile(ctx, 8*time.Second, "global-1", "region", "sim-agents")
	}
	stopReads := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() { s.b1Reads(ctx, stopReads, &gets) })
	failed := s.b1Creates(ctx, &posts)
	accepted := time.Since(start)
	if failed > 0 {
		close(stopReads)
		readers.Wait()
		return fmt.Errorf("%d creates failed", failed)
	}
	err := waitFor(ctx, 250*time.Millisecond, "every B1 replica ready", func() error {
		ready, err := s.readyReplicas(ctx, "b1-")
		if err != nil {
			return err
		}
		if ready < total {
			return fmt.Errorf("%d/%d ready", ready, total)
		}
		return nil
	})
	elapsed := time.Since(start)
	close(stopReads)
	readers.Wait()
	if err != nil {
		return err
	}
	s.b1Report(total, elapsed, accepted, gets.all(), posts.all())
	return nil
}

// samples are latencies gathered by several goroutines.
type samples struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *samples) add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.d = append(l.d, d)
}

func (l *samples) all() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.d)
}

// b1Reads GETs a random B1 resource every 5 ms until stop, timing each.
func (s *suite) b1Reads(ctx context.Context, stop <-chan struct{}, gets *samples) {
	reader := newClient("http://"+s.gHTTP[0], s.token)
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		name := fmt.Sprintf("b1-%d", rand.IntN(s.o.resources))
		t0 := time.Now()
		if code, _ := reader.do(ctx, http.MethodGet, "/v1/resources/"+name, nil, nil); code == http.StatusOK || code == http.StatusNotFound {
			gets.add(time.Since(t0))
		}
	}
}

// b1Creates POSTs the B1 resources from 32 clients, timing each, and
// returns how many failed.
func (s *suite) b1Creates(ctx context.Context, posts *samples) int64 {
	names := make(chan int)
	var writers sync.WaitGroup
	var failed atomic.Int64
	for range 32 {
		writers.Go(func() {
			for i := range names {
				t0 := time.Now()
				if _, err := s.g.do(ctx, http.MethodPost, "/v1/resources", resource(fmt.Sprintf("b1-%d", i), s.o.replicas, nil), nil); err != nil {
					failed.Add(1)
					continue
				}
				posts.add(time.Since(t0))
			}
		})
	}
	for i := range s.o.resources {
		names <- i
	}
	close(names)
	writers.Wait()
	return failed.Load()
}

// b1Report adds the rows of B1, B3 and (wanted) B6.
func (s *suite) b1Report(total int, elapsed, accepted time.Duration, getLat, postLat []time.Duration) {
	rate := float64(total) / elapsed.Seconds()
	ratio := ""
	met := rate >= 2000
	if s.etcdPut128 > 0 {
		ratio = fmt.Sprintf("%.2f × raw etcd (128 clients)", rate/s.etcdPut128)
		met = met && rate/s.etcdPut128 >= 0.15
	}
	s.r.add(row{id: "B1", what: fmt.Sprintf("throughput: %d replicas (%d × %d) on %d agents, create → all ready", total, s.o.resources, s.o.replicas, s.o.agents),
		figure: fmt.Sprintf("%.0f replicas/s (%s)", rate, elapsed.Round(100*time.Millisecond)), target: "≥ 2,000/s and ≥ 0.15 × etcd", ratio: ratio, met: verdict(met),
		notes: fmt.Sprintf("All %d creates accepted in %s.", s.o.resources, accepted.Round(100*time.Millisecond))})
	gp50, gp99 := pct(getLat, 50), pct(getLat, 99)
	pp50, pp99 := pct(postLat, 50), pct(postLat, 99)
	s.r.add(row{id: "B3", what: "API under B1 load: GET one resource (p50 / p99)", figure: fmt.Sprintf("%s / %s", ms(gp50), ms(gp99)),
		target: "p99 ≤ 100 ms", met: verdict(gp99 <= 100*time.Millisecond), notes: fmt.Sprintf("%d GETs, %d POSTs sampled.", len(getLat), len(postLat))})
	s.r.add(row{id: "B3", what: "API under B1 load: POST a resource (p50 / p99)", figure: fmt.Sprintf("%s / %s", ms(pp50), ms(pp99)),
		target: "p99 ≤ 300 ms", met: verdict(pp99 <= 300*time.Millisecond)})
	if s.o.wants("B6") {
		rss, err := s.region.rssMiB()
		if err == nil {
			s.r.add(row{id: "B6", what: fmt.Sprintf("memory: region process with %d nodes and %d replicas", s.o.agents+1, total),
				figure: fmt.Sprintf("%.0f MiB RSS", rss), target: "≤ 512 MiB", met: verdict(rss <= 512)})
		}
	}
}

// profile takes CPU profiles of processes at the same time.
func (s *suite) profile(ctx context.Context, d time.Duration, names ...string) {
	if err := os.MkdirAll(s.o.profiles, 0o755); err != nil {
		return
	}
	for _, name := range names {
		addr := pprofAddrs[name]
		if addr == "" {
			continue
		}
		go func() {
			url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds()))
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			f, err := os.Create(filepath.Join(s.o.profiles, "b1-"+name+".pprof"))
			if err != nil {
				return
			}
			defer f.Close()
			_, _ = io.Copy(f, resp.Body)
		}()
	}
}

// readyReplicas sums the ready replicas of the resources named prefix*.
func (s *suite) readyReplicas(ctx context.Context, prefix string) (int, error) {
	ready, cont := 0, ""
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
		if _, err := s.g.do(ctx, http.MethodGet, path, nil, &page); err != nil {
			return 0, err
		}
		for _, it := range page.Items {
			if strings.HasPrefix(it.Name, prefix) && it.Status != nil && it.Status.Phase == "ready" {
				ready += it.Status.Ready
			}
		}
		if page.Continue == "" {
			return ready, nil
		}
		cont = page.Continue
	}
}

// b4 kills a real agent holding 100 replicas and times their recovery.
func (s *suite) b4(ctx context.Context) error {
	if _, err := s.g.do(ctx, http.MethodPost, "/v1/resources", resource("loss", 100, map[string]string{"bench": "single"}), nil); err != nil {
		return err
	}
	if err := waitFor(ctx, 100*time.Millisecond, "100 replicas on the single agent", func() error {
		var v statusView
		if _, err := s.g.do(ctx, http.MethodGet, "/v1/resources/loss", nil, &v); err != nil {
			return err
		}
		if !v.ready(100) {
			return fmt.Errorf("not ready")
		}
		return nil
	}); err != nil {
		return err
	}
	if s.o.wants("B6") {
		if rss, err := s.single.rssMiB(); err == nil {
			s.r.add(row{id: "B6", what: "memory: one agent process with 100 replicas (fake provider)",
				figure: fmt.Sprintf("%.0f MiB RSS", rss), target: "≤ 40 MiB", met: verdict(rss <= 40)})
		}
	}
	if !s.o.wants("B4") {
		return nil
	}
	// Let the replicas go anywhere once their node is gone.
	res := resource("loss", 100, nil)
	if _, err := s.g.do(ctx, http.MethodPut, "/v1/resources/loss", res, nil); err != nil {
		return err
	}
	_ = s.single.cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	<-s.single.done
	if err := waitFor(ctx, 100*time.Millisecond, "100 replicas ready elsewhere", func() error {
		n, err := s.readyOffNode(ctx, "loss", "single")
		if err == nil && n < 100 {
			err = fmt.Errorf("%d/100", n)
		}
		return err
	}); err != nil {
		return err
	}
	took := time.Since(killed)
	s.r.add(row{id: "B4", what: "node loss: SIGKILL an agent with 100 replicas → all ready elsewhere", figure: secs(took),
		target: "≤ 15 s (default settings)", met: verdict(took <= 15*time.Second),
		notes: "Default liveness: heartbeats every 2 s, Suspect after 6 s, Down after 10 s when the probe fails."})
	return nil
}

// readyOffNode counts the running, ready replicas of resource that are
// not on node.
func (s *suite) readyOffNode(ctx context.Context, resource, node string) (int, error) {
	var reps struct {
		Items []struct {
			Node    string `json:"node"`
			Phase   string `json:"phase"`
			Desired string `json:"desired"`
		} `json:"items"`
	}
	if _, err := s.g.do(ctx, http.MethodGet, "/v1/resources/"+resource+"/replicas", nil, &reps); err != nil {
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

// b5 SIGKILLs the master and times the new master's first propagation.
func (s *suite) b5(ctx context.Context) error {
	master := -1
	if err := waitFor(ctx, 50*time.Millisecond, "a master", func() error {
		for i, h := range s.gHTTP {
			v, err := metric(h, `strata_global_is_master{tier="global"}`)
			if err == nil && v == 1 {
				master = i
				return nil
			}
		}
		return fmt.Errorf("none")
	}); err != nil {
		return err
	}
	other := 1 - master
	_ = s.globals[master].cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	<-s.globals[master].done
	g := newClient("http://"+s.gHTTP[other], s.token)
	if _, err := g.do(ctx, http.MethodPost, "/v1/resources", resource("after-failover", 1, nil), nil); err != nil {
		return err
	}
	if err := waitFor(ctx, 10*time.Millisecond, "the new master propagates", func() error {
		v, err := metric(s.gHTTP[other], `strata_global_propagations_total{tier="global"}`)
		if err != nil {
			return err
		}
		if v < 1 {
			return fmt.Errorf("no propagation yet")
		}
		return nil
	}); err != nil {
		return err
	}
	took := time.Since(killed)
	s.r.add(row{id: "B5", what: "master failover: SIGKILL the master → new master's first propagation", figure: secs(took),
		target: "≤ 5 s", met: verdict(took <= 5*time.Second), notes: "Election lease TTL 3 s (the default)."})
	return nil
}

// b8 times one resource of 10,000 replicas in one region through the
// global API, on etcds with stock --max-txn-ops: create → all ready, scale
// to 0 → ready with none, delete → gone (the region has destroyed every
// replica and forgotten the resource). Three runs.
func (s *suite) b8(ctx context.Context) error {
	const n, runs = 10000, 3
	var up, down, gone []time.Duration
	status := func(name string, cond func(statusView) bool) func() error {
		return func() error {
			var v statusView
			if _, err := s.g.do(ctx, http.MethodGet, "/v1/resources/"+name, nil, &v); err != nil {
				return err
			}
			if !cond(v) {
				return fmt.Errorf("status %+v", v.Status)
			}
			return nil
		}
	}
	for i := range runs {
		name := fmt.Sprintf("big-%d", i)
		start := time.Now()
		if _, err := s.g.do(ctx, http.MethodPost, "/v1/resources", resource(name, n, nil), nil); err != nil {
			return err
		}
		if err := waitFor(ctx, 100*time.Millisecond, name+" ready", status(name, func(v statusView) bool { return v.ready(n) })); err != nil {
			return fmt.Errorf("%w\nregion log:\n%s", err, s.region.tail(10))
		}
		up = append(up, time.Since(start))

		start = time.Now()
		if _, err := s.g.do(ctx, http.MethodPut, "/v1/resources/"+name, resource(name, 0, nil), nil); err != nil {
			return err
		}
		if err := waitFor(ctx, 100*time.Millisecond, name+" scaled to 0", status(name, func(v statusView) bool {
			return v.ready(0) && v.Status.Replicas == 0
		})); err != nil {
			return err
		}
		down = append(down, time.Since(start))

		// Delete from 10,000 replicas: scale up again first (untimed).
		if _, err := s.g.do(ctx, http.MethodPut, "/v1/resources/"+name, resource(name, n, nil), nil); err != nil {
			return err
		}
		if err := waitFor(ctx, 100*time.Millisecond, name+" ready again", status(name, func(v statusView) bool { return v.ready(n) })); err != nil {
			return err
		}
		start = time.Now()
		if _, err := s.g.do(ctx, http.MethodDelete, "/v1/resources/"+name, nil, nil); err != nil {
			return err
		}
		if err := waitFor(ctx, 100*time.Millisecond, name+" gone", func() error {
			code, err := s.g.do(ctx, http.MethodGet, "/v1/resources/"+name, nil, nil)
			if code == http.StatusNotFound {
				return nil
			}
			return fmt.Errorf("still there (%d, %v)", code, err)
		}); err != nil {
			return err
		}
		gone = append(gone, time.Since(start))
	}
	note := fmt.Sprintf("One resource of %d replicas in one region on %d simulated agents; %d runs, median (min–max); etcd with stock --max-txn-ops (128).", n, s.o.agents, runs)
	s.r.add(row{id: "B8", what: "one resource of 10,000 replicas: create → all ready", figure: spread(up)})
	s.r.add(row{id: "B8", what: "one resource of 10,000 replicas: scale to 0 → ready with none", figure: spread(down)})
	s.r.add(row{id: "B8", what: "one resource of 10,000 replicas: delete → gone", figure: spread(gone), notes: note})
	return nil
}

// spread is the median of d with its range: "1.20 s (1.10–1.35 s)".
func spread(d []time.Duration) string {
	s := slices.Clone(d)
	slices.Sort(s)
	return fmt.Sprintf("%s (%.2f–%.2f s)", secs(pct(s, 50)), s[0].Seconds(), s[len(s)-1].Seconds())
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}

func ms(d time.Duration) string   { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
