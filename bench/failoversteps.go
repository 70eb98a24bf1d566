package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// b5Steps is one failover's timeline from outside the tiers: a watch of
// both tiers' etcd notes when the dead leader's election key went (etcd
// expired its lease), when the successor announced its term, and the
// writes of the resource created after the kill (b2Steps' steps); a poll
// of the survivor notes when its agents were all back.
type b5Steps struct {
	tier   string // whose election: "region" or "global"
	killed time.Time

	mu            sync.Mutex
	gone, elected time.Time
	agents        time.Time // the survivor follows every agent again
	res           *b2Steps
}

// The steps of a failover, each from the kill; absent ones are left out.
const (
	b5Gone    = "lease expired"
	b5Elected = "successor leads"
	b5Agents  = "agents back"
)

// b5StepNames lists, in order, what a failover's notes report.
var b5StepNames = []string{b5Gone, b5Elected, b5Agents, b2Posted, b2Placed, b2Assigned, b2Reported, b2Shared, b2GlobalDone, b2Seen}

// b5StepWhat describes each step for the notes.
var b5StepWhat = map[string]string{
	b5Gone:       "the dead leader's election key deleted (lease expired)",
	b5Elected:    "the successor announces its term",
	b5Agents:     "every agent follows its assignments again",
	b2Posted:     "the create accepted",
	b2Placed:     "placement written in the region",
	b2Assigned:   "assignment written",
	b2Reported:   "agent's ready status in the region (the fake provider's start of 50–200 ms included)",
	b2Shared:     "region's share ready",
	b2GlobalDone: "global status ready",
	b2Seen:       "the client sees it (the figure)",
}

// watchB5Steps starts watching both tiers' etcd for tier's election and
// for the writes of the resource name.
func (c *cluster) watchB5Steps(ctx context.Context, tier, name string) (*b5Steps, func(), error) {
	s := &b5Steps{tier: tier, res: &b2Steps{at: map[string]map[string]time.Time{}, fake: map[string]time.Duration{}, replica: map[string]string{}}}
	stop, err := c.watchEtcd(ctx, func(t string, resp clientv3.WatchResponse, now time.Time) {
		for _, ev := range resp.Events {
			key := string(ev.Kv.Key)
			if kind, _ := stepKey(key); kind == "election" && t == tier {
				s.sawElection(ev.Type == clientv3.EventTypeDelete, now)
				continue
			}
			if ev.Type == clientv3.EventTypePut {
				s.res.saw(name, key, ev.Kv.Value, now)
			}
		}
	})
	return s, stop, err
}

// sawElection notes the election's changes after the kill: the first
// write of an election key after a deletion is the successor announcing
// its term, and the last deletion before it the dead leader's key going
// with its lease (an earlier one may be a queued candidate's).
func (s *b5Steps) sawElection(deleted bool, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.killed.IsZero() || !s.elected.IsZero():
	case deleted:
		s.gone = now
	case !s.gone.IsZero():
		s.elected = now
	}
}

func (s *b5Steps) kill(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killed = at
}

// agentsFollowing is the sample of the region's count of agents that
// follow their assignments through a replica.
const agentsFollowing = `strata_region_agents_following{tier="region"}`

// followAgents polls every replica's agentsFollowing until their sum
// reaches want, and notes when; it gives up when ctx ends. A replica
// that does not answer (the dead one, until it is restarted) counts
// none. With want 0 (a region without the gauge) it notes nothing.
func (s *b5Steps) followAgents(ctx context.Context, replicas []*client, want float64) {
	for want > 0 && ctx.Err() == nil {
		var sum float64
		for _, r := range replicas {
			if v, err := r.metric(ctx, agentsFollowing); err == nil {
				sum += v
			}
		}
		if sum >= want {
			s.mu.Lock()
			s.agents = time.Now()
			s.mu.Unlock()
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// values is each step's time from the kill; a step not seen is absent.
func (s *b5Steps) values() map[string]time.Duration {
	s.mu.Lock()
	at := map[string]time.Time{b5Gone: s.gone, b5Elected: s.elected, b5Agents: s.agents}
	s.mu.Unlock()
	s.res.mu.Lock()
	for _, m := range s.res.at {
		for k, v := range m {
			at[k] = v
		}
	}
	s.res.mu.Unlock()
	out := map[string]time.Duration{}
	for k, v := range at {
		if !v.IsZero() {
			out[k] = v.Sub(s.killed)
		}
	}
	return out
}

// b5RunLine is one run's steps, for the log.
func b5RunLine(what string, round int, v map[string]time.Duration) string {
	var parts []string
	for _, k := range b5StepNames {
		if d, ok := v[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %.2fs", k, d.Seconds()))
		}
	}
	return fmt.Sprintf("B5 %s run %d, from the kill: %s", what, round+1, strings.Join(parts, ", "))
}

// b5BreakdownNotes is each step's median (range) over the runs that saw
// it, from the kill.
func b5BreakdownNotes(runs []map[string]time.Duration) string {
	var parts []string
	for _, k := range b5StepNames {
		var d []time.Duration
		for _, r := range runs {
			if v, ok := r[k]; ok {
				d = append(d, v)
			}
		}
		if len(d) == 0 {
			continue
		}
		sp := spreadDurations(d)
		parts = append(parts, fmt.Sprintf("%s %s (%s–%s)", b5StepWhat[k], fmtSecs(sp.med), fmtSecs(sp.lo), fmtSecs(sp.hi)))
	}
	if len(parts) == 0 {
		return ""
	}
	notes := " Where the time goes, median (range) over the runs, each from the kill (from a watch of both tiers' etcd and polls of the replicas): " + strings.Join(parts, "; ") + "."
	var after []time.Duration
	for _, r := range runs {
		gone, ok1 := r[b5Gone]
		seen, ok2 := r[b2Seen]
		if ok1 && ok2 {
			after = append(after, seen-gone)
		}
	}
	if len(after) > 0 {
		sp := spreadDurations(after)
		notes += fmt.Sprintf(" From the lease's expiry to the figure (the part the tiers can cut): %s (%s–%s).", fmtSecs(sp.med), fmtSecs(sp.lo), fmtSecs(sp.hi))
	}
	return notes
}
