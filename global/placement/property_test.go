package placement

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/big"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

var (
	seedFlag  = flag.Uint64("placement.seed", 0, "replay the property tests from this seed (0: a new one)")
	itersFlag = flag.Int("placement.iters", 3000, "worlds per property test")
)

// forEachWorld runs check on many random worlds. Every world has its own
// seed, derived from the run's; a failure prints it, and
// -placement.seed=N -placement.iters=1 replays that world alone.
func forEachWorld(t *testing.T, check func(t *testing.T, rng *rand.Rand) string) {
	t.Helper()
	base := *seedFlag
	if base == 0 {
		base = rand.Uint64()
	}
	iters := *itersFlag
	t.Logf("seed %d, %d worlds", base, iters)
	for i := range iters {
		seed := base + uint64(i)
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		if msg := check(t, rng); msg != "" {
			t.Fatalf("seed %d (replay: go test ./global/placement -run '%s' -placement.seed=%d -placement.iters=1):\n%s",
				seed, t.Name(), seed, msg)
		}
	}
}

// TestWeightedProperty: the split of n replicas by weights gives every
// region its exact share n·w/Σw rounded down or up, zero-weight regions
// none, and adds up to n; the remainder goes to the largest fractions,
// ties to the first listed. The oracle computes the shares with exact
// rationals.
func TestWeightedProperty(t *testing.T) {
	forEachWorld(t, func(t *testing.T, rng *rand.Rand) string {
		total := rng.IntN(200)
		targets := make([]api.RegionTarget, 1+rng.IntN(7))
		for i := range targets {
			targets[i] = api.RegionTarget{Name: fmt.Sprintf("r%d", i), Weight: rng.IntN(6)}
		}
		got := weighted(total, targets)
		want := oracleWeighted(total, targets)
		if !reflect.DeepEqual(got, want) {
			return fmt.Sprintf("weighted(%d, %v): got %v; want %v", total, targets, got, want)
		}
		sum := 0
		for _, tg := range targets {
			sum += tg.Weight
		}
		given := 0
		for _, tg := range targets {
			n := got[tg.Name]
			given += n
			if sum == 0 {
				continue
			}
			exact := new(big.Rat).SetFrac64(int64(total*tg.Weight), int64(sum))
			lo := new(big.Rat).SetInt64(int64(n - 1))
			hi := new(big.Rat).SetInt64(int64(n + 1))
			if exact.Cmp(lo) <= 0 || exact.Cmp(hi) >= 0 {
				return fmt.Sprintf("weighted(%d, %v): %s got %d, not within 1 of %s", total, targets, tg.Name, n, exact.FloatString(3))
			}
		}
		if sum > 0 && given != total {
			return fmt.Sprintf("weighted(%d, %v) = %v adds up to %d", total, targets, got, given)
		}
		return ""
	})
}

// oracleWeighted is the largest-remainder method written plainly with
// exact fractions.
func oracleWeighted(total int, targets []api.RegionTarget) map[string]int {
	out := map[string]int{}
	sum := 0
	for _, t := range targets {
		out[t.Name] = 0
		sum += t.Weight
	}
	if sum == 0 || total == 0 {
		return out
	}
	type quota struct {
		i    int
		frac *big.Rat
	}
	var qs []quota
	left := total
	for i, t := range targets {
		q := new(big.Rat).SetFrac64(int64(total*t.Weight), int64(sum))
		floor := new(big.Int).Quo(q.Num(), q.Denom())
		out[t.Name] += int(floor.Int64())
		left -= int(floor.Int64())
		qs = append(qs, quota{i, new(big.Rat).Sub(q, new(big.Rat).SetInt(floor))})
	}
	sort.SliceStable(qs, func(a, b int) bool { return qs[a].frac.Cmp(qs[b].frac) > 0 })
	for k := 0; k < left; k++ {
		out[targets[qs[k].i].Name]++
	}
	return out
}

