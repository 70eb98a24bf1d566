package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stratahq/strata/e2e/framework"
)

// TestLogsJSONThroughRedisOutage runs a region and two agents with JSON
// logs (log.format from the environment), kills the region's Redis while
// they heartbeat and starts it again: every line each process wrote is
// one JSON object with no key twice, the Redis client's complaints
// included (records with component=redis, not go-redis's plain lines).
func TestLogsJSONThroughRedisOutage(t *testing.T) {
	t.Setenv("STRATA_LOG_FORMAT", "json") // inherited by the processes; beats their files
	lv := liveness{heartbeat: time.Second, suspect: 3 * time.Second, down: 6 * time.Second, probe: 500 * time.Millisecond}
	c := startRegion(t, lv)
	nodes := []string{"n-a", "n-b"}
	c.startAgents(agentOpts{}, nodes...)
	c.apply("app", 2)
	c.waitReady("app", 2)

	c.redis.Kill()
	framework.Eventually(t, 30*time.Second, "the region logging the Redis client's failures", func() error {
		if n := countRecords(c.proc.Log(), "component", "redis"); n == 0 {
			return fmt.Errorf("no record with component=redis yet")
		}
		return nil
	})
	c.redis.Restart(t)
	rdb := c.redis.Client(t)
	framework.Eventually(t, 30*time.Second, "heartbeats recorded again", func() error {
		n, err := rdb.ZCard(t.Context(), "{strata:region:"+regionName+"}:hb").Result()
		if err != nil || n != int64(len(nodes)) {
			return fmt.Errorf("ZCARD = %d, %v; want %d", n, err, len(nodes))
		}
		return nil
	})

	procs := map[string]*framework.Proc{"region": c.proc}
	for _, n := range nodes {
		procs["agent "+n] = c.agents[n].proc
	}
	checkJSONLogs(t, procs)
	t.Logf("region: %d records from the Redis client", countRecords(c.proc.Log(), "component", "redis"))
}

// countRecords counts the JSON records of log whose key is value.
func countRecords(log []byte, key, value string) int {
	n := 0
	for _, line := range bytes.Split(log, []byte("\n")) {
		var rec map[string]any
		if json.Unmarshal(line, &rec) == nil && rec[key] == value {
			n++
		}
	}
	return n
}
