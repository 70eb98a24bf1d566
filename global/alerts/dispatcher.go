package alerts

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratahq/strata/internal/backoff"
	"github.com/stratahq/strata/internal/hostpolicy"
	"github.com/stratahq/strata/internal/secretbox"
	"github.com/stratahq/strata/internal/store"
)

// Source is where the master reads what rules match.
type Source interface {
	// Regions names the regions whose event streams to read.
	Regions() []string
	// Read returns up to limit events of region's stream after the
	// cursor ("0-0": from the oldest retained), oldest first.
	Read(ctx context.Context, region, after string, limit int) ([]Event, error)
	// Levels returns conditions as events, one per object, every time:
	// the regions' health (RegionDown, RegionSuspect, RegionUp) and the
	// limited tenants' quota (QuotaNearFull, QuotaOK). A level, which
	// the rules' dedupe turns into transitions.
	Levels(now time.Time) []Event
}

// Options configure a Dispatcher.
type Options struct {
	Collections *Collections
	Source      Source
	// Receivers is where receivers may be (config
	// alerts.receiverNetworks): every connection to one is checked with
	// the address it dials, which must be public unicast or in these
	// networks.
	Receivers hostpolicy.Networks
	// Timeout bounds one post (default 10 s).
	Timeout time.Duration
	// Poll is how often the streams are read and the outboxes checked
	// (default 1 s).
	Poll time.Duration
	// Backoff spaces a rule's retries (default 1 s doubling to 1 min);
	// MaxAttempts bounds them, after which the notification is dropped
	// and counted (default 10).
	Backoff     backoff.Backoff
	MaxAttempts int
	// MaxInFlight bounds the notifications being sent at once (default 4).
	MaxInFlight int
	// ReadLimit and ReadPages bound what one pass reads of one region
	// (default 256 events × 8 pages).
	ReadLimit, ReadPages int
	// Keyring opens the receivers' sealed secrets (the Secrets' keys).
	Keyring *secretbox.Keyring
	Clock   func() time.Time
	Logger  *slog.Logger
}

// Dispatcher turns events into notifications on the master.
type Dispatcher struct {
	o      Options
	log    *slog.Logger
	client *http.Client

	sent, failed, dropped atomic.Uint64
	pending               atomic.Int64
	passes                atomic.Uint64
}

// Stats are this process's delivery counters, for metrics: posts the
// receivers took and refused, alerts dropped, and alerts waiting (while
// this process is the master).
func (d *Dispatcher) Stats() (sent, failed, dropped uint64, pending int64) {
	return d.sent.Load(), d.failed.Load(), d.dropped.Load(), d.pending.Load()
}

// Passes is how many passes this process has completed as the master:
// each read the rules and the regions' events, wrote the state and
// started the notifications that were due. A pass that fails is not
// counted.
func (d *Dispatcher) Passes() uint64 { return d.passes.Load() }

// New returns a dispatcher.
func New(o Options) *Dispatcher {
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	client := &http.Client{
		Timeout:   cmp.Or(o.Timeout, 10*time.Second),
		Transport: o.Receivers.Transport(),
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a redirect would carry the body elsewhere
		},
	}
	o.Poll = cmp.Or(o.Poll, time.Second)
	if o.Backoff.Min <= 0 {
		o.Backoff = backoff.Backoff{Min: time.Second, Max: time.Minute, Jitter: backoff.Half}
	}
	o.MaxAttempts = cmp.Or(o.MaxAttempts, 10)
	o.MaxInFlight = cmp.Or(o.MaxInFlight, 4)
	o.ReadLimit = cmp.Or(o.ReadLimit, 256)
	o.ReadPages = cmp.Or(o.ReadPages, 8)
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return &Dispatcher{o: o, log: o.Logger.With("component", "alerts"), client: client}
}

// result is what a send goroutine reports.
type result struct {
	rule  string
	batch []Alert
	err   error
	at    time.Time
}

// leadRun is one term of mastership: what it holds in memory mirrors
// etcd, and every change is written fenced before it is acted on.
type leadRun struct {
	d        *Dispatcher
	guard    store.Guard
	rules    map[string]*StoredRule
	states   map[string]*RuleState
	cursor   Cursor
	inflight map[string]bool
	retry    map[string]time.Time
	results  chan result
}

