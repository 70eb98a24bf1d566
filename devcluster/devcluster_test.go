package devcluster_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/devcluster"
	"github.com/stratahq/strata/providers/fake"
	"github.com/stratahq/strata/providers/provider"
	"github.com/stratahq/strata/testkit/testenv/logcheck"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// TestLogAttributesOnce runs a dev cluster (every tier in one process, as
// `strata dev` does) on one logger and checks its records: no record
// repeats a key (the cluster, a tier's server and its components each set
// their own attributes, once), and each tier's records say which tier and
// which instance they come from.
func TestLogAttributesOnce(t *testing.T) {
	var out syncBuffer
	log := logcheck.New(t, slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := provider.NewRegistry()
	reg.Register("fake", fake.Factory)
	ctx, cancel := context.WithCancel(context.Background())
	c, err := devcluster.Start(ctx, devcluster.Options{
		DataDir: t.TempDir(), Regions: []string{"dev-1"}, AgentsPerRegion: 1,
		Registry: reg, TLS: true, Logger: log,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = c.Wait()
	})
	// A resource placed, scheduled and run: the controllers, the
	// scheduler and the agent log along the way.
	base := "http://" + c.Global.HTTPAddr()
	call(t, c.Token, "POST", base+"/v1/flavors", `{"name":"small","kind":"container","spec":{"vcpus":0.5,"memoryMiB":256}}`, http.StatusCreated)
	call(t, c.Token, "POST", base+"/v1/resources", `{"name":"app","kind":"Compute","replicas":2,"spec":{"flavor":"small","compute":{"image":"busybox"}}}`, http.StatusCreated)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var r struct {
			Status struct{ Phase string } `json:"status"`
		}
		if err := json.Unmarshal(call(t, c.Token, "GET", base+"/v1/resources/app", "", http.StatusOK), &r); err != nil {
			t.Fatal(err)
		}
		if r.Status.Phase == "ready" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("resource app: phase %q after 30s; want ready", r.Status.Phase)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	_ = c.Wait()

	want := map[string]map[string]string{
		"region serving":     {"tier": "region", "region": "dev-1", "instance": "dev-1"},
		"leading the region": {"tier": "region", "region": "dev-1", "instance": "dev-1"},
		"node registered":    {"tier": "region", "region": "dev-1", "node": "dev-1-a"},
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if dups, err := logcheck.Line(line); err != nil || len(dups) > 0 {
			t.Errorf("line repeats %v (%v): %s", dups, err, line)
		}
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if rec["level"] == "ERROR" {
			t.Errorf("ERROR record in a healthy cluster: %s", line)
		}
		msg, _ := rec["msg"].(string)
		if attrs, ok := want[msg]; ok {
			seen[msg] = true
			for k, v := range attrs {
				if rec[k] != v {
					t.Errorf("%q: %s = %v; want %q (%s)", msg, k, rec[k], v, line)
				}
			}
		}
		if _, ok := rec["tier"]; !ok && !strings.HasPrefix(msg, "devcluster") && rec["component"] != "redis" {
			t.Errorf("record without a tier: %s", line)
		}
	}
	t.Logf("%d log records", bytes.Count(out.Bytes(), []byte("\n")))
	for msg := range want {
		if !seen[msg] {
			t.Errorf("no %q record in the log", msg)
		}
	}
}

func call(t *testing.T, token, method, url, body string, want int) []byte {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: got %d %s; want %d", method, url, resp.StatusCode, b, want)
	}
	return b
}
