package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// b0 measures raw etcd puts on the global tier's etcd (before the tiers
// use it): B1's baseline, and the latency of one put, B2's.
func (s *suite) b0(ctx context.Context, c *cluster) error {
	value := strings.Repeat("x", 512)
	members := fmt.Sprintf("%d-member etcd", c.shape.members)
	for _, clients := range []int{1, 16, 128} {
		var rates []float64
		var lat latencies
		for round := range s.o.rounds {
			rate, err := s.etcdPuts(ctx, c.etcdGlobal, clients, value, round, &lat)
			if err != nil {
				return err
			}
			rates = append(rates, rate)
		}
		sp := spreadFloats(rates)
		x := row{id: "B0", what: c.label(fmt.Sprintf("raw etcd puts, %d concurrent client(s), 512 B, %s", clients, members)),
			figure: sp.format(fmtRate), ratio: "(the baseline)"}
		switch clients {
		case 1:
			c.put1 = &lat
			x.notes = "One put's latency: " + lat.summary() + "."
		case 128:
			c.put128 = sp.med
		}
		s.r.add(x)
	}
	// Leave the tiers an etcd without the baseline's keys.
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.etcdGlobal, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	_, err = cli.Delete(ctx, "/bench/", clientv3.WithPrefix())
	return err
}

// etcdPuts puts value to distinct keys from clients goroutines for 3 s
// and returns the rate; with one client it records each put's latency.
func (s *suite) etcdPuts(ctx context.Context, endpoints []string, clients int, value string, round int, lat *latencies) (float64, error) {
	// Separate connections, as separate processes would have.
	conns := min(clients, 16)
	clis := make([]*clientv3.Client, conns)
	for i := range clis {
		var err error
		if clis[i], err = clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}); err != nil {
			return 0, err
		}
		defer clis[i].Close()
	}
	var n atomic.Int64
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for w := range clients {
		wg.Go(func() {
			cli := clis[w%conns]
			for i := 0; dctx.Err() == nil; i++ {
				t0 := time.Now()
				_, err := cli.Put(dctx, fmt.Sprintf("/bench/%d/%d/%d", round, w, i), value)
				if dctx.Err() != nil {
					return
				}
				if clients == 1 {
					lat.record(time.Since(t0), err)
				}
				if err == nil {
					n.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}