// Lead runs delivery until ctx is done (leadership lost or shutdown);
// it returns once every send it started has ended.
func (d *Dispatcher) Lead(ctx context.Context, guard store.Guard) error {
	r := &leadRun{
		d: d, guard: guard, inflight: map[string]bool{}, retry: map[string]time.Time{},
		results: make(chan result, d.o.MaxInFlight),
	}
	defer r.wait()
	defer d.pending.Store(0) // no longer the master's to send
	for {
		err := r.load(ctx)
		if err == nil {
			break
		}
		d.log.Warn("alerts cannot load their state; retrying", "err", err)
		if backoff.Sleep(ctx, d.o.Poll) != nil {
			return nil
		}
	}
	t := time.NewTicker(d.o.Poll)
	defer t.Stop()
	for {
		var err error
		select {
		case <-ctx.Done():
			return nil
		case res := <-r.results:
			err = r.done(ctx, res)
		case <-t.C:
			if err = r.pass(ctx); err == nil {
				d.passes.Add(1)
			}
		}
		if err == nil {
			continue
		}
		if errors.Is(err, store.ErrFenced) || ctx.Err() != nil {
			return nil
		}
		d.log.Warn("alerts pass failed; reloading", "err", err)
		if err := r.load(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("alerts reload failed", "err", err)
		}
	}
}

// wait lets the sends in flight end (their context is the leader's,
// cancelled by now) without writing what they report.
func (r *leadRun) wait() {
	for len(r.inflight) > 0 {
		res := <-r.results
		delete(r.inflight, res.rule)
	}
}

// load reads the master's state from etcd.
func (r *leadRun) load(ctx context.Context) error {
	states, _, err := r.d.o.Collections.States.ListAll(ctx)
	if err != nil {
		return fmt.Errorf("alerts: load states: %w", err)
	}
	r.states = map[string]*RuleState{}
	for _, it := range states {
		r.states[it.Name] = it.Value
	}
	r.cursor = Cursor{Regions: map[string]string{}}
	it, err := r.d.o.Collections.Cursor.Get(ctx, cursorName)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return fmt.Errorf("alerts: load cursor: %w", err)
	case it.Value.Regions != nil:
		r.cursor = *it.Value
	}
	return nil
}

// pass syncs the rules, reads what happened, writes the new state and
// starts the notifications that are due.
func (r *leadRun) pass(ctx context.Context) error {
	now := r.d.o.Clock()
	changed, gone, err := r.syncRules(ctx, now)
	if err != nil {
		return err
	}
	cursorMoved := false
	if len(r.rules) > 0 {
		cursorMoved = r.read(ctx, now, changed)
		for _, ev := range r.d.o.Source.Levels(now) {
			r.apply(&ev, now, changed)
		}
	}
	if err := r.persist(ctx, changed, gone, cursorMoved); err != nil {
		return err
	}
	r.dispatch(ctx, now)
	r.countPending()
	return nil
}

// countPending publishes how many alerts wait, over every rule.
func (r *leadRun) countPending() {
	n := 0
	for _, st := range r.states {
		n += len(st.Outbox)
	}
	r.d.pending.Store(int64(n))
}

// syncRules reads the rules; a new rule gets a state that sees events
// from its creation on, a deleted rule's state goes.
func (r *leadRun) syncRules(ctx context.Context, now time.Time) (changed map[string]bool, gone []string, err error) {
	items, _, err := r.d.o.Collections.Rules.ListAll(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("alerts: list rules: %w", err)
	}
	r.rules = make(map[string]*StoredRule, len(items))
	changed = map[string]bool{}
	for _, it := range items {
		r.rules[it.Name] = it.Value
		if _, ok := r.states[it.Name]; !ok {
			r.states[it.Name] = &RuleState{Since: cmp.Or(it.Value.CreatedAt, now)}
			changed[it.Name] = true
		}
	}
	for name := range r.states {
		if _, ok := r.rules[name]; !ok && !r.inflight[name] {
			gone = append(gone, name)
			delete(r.states, name)
			delete(r.retry, name)
		}
	}
	return changed, gone, nil
}

// read feeds every region's new events to the rules. The regions are
// read at once, so a region slow to answer costs one read timeout, not
// one per region; one that does not answer keeps its cursor, and is read
// again next pass.
func (r *leadRun) read(ctx context.Context, now time.Time, changed map[string]bool) bool {
	regions := r.d.o.Source.Regions()
	got := make([][]Event, len(regions))
	var wg sync.WaitGroup
	for i, region := range regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = r.readRegion(ctx, region, cmp.Or(r.cursor.Regions[region], "0-0"))
		}()
	}
	wg.Wait()
	moved := false
	for i, evs := range got {
		for j := range evs {
			r.apply(&evs[j], now, changed)
		}
		if len(evs) > 0 {
			r.cursor.Regions[regions[i]] = evs[len(evs)-1].ID
			moved = true
		}
	}
	return moved
}

