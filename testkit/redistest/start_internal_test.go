package redistest

import (
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/testkit/testenv"
)

// A server that cannot start (here: its port is taken) fails at once,
// with its log, instead of after the readiness deadline.
func TestStartFailsAtOnceWithTheLog(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Missing(t, "redis-server", err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	s := &Server{bin: bin, dir: dir, port: taken.Addr().(*net.TCPAddr).Port, logPath: filepath.Join(dir, "redis.log")}
	t.Cleanup(s.Kill)
	start := time.Now()
	err = s.start()
	if err == nil {
		t.Fatal("start on a taken port: got nil; want an error")
	}
	if !strings.Contains(err.Error(), "already in use") {
		t.Errorf("start on a taken port: got %q; want redis-server's log saying the address is in use", err)
	}
	if took := time.Since(start); took > readyTimeout/2 {
		t.Errorf("start on a taken port failed after %s; want well before the %s readiness deadline", took, readyTimeout)
	}
}