// TestDecideProperties checks Decide on random worlds against what the
// docs promise (docs/architecture.md: Placements and shares, Rollouts,
// Failover):
//
//   - replicas go only to registered regions; an image's to every
//     candidate, without replicas;
//   - the regions hold exactly the replicas asked, plus, while a region
//     fails back (make-before-break), the copy its stand-ins keep: never
//     more;
//   - a stand-in is never Down; a region Down for failover.after keeps
//     nothing of its own share when a stand-in is up;
//   - a rollout moves one region at a time in the schedule's order (then
//     stand-ins by name): regions before the one rolling run the new
//     revision ready, regions after it get nothing new (their share at the
//     revision they run: scaling never waits); paused, no region
//     that does not run the new revision gets it;
//   - a failure fails the rollout, and only autoRevert asks for a revert,
//     never of an undo;
//   - the status counts what regions report, is ready only when every
//     desired region is;
//   - the decision does not depend on the order regions are given in, and
//     a pass over its own status settles: the third writes nothing.
func TestDecideProperties(t *testing.T) {
	forEachWorld(t, func(t *testing.T, rng *rand.Rand) string {
		in := randomInput(rng)
		d := Decide(in)
		for _, check := range []func(Input, Decision) string{
			checkRegistered, checkTotals, checkStandIns, checkRollout, checkStatus, checkStable,
		} {
			if msg := check(in, d); msg != "" {
				return msg + "\n" + dump(in, d)
			}
		}
		return ""
	})
}

// TestDeletionProperties: a deleted resource is removed from every linked
// region that holds or may hold it, and finalized only when none does.
func TestDeletionProperties(t *testing.T) {
	forEachWorld(t, func(t *testing.T, rng *rand.Rand) string {
		in := randomInput(rng)
		at := in.Now.Add(-time.Minute)
		in.Resource.DeletionRequestedAt = &at
		d := Decide(in)
		settled, msg := checkRemovals(in, d)
		if msg != "" {
			return msg + "\n" + dump(in, d)
		}
		if d.Finalize != settled || len(d.Targets) > 0 {
			return fmt.Sprintf("finalize %v with %d targets; want %v and none", d.Finalize, len(d.Targets), settled) + "\n" + dump(in, d)
		}
		if !settled && (d.Status == nil || d.Status.Phase != api.PhaseDestroy) {
			return fmt.Sprintf("status %+v; want destroy while waiting", d.Status) + "\n" + dump(in, d)
		}
		return ""
	})
}

// checkRemovals: every linked region that holds (a share) or may hold
// (not settled) the resource is asked to remove it, by the uid it holds;
// no unlinked one. settled says whether every linked region is.
func checkRemovals(in Input, d Decision) (settled bool, msg string) {
	removed := map[string]string{}
	for _, rm := range d.Remove {
		removed[rm.Region] = rm.UID
	}
	settled = true
	for _, reg := range in.Regions {
		uid, ok := removed[reg.Name]
		if !reg.Linked {
			if ok {
				return false, fmt.Sprintf("removal sent to unlinked region %s", reg.Name)
			}
			continue
		}
		settled = settled && reg.Settled
		want, should := in.Resource.UID, reg.Share != nil || !reg.Settled
		if reg.Share != nil {
			want = reg.Share.UID
		}
		if ok != should || ok && uid != want {
			return false, fmt.Sprintf("region %s: removal %q (%v); want %q (%v)", reg.Name, uid, ok, want, should)
		}
	}
	return settled, ""
}

