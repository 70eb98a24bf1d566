package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/election"
	"github.com/stratahq/strata/testkit/testenv/ports"
)

// deadEndpoint returns a loopback address nothing listens on: reserved,
// so that no other process's server can turn up there.
func deadEndpoint(t *testing.T) string {
	t.Helper()
	return ports.Addr(t)
}

func TestNodeForwarding(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e := newEnv(t, envConfig{leader: fixedLeader{info: election.LeaderInfo{ID: "global-2", Since: since}}})
	eu, us := newFakeRegion("eu", "n1", "n2"), newFakeRegion("us", "n3")
	e.fixtures(t, map[string]string{"eu": eu.serve(t, e.pki), "us": us.serve(t, e.pki)})
	infra := e.token(t, DefaultTenant, api.RoleInfra)
	op := withToken(infra)

	// The pool looks regions up in its own cache: wait until it has them.
	poll(t, "regions reachable", func() error {
		r := e.do(t, "GET", "/v1/nodes", nil, op)
		if nodes := decodeAs[NodeList](t, r); len(nodes.Items) != 3 {
			return errors.New("got " + r.String() + "; want 3 nodes")
		}
		return nil
	})

	tests := []struct {
		name     string
		method   string
		path     string
		body     any
		wantCode int
		// region, and the call it must have received (last one)
		region   *fakeRegion
		wantCall string
		check    func(t *testing.T, r *response)
	}{
		{
			name: "list one region", method: "GET", path: "/v1/nodes?region=us&selector=pool%3Da",
			wantCode: 200, region: us, wantCall: "ListNodes pool=a",
			check: func(t *testing.T, r *response) {
				nodes := decodeAs[NodeList](t, r)
				if len(nodes.Items) != 1 || nodes.Items[0].Name != "n3" || nodes.Items[0].Region != "us" {
					t.Fatalf("got %+v; want n3 of us", nodes.Items)
				}
			},
		},
		{
			name: "list every region", method: "GET", path: "/v1/nodes",
			wantCode: 200, region: eu, wantCall: "ListNodes ",
			check: func(t *testing.T, r *response) {
				nodes := decodeAs[NodeList](t, r)
				var got []string
				for _, n := range nodes.Items {
					got = append(got, n.Region+"/"+n.Name)
				}
				if !slices.Equal(got, []string{"eu/n1", "eu/n2", "us/n3"}) || len(nodes.Unreachable) != 0 {
					t.Fatalf("got %v, unreachable %v; want eu/n1 eu/n2 us/n3, none unreachable", got, nodes.Unreachable)
				}
			},
		},
		{
			name: "get", method: "GET", path: "/v1/regions/eu/nodes/n1",
			wantCode: 200, region: eu, wantCall: "GetNode n1",
		},
		{
			name: "region NotFound is 404", method: "GET", path: "/v1/regions/eu/nodes/n9",
			wantCode: 404, region: eu, wantCall: "GetNode n9",
			check: func(t *testing.T, r *response) {
				got := decodeAs[api.ErrorBody](t, r).Error
				if got.Code != "NotFound" || got.Message != `region "eu": node "n9" not found` {
					t.Fatalf("got %+v; want NotFound with the region's message", got)
				}
			},
		},
		{
			name: "cordon with reason", method: "POST", path: "/v1/regions/eu/nodes/n1/cordon", body: `{"reason":"disk"}`,
			wantCode: 200, region: eu, wantCall: "CordonNode n1 disk",
			check: func(t *testing.T, r *response) {
				if n := decodeAs[api.Node](t, r); n.Schedulable || n.CordonReason != "disk" {
					t.Fatalf("got schedulable %v reason %q; want cordoned for disk", n.Schedulable, n.CordonReason)
				}
			},
		},
		{
			name: "cordon without body", method: "POST", path: "/v1/regions/eu/nodes/n2/cordon",
			wantCode: 200, region: eu, wantCall: "CordonNode n2 ",
		},
		{
			name: "uncordon", method: "POST", path: "/v1/regions/eu/nodes/n1/uncordon",
			wantCode: 200, region: eu, wantCall: "UncordonNode n1",
		},
		{
			name: "drain", method: "POST", path: "/v1/regions/us/nodes/n3/drain", body: `{"deadline":"5m","maxParallel":2,"reason":"kernel"}`,
			wantCode: 200, region: us, wantCall: "DrainNode n3 5m0s 2 kernel",
			check: func(t *testing.T, r *response) {
				if d := decodeAs[api.DrainStatus](t, r); d.State != api.DrainRunning || d.MaxParallel != 2 {
					t.Fatalf("got %+v; want a running drain", d)
				}
			},
		},
		{
			name: "drain request is checked here", method: "POST", path: "/v1/regions/us/nodes/n3/drain", body: `{"maxParallel":-1}`,
			wantCode: 400, region: us, wantCall: "DrainNode n3 5m0s 2 kernel", // not forwarded
		},
		{
			name: "drain status", method: "GET", path: "/v1/regions/us/nodes/n3/drain",
			wantCode: 200, region: us, wantCall: "GetDrain n3",
		},
		{
			name: "delete", method: "DELETE", path: "/v1/regions/us/nodes/n3",
			wantCode: 200, region: us, wantCall: "DeleteNode n3",
		},
		{
			name: "delete again is 404", method: "DELETE", path: "/v1/regions/us/nodes/n3",
			wantCode: 404, region: us, wantCall: "DeleteNode n3",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(t, tt.method, tt.path, tt.body, op)
			if r.code != tt.wantCode {
				t.Fatalf("got %s; want %d", r, tt.wantCode)
			}
			if calls := tt.region.recorded(); len(calls) == 0 || calls[len(calls)-1] != tt.wantCall {
				t.Fatalf("got calls %q; want the last to be %q", calls, tt.wantCall)
			}
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}

	t.Run("an unreachable region is reported, the others listed", func(t *testing.T) {
		e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/regions", `{"name":"ap","endpoint":"`+deadEndpoint(t)+`"}`))
		poll(t, "ap known to the pool", func() error {
			nodes := decodeAs[NodeList](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/nodes", nil, op)))
			if !slices.Equal(nodes.Unreachable, []string{"ap"}) || len(nodes.Items) != 2 {
				return errors.New("got unreachable " + strings.Join(nodes.Unreachable, ",") + "; want ap, with eu's 2 nodes")
			}
			return nil
		})
	})

	t.Run("a region that hangs is cut off by the per-region timeout", func(t *testing.T) {
		slow := newFakeRegion("slow", "n9")
		slow.hang = true
		e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/regions", `{"name":"slow","endpoint":"`+slow.serve(t, e.pki)+`"}`))
		poll(t, "slow known to the pool", func() error {
			start := time.Now()
			nodes := decodeAs[NodeList](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/nodes", nil, op)))
			if took := time.Since(start); took > 3*time.Second {
				t.Fatalf("took %s; want about the 1s region timeout", took)
			}
			if !slices.Equal(nodes.Unreachable, []string{"ap", "slow"}) || len(nodes.Items) != 2 {
				return errors.New("got unreachable " + strings.Join(nodes.Unreachable, ",") + "; want ap,slow with eu's 2 nodes")
			}
			return nil
		})
		e.must(t, http.StatusOK, e.do(t, "DELETE", "/v1/regions/slow", nil))
	})

	t.Run("replicas come from the regions of the resource", func(t *testing.T) {
		created := decodeAs[api.Resource](t, e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("web", func(m map[string]any) {
			m["schedule"] = map[string]any{"regions": []any{map[string]any{"name": "eu"}, map[string]any{"name": "us"}}}
		}))))
		replica := func(id, region string) api.Replica {
			return api.Replica{Assignment: api.Assignment{ID: id, Tenant: DefaultTenant, Resource: "web", ResourceUID: created.UID}, Region: region, Phase: api.PhaseReady}
		}
		eu.mu.Lock()
		eu.replicas = []api.Replica{replica("web-b", "eu"), replica("web-a", "eu")}
		eu.mu.Unlock()
		us.mu.Lock()
		stale := replica("web-old", "us")
		stale.ResourceUID = "a-deleted-namesake"
		us.replicas = []api.Replica{replica("web-c", ""), stale}
		us.mu.Unlock()

		reps := decodeAs[ReplicaList](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/web/replicas", nil)))
		var got []string
		for _, r := range reps.Items {
			got = append(got, r.Region+"/"+r.ID)
		}
		if want := []string{"eu/web-a", "eu/web-b", "us/web-c"}; !slices.Equal(got, want) {
			t.Fatalf("got %v; want %v", got, want)
		}
	})

	t.Run("status", func(t *testing.T) {
		st := decodeAs[Status](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/status", nil)))
		var regions []string
		for _, r := range st.Regions {
			regions = append(regions, r.Name)
		}
		if st.ID != "global-1" || st.Leader != "global-2" || !st.LeaderSince.Equal(since) || st.IsLeader || st.Version != "test" ||
			!slices.Equal(regions, []string{"ap", "eu", "us"}) {
			t.Fatalf("got %+v; want this replica global-1, leader global-2 since %s, regions ap eu us", st, since)
		}
	})
}

// electorLeader also answers IsLeader, as election.Elector does.
type electorLeader struct {
	fixedLeader
	leading bool
}

func (e electorLeader) IsLeader() bool { return e.leading }

func TestStatusLeader(t *testing.T) {
	e := newEnv(t, envConfig{})
	tests := []struct {
		name       string
		leader     LeaderSource
		wantLeader string
		wantIs     bool
	}{
		{"no elector", nil, "", false},
		{"no leader elected", fixedLeader{err: election.ErrNoLeader}, "", false},
		{"leader unreadable", fixedLeader{err: errors.New("etcd down")}, "", false},
		{"this replica by id", fixedLeader{info: election.LeaderInfo{ID: "me"}}, "me", true},
		{"another replica", fixedLeader{info: election.LeaderInfo{ID: "other"}}, "other", false},
		{"the elector knows better", electorLeader{fixedLeader{info: election.LeaderInfo{ID: "host-a"}}, true}, "host-a", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, err := New(Options{State: e.st, ID: "me", Leader: tt.leader})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { _ = svc.Run(ctx); close(done) }()
			defer func() { cancel(); <-done }()

			st, err := svc.Status(WithIdentity(ctx, Identity{Tenant: DefaultTenant, Role: api.RoleAdmin}))
			if err != nil {
				t.Fatal(err)
			}
			if st.Leader != tt.wantLeader || st.IsLeader != tt.wantIs || st.ID != "me" {
				t.Fatalf("got leader %q, isLeader %v, id %q; want %q, %v, me", st.Leader, st.IsLeader, st.ID, tt.wantLeader, tt.wantIs)
			}
		})
	}
}
