package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// sample is what the agents said they run at one moment: replica id to
// the nodes that run it (phase provision or ready).
type sample struct {
	At      time.Time
	Running map[string][]string
	// Unreachable are the agents that did not answer.
	Unreachable []string
}

// resourceOf is the resource a replica id belongs to (<resource>-<suffix>).
func resourceOf(id string) string {
	if i := strings.LastIndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return id
}

// count is how many replicas of each resource the sample saw running.
func (s sample) count() map[string]int {
	out := map[string]int{}
	for id := range s.Running {
		out[resourceOf(id)]++
	}
	return out
}

// sampler asks every agent's NodeService, as its region, what it runs:
// the providers' view, not the API's. It also watches every etcd
// cluster's revision, which must never go backwards.
type sampler struct {
	top   *Topology
	conns map[string]*grpc.ClientConn
	etcd  map[string]*clientv3.Client

	revMu     sync.Mutex
	mu        sync.Mutex
	samples   []sample
	revisions map[string]int64
	anomalies []string
	// duplicates counts the replicas seen on two nodes at once.
	duplicates int
}

func newSampler(t *testing.T, top *Topology) *sampler {
	s := &sampler{top: top, conns: map[string]*grpc.ClientConn{}, etcd: map[string]*clientv3.Client{}, revisions: map[string]int64{}}
	for _, a := range top.Agents {
		s.conns[a.Name] = top.nodeConn(t, a)
	}
	for _, tier := range append([]*Tier{top.Global}, top.Regions...) {
		s.etcd[tier.Name] = tier.Etcd.Client(t)
	}
	return s
}

// take samples the agents once.
func (s *sampler) take(ctx context.Context) sample {
	sm := sample{Running: map[string][]string{}}
	for _, a := range s.top.Agents {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := nodeStatus(cctx, s.conns[a.Name])
		cancel()
		if err != nil {
			sm.Unreachable = append(sm.Unreachable, a.Name)
			continue
		}
		for _, as := range st.GetAssignments() {
			if p := as.GetPhase(); p == "ready" || p == "provision" {
				sm.Running[as.GetId()] = append(sm.Running[as.GetId()], a.Name)
			}
		}
	}
	// What ran was seen by now: writes started before this may explain it.
	sm.At = time.Now()
	s.mu.Lock()
	s.samples = append(s.samples, sm)
	for id, nodes := range sm.Running {
		if len(nodes) > 1 {
			s.duplicates++
			s.anomalies = append(s.anomalies, fmt.Sprintf("%s: replica %s runs on %v", sm.At.Format(time.StampMilli), id, nodes))
		}
	}
	s.mu.Unlock()
	s.revs(ctx)
	return sm
}

// revs reads each cluster's revision; a lower one than seen before is an
// anomaly. The reads are one at a time (revMu): of two concurrent reads
// the later answer may rightly carry the older revision.
func (s *sampler) revs(ctx context.Context) {
	s.revMu.Lock()
	defer s.revMu.Unlock()
	for name, cli := range s.etcd {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := cli.Get(cctx, "chaos-revision-probe")
		cancel()
		if err != nil {
			continue
		}
		s.mu.Lock()
		if prev := s.revisions[name]; resp.Header.Revision < prev {
			s.anomalies = append(s.anomalies, fmt.Sprintf("etcd %s: revision %d after %d", name, resp.Header.Revision, prev))
		}
		s.revisions[name] = resp.Header.Revision
		s.mu.Unlock()
	}
}

// run samples every interval until ctx ends.
func (s *sampler) run(ctx context.Context, interval time.Duration) {
	for ctx.Err() == nil {
		s.take(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
}

// all returns the samples, how many times a replica ran on two nodes,
// and every anomaly seen.
func (s *sampler) all() ([]sample, int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sample(nil), s.samples...), s.duplicates, append([]string(nil), s.anomalies...)
}
