package cli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

func TestTokens(t *testing.T) {
	e := newEnv(t)

	out := e.must("", "--tenant", "acme", "tokens", "create", "alice", "--role", "member", "--expires-in", "30d")
	e.srv.Mu.Lock()
	var id string
	for k, tk := range e.srv.Tokens {
		id = k
		if tk.Tenant != "acme" || tk.Role != api.RoleMember || tk.Name != "alice" || tk.ExpiresAt != now.Add(30*24*time.Hour).Format(time.RFC3339) {
			t.Errorf("created %+v; want alice, member of acme, expiring 30 days from now", tk)
		}
	}
	e.srv.Mu.Unlock()
	secret := "strata_" + id + "_0123456789abcdef0123456789abcdef"
	if n := strings.Count(out, secret); n != 2 {
		t.Errorf("create printed the secret %d times; want twice (alone, and in the config line):\n%s", n, out)
	}
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "stratactl config set-context ") {
			line = l
		}
	}
	if want := "stratactl config set-context acme --url " + e.srv.URL + " --token " + secret; line != want {
		t.Fatalf("config line: got %q; want %q in\n%s", line, want, out)
	}
	// The line works as printed.
	e.must("", strings.Fields(line)[1:]...)
	if got := e.must("", "config", "get-contexts"); !strings.Contains(got, "acme") {
		t.Errorf("get-contexts after the printed line: got\n%s\nwant context acme", got)
	}

	e.must("", "tokens", "create", "ci", "--role", "viewer")
	list := e.must("", "tokens", "list")
	for _, want := range []string{"ID", "EXPIRES", "alice", "acme", "member", "in 30d", "ci", "default", "viewer", "never"} {
		if !strings.Contains(list, want) {
			t.Errorf("tokens list: got\n%s\nwant %q", list, want)
		}
	}
	if strings.Contains(list, "0123456789abcdef") {
		t.Errorf("tokens list shows a secret:\n%s", list)
	}
	if got := e.must("", "--tenant", "acme", "tokens", "list"); strings.Contains(got, "ci") || !strings.Contains(got, "alice") {
		t.Errorf("tokens list --tenant acme: got\n%s\nwant alice only", got)
	}
	if got := e.must("", "tokens", "list", "-o", "json"); !strings.Contains(got, `"id": "`+id+`"`) {
		t.Errorf("tokens list -o json: got\n%s", got)
	}

	// Revoke by id, or by the whole token: only the id is sent.
	if got := e.must("", "tokens", "revoke", secret); !strings.Contains(got, "token "+id+" (alice, tenant acme, role member) revoked") {
		t.Errorf("revoke: got %q", got)
	}
	for _, w := range e.srv.Writes() {
		if strings.Contains(w, "0123456789abcdef") {
			t.Errorf("a request carried the secret in its path: %s", w)
		}
	}
	if r := e.run("", "tokens", "revoke", id); r.code != 3 {
		t.Errorf("revoking again: exit %d, stderr %q; want 3 (not found)", r.code, r.stderr)
	}
}

func TestTokensUsage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"no role", []string{"tokens", "create", "x"}, "tokens create needs --role"},
		{"a bad role", []string{"tokens", "create", "x", "--role", "root"}, `--role "root" is not one of`},
		{"a bad lifetime", []string{"tokens", "create", "x", "--role", "viewer", "--expires-in", "soon"}, `--expires-in: "soon" is not a duration`},
		{"a negative lifetime", []string{"tokens", "create", "x", "--role", "viewer", "--expires-in", "-1h"}, "not a positive duration"},
		{"no name", []string{"tokens", "create", "--role", "viewer"}, "accepts 1 arg(s)"},
		{"no id", []string{"tokens", "revoke"}, "accepts 1 arg(s)"},
		{"unknown subcommand", []string{"tokens", "rotate"}, `unknown command "rotate" for "stratactl tokens"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			r := e.run("", tc.args...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("got exit %d, stderr %q; want 2 and %q", r.code, r.stderr, tc.stderr)
			}
			if w := e.srv.Writes(); len(w) != 0 {
				t.Errorf("sent %v; want nothing", w)
			}
		})
	}
}

// TestTokensTenantAdmin: tenant-admin is a role the CLI makes and
// explains, with admin said to be the system tenant's only.
func TestTokensTenantAdmin(t *testing.T) {
	e := newEnv(t)
	e.must("", "--tenant", "acme", "tokens", "create", "acme-admin", "--role", "tenant-admin")
	e.srv.Mu.Lock()
	found := false
	for _, tk := range e.srv.Tokens {
		found = found || tk.Tenant == "acme" && tk.Role == api.RoleTenantAdmin
	}
	e.srv.Mu.Unlock()
	if !found {
		t.Errorf("no tenant-admin token of acme was created")
	}
	help := e.must("", "tokens", "--help")
	for _, want := range []string{"tenant-admin", `system
                tenant ("default")`} {
		if !strings.Contains(help, want) {
			t.Errorf("tokens --help: got\n%s\nwant it to say %q", help, want)
		}
	}
	if got := e.must("", "tokens", "create", "--help"); !strings.Contains(got, "admin, infra, tenant-admin, operator, member, viewer (required)") {
		t.Errorf("tokens create --help: got\n%s\nwant the roles with tenant-admin", got)
	}
}
