package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/stratahq/strata/e2e/framework"
)

// Scenario is one named fault. Inject runs it on a topology under load:
// it marks when the fault started and ended (r.fault, r.heal), and
// checks what is particular to it; the runner checks the rest.
type Scenario struct {
	Name string
	// What the fault is, for the report.
	About string
	// Fast scenarios run in `make test` (one seed).
	Fast   bool
	Inject func(t *testing.T, r *Run)
	// Topology adds to the standard layout.
	Topology []TopologyOption
}

// Run is one scenario on one seed.
type Run struct {
	Top  *Topology
	Seed uint64
	Rng  *rand.Rand
	// faultAt and healAt bound the fault; failoverAt, when a scenario
	// sets it, is when the system was seen to recover (a new leader).
	faultAt, healAt, failoverAt time.Time
	// restartAt, when set, is where failover is measured from instead of
	// faultAt: a fault that holds a tier down on purpose (global-tier-down)
	// measures its recovery from the restart.
	restartAt time.Time
	notes     []string
	// isolated are agents cut from their region by the fault: by design
	// they keep running their replicas while the region replaces them
	// elsewhere, until the partition heals (docs/architecture.md).
	isolated []string
}

func (r *Run) fault()                  { r.faultAt = time.Now() }
func (r *Run) heal()                   { r.healAt = time.Now() }
func (r *Run) recovered()              { r.failoverAt = time.Now() }
func (r *Run) note(f string, a ...any) { r.notes = append(r.notes, fmt.Sprintf(f, a...)) }

// Result is what a run measured: a row of docs/reliability.md.
type Result struct {
	Scenario     string   `json:"scenario"`
	Seed         uint64   `json:"seed"`
	Requests     int      `json:"requests"`
	Acked        int      `json:"ackedWrites"`
	Unknown      int      `json:"unknownWrites"`
	Lost         int      `json:"lost"`
	Duplicates   int      `json:"duplicates"`
	OverCount    int      `json:"overCount"`
	Linearizable string   `json:"linearizable"`
	Convergence  float64  `json:"convergenceSeconds"`
	Failover     float64  `json:"failoverSeconds"`
	Anomalies    []string `json:"anomalies,omitempty"`
	Notes        []string `json:"notes,omitempty"`
	Passed       bool     `json:"passed"`
}

// Timings of a run. The load runs warmUp before the fault and coolDown
// after it; convergence must follow within convergeWithin of the last
// write.
const (
	warmUp         = 5 * time.Second
	coolDown       = 5 * time.Second
	convergeWithin = 30 * time.Second
	loadClients    = 3
)

var loadKeys = []string{"chaos-a", "chaos-b", "chaos-c", "chaos-d", "chaos-e", "chaos-f"}

var (
	resultsMu sync.Mutex
	results   []Result
)

// runScenario starts a topology, runs the load and the fault, and checks
// the invariants.
func runScenario(t *testing.T, sc Scenario, seed uint64) {
	t.Logf("scenario %s seed %d; replay: STRATA_CHAOS_SCENARIOS=%s STRATA_CHAOS_SEED=%d go test -run 'TestChaos$' ./e2e/chaos", sc.Name, seed, sc.Name, seed)
	top := StartTopology(t, sc.Topology...)
	top.REST(10*time.Second).Must(t, http.MethodPost, "/v1/flavors", map[string]any{
		"name": flavorName, "kind": "container", "spec": map[string]any{"vcpus": 0.1, "memoryMiB": 16},
	}, http.StatusCreated, nil)
	r := &Run{Top: top, Seed: seed, Rng: rand.New(rand.NewPCG(seed, 1))}
	smp := newSampler(t, top)
	hist, final, conv, convErr := drive(t, sc, r, smp)

	res := Result{Scenario: sc.Name, Seed: seed, Convergence: conv.Seconds()}
	if convErr != nil {
		res.Anomalies = append(res.Anomalies, convErr.Error())
	}
	res.judge(t, r, hist, final, smp)
	res.Notes = r.notes
	res.Passed = len(res.Anomalies) == 0 && !t.Failed()
	resultsMu.Lock()
	results = append(results, res)
	resultsMu.Unlock()
	t.Logf("%s seed %d: %d requests, %d acknowledged writes (%d unknown), lost %d, duplicates %d, over-count %d, linearizable %s, convergence %.1fs, failover %.1fs",
		sc.Name, seed, res.Requests, res.Acked, res.Unknown, res.Lost, res.Duplicates, res.OverCount, res.Linearizable, res.Convergence, res.Failover)
	for _, n := range r.notes {
		t.Logf("note: %s", n)
	}
	if len(res.Anomalies) > 0 {
		t.Errorf("%s seed %d: %d anomalies (replay: STRATA_CHAOS_SCENARIOS=%s STRATA_CHAOS_SEED=%d):\n%s",
			sc.Name, seed, len(res.Anomalies), sc.Name, seed, strings.Join(res.Anomalies, "\n"))
	}
}

