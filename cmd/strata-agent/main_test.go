package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// TestLinksOnlyTheAgent keeps the agent's binary the agent alone: nothing
// of the global or region tiers, nor etcd's server, is compiled in (they
// would be pages resident on every node for nothing).
func TestLinksOnlyTheAgent(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	const mod = "github.com/stratahq/strata/"
	for _, p := range deps {
		// The agent talks to its region over gRPC only: neither the
		// tiers, nor the store, nor any of etcd's packages (the client
		// cost 4 MiB of RSS, etcd's API types alone 2 MiB).
		for _, banned := range []string{mod + "global", mod + "region", mod + "internal/store", "go.etcd.io/etcd"} {
			if p == banned || strings.HasPrefix(p, banned+"/") {
				t.Errorf("strata-agent links %s", p)
			}
		}
	}
	if !strings.Contains(string(out), mod+"agent\n") {
		t.Errorf("strata-agent does not link %sagent", mod)
	}
}

// TestCommand: the agent's flags, its help naming `strata agent`, the
// version, and arguments refused.
func TestCommand(t *testing.T) {
	root := newRoot()
	for _, f := range []string{"config", "node", "region", "listen-grpc", "listen-metrics", "data-dir", "log-level"} {
		if root.Flags().Lookup(f) == nil {
			t.Errorf("--%s missing", f)
		}
	}
	if !strings.Contains(root.Long, "`strata agent` runs the same command") {
		t.Errorf("help: %q; want it to say strata agent is the same command", root.Long)
	}

	var buf bytes.Buffer
	root.SetOut(&buf)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil || !strings.HasPrefix(buf.String(), "strata-agent ") {
		t.Errorf("version: %v %q; want strata-agent <version>", err, buf.String())
	}

	root = newRoot()
	root.SetArgs([]string{"extra"})
	if err := root.Execute(); err == nil {
		t.Error("an argument that is no command: accepted; want an error")
	}
}