var healths = []api.Health{api.HealthUp, api.HealthUp, api.HealthSuspect, api.HealthDown, api.HealthDown, api.HealthUnknown, ""}
var phases = []api.Phase{api.PhaseReady, api.PhaseReady, api.PhaseProvision, api.PhaseCreated, api.PhaseError}

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// randomInput is a world of up to six regions and one resource, with
// every field the decision reads drawn at random, including ones a valid
// store never holds (weights of 0, a toRegions entry twice).
func randomInput(rng *rand.Rand) Input {
	now := t0
	names := []string{"r0", "r1", "r2", "r3", "r4", "r5"}[:1+rng.IntN(6)]
	r := &api.Resource{
		Name: "web", Tenant: "t", UID: "u1", Kind: api.KindCompute, Replicas: rng.IntN(40),
		Revision: 1 + int64(rng.IntN(3)), Spec: api.ResourceSpec{Flavor: "small", Compute: &api.ComputeSpec{Image: "busybox"}},
	}
	r.Generation = r.Revision + int64(rng.IntN(2))
	if rng.IntN(10) == 0 {
		r.Kind, r.Replicas, r.Spec = api.KindImage, 0, api.ResourceSpec{Image: &api.ImageSpec{Ref: "busybox"}}
	}
	for _, n := range shuffled(rng, names) {
		if rng.IntN(3) > 0 {
			r.Schedule.Regions = append(r.Schedule.Regions, api.RegionTarget{Name: n, Weight: rng.IntN(5)})
		}
	}
	if rng.IntN(4) == 0 && len(r.Schedule.Regions) > 0 {
		r.Schedule.SpreadRegions = 1 + rng.IntN(len(r.Schedule.Regions))
	}
	if rng.IntN(3) > 0 {
		f := &api.FailoverPolicy{Enabled: rng.IntN(5) > 0, After: api.D(time.Duration(rng.IntN(3)) * time.Minute), FailBack: rng.IntN(2) == 0}
		for range rng.IntN(4) {
			f.ToRegions = append(f.ToRegions, pick(rng, names))
		}
		r.Failover = f
	}
	r.Rollout = api.RolloutPolicy{Paused: rng.IntN(4) == 0, AutoRevert: rng.IntN(2) == 0}
	in := Input{Now: now, Resource: r, Catalog: everyRevision{}}
	for _, n := range names {
		reg := Region{
			Name: n, Registered: rng.IntN(8) > 0, Health: pick(rng, healths),
			HealthSince: now.Add(-time.Duration(rng.IntN(240)) * time.Second),
			Linked:      rng.IntN(8) > 0, Live: rng.IntN(4) > 0, Settled: rng.IntN(2) == 0,
		}
		if rng.IntN(3) > 0 {
			reg.Share = randomShare(rng, r, names)
		}
		in.Regions = append(in.Regions, reg)
	}
	in.Status = randomStatus(rng, r, names)
	if rng.IntN(2) == 0 {
		converge(rng, &in)
	}
	return in
}

// converge makes some regions report what a first decision asks of
// them, ready, so that worlds near a steady state (every region ready, a
// rollout about to finish) come up as often as scattered ones.
func converge(rng *rand.Rand, in *Input) {
	d := Decide(*in)
	r := in.Resource
	for _, t := range d.Targets {
		if rng.IntN(4) == 0 {
			continue
		}
		for i := range in.Regions {
			reg := &in.Regions[i]
			if reg.Name != t.Region {
				continue
			}
			gen := r.Generation
			if t.Revision != r.Revision {
				gen = t.Revision
			}
			reg.Linked = true
			reg.Share = &Share{UID: r.UID, RegionShare: api.RegionShare{
				Phase: api.PhaseReady, Replicas: t.Replicas, Ready: t.Replicas, Updated: t.Replicas,
				Revision: t.Revision, ObservedGeneration: gen, FailoverFrom: t.FailoverFrom,
			}}
		}
	}
}

func randomShare(rng *rand.Rand, r *api.Resource, names []string) *Share {
	uid := r.UID
	if rng.IntN(8) == 0 {
		uid = "old"
	}
	rev := max(1, r.Revision-int64(rng.IntN(2)))
	gen := r.Generation
	if rev != r.Revision || rng.IntN(6) == 0 {
		gen = rev
	}
	n := rng.IntN(20)
	sh := &Share{UID: uid, RegionShare: api.RegionShare{
		Phase: pick(rng, phases), Replicas: n, Ready: rng.IntN(n + 1), Revision: rev, ObservedGeneration: gen,
	}}
	if sh.Phase == api.PhaseError {
		sh.Reason = "replica x on n: boom"
	}
	if rng.IntN(4) == 0 {
		sh.FailoverFrom = pick(rng, names)
	}
	return sh
}