// drive runs the load and the sampler from warmUp before the fault to
// coolDown after it, then waits for convergence. It returns the history
// (the final reads last), the final reads, and the time convergence took
// from the last write.
func drive(t *testing.T, sc Scenario, r *Run, smp *sampler) (hist, final []Op, conv time.Duration, err error) {
	ld := newLoad(r.Seed, loadKeys, loadClients, func() *framework.Client { return r.Top.REST(10 * time.Second) })
	sctx, stopSampler := context.WithCancel(context.Background())
	lctx, stopLoad := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); smp.run(sctx, 500*time.Millisecond) }()
	loadDone := make(chan struct{})
	go func() { defer wg.Done(); defer close(loadDone); ld.run(lctx) }()
	stop := func() { stopLoad(); stopSampler(); wg.Wait() }
	t.Cleanup(stop)

	time.Sleep(warmUp) // the load runs meanwhile
	sc.Inject(t, r)
	if r.faultAt.IsZero() || r.healAt.IsZero() {
		t.Fatalf("scenario %s did not mark its fault and heal", sc.Name)
	}
	time.Sleep(coolDown)
	stopLoad()
	<-loadDone

	hist = ld.history()
	lastWrite := r.healAt
	for _, o := range hist {
		if o.write() && o.End.After(lastWrite) {
			lastWrite = o.End
		}
	}
	final, conv, err = converge(t, r.Top, smp, lastWrite)
	stop()
	return append(hist, final...), final, conv, err
}

// judge checks the invariants over the history and the samples.
func (res *Result) judge(t *testing.T, r *Run, hist, final []Op, smp *sampler) {
	samples, dups, anomalies := smp.all()
	logSkew(t, hist, excuse(samples, r))
	res.Duplicates = dups
	res.Anomalies = append(res.Anomalies, anomalies...)
	over := overCounts(hist, excuse(samples, r))
	if d := len(overCounts(hist, samples)) - len(over); d > 0 {
		r.note("%d times a resource ran more replicas than asked only counting those on the cut-off node %v (by design, until the partition heals)", d, r.isolated)
	}
	res.OverCount = len(over)
	res.Anomalies = append(res.Anomalies, over...)
	res.count(hist)
	lost := lostWrites(hist, final)
	res.Lost = len(lost)
	res.Anomalies = append(res.Anomalies, lost...)
	res.Failover = failover(r, hist).Seconds()
	res.checkHistory(t, hist)
	writeHistory(t, hist)
}

// count counts the requests and their outcomes; a 4xx other than 404
// and 409 (which the model expects) is an anomaly: the load sends only
// valid requests.
func (res *Result) count(hist []Op) {
	for _, o := range hist {
		res.Requests++
		if o.write() && o.Outcome == outOK {
			res.Acked++
		}
		if o.write() && o.Outcome == outUnknown {
			res.Unknown++
		}
		if o.Status >= 400 && o.Status < 500 && o.Status != 404 && o.Status != 409 {
			res.Anomalies = append(res.Anomalies, fmt.Sprintf("%s %s: %d %s", o.Kind, o.Key, o.Status, o.Err))
		}
	}
}

// checkHistory runs porcupine over the history; a counterexample is
// drawn next to the processes' logs.
func (res *Result) checkHistory(t *testing.T, hist []Op) {
	check, info := checkLinearizable(hist, 60*time.Second)
	res.Linearizable = string(check)
	if check == porcupine.Ok {
		return
	}
	res.Anomalies = append(res.Anomalies, "history is not linearizable ("+string(check)+")")
	if check != porcupine.Illegal {
		return
	}
	path := filepath.Join(framework.LogDir(t), "history.html")
	if f, err := os.Create(path); err == nil {
		_ = porcupine.Visualize(registerModel.ToModel(), info, f)
		f.Close()
		t.Logf("linearizability counterexample: %s", path)
	}
}

