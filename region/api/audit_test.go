package api

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/audit"
)

// TestAuditLog: the region records its operators' REST writes as the
// region token's holder (never the token), refused ones with nobody,
// and the node registrations its agents make; reads are not recorded.
func TestAuditLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	log, err := audit.Open(path, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *Options, _ *tuning) { o.Audit = log })
	e.register(testNode("n1"))
	for _, r := range []struct {
		method, path, token string
		code                int
	}{
		{"GET", "/v1/nodes", testToken, 200},
		{"POST", "/v1/nodes/n1/cordon", testToken, 200},
		{"POST", "/v1/nodes/n1/uncordon", "wrong-token", 401},
	} {
		req, err := http.NewRequestWithContext(e.ctx(), r.method, e.http.URL+r.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+r.token)
		resp, err := e.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != r.code {
			t.Fatalf("%s %s: got %d; want %d", r.method, r.path, resp.StatusCode, r.code)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), testToken) || strings.Contains(string(raw), "wrong-token") {
		t.Fatalf("the audit log holds a token:\n%s", raw)
	}
	var got []audit.Entry
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		var en audit.Entry
		if err := json.Unmarshal(sc.Bytes(), &en); err != nil {
			t.Fatal(err)
		}
		got = append(got, en)
	}
	want := []audit.Entry{
		// Insecure mode here: the agent's peer is an insecure-mode one.
		{Method: "gRPC", Path: "/strata.agent.v1.AgentService/Register", Code: "OK", Who: audit.Who{Identity: "an insecure-mode loopback peer"}},
		{Method: "POST", Path: "/v1/nodes/n1/cordon", Status: 200, Who: audit.Who{Identity: "region-token"}},
		{Method: "POST", Path: "/v1/nodes/n1/uncordon", Status: 401},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d entries:\n%s\nwant %d", len(got), raw, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Method != w.Method || g.Path != w.Path || g.Status != w.Status || g.Code != w.Code || g.Who != w.Who || g.Tier != "region:"+testRegion {
			t.Errorf("entry %d: got %+v; want %+v in tier region:%s", i, g, w, testRegion)
		}
	}
}
