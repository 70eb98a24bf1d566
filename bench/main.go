// Command bench runs Strata's benchmark suite on this machine and writes
// docs/benchmarks.md: every figure with its target and, where there is
// one, its ratio to a baseline measured in the same run.
//
//	go run ./bench            (what `make bench` does)
//	go run ./bench -only B0,B2 -out /tmp/b.md
//
// Tiers run as real processes (bin/strata, bin/strata-agent, bin/etcd
// from `make build`), so that memory is measured per tier and a master
// can be SIGKILLed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

type options struct {
	out       string
	only      map[string]bool
	agents    int
	resources int
	replicas  int
	bin       string
	keep      bool
	profiles  string
	rounds    int
	shapes    map[string]bool
}

func main() {
	if len(os.Args) > 1 && dnsSubcommand(os.Args[1:]) {
		return
	}
	var o options
	var only, shapes string
	flag.StringVar(&o.out, "out", "docs/benchmarks.md", "where to write the results")
	flag.StringVar(&only, "only", "", "comma-separated benchmarks to run (A1, A2, B0..B10, C1, V1, N1, N2, N3, P1, P2, DNS1, DNS3); empty runs all")
	flag.StringVar(&shapes, "shapes", "production,light", "comma-separated cluster shapes to run the cluster benchmarks on")
	flag.IntVar(&o.rounds, "rounds", 3, "runs of each benchmark (B5: at least 5)")
	flag.IntVar(&o.agents, "agents", 1000, "simulated agents for B1")
	flag.IntVar(&o.resources, "resources", 2000, "resources created in B1")
	flag.IntVar(&o.replicas, "replicas", 10, "replicas per resource in B1")
	flag.StringVar(&o.bin, "bin", "bin", "directory with strata, strata-agent and etcd")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory")
	flag.StringVar(&o.profiles, "profiles", "", "directory to write CPU profiles of the tiers and their etcd members taken during B1, of the region during B8, heap and goroutine profiles of the region and agent B6 measures, and the region's runtime memory statistics at the end of each B1 run (empty: none)")
	flag.Parse()
	o.only = map[string]bool{}
	for _, b := range strings.Split(only, ",") {
		if b = strings.TrimSpace(strings.ToUpper(b)); b != "" {
			o.only[b] = true
		}
	}
	o.shapes = map[string]bool{}
	for _, sh := range strings.Split(shapes, ",") {
		if sh = strings.TrimSpace(sh); sh != "" {
			o.shapes[sh] = true
		}
	}
	if o.rounds < 3 {
		log.Fatal("-rounds: at least 3 (a single run says nothing of the spread)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeoutCause(ctx, 60*time.Minute, errors.New("over the whole run's 60-minute limit"))
	defer cancel()

	dir, err := os.MkdirTemp("", "strata-bench-")
	if err != nil {
		log.Fatal(err)
	}
	if !o.keep {
		defer os.RemoveAll(dir)
	}
	r := &report{started: time.Now()}
	go r.load.run(ctx)
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		log.Fatal(err)
	}
	write := func() {
		if err := os.WriteFile(o.out, []byte(r.markdown(o)), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	r.flush = write
	s := &suite{o: o, dir: dir, r: r, prof: profiler{dir: o.profiles}}
	if err := s.run(ctx); err != nil {
		log.Printf("bench: %v", err)
		r.note("The run stopped early: %v", err)
	}
	write()
	fmt.Printf("wrote %s (%s)\n", o.out, time.Since(r.started).Round(time.Second))
}

func (o options) wants(id string) bool { return len(o.only) == 0 || o.only[id] }