func randomStatus(rng *rand.Rand, r *api.Resource, names []string) *api.ResourceStatus {
	if rng.IntN(5) == 0 {
		return nil
	}
	st := &api.ResourceStatus{UID: r.UID, Revision: max(1, r.Revision-int64(rng.IntN(2))), Phase: pick(rng, phases), Since: t0.Add(-time.Hour)}
	if rng.IntN(10) == 0 {
		st.UID = "old"
	}
	st.Regions = map[string]api.RegionShare{}
	for _, n := range names {
		if rng.IntN(3) == 0 {
			st.Regions[n] = api.RegionShare{Phase: pick(rng, phases), FailoverFrom: pick(rng, append([]string{""}, names...))}
		}
	}
	if rng.IntN(2) == 0 {
		states := []string{api.RolloutProgressing, api.RolloutPaused, api.RolloutSucceeded, api.RolloutFailed}
		st.Rollout = &api.RolloutStatus{
			Revision: st.Revision, FromRevision: st.Revision - 1, State: pick(rng, states), Revert: rng.IntN(4) == 0,
			StartedAt: t0.Add(-time.Minute),
		}
	}
	return st
}

func shuffled(rng *rand.Rand, xs []string) []string {
	out := slices.Clone(xs)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// oracle is the test's own reading of a world: which regions are
// candidates, their base shares, and what failover does to each.
type oracle struct {
	in         Input
	r          *api.Resource
	regs       map[string]Region
	candidates []api.RegionTarget
	base       map[string]int
}

func newOracle(in Input) *oracle {
	o := &oracle{in: in, r: in.Resource, regs: map[string]Region{}}
	for _, reg := range in.Regions {
		o.regs[reg.Name] = reg
	}
	if len(o.r.Schedule.Regions) == 0 {
		for _, reg := range in.Regions {
			if reg.Registered {
				o.candidates = append(o.candidates, api.RegionTarget{Name: reg.Name, Weight: 1})
			}
		}
		sort.Slice(o.candidates, func(i, j int) bool { return o.candidates[i].Name < o.candidates[j].Name })
	} else {
		for _, t := range o.r.Schedule.Regions {
			if o.regs[t.Name].Registered {
				o.candidates = append(o.candidates, t)
			}
		}
	}
	if n := o.r.Schedule.SpreadRegions; n > 0 {
		var up, dn []api.RegionTarget
		for _, t := range o.candidates {
			if o.regs[t.Name].Health == api.HealthDown {
				dn = append(dn, api.RegionTarget{Name: t.Name, Weight: 1})
			} else {
				up = append(up, api.RegionTarget{Name: t.Name, Weight: 1})
			}
		}
		o.candidates = append(up, dn...)[:min(n, len(up)+len(dn))]
	}
	o.base = oracleWeighted(o.r.Replicas, o.candidates)
	return o
}

// share is what a linked region reports of this resource (same UID).
func (o *oracle) share(name string) *Share {
	reg := o.regs[name]
	if !reg.Linked || reg.Share == nil || reg.Share.UID != o.r.UID {
		return nil
	}
	return reg.Share
}

// readyAt reports whether region runs the resource ready at its
// generation.
func (o *oracle) readyAt(name string) bool {
	sh := o.share(name)
	return sh != nil && sh.Phase == api.PhaseReady && sh.ObservedGeneration == o.r.Generation
}

// movedBefore reports whether the stored status has a stand-in for name.
func (o *oracle) movedBefore(name string) bool {
	for _, sh := range o.in.Status.Regions {
		if sh.FailoverFrom == name {
			return true
		}
	}
	return false
}

func (o *oracle) down(name string) bool { return o.regs[name].Health == api.HealthDown }
func (o *oracle) stored() bool          { return o.in.Status != nil && o.in.Status.UID == o.r.UID }
func (o *oracle) failover() bool {
	f := o.r.Failover
	return f != nil && f.Enabled && o.r.Kind != api.KindImage
}
func (o *oracle) downLong(n string) bool {
	return o.down(n) && o.in.Now.Sub(o.regs[n].HealthSince) >= o.r.Failover.After.Duration
}

func (o *oracle) standIns(region string) []string {
	var names []string
	switch f := o.r.Failover; {
	case len(f.ToRegions) > 0:
		names = f.ToRegions
	case len(o.r.Schedule.Regions) > 1:
		for _, t := range o.r.Schedule.Regions {
			names = append(names, t.Name)
		}
	default:
		for _, reg := range o.in.Regions {
			names = append(names, reg.Name)
		}
	}
	var out []string
	for _, n := range names {
		if n != region && o.regs[n].Registered && !o.down(n) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// lent is the replicas stand-ins keep beside a region failing back.
func (o *oracle) lent() int {
	if !o.failover() || !o.r.Failover.FailBack || !o.stored() {
		return 0
	}
	extra := 0
	for name, n := range o.base {
		if n > 0 && !o.downLong(name) && len(o.standIns(name)) > 0 && o.movedBefore(name) && !o.readyAt(name) {
			extra += n
		}
	}
	return extra
}

func checkRegistered(in Input, d Decision) string {
	o := newOracle(in)
	for _, t := range d.Targets {
		if !o.regs[t.Region].Registered {
			return fmt.Sprintf("target %s is not registered", t.Region)
		}
		if in.Resource.Kind == api.KindImage && t.Replicas != 0 {
			return fmt.Sprintf("image: %s gets %d replicas", t.Region, t.Replicas)
		}
	}
	if in.Resource.Kind == api.KindImage && len(d.Targets) != len(o.candidates) {
		return fmt.Sprintf("image: %d targets; want every candidate, %d", len(d.Targets), len(o.candidates))
	}
	return ""
}

func checkTotals(in Input, d Decision) string {
	o := newOracle(in)
	got := replicasOf(d)
	total := 0
	for _, n := range got {
		total += n
	}
	want := 0
	for _, n := range o.base {
		want += n
	}
	if !o.failover() {
		if !reflect.DeepEqual(got, o.base) && !(len(got) == 0 && len(o.base) == 0) {
			return fmt.Sprintf("split %v; want the weighted split %v", got, o.base)
		}
		return ""
	}
	if want += o.lent(); total != want {
		return fmt.Sprintf("regions hold %d replicas; want %d (%d asked + %d lent while failing back)", total, want, in.Resource.Replicas, o.lent())
	}
	return ""
}

func checkStandIns(in Input, d Decision) string {
	o := newOracle(in)
	if !o.failover() {
		return ""
	}
	got := replicasOf(d)
	for _, t := range d.Targets {
		if t.Replicas > o.base[t.Region] && o.down(t.Region) {
			return fmt.Sprintf("down region %s receives %d replicas over its %d", t.Region, t.Replicas, o.base[t.Region])
		}
		if t.FailoverFrom != "" && o.down(t.Region) {
			return fmt.Sprintf("down region %s stands in for %s", t.Region, t.FailoverFrom)
		}
	}
	for name, n := range o.base {
		if n == 0 || !o.downLong(name) || len(o.standIns(name)) == 0 {
			continue
		}
		if got[name] != 0 {
			return fmt.Sprintf("region %s, down for failover.after with stand-ins up, still holds %d", name, got[name])
		}
	}
	return ""
}

// everyRevision is testCatalog with every revision stored, each with the
// spec of the resource it is asked for.
type everyRevision struct{ testCatalog }

func (everyRevision) Revision(tenant, name, uid string, number int64) (*api.Revision, bool) {
	return &api.Revision{Resource: name, Tenant: tenant, UID: uid, Number: number,
		Spec: api.ResourceSpec{Flavor: "small", Compute: &api.ComputeSpec{Image: "busybox"}}}, true
}

// rolloutView is the test's reading of a decision's rollout.
type rolloutView struct {
	in      Input
	d       Decision
	r       *api.Resource
	o       *oracle
	order   []string
	sent    map[string]bool
	current string // the first region in order that reports and is not done
}

func newRolloutView(in Input, d Decision) *rolloutView {
	v := &rolloutView{in: in, d: d, r: in.Resource, o: newOracle(in), sent: map[string]bool{}}
	v.order = oracleOrder(v.r, replicasOf(d))
	for _, t := range d.Targets {
		// sent: the region gets the resource's revision (a held one gets
		// the revision it runs).
		v.sent[t.Region] = t.Placement != nil && t.Placement.Resource.Revision == v.r.Revision
	}
	for _, name := range v.order {
		if sh := v.share(name); sh != nil && !v.done(sh) {
			v.current = name
			break
		}
	}
	return v
}

func (v *rolloutView) share(name string) *Share { return v.o.share(name) }

func (v *rolloutView) done(sh *Share) bool {
	return sh.Revision == v.r.Revision && sh.Phase == api.PhaseReady && sh.ObservedGeneration == v.r.Generation
}

func (v *rolloutView) active() bool {
	ro := v.d.Rollout
	return ro != nil && ro.Revision == v.r.Revision && ro.State != api.RolloutSucceeded
}

// wasSucceeded reports whether the stored status already said this
// revision's rollout succeeded (a region may have regressed since).
func (v *rolloutView) wasSucceeded() bool {
	st := v.in.Status
	return st != nil && st.UID == v.r.UID && st.Rollout != nil && st.Rollout.Revision == v.r.Revision && st.Rollout.State == api.RolloutSucceeded
}

func (v *rolloutView) failedNow() bool {
	sh := v.share(v.current)
	return sh != nil && sh.Revision == v.r.Revision && sh.Phase == api.PhaseError
}

func checkRollout(in Input, d Decision) string {
	v := newRolloutView(in, d)
	if msg := v.checkScaled(); msg != "" {
		return msg
	}
	if !v.active() {
		return v.checkInactive()
	}
	for _, check := range []func() string{v.checkOneAtATime, v.checkPaused, v.checkState, v.checkRevert} {
		if msg := check(); msg != "" {
			return msg
		}
	}
	return ""
}

// checkScaled: every linked region that should run the resource gets
// its share of the replicas, at the resource's revision or, held back by
// a rollout, at the one it runs: scaling never waits for a rollout.
func (v *rolloutView) checkScaled() string {
	for _, t := range v.d.Targets {
		sh := v.share(t.Region)
		p := t.Placement
		switch {
		case p == nil && sh != nil && v.d.Reason == "":
			return fmt.Sprintf("%s (at revision %d) gets no placement", t.Region, sh.Revision)
		case p == nil:
		case p.Resource.Replicas != t.Replicas:
			return fmt.Sprintf("%s: placement of %d replicas; its share is %d", t.Region, p.Resource.Replicas, t.Replicas)
		case p.Resource.Revision != v.r.Revision && (sh == nil || p.Resource.Revision != sh.Revision):
			return fmt.Sprintf("%s: placement at revision %d; want %d or the one it runs", t.Region, p.Resource.Revision, v.r.Revision)
		}
	}
	return ""
}

// checkInactive: without a rollout in progress every linked region gets
// its placement and nothing is reverted.
func (v *rolloutView) checkInactive() string {
	if ro := v.d.Rollout; ro != nil && ro.Revision == v.r.Revision && ro.State == api.RolloutSucceeded && v.current != "" && !v.wasSucceeded() {
		return fmt.Sprintf("rollout succeeded with %s not done", v.current)
	}
	for _, t := range v.d.Targets {
		if !v.sent[t.Region] && v.o.regs[t.Region].Linked && v.d.Reason == "" {
			return fmt.Sprintf("no rollout, yet %s gets no placement", t.Region)
		}
	}
	if v.d.Revert != nil {
		return fmt.Sprintf("revert %+v without a rollout", v.d.Revert)
	}
	return ""
}

// checkOneAtATime: regions after the one rolling get no new revision, and the
// rollout names the one rolling.
func (v *rolloutView) checkOneAtATime() string {
	after := false
	for _, name := range v.order {
		if sh := v.share(name); after && sh != nil && v.sent[name] && sh.Revision != v.r.Revision {
			return fmt.Sprintf("%s gets revision %d while %s rolls (order %v)", name, v.r.Revision, v.current, v.order)
		}
		after = after || name == v.current
	}
	if v.d.Rollout.Region != v.current {
		return fmt.Sprintf("rollout in %q; want the first region not done in %v, %q", v.d.Rollout.Region, v.order, v.current)
	}
	return ""
}

// checkPaused: paused, no region that runs an older revision gets one.
func (v *rolloutView) checkPaused() string {
	if !v.r.Rollout.Paused {
		return ""
	}
	for _, name := range v.order {
		if sh := v.share(name); sh != nil && v.sent[name] && sh.Revision != v.r.Revision {
			return fmt.Sprintf("paused, yet %s (at revision %d) gets revision %d", name, sh.Revision, v.r.Revision)
		}
	}
	return ""
}

// checkState: failed once the rolling region fails, succeeded once every
// region is done, else paused or progressing as the policy says.
func (v *rolloutView) checkState() string {
	state := v.d.Rollout.State
	want := api.RolloutProgressing
	switch {
	case v.failedNow() || state == api.RolloutFailed:
		want = api.RolloutFailed // a failure sticks to its revision
	case v.current == "":
		want = api.RolloutSucceeded
	case v.r.Rollout.Paused:
		want = api.RolloutPaused
	}
	if state != want {
		return fmt.Sprintf("rollout %s at %q; want %s", state, v.current, want)
	}
	return ""
}

// checkRevert: a revert of the failed revision to the one the rollout
// started from, only with autoRevert and never of an undo.
func (v *rolloutView) checkRevert() string {
	ro, rv := v.d.Rollout, v.d.Revert
	want := v.failedNow() && v.r.Rollout.AutoRevert && !ro.Revert && ro.FromRevision > 0
	if (rv != nil) != want {
		return fmt.Sprintf("revert %+v; want one: %v", rv, want)
	}
	if rv != nil && (rv.Failed != v.r.Revision || rv.To != ro.FromRevision || rv.UID != v.r.UID) {
		return fmt.Sprintf("revert %+v; want %d → %d of %s", rv, v.r.Revision, ro.FromRevision, v.r.UID)
	}
	return ""
}

func oracleOrder(r *api.Resource, desired map[string]int) []string {
	var out, rest []string
	for _, t := range r.Schedule.Regions {
		if _, ok := desired[t.Name]; ok && !slices.Contains(out, t.Name) {
			out = append(out, t.Name)
		}
	}
	for name := range desired {
		if !slices.Contains(out, name) {
			rest = append(rest, name)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

func checkStatus(in Input, d Decision) string {
	st := d.Status
	if st == nil {
		st = in.Status // unchanged: the stored one says it
	}
	if st == nil {
		return "no status written and none stored"
	}
	r := in.Resource
	if st.UID != r.UID || st.Replicas != r.Replicas || st.Revision != r.Revision {
		return fmt.Sprintf("status of %s: %d replicas at revision %d", st.UID, st.Replicas, st.Revision)
	}
	desired := replicasOf(d)
	o := newOracle(in)
	if ready := o.countedReady(desired); st.Ready != ready {
		return fmt.Sprintf("status ready %d; want %d", st.Ready, ready)
	}
	if st.Phase != api.PhaseReady {
		return ""
	}
	for name, want := range desired {
		if !o.readyAt(name) || o.share(name).Replicas != want {
			return fmt.Sprintf("status ready, but %s (%d wanted) reports %+v", name, want, o.share(name))
		}
	}
	if d.Reason != "" || len(desired) == 0 {
		return fmt.Sprintf("status ready with reason %q and %d regions", d.Reason, len(desired))
	}
	return ""
}

// countedReady is the ready replicas a status counts: those of every
// linked region reporting the resource, but not of one that no longer
// runs it and cannot be reached (its last word).
func (o *oracle) countedReady(desired map[string]int) int {
	ready := 0
	for name, reg := range o.regs {
		_, isDesired := desired[name]
		if sh := o.share(name); sh != nil && (isDesired || reg.Live) {
			ready += sh.Ready
		}
	}
	return ready
}

func checkStable(in Input, d Decision) string {
	// The regions in another order decide the same.
	again := in
	again.Regions = slices.Clone(in.Regions)
	slices.Reverse(again.Regions)
	if d2 := Decide(again); !reflect.DeepEqual(d, d2) {
		return fmt.Sprintf("regions reversed, decision differs:\n%s", dump(again, d2))
	}
	// Fed its own status, a pass settles within two.
	cur := in
	for pass := 1; pass <= 3; pass++ {
		next := Decide(cur)
		if next.Status == nil {
			return ""
		}
		if pass == 3 {
			return fmt.Sprintf("third pass over its own status still writes %+v", next.Status)
		}
		cur.Status = next.Status
	}
	return ""
}

func dump(in Input, d Decision) string {
	b, _ := json.MarshalIndent(struct {
		In  Input
		Out Decision
	}{in, d}, "", " ")
	return string(b)
}
