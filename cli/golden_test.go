package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestHelpGolden keeps the help of every command, found by walking the
// "Available Commands" of each help from the root, to the byte.
func TestHelpGolden(t *testing.T) {
	e := newEnv(t)
	var b strings.Builder
	var walk func(path []string)
	walk = func(path []string) {
		args := append(append([]string{}, path...), "--help")
		r := e.run("", args...)
		fmt.Fprintf(&b, "$ stratactl %s\n%s%s(exit %d)\n\n", strings.Join(args, " "), r.stdout, r.stderr, r.code)
		for _, sub := range subcommands(r.stdout) {
			walk(append(append([]string{}, path...), sub))
		}
	}
	walk(nil)
	golden(t, "help.txt", b.String())
}

// subcommands reads the names of a help's "Available Commands".
func subcommands(help string) []string {
	_, rest, ok := strings.Cut(help, "\nAvailable Commands:\n")
	if !ok {
		return nil
	}
	var names []string
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		names = append(names, strings.Fields(line)[0])
	}
	return names
}

// TestOutputsGolden keeps what the commands print, in every output format,
// to the byte: a transcript of commands against the fixtures.
func TestOutputsGolden(t *testing.T) {
	e := newEnv(t)
	e.load()
	e.srv.Usage["team-a"] = e.srv.Usage["default"]
	secretFile := filepath.Join(t.TempDir(), "hook.secret")
	if err := os.WriteFile(secretFile, []byte("0123456789abcdef-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.srv.Logs["web"] = "line 1\nline 2\n"
	var b strings.Builder
	for _, args := range [][]string{
		{"version"},
		{"version", "-o", "json"},
		{"get", "flavors", "-o", "yaml"},
		{"get", "res", "web", "-o", "json"},
		{"get", "nodes", "-o", "json"},
		{"get", "replicas", "web", "-o", "yaml"},
		{"get", "rev", "web", "-o", "wide"},
		{"get", "configs"},
		{"get", "secrets", "-o", "json"},
		{"get", "netpol"},
		{"regions", "-o", "yaml"},
		{"nodes", "-o", "wide"},
		{"describe", "resource", "web", "-o", "yaml"},
		{"describe", "node/dev-1/dev-1-a", "-o", "json"},
		{"describe", "flavor", "small", "-o", "yaml"},
		{"describe", "config", "x"},
		{"describe", "resource"},
		{"get", "widgets", "-o", "xml"},
		{"events"},
		{"events", "-o", "json", "--limit", "2"},
		{"events", "--for", "resource/web", "-o", "wide"},
		{"events", "--limit", "0"},
		{"alerts"},
		{"alerts", "create", "nodes", "--reason", "NodeDown", "--url", "https://hooks.example.com/strata", "--secret-file", secretFile, "--label", "severity=page"},
		{"alerts", "create", "am", "--type", "alertmanager", "--reason", "NodeDown", "--url", "http://am:9095/", "-o", "json"},
		{"alerts", "create", "bad", "--reason", "NodeDown", "--url", "https://x", "--label", "novalue"},
		{"alerts"},
		{"alerts", "-o", "wide"},
		{"alerts", "-o", "yaml"},
		{"alerts", "get", "nodes"},
		{"alerts", "get", "nodes", "-o", "json"},
		{"alerts", "get", "nope"},
		{"alerts", "delete", "am"},
		{"tenants", "list"},
		{"tenants", "set-quota", "team-a", "--replicas", "10", "--region", "dev-1"},
		{"tenants", "list", "-o", "yaml"},
		{"tenants", "get", "team-a"},
		{"tenants", "get", "team-a", "-o", "json"},
		{"tokens", "list"},
		{"tokens", "create", "alice", "--role", "member", "--expires-in", "30d"},
		{"tokens", "create", "bob", "--role", "viewer", "-o", "yaml"},
		{"tokens", "create", "carol"},
		{"tokens", "create", "carol", "--role", "member", "--expires-in", "soon"},
		{"tokens", "list"},
		{"tokens", "list", "-o", "json"},
		{"--tenant", "acme", "tokens", "list"},
		{"tokens", "revoke", "strata_00000000_x"},
		{"jobs"},
		{"jobs", "-o", "json"},
		{"jobs", "web"},
		{"scale", "web", "--replicas", "4"},
		{"scale", "web"},
		{"rollback", "web", "--to", "1"},
		{"rollback", "web"},
		{"logs", "web"},
		{"logs", "web", "--tail", "-1"},
		{"resolve", "web"},
		{"resolve", "web", "--region", "dev-1", "-o", "json"},
		{"resolve", "web-bbbb2222.web.default.dev-1.strata.internal", "-o", "yaml"},
		{"resolve", "web", "--type", "aaaa"},
		{"resolve", "nope"},
		{"--tenant", "acme", "resolve", "web.default.strata.internal"},
		{"resolve", "web", "--type", "MX"},
		{"nodes", "cordon", "dev-1-a", "--reason", "disk"},
		{"nodes", "uncordon", "dev-1/dev-1-a"},
		{"nodes", "drain", "dev-1/dev-1-a", "--deadline", "-1s"},
		{"nodes", "cordon", "nope"},
		{"delete", "flavor", "nope", "--ignore-not-found"},
		{"delete", "netpol", "nope"},
		{"delete", "widgets", "x"},
		{"delete", "res"},
		{"apply"},
		{"config", "get-contexts"},
		{"config", "current-context"},
	} {
		r := e.run("", args...)
		out := strings.ReplaceAll(r.stdout+r.stderr, e.srv.URL, "$URL")
		out = strings.ReplaceAll(out, secretFile, "$SECRET")
		out = strings.ReplaceAll(out, e.vars["HOME"], "$HOME")
		out = strings.ReplaceAll(out, runtime.Version(), "$GO")
		fmt.Fprintf(&b, "$ stratactl %s\n%s(exit %d)\n\n", strings.ReplaceAll(strings.Join(args, " "), secretFile, "$SECRET"), out, r.code)
	}
	golden(t, "outputs.txt", b.String())
}
