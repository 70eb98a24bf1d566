package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestProcGroup(t *testing.T) {
	for name, want := range map[string]string{
		"production-etcd-global-2": "etcd-global",
		"production-region-1":      "region",
		"light-sim":                "sim",
		"production-lb-region":     "lb-region",
		"production-redis":         "redis",
		"solo":                     "solo",
	} {
		if got := procGroup(name); got != want {
			t.Errorf("procGroup(%q) = %q; want %q", name, got, want)
		}
	}
}

func TestScrapeCountersSumsLabelsAndSkipsLongerNames(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `# HELP etcd_disk_wal_fsync_duration_seconds fsyncs
etcd_disk_wal_fsync_duration_seconds_count 7
etcd_disk_wal_fsync_duration_seconds_count_extra 100
etcd_network_peer_sent_bytes_total{To="a"} 10
etcd_network_peer_sent_bytes_total{To="b"} 5.5
grpc_server_handled_total{grpc_code="OK",grpc_method="Txn",grpc_service="etcdserverpb.KV"} 3
grpc_server_handled_total{grpc_code="Aborted",grpc_method="Txn",grpc_service="etcdserverpb.KV"} 1
grpc_server_handled_total{grpc_code="OK",grpc_method="Range",grpc_service="etcdserverpb.KV"} 50
strata_controller_passes_total{tier="region"} 9
`)
	}))
	defer srv.Close()
	got := scrapeCounters(context.Background(), srv.Client(), srv.URL, []string{
		"etcd_disk_wal_fsync_duration_seconds_count",
		"etcd_network_peer_sent_bytes_total",
		`grpc_server_handled_total{grpc_method="Txn"`,
		"strata_controller_passes_total",
		"absent_total",
	})
	want := map[string]float64{
		"etcd_disk_wal_fsync_duration_seconds_count":  7,
		"etcd_network_peer_sent_bytes_total":          15.5,
		`grpc_server_handled_total{grpc_method="Txn"`: 4,
		"strata_controller_passes_total":              9,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v; want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v; want %v", k, got[k], v)
		}
	}
}

func TestAccountCountsTransactionsByRevision(t *testing.T) {
	a := &b1Account{start: time.Now(), kinds: map[string]*kindWrites{}}
	put := func(key string, rev int64) *clientv3.Event {
		return &clientv3.Event{Type: clientv3.EventTypePut, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte("vv"), ModRevision: rev}}
	}
	// One transaction (revision 5) writes two assignments and a port,
	// interleaved; the next (6) one assignment.
	for _, ev := range []*clientv3.Event{
		put("/strata/region/assignments/a1", 5),
		put("/strata/region/ports/net/10.0.0.1", 5),
		put("/strata/region/assignments/a2", 5),
		put("/strata/region/assignments/a3", 6),
	} {
		a.sawLocked("region", ev, a.start.Add(time.Second))
	}
	w := a.kinds["region assignments"]
	if w == nil || w.puts != 3 || w.txns != 2 {
		t.Fatalf("assignments: %+v; want 3 puts in 2 transactions", w)
	}
	if p := a.kinds["region ports"]; p == nil || p.puts != 1 || p.txns != 1 {
		t.Fatalf("ports: %+v; want 1 put in 1 transaction", p)
	}
}

func TestCPUBudget(t *testing.T) {
	used := map[string]float64{"region": 0.75, "sim": 0.25}
	got := cpuBudget(used, []string{"region", "sim"}, 10*time.Second, 10000)
	n := runtime.NumCPU()
	want := fmt.Sprintf("CPU time per replica: 1.000 ms (region 0.750, sim 0.250); at that cost the machine's %d cores hold at most %d/s, %d/s without the simulated agents", n, n*1000, int(math.Round(float64(n)*4000/3)))
	if got != want {
		t.Errorf("cpuBudget:\n got %s\nwant %s", got, want)
	}
}
