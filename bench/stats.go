package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// spreadOf is the median of a row's runs with their range: what every
// figure of the report is, so that one lucky or unlucky run cannot pass
// for the result.
type spreadOf struct {
	med, lo, hi float64
	n           int
}

func spreadFloats(v []float64) spreadOf {
	if len(v) == 0 {
		return spreadOf{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spreadOf{med: med, lo: s[0], hi: s[len(s)-1], n: len(s)}
}

func spreadDurations(d []time.Duration) spreadOf {
	v := make([]float64, len(d))
	for i, x := range d {
		v[i] = x.Seconds()
	}
	return spreadFloats(v)
}

// format writes the median and range with f: "4,120/s (3,900–4,300, 3 runs)".
func (s spreadOf) format(f func(float64) string) string {
	return fmt.Sprintf("%s (%s–%s, %d runs)", f(s.med), f(s.lo), f(s.hi), s.n)
}

func fmtSecs(v float64) string { return fmt.Sprintf("%.2f s", v) }
func fmtMs(v float64) string   { return fmt.Sprintf("%.1f ms", v*1000) }
func fmtRate(v float64) string { return fmt.Sprintf("%.0f/s", v) }
func fmtMiB(v float64) string  { return fmt.Sprintf("%.0f MiB", v) }

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// latencies are the outcomes of an open-loop load: the latency of every
// request that succeeded, and how many failed (errors, and answers that
// are not the one wanted, such as a 404 for a resource that exists).
type latencies struct {
	mu   sync.Mutex
	ok   []time.Duration
	errs int
	last error
}

func (l *latencies) record(d time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.errs++
		l.last = err
		return
	}
	l.ok = append(l.ok, d)
}

func (l *latencies) merge(o *latencies) {
	l.mu.Lock()
	defer l.mu.Unlock()
	o.mu.Lock()
	defer o.mu.Unlock()
	l.ok = append(l.ok, o.ok...)
	l.errs += o.errs
	if o.last != nil {
		l.last = o.last
	}
}

func (l *latencies) p(p int) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return pct(l.ok, p)
}

// summary is "p50 1.2 ms / p99 8.0 ms (400 samples, 0 errors)".
func (l *latencies) summary() string {
	l.mu.Lock()
	n, errs := len(l.ok), l.errs
	l.mu.Unlock()
	return fmt.Sprintf("p50 %s / p99 %s (%d samples, %d errors)", ms(l.p(50)), ms(l.p(99)), n, errs)
}

func (l *latencies) counts() (samples, errs int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ok), l.errs
}

// openLoop offers requests at rate per second until stop is closed or n
// were sent (n 0: no limit), each in its own goroutine at its scheduled
// time, and measures each from that time: a slow answer does not delay
// the next request (which would hide the queueing a client sees, the
// "coordinated omission" of closed-loop load). req returns the latency to
// add to the scheduled time's (ready minus scheduled, for requests whose
// end is observed later) or an error. openLoop returns when every request
// sent has ended.
func openLoop(ctx context.Context, rate float64, n int, stop <-chan struct{}, out *latencies, req func(ctx context.Context, i int, scheduled time.Time) (time.Time, error)) {
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; n == 0 || i < n; i++ {
		at := start.Add(time.Duration(i) * interval)
		t := time.NewTimer(time.Until(at))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
		wg.Go(func() {
			done, err := req(ctx, i, at)
			out.record(done.Sub(at), err)
		})
	}
}
