package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// b4Steps are the steps of one node loss, each timed from the kill: where
// B4's seconds go. Read after the clock stopped, from what the region
// recorded (its node status, its events, the replicas' assignments and
// statuses), all on this host's clock.
type b4Steps struct {
	// beatAge is the age of the agent's last heartbeat at the kill: the
	// node can be Down no sooner than downAfter less it.
	beatAge time.Duration
	// since the kill: the node Suspect, Down; the first and last new
	// replica assigned; the first and last ready; the global API reading
	// 100 ready (B4's figure).
	suspect, down, firstAssigned, lastAssigned, firstReady, lastReady, global time.Duration
}

// b4StepNames name b4Steps' fields in the notes, in order.
// The last two are not from the kill: how late Down came after its
// deadline (downAfter after the last beat), and how much of the figure is
// more than that deadline, the part that is not inherent.
var b4StepNames = []string{"last beat's age at the kill", "Suspect", "Down", "first replica assigned elsewhere",
	"last assigned", "first ready", "last ready", "global API reads 100 ready",
	"Down past its deadline", "the figure past that deadline"}

func (b b4Steps) values() []time.Duration {
	deadline := downAfter - b.beatAge // from the kill
	return []time.Duration{b.beatAge, b.suspect, b.down, b.firstAssigned, b.lastAssigned, b.firstReady, b.lastReady, b.global,
		b.down - deadline, b.global - deadline}
}

// b4Breakdown reads the steps of the loss of node (resource res), killed
// at killed; took is B4's figure for it.
func (c *cluster) b4Breakdown(ctx context.Context, res, node string, killed time.Time, took time.Duration) (b4Steps, error) {
	st := b4Steps{global: took}
	var n struct {
		Status struct {
			Health        string    `json:"health"`
			Since         time.Time `json:"since"`
			LastHeartbeat time.Time `json:"lastHeartbeat"`
		} `json:"status"`
	}
	if _, err := c.regionAPI().do(ctx, http.MethodGet, "/v1/nodes/"+node, nil, &n); err != nil {
		return st, err
	}
	if n.Status.Health != "Down" {
		return st, fmt.Errorf("node %s is %s, not Down", node, n.Status.Health)
	}
	st.beatAge, st.down = killed.Sub(n.Status.LastHeartbeat), n.Status.Since.Sub(killed)
	var evs struct {
		Items []struct {
			Time   time.Time `json:"time"`
			Reason string    `json:"reason"`
		} `json:"items"`
	}
	if _, err := c.regionAPI().do(ctx, http.MethodGet, "/v1/events?object=node/"+node, nil, &evs); err != nil {
		return st, err
	}
	for _, ev := range evs.Items {
		if ev.Reason == "NodeSuspect" && ev.Time.After(killed) {
			st.suspect = ev.Time.Sub(killed)
		}
	}
	return st, c.b4Replicas(ctx, res, node, killed, &st)
}

// b4Replicas fills in when the replicas were assigned elsewhere and ready.
func (c *cluster) b4Replicas(ctx context.Context, res, node string, killed time.Time, st *b4Steps) error {
	var reps struct {
		Items []struct {
			Node      string    `json:"node"`
			CreatedAt time.Time `json:"createdAt"`
			Phase     string    `json:"phase"`
			Status    *struct {
				Phase string    `json:"phase"`
				Since time.Time `json:"since"`
			} `json:"status"`
		} `json:"items"`
	}
	if _, err := c.g.do(ctx, http.MethodGet, "/v1/resources/"+res+"/replicas", nil, &reps); err != nil {
		return err
	}
	first := func(cur *time.Duration, d time.Duration) {
		if *cur == 0 || d < *cur {
			*cur = d
		}
	}
	for _, r := range reps.Items {
		if r.Node == node || r.CreatedAt.Before(killed) {
			continue
		}
		d := r.CreatedAt.Sub(killed)
		first(&st.firstAssigned, d)
		st.lastAssigned = max(st.lastAssigned, d)
		if r.Phase == "ready" && r.Status != nil {
			d := r.Status.Since.Sub(killed)
			first(&st.firstReady, d)
			st.lastReady = max(st.lastReady, d)
		}
	}
	return nil
}

// b4BreakdownNotes is the median (range) of each step over the runs.
func b4BreakdownNotes(runs []b4Steps) string {
	if len(runs) == 0 {
		return ""
	}
	parts := make([]string, len(b4StepNames))
	for i, name := range b4StepNames {
		d := make([]time.Duration, len(runs))
		for j, r := range runs {
			d[j] = r.values()[i]
		}
		s := spreadDurations(d)
		parts[i] = fmt.Sprintf("%s %s (%s–%s)", name, fmtSecs(s.med), fmtSecs(s.lo), fmtSecs(s.hi))
	}
	return " Where the time goes, median (range) over the runs, from the kill (the last two from Down's deadline, downAfter after the last beat): " + strings.Join(parts, "; ") + "."
}

// b4RunLine is one run's steps, for the log.
func b4RunLine(round int, st b4Steps) string {
	parts := make([]string, len(b4StepNames))
	for i, v := range st.values() {
		parts[i] = fmt.Sprintf("%s %.2fs", b4StepNames[i], v.Seconds())
	}
	return fmt.Sprintf("B4 run %d: %s", round+1, strings.Join(parts, ", "))
}