// readRegion reads up to ReadPages pages of region's stream after the
// cursor.
func (r *leadRun) readRegion(ctx context.Context, region, after string) []Event {
	var out []Event
	for range r.d.o.ReadPages {
		evs, err := r.d.o.Source.Read(ctx, region, after, r.d.o.ReadLimit)
		if err != nil {
			r.d.log.Debug("cannot read a region's events", "region", region, "err", err)
			break
		}
		out = append(out, evs...)
		if len(evs) < r.d.o.ReadLimit {
			break
		}
		after = evs[len(evs)-1].ID
	}
	return out
}

func (r *leadRun) apply(ev *Event, now time.Time, changed map[string]bool) {
	for name, rule := range r.rules {
		if r.states[name].Apply(&rule.AlertRule, ev, now) {
			changed[name] = true
		}
	}
}

// persist writes the changed states, then the cursor, fenced. States go
// first: a cursor never runs ahead of what was queued from the events
// it passed.
func (r *leadRun) persist(ctx context.Context, changed map[string]bool, gone []string, cursorMoved bool) error {
	c := r.d.o.Collections
	ops := max(c.Rules.Store().MaxTxnOps()-1, 1)
	t, n := c.States.Store().Txn().Guard(r.guard), 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		_, err := t.Commit(ctx)
		t, n = c.States.Store().Txn().Guard(r.guard), 0
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(changed)) {
		if err := c.States.TxnPut(t, name, r.states[name]); err != nil {
			return err
		}
		if n++; n >= ops {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	for _, name := range gone {
		c.States.TxnDelete(t, name, 0)
		if n++; n >= ops {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if cursorMoved {
		if err := c.Cursor.TxnPut(t, cursorName, &r.cursor); err != nil {
			return err
		}
		n++
	}
	return flush()
}

// dispatch starts the sends that are due, within MaxInFlight.
func (r *leadRun) dispatch(ctx context.Context, now time.Time) {
	for _, name := range slices.Sorted(maps.Keys(r.rules)) {
		if len(r.inflight) >= r.d.o.MaxInFlight {
			return
		}
		rule, st := r.rules[name], r.states[name]
		if r.inflight[name] || now.Before(r.retry[name]) {
			continue
		}
		batch := st.Ready(rule.GroupWaitOr(), now)
		if batch == nil {
			continue
		}
		r.inflight[name] = true
		go func() {
			err := r.send(ctx, rule, batch)
			r.results <- result{rule: name, batch: batch, err: err, at: r.d.o.Clock()}
		}()
	}
}

// send posts batch to the rule's receiver, with its secret opened for
// this send only. A secret that does not open fails the attempt like a
// receiver that refuses (the error names the rule and the key, never the
// secret), and is retried: a key file may come back.
func (r *leadRun) send(ctx context.Context, stored *StoredRule, batch []Alert) error {
	secret, err := stored.Secret(r.d.o.Keyring)
	if err != nil {
		return failed("delivery failed: "+err.Error(), err)
	}
	rule := stored.AlertRule
	rule.Receiver.Secret = secret
	return Sender{Client: r.d.client, Clock: r.d.o.Clock}.Send(ctx, &rule, batch)
}

// done records a send's outcome, fenced.
func (r *leadRun) done(ctx context.Context, res result) error {
	delete(r.inflight, res.rule)
	st, ok := r.states[res.rule]
	if !ok {
		return nil // the rule was deleted meanwhile
	}
	defer r.countPending()
	if res.err == nil {
		r.d.sent.Add(1)
		st.Sent(res.batch, res.at)
		delete(r.retry, res.rule)
		r.d.log.Info("alert notification sent", "rule", res.rule, "alerts", len(res.batch))
	} else {
		giveUp := st.Delivery.Attempts+1 >= r.d.o.MaxAttempts
		r.d.failed.Add(1)
		if giveUp {
			r.d.dropped.Add(uint64(len(res.batch)))
		}
		st.Failed(res.batch, res.at, Shown(res.err), giveUp)
		delay := r.d.o.Backoff.Delay(st.Delivery.Attempts)
		r.retry[res.rule] = res.at.Add(delay)
		r.d.log.Warn("alert notification failed", "rule", res.rule, "attempt", st.Delivery.Attempts, "dropped", giveUp, "retry_in", delay, "err", res.err)
	}
	_, err := r.d.o.Collections.States.Put(ctx, res.rule, st, r.guard)
	return err
}
