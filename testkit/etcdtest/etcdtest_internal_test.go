package etcdtest

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/testkit/testenv"
	"github.com/stratahq/strata/testkit/testenv/ports"
)

// A server that cannot start (here: its client port is taken) fails at
// once, with its log, instead of after the readiness deadline.
func TestStartFailsAtOnceWithTheLog(t *testing.T) {
	bin := testenv.Binary(t, "STRATA_ETCD_BIN", "etcd")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	p := &Process{bin: bin, dir: dir, logPath: filepath.Join(dir, "etcd.log"),
		clientURL: "http://" + taken.Addr().String(), peerURL: "http://" + ports.Addr(t)}
	t.Cleanup(p.Kill)
	start := time.Now()
	err = p.start()
	if err == nil {
		t.Fatal("start on a taken port: got nil; want an error")
	}
	if !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("start on a taken port: got %q; want etcd's log saying the address is in use", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("start on a taken port failed after %s; want well before the 30s readiness deadline", took)
	}
}

func TestProcessRestartKeepsItsPorts(t *testing.T) {
	p := StartProcess(t)
	cli := Client(t, p.Endpoints())
	if _, err := cli.Put(t.Context(), "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(t.Context(), "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("get after restart: got %v, %v; want k=v", resp, err)
	}
}
