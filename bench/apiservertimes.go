package main

import (
	"context"
	"fmt"
	"strconv"
)

// b3GetRoute is the route B3's GETs take, as the global's REST metrics
// label it.
const b3GetRoute = `route="GET /v1/resources/{name}",tier="global"`

// httpBounds are the upper bounds of strata_http_request_duration_seconds'
// buckets (internal/metrics' latencyBuckets), as /metrics prints them.
var httpBounds = []string{"0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"}

// serverTimes are the counters of a route's latency histogram on one
// replica: count, sum and each bucket's cumulative count, by bound.
type serverTimes map[string]float64

// getServerTimes reads the histogram of B3's GET route from the global
// replica B3 sends to. Only B3 GETs one resource there, so the difference
// of two readings around a run is B3's requests as the server timed them.
func (c *cluster) getServerTimes(ctx context.Context) serverTimes {
	names := []string{
		"strata_http_request_duration_seconds_count{" + b3GetRoute,
		"strata_http_request_duration_seconds_sum{" + b3GetRoute,
		`strata_etcd_request_duration_seconds_count{method="Txn (read)"`,
		`strata_etcd_request_duration_seconds_sum{method="Txn (read)"`,
	}
	for _, b := range httpBounds {
		names = append(names, fmt.Sprintf(`strata_http_request_duration_seconds_bucket{%s,le="%s"`, b3GetRoute, b))
	}
	cl := c.newClient(c.gHTTP[0])
	got := scrapeCounters(ctx, cl.http, cl.base, names)
	out := serverTimes{"count": got[names[0]], "sum": got[names[1]], "etcd count": got[names[2]], "etcd sum": got[names[3]]}
	for i, b := range httpBounds {
		out[b] = got[names[4+i]]
	}
	return out
}

// since is what was timed between the reading was and t.
func (t serverTimes) since(was serverTimes) serverTimes {
	out := serverTimes{}
	for k, v := range t {
		out[k] = v - was[k]
	}
	return out
}

// add adds d's counters to t.
func (t serverTimes) add(d serverTimes) {
	for k, v := range d {
		t[k] += v
	}
}

// quantileBound is the upper bound of the bucket that holds the q-th
// quantile (0 < q < 1), in ms; "" when nothing was timed. A histogram
// tells no more than its buckets: "≤ 100 ms" means between the bound
// below and 100 ms.
func (t serverTimes) quantileBound(q float64) string {
	n := t["count"]
	if n <= 0 {
		return ""
	}
	for _, b := range httpBounds {
		if t[b] >= q*n {
			if b == "+Inf" {
				return "> 10 s"
			}
			s, _ := strconv.ParseFloat(b, 64)
			return fmt.Sprintf("≤ %g ms", s*1000)
		}
	}
	return "> 10 s"
}

// note describes the server's side of B3's GETs.
func (t serverTimes) note() string {
	n := t["count"]
	if n <= 0 {
		return ""
	}
	out := fmt.Sprintf("The server's side of the GETs under load (the replica's strata_http_request_duration_seconds for GET /v1/resources/{name}, from the request read to the answer written: the token check, the etcd read, JSON; neither TLS, the network nor the client's wait): %.0f requests, mean %.1f ms, p50 %s, p99 %s (bucket bounds).",
		n, t["sum"]/n*1000, t.quantileBound(0.5), t.quantileBound(0.99))
	if e := t["etcd count"]; e > 0 {
		// The GET's read is the replica's only read-only transaction
		// while the runs go on (B3's POSTs write without reading; the
		// DELETEs that clean up after each run fall outside the window);
		// the mean is of every one it ran meanwhile.
		out += fmt.Sprintf(" Of which the etcd read (strata_etcd_request_duration_seconds, Txn (read), %.0f calls): mean %.1f ms.", e, t["etcd sum"]/e*1000)
	}
	return out
}