// converge waits until every resource runs exactly what it asks, as the
// providers say: a resource that exists (not being deleted) runs its
// replicas, one gone runs none. It returns the final reads (part of the
// history) and the time from the last write.
func converge(t *testing.T, top *Topology, smp *sampler, from time.Time) ([]Op, time.Duration, error) {
	t.Helper()
	deadline := from.Add(convergeWithin)
	rest := top.REST(5 * time.Second)
	var last string
	for {
		var final []Op
		want := map[string]int{}
		settled := true
		for _, k := range loadKeys {
			l := &load{rest: func() *framework.Client { return rest }}
			op := l.do(Op{Client: 100, Key: k, Kind: opGet})
			final = append(final, op)
			switch {
			case op.Outcome != outOK && op.Status != 404:
				settled = false
			case op.Status == 404:
				want[k] = 0
			case op.OutDeleting:
				settled = false
			default:
				want[k] = op.OutCount
			}
		}
		if settled {
			smpl := smp.take(context.Background())
			got := smpl.count()
			var diff []string
			for _, k := range loadKeys {
				if got[k] != want[k] {
					diff = append(diff, fmt.Sprintf("%s runs %d; asks %d", k, got[k], want[k]))
				}
			}
			orphans, err := orphans(rest, smpl)
			if err != nil {
				diff = append(diff, err.Error())
			}
			diff = append(diff, orphans...)
			if len(diff) == 0 {
				return final, time.Since(from), nil
			}
			last = strings.Join(diff, ", ")
		} else {
			last = "resources still being deleted or the API not answering"
		}
		if time.Now().After(deadline) {
			// The final reads still go into the history.
			return final, time.Since(from), fmt.Errorf("no convergence within %s of the last write: %s", convergeWithin, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// orphans are the replicas the providers run of resources the global
// tier does not know (a scenario's own resources included): what a lost
// delete or a replica forgotten across a restart leaves behind.
func orphans(rest *framework.Client, smpl sample) ([]string, error) {
	var list struct{ Items []struct{ Name string } }
	if code, err := rest.Get("/v1/resources?limit=1000", &list); err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("list resources: %d %v", code, err)
	}
	known := map[string]bool{}
	for _, it := range list.Items {
		known[it.Name] = true
	}
	var out []string
	for id, nodes := range smpl.Seen {
		if !known[resourceOf(id)] {
			out = append(out, fmt.Sprintf("orphan replica %s on %v", id, nodes))
		}
	}
	sort.Strings(out)
	return out, nil
}

// overCounts finds samples where a resource ran more replicas than it
// asked for at any time in the convergeWithin before (a scale-down and a
// delete take a moment to reach the providers).
func overCounts(hist []Op, samples []sample) []string {
	var out []string
	byKey := map[string][]Op{}
	for _, o := range hist {
		if o.Kind == opCreate || o.Kind == opScale || o.Kind == opDelete {
			byKey[o.Key] = append(byKey[o.Key], o)
		}
	}
	for _, s := range samples {
		for key, n := range s.count() {
			if !slices.Contains(loadKeys, key) {
				continue // a scenario's own resource
			}
			if bound := maxAsked(byKey[key], s.At.Add(-convergeWithin), s.At); n > bound {
				var ids []string
				for id, nodes := range s.Running {
					if resourceOf(id) == key {
						ids = append(ids, id+"@"+strings.Join(nodes, "+"))
					}
				}
				sort.Strings(ids)
				out = append(out, fmt.Sprintf("%s: %s runs %d replicas (%s); at most %d asked in the %s before (agents asked %s)",
					s.At.Format(time.StampMilli), key, n, strings.Join(ids, " "), bound, convergeWithin, s.askedTimes()))
			}
		}
	}
	return out
}

// logSkew logs how long the samples took, and the over-counts the
// agents' answers would have shown had they been taken as one instant
// (what the sampler did before it cut two rounds): replicas that ran one
// after the other, not at once.
func logSkew(t *testing.T, hist []Op, samples []sample) {
	var widest time.Duration
	seen := make([]sample, len(samples))
	for i, s := range samples {
		widest = max(widest, s.spread())
		seen[i] = sample{At: s.At, Running: s.Seen}
	}
	t.Logf("sampler: %d samples; the widest took %s from the first agent asked to the last answer", len(samples), widest.Round(time.Millisecond))
	for _, o := range overCounts(hist, seen) {
		t.Logf("sampler: not at one instant, so not counted: %s", o)
	}
}

// excuse drops, from the samples taken between the fault and
// convergeWithin after the heal, the replicas on isolated nodes from
// the node that ran them.
func excuse(samples []sample, r *Run) []sample {
	if len(r.isolated) == 0 {
		return samples
	}
	out := make([]sample, 0, len(samples))
	for _, s := range samples {
		if s.At.Before(r.faultAt) || s.At.After(r.healAt.Add(convergeWithin)) {
			out = append(out, s)
			continue
		}
		out = append(out, sample{At: s.At, Running: without(s.Running, r.isolated), Seen: without(s.Seen, r.isolated), Unreachable: s.Unreachable, Asked: s.Asked})
	}
	return out
}

// without is running (replica id to nodes) without the nodes named.
func without(running map[string][]string, nodes []string) map[string][]string {
	out := make(map[string][]string, len(running))
	for id, on := range running {
		var kept []string
		for _, n := range on {
			if !slices.Contains(nodes, n) {
				kept = append(kept, n)
			}
		}
		if len(kept) > 0 {
			out[id] = kept
		}
	}
	return out
}

// maxAsked is the most replicas the writes in effect between from and to
// may have asked: the last write acknowledged before from (and every
// unknown one started before it), and every write started since.
func maxAsked(ops []Op, from, to time.Time) int {
	best := 0
	var lastBefore *Op
	for i, o := range ops {
		switch {
		case o.Start.After(to):
		case o.Start.After(from), o.Outcome == outUnknown:
			best = max(best, o.Count)
		case o.Outcome == outOK && (lastBefore == nil || o.End.After(lastBefore.End)):
			lastBefore = &ops[i]
		}
	}
	if lastBefore != nil {
		best = max(best, lastBefore.Count)
	}
	return best
}

// aspect is one part of a resource the load writes: its spec (the mark,
// written by create and put) or its count (create and scale). A delete
// ends both.
type aspect struct {
	name  string
	kinds []opKind
	// shows reports whether the final read f shows what w wrote.
	shows func(w, f Op) bool
}

var aspects = []aspect{
	{"spec", []opKind{opCreate, opPut, opDelete}, func(w, f Op) bool { return f.OutMark == w.Mark }},
	{"replicas", []opKind{opCreate, opScale, opDelete}, func(w, f Op) bool { return f.OutCount == w.Count }},
}

// lostWrites checks the final reads against the last acknowledged write
// of each key and aspect: the spec of the last create or put, the count
// of the last create or scale, or the last delete must be what the final
// read shows, unless a later or concurrent write (acknowledged or
// unknown) explains the difference. A key counts once.
func lostWrites(hist []Op, final []Op) []string {
	var out []string
	for _, f := range final {
		if f.Outcome != outOK && f.Status != 404 {
			continue
		}
		for _, a := range aspects {
			last, candidates := lastAcked(hist, f.Key, a.kinds)
			if last == nil || slices.ContainsFunc(candidates, func(w Op) bool { return a.explains(w, f) }) {
				continue
			}
			out = append(out, fmt.Sprintf("lost write: %s %s (mark %q, replicas %d, acknowledged at %s) is not in the final read's %s (status %d, mark %q, replicas %d)",
				last.Kind, last.Key, last.Mark, last.Count, last.End.Format(time.StampMilli), a.name, f.Status, f.OutMark, f.OutCount))
			break
		}
	}
	return out
}

// lastAcked is the last acknowledged write of key among kinds, and the
// writes that may be the last to take effect: it, and those unknown or
// not over before it started.
func lastAcked(hist []Op, key string, kinds []opKind) (*Op, []Op) {
	var writes []Op
	for _, o := range hist {
		if o.Key == key && slices.Contains(kinds, o.Kind) && o.Outcome != outRefused {
			writes = append(writes, o)
		}
	}
	var last *Op
	for i, o := range writes {
		if o.Outcome == outOK && (last == nil || o.End.After(last.End)) {
			last = &writes[i]
		}
	}
	if last == nil {
		return nil, nil
	}
	candidates := []Op{*last}
	for _, o := range writes {
		if o != *last && (o.Outcome == outUnknown || o.End.After(last.Start)) {
			candidates = append(candidates, o)
		}
	}
	return last, candidates
}

// explains reports whether write w, had it been the last of the aspect,
// leaves what the final read f shows of it.
func (a aspect) explains(w, f Op) bool {
	if w.Kind == opDelete {
		return f.Status == 404
	}
	return f.Outcome == outOK && a.shows(w, f)
}

// failover is the time from the fault to the scenario's recovery mark,
// or else to the end of the first write acknowledged that started after
// the fault.
func failover(r *Run, hist []Op) time.Duration {
	if !r.failoverAt.IsZero() {
		if !r.restartAt.IsZero() {
			return r.failoverAt.Sub(r.restartAt)
		}
		return r.failoverAt.Sub(r.faultAt)
	}
	var first time.Time
	for _, o := range hist {
		if o.write() && o.Outcome == outOK && o.Start.After(r.faultAt) && (first.IsZero() || o.End.Before(first)) {
			first = o.End
		}
	}
	if first.IsZero() {
		return 0
	}
	return first.Sub(r.faultAt)
}

// writeHistory keeps the history as JSON lines next to the processes'
// logs.
func writeHistory(t *testing.T, hist []Op) {
	sort.Slice(hist, func(i, j int) bool { return hist[i].Start.Before(hist[j].Start) })
	var b strings.Builder
	for _, o := range hist {
		line, _ := json.Marshal(o)
		b.Write(line)
		b.WriteByte('\n')
	}
	path := filepath.Join(framework.LogDir(t), "history.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err == nil {
		t.Logf("history: %s", path)
	}
}
