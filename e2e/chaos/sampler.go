package chaos

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	agentv1 "github.com/stratahq/strata/proto/agent/v1"
)

// sample is what ran at one instant, At, as the agents say: replica id
// to the nodes that run it (phase provision or ready).
//
// The agents cannot all be asked at one instant: they are asked in turn,
// and between two answers a replica may stop on one node and its
// replacement start on another (a rolling update, a scale moving a share
// between regions, the controller creating a replica once its agent
// confirmed the one it replaces gone). Counting both would report more
// running than ever ran at once. So every agent is asked twice, in two
// rounds, the second started once the first has answered: a replica an
// agent reports in both rounds, with no restart of the agent between,
// ran all the time between its two answers, and so at At, the end of the
// first round. Running holds exactly those: what is known to have run at
// one instant.
type sample struct {
	At      time.Time
	Running map[string][]string
	// Unreachable are the agents that did not answer both rounds (or
	// restarted between them).
	Unreachable []string
	// Seen are the replicas either round saw, at any moment of the
	// sample; Running is the part of it known to run at At.
	Seen map[string][]string
	// Asked is when each agent was asked in the first round and when it
	// answered in the second.
	Asked map[string][2]time.Time
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
	top *Topology
	// ask asks one agent what it runs (its NodeService's Status).
	ask  func(ctx context.Context, agent string) (*agentv1.NodeStatusResponse, error)
	etcd map[string]*clientv3.Client

	revMu     sync.Mutex
	mu        sync.Mutex
	samples   []sample
	revisions map[string]int64
	anomalies []string
	// duplicates counts the replicas seen on two nodes at once.
	duplicates int
}

func newSampler(t *testing.T, top *Topology) *sampler {
	conns := map[string]*grpc.ClientConn{}
	for _, a := range top.Agents {
		conns[a.Name] = top.nodeConn(t, a)
	}
	s := &sampler{top: top, etcd: map[string]*clientv3.Client{}, revisions: map[string]int64{}}
	s.ask = func(ctx context.Context, agent string) (*agentv1.NodeStatusResponse, error) {
		return nodeStatus(ctx, conns[agent])
	}
	for _, tier := range append([]*Tier{top.Global}, top.Regions...) {
		s.etcd[tier.Name] = tier.Etcd.Client(t)
	}
	return s
}

// answer is one agent's answer in one round.
type answer struct {
	asked, answered time.Time
	started         time.Time
	running         []string
}

// round asks every agent once, in turn; an agent that does not answer
// is missing from the result.
func (s *sampler) round(ctx context.Context) map[string]answer {
	out := make(map[string]answer, len(s.top.Agents))
	for _, a := range s.top.Agents {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		asked := time.Now()
		st, err := s.ask(cctx, a.Name)
		cancel()
		if err != nil {
			continue
		}
		an := answer{asked: asked, answered: time.Now(), started: st.GetStartedAt().AsTime()}
		for _, as := range st.GetAssignments() {
			if p := as.GetPhase(); p == "ready" || p == "provision" {
				an.running = append(an.running, as.GetId())
			}
		}
		out[a.Name] = an
	}
	return out
}

// cut builds the sample of two rounds, first ending at at (see sample).
func (s *sampler) cut(first, second map[string]answer, at time.Time) sample {
	sm := sample{At: at, Running: map[string][]string{}, Seen: map[string][]string{}, Asked: map[string][2]time.Time{}}
	for _, a := range s.top.Agents {
		one, ok1 := first[a.Name]
		two, ok2 := second[a.Name]
		for _, an := range []answer{one, two} {
			for _, id := range an.running {
				if !slices.Contains(sm.Seen[id], a.Name) {
					sm.Seen[id] = append(sm.Seen[id], a.Name)
				}
			}
		}
		if !ok1 || !ok2 || !one.started.Equal(two.started) {
			sm.Unreachable = append(sm.Unreachable, a.Name)
			continue
		}
		sm.Asked[a.Name] = [2]time.Time{one.asked, two.answered}
		for _, id := range one.running {
			if slices.Contains(two.running, id) {
				sm.Running[id] = append(sm.Running[id], a.Name)
			}
		}
	}
	return sm
}

// take samples the agents once: two rounds, cut at the end of the first.
func (s *sampler) take(ctx context.Context) sample {
	first := s.round(ctx)
	at := time.Now()
	second := s.round(ctx)
	sm := s.cut(first, second, at)
	s.mu.Lock()
	s.samples = append(s.samples, sm)
	// A replica's id is placed on one node once and never moves: one
	// seen on two nodes, at whatever moments, ran twice.
	for id, nodes := range sm.Seen {
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

// askedTimes says when each agent was asked and answered, by name.
func (s sample) askedTimes() string {
	names := make([]string, 0, len(s.Asked))
	for n := range s.Asked {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s-%s", n, s.Asked[n][0].Format("15:04:05.000"), s.Asked[n][1].Format("15:04:05.000"))
	}
	return b.String()
}

// spread is the time from the first agent asked to the last answer.
func (s sample) spread() time.Duration {
	var first, last time.Time
	for _, at := range s.Asked {
		if first.IsZero() || at[0].Before(first) {
			first = at[0]
		}
		if at[1].After(last) {
			last = at[1]
		}
	}
	return last.Sub(first)
}
