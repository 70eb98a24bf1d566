// Package metrics is Strata's Prometheus instrumentation: one registry per
// tier (no global default registry, so that `strata dev` runs every tier
// in one process with separate /metrics), HTTP and gRPC middleware, and
// the metrics of controllers, the scheduler and providers.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// Registry is one tier's metrics.
type Registry struct {
	reg  *prometheus.Registry
	tier string

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
	grpcRequests *prometheus.CounterVec
	grpcDuration *prometheus.HistogramVec
}

// latencyBuckets span a fast in-memory answer to a slow fan-out.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// New returns the registry of a tier ("global", "region", "agent"), with
// the Go runtime and process collectors.
func New(tier string) *Registry {
	r := &Registry{reg: prometheus.NewRegistry(), tier: tier}
	r.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r.httpRequests = r.counterVec("strata_http_requests_total", "REST requests served, by route and status code.", "method", "route", "code")
	r.httpDuration = r.histogramVec("strata_http_request_duration_seconds", "REST request latency, by route.", "method", "route")
	r.grpcRequests = r.counterVec("strata_grpc_requests_total", "gRPC calls served, by method and code.", "method", "code")
	r.grpcDuration = r.histogramVec("strata_grpc_request_duration_seconds", "gRPC call latency, by method (streams: their whole life).", "method")
	return r
}

// Handler serves /metrics.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{Registry: r.reg})
}

// Register adds collectors (gauges computed at scrape time, typically).
func (r *Registry) Register(cs ...prometheus.Collector) { r.reg.MustRegister(cs...) }

func (r *Registry) labels() prometheus.Labels { return prometheus.Labels{"tier": r.tier} }

func (r *Registry) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: r.labels()}, labels)
	r.reg.MustRegister(c)
	return c
}

func (r *Registry) histogramVec(name, help string, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, ConstLabels: r.labels(), Buckets: latencyBuckets}, labels)
	r.reg.MustRegister(h)
	return h
}

// Counter makes and registers a counter.
func (r *Registry) Counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: r.labels()})
	r.reg.MustRegister(c)
	return c
}

// CounterVec makes and registers a counter vector.
func (r *Registry) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return r.counterVec(name, help, labels...)
}

// Gauge makes and registers a gauge.
func (r *Registry) Gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: r.labels()})
	r.reg.MustRegister(g)
	return g
}

// Histogram makes and registers a latency histogram.
func (r *Registry) Histogram(name, help string) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, ConstLabels: r.labels(), Buckets: latencyBuckets})
	r.reg.MustRegister(h)
	return h
}

// HistogramVec makes and registers a latency histogram vector.
func (r *Registry) HistogramVec(name, help string, labels ...string) *prometheus.HistogramVec {
	return r.histogramVec(name, help, labels...)
}

// GaugeFunc registers a gauge whose value is read at scrape time.
func (r *Registry) GaugeFunc(name, help string, fn func() float64) {
	r.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: r.labels()}, fn))
}

// HTTP instruments a handler: requests and latency by the route pattern
// that matched (never the raw path, which would explode cardinality), and
// serves /metrics.
func (r *Registry) HTTP(next http.Handler) http.Handler {
	metricsHandler := r.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/metrics" {
			metricsHandler.ServeHTTP(w, req)
			return
		}
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		holder := new(string)
		req = req.WithContext(context.WithValue(req.Context(), routeKey{}, holder))
		next.ServeHTTP(rec, req)
		route := *holder
		if route == "" {
			route = req.Pattern
		}
		if route == "" {
			route = "unmatched"
		}
		r.httpRequests.WithLabelValues(req.Method, route, strconv.Itoa(rec.code)).Inc()
		r.httpDuration.WithLabelValues(req.Method, route).Observe(time.Since(start).Seconds())
	})
}

type routeKey struct{}

// NoteRoute records the route pattern that matched r for the HTTP
// metrics. Handlers behind middleware that copies the request (to add an
// identity to its context) call it, since the metrics middleware never
// sees the copy the mux marked.
func NoteRoute(r *http.Request) {
	if h, ok := r.Context().Value(routeKey{}).(*string); ok && r.Pattern != "" {
		*h = r.Pattern
	}
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// Flush keeps streaming responses (logs, server-sent events) streaming.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// GRPC returns server options that count and time every call.
func (r *Registry) GRPC() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			start := time.Now()
			resp, err := h(ctx, req)
			r.observeGRPC(info.FullMethod, err, start)
			return resp, err
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			start := time.Now()
			err := h(srv, ss)
			r.observeGRPC(info.FullMethod, err, start)
			return err
		}),
	}
}

func (r *Registry) observeGRPC(method string, err error, start time.Time) {
	r.grpcRequests.WithLabelValues(method, status.Code(err).String()).Inc()
	r.grpcDuration.WithLabelValues(method).Observe(time.Since(start).Seconds())
}

// CounterFunc registers a counter whose value is read at scrape time.
func (r *Registry) CounterFunc(name, help string, fn func() float64) {
	r.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: r.labels()}, fn))
}

// GaugeSet registers a gauge with one label whose values are computed at
// scrape time (nodes by health, replicas by phase): counting from caches
// when scraped costs nothing on the hot paths.
func (r *Registry) GaugeSet(name, help, label string, fn func() map[string]float64) {
	r.reg.MustRegister(&gaugeSet{
		desc: prometheus.NewDesc(name, help, []string{label}, r.labels()),
		fn:   fn,
	})
}

// CounterSet is GaugeSet for counters: fn returns running totals (events
// dropped by reason) that only grow.
func (r *Registry) CounterSet(name, help, label string, fn func() map[string]float64) {
	r.reg.MustRegister(&gaugeSet{
		desc:    prometheus.NewDesc(name, help, []string{label}, r.labels()),
		fn:      fn,
		counter: true,
	})
}

// gaugeSet is a GaugeSet, or a CounterSet when counter is set.
type gaugeSet struct {
	desc    *prometheus.Desc
	fn      func() map[string]float64
	counter bool
}

func (g *gaugeSet) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *gaugeSet) Collect(ch chan<- prometheus.Metric) {
	typ := prometheus.GaugeValue
	if g.counter {
		typ = prometheus.CounterValue
	}
	for v, n := range g.fn() {
		ch <- prometheus.MustNewConstMetric(g.desc, typ, n, v)
	}
}
