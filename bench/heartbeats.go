package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// b8 brings the region to 10,000 nodes heartbeating through Redis and
// measures, over s.o.rounds windows of 20 s, the CPU the region and Redis
// use and whether any node is marked Suspect or Down while its agent
// runs.
func (s *suite) b8(ctx context.Context, c *cluster) error {
	const window = 20 * time.Second
	base := c.newClient(c.rHTTP)
	downBefore, err := regionNodes(ctx, base, "Down")
	if err != nil {
		return err
	}
	// The region's CPU with the 1,000 nodes of B1: the baseline.
	idle, _, _, err := c.cpuWindow(ctx, base, window, downBefore)
	if err != nil {
		return err
	}
	extra := hbNodes - s.o.agents
	// They dial the leader, whose CPU is measured, directly: 10,000
	// connections through haproxy would need more descriptors than the
	// machine's limit lets it hold.
	// They come up hbStartRate a second, as a fleet does: what B8
	// measures is the steady state, and 9,000 TLS handshakes and
	// registrations in one instant, on the 2 cores every process here
	// shares, time out and retry rather than measure it.
	hb, err := c.startSims(ctx, "hb", extra, hbStartRate, c.leaderGRPC())
	if err != nil {
		return err
	}
	// Nodes Up as the region counts them: the global tier's view comes
	// with the region's heartbeats, which a region this busy may miss.
	up, err := regionNodes(ctx, base, "Up")
	if err != nil {
		return err
	}
	want := int(up) + extra
	// Measured even when not every node came up in time: the row then
	// says how many did, and is not met.
	wctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
	upErr := waitFor(wctx, time.Second, fmt.Sprintf("%d nodes Up at the region", want), func() error {
		n, err := regionNodes(ctx, base, "Up")
		if err == nil && int(n) < want {
			err = fmt.Errorf("%.0f up", n)
		}
		return err
	})
	cancel()
	if upErr != nil {
		s.r.note("B8: not every node came Up within 6 minutes: %v; sim-agents log:\n\n```\n%s\n```", upErr, hb.tail(5))
	}
	nowUpF, err := regionNodes(ctx, base, "Up")
	if err != nil {
		return err
	}
	nowUp := int(nowUpF)
	region, redis, falseDown, err := s.b8Windows(ctx, c, base, window, downBefore)
	if err != nil {
		return err
	}
	rs, ds := spreadFloats(region), spreadFloats(redis)
	// CPU at fewer nodes than 10,000 says nothing of the target: the
	// figure stands, with how many nodes it was measured at, and is not met.
	all := upErr == nil
	at := ""
	if !all {
		at = fmt.Sprintf(", at %d nodes Up (not %d)", nowUp, want)
	}
	cores := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	s.r.add(row{id: "B8", what: c.label(fmt.Sprintf("%d nodes heartbeating through Redis: region CPU (cores)", hbNodes)), figure: rs.format(cores) + at,
		target: "≤ 0.5 core", ratio: fmt.Sprintf("%.1f × the region at %d nodes (%.2f)", rs.med/max(idle, 0.001), s.o.agents, idle), met: verdict(all && rs.med <= 0.5)})
	s.r.add(row{id: "B8", what: c.label(fmt.Sprintf("%d nodes heartbeating through Redis: Redis CPU (cores)", hbNodes)), figure: ds.format(cores) + at,
		target: "≤ 0.3 core", met: verdict(all && ds.med <= 0.3)})
	s.r.add(row{id: "B8", what: c.label(fmt.Sprintf("%d nodes heartbeating: nodes marked Suspect or Down while their agent runs (max)", hbNodes)), figure: fmt.Sprint(falseDown),
		target: "0, all 10,000 Up", met: verdict(all && falseDown == 0),
		notes: fmt.Sprintf("%d of %d nodes Up when measured. %d windows of %s; the region's strata_region_nodes gauges polled every second. Default heartbeat interval (2 s). The simulated agents run in one process on the same 2 cores.", nowUp, want, s.o.rounds, window)})
	hb.kill()
	return nil
}

// b8Windows measures s.o.rounds CPU windows of d (cpuWindow), the first
// one profiled when profiles are asked for.
func (s *suite) b8Windows(ctx context.Context, c *cluster, base *client, d time.Duration, downBefore float64) (region, redis []float64, falseDown int, err error) {
	for round := range s.o.rounds {
		if s.o.profiles != "" && round == 0 {
			go s.prof.cpu(ctx, d-5*time.Second, "b8", c.name, c.region.name)
		}
		r, rd, bad, err := c.cpuWindow(ctx, base, d, downBefore)
		if err != nil {
			return nil, nil, 0, err
		}
		region, redis = append(region, r), append(redis, rd)
		falseDown = max(falseDown, bad)
	}
	return region, redis, falseDown, nil
}

// cpuWindow measures the cores the region and Redis used over d, and the
// most nodes seen Suspect or Down beyond the downBefore already down.
func (c *cluster) cpuWindow(ctx context.Context, regionAPI *client, d time.Duration, downBefore float64) (region, redis float64, bad int, err error) {
	r0, err := c.region.cpuSeconds()
	if err != nil {
		return 0, 0, 0, err
	}
	d0, err := c.redisProc.cpuSeconds()
	if err != nil {
		return 0, 0, 0, err
	}
	start := time.Now()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for time.Since(start) < d {
		select {
		case <-ctx.Done():
			return 0, 0, 0, ctx.Err()
		case <-t.C:
		}
		down, err1 := regionNodes(ctx, regionAPI, "Down")
		suspect, err2 := regionNodes(ctx, regionAPI, "Suspect")
		if err1 != nil || err2 != nil {
			return 0, 0, 0, fmt.Errorf("region metrics: %v %v", err1, err2)
		}
		bad = max(bad, int(down-downBefore+suspect))
	}
	el := time.Since(start).Seconds()
	r1, err := c.region.cpuSeconds()
	if err != nil {
		return 0, 0, 0, err
	}
	d1, err := c.redisProc.cpuSeconds()
	if err != nil {
		return 0, 0, 0, err
	}
	return (r1 - r0) / el, (d1 - d0) / el, bad, nil
}

// regionNodes reads the region's count of nodes in health h (Up,
// Suspect, Down, as the gauge's label spells it) from its
// strata_region_nodes gauge; a gauge that is not there is an error, so
// that a renamed label cannot read as zero nodes Down.
func regionNodes(ctx context.Context, api *client, h string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api.base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := api.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "strata_region_nodes{") && strings.Contains(l, `health="`+h+`"`) {
			f := strings.Fields(l)
			return strconv.ParseFloat(f[len(f)-1], 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no strata_region_nodes{health=%q} in the region's metrics", h)
}
