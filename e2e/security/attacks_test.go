package security

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/e2e/framework"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/transport"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	globalv1 "github.com/stratahq/strata/proto/global/v1"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// call is one gRPC call an attacker makes on a connection.
type call struct {
	name string
	do   func(ctx context.Context, cc *grpc.ClientConn) error
}

// The calls of the review's attacks, by listener.
func globalCalls() []call {
	return []call{
		{"FederationService.RegionHeartbeat re-pointing sec-1", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := globalv1.NewFederationServiceClient(cc).RegionHeartbeat(ctx, &globalv1.RegionHeartbeatRequest{
				Region: &resourcev1.Region{Name: "sec-1", Endpoint: "203.0.113.66:9091", ConsoleUrl: "http://203.0.113.66/console"},
			})
			return err
		}},
		{"FederationService.RegionHeartbeat registering rogue", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := globalv1.NewFederationServiceClient(cc).RegionHeartbeat(ctx, &globalv1.RegionHeartbeatRequest{
				Region: &resourcev1.Region{Name: "rogue", Endpoint: "203.0.113.66:9091"},
			})
			return err
		}},
		{"ResourceService.ListResources", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := globalv1.NewResourceServiceClient(cc).ListResources(ctx, &globalv1.ListResourcesRequest{})
			return err
		}},
	}
}

func regionCalls(node string) []call {
	return []call{
		{"AgentService.Register overwriting " + node, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := agentv1.NewAgentServiceClient(cc).Register(ctx, &agentv1.RegisterRequest{Node: &resourcev1.Node{
				Name: node, Zone: "a", Address: "203.0.113.66:9092",
			}})
			return err
		}},
		{"AgentService.Heartbeat for " + node, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := agentv1.NewAgentServiceClient(cc).Heartbeat(ctx, &agentv1.HeartbeatRequest{Node: node})
			return err
		}},
		{"AgentService.WatchAssignments of " + node, func(ctx context.Context, cc *grpc.ClientConn) error {
			s, err := agentv1.NewAgentServiceClient(cc).WatchAssignments(ctx, &agentv1.WatchAssignmentsRequest{Node: node})
			if err == nil {
				_, err = s.Recv()
			}
			return err
		}},
		{"AgentService.ReportStatus for " + node, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := agentv1.NewAgentServiceClient(cc).ReportStatus(ctx, &agentv1.ReportStatusRequest{Node: node})
			return err
		}},
		{"RegionService.ListNodes", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := regionv1.NewRegionServiceClient(cc).ListNodes(ctx, &regionv1.ListNodesRequest{})
			return err
		}},
		{"RegionService.ApplyPlacements", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := regionv1.NewRegionServiceClient(cc).ApplyPlacements(ctx, &regionv1.ApplyPlacementsRequest{})
			return err
		}},
	}
}

func nodeCalls() []call {
	return []call{
		{"NodeService.Status", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := agentv1.NewNodeServiceClient(cc).Status(ctx, &agentv1.NodeStatusRequest{})
			return err
		}},
		{"NodeService.Logs", func(ctx context.Context, cc *grpc.ClientConn) error {
			s, err := agentv1.NewNodeServiceClient(cc).Logs(ctx, &agentv1.NodeLogsRequest{AssignmentId: "any"})
			if err == nil {
				_, err = s.Recv()
			}
			return err
		}},
	}
}

func dial(t *testing.T, addr string, sec *transport.Security, server transport.Server) *grpc.ClientConn {
	t.Helper()
	cc, err := transport.Dial(addr, sec, server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestSecurityAttacks replays the review's attacks on one running cluster.
func TestSecurityAttacks(t *testing.T) {
	c := startCluster(t)
	r1, r2 := c.regions["sec-1"], c.regions["sec-2"]
	before := c.registered(t)
	nodeBefore := c.node(t, "sec-1", r1.node)

	// An anonymous TLS client: it trusts the CA and holds no certificate.
	anon, err := transport.TokenClient(c.pki.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	listeners := []struct {
		name   string
		addr   string
		server pki.Identity
		calls  []call
	}{
		{"global gRPC", c.globalGRPC, pki.Global("g1"), globalCalls()},
		{"region gRPC", r1.grpc, pki.Region("sec-1"), regionCalls(r1.node)},
		{"agent NodeService", r1.nodeAddr, pki.Node("sec-1", r1.node), nodeCalls()},
	}

	t.Run("anonymous gRPC is refused on every service", func(t *testing.T) {
		for _, l := range listeners {
			cc := dial(t, l.addr, anon, transport.ServerIs(l.server))
			for _, cl := range l.calls {
				if err := cl.do(callCtx(t), cc); !errors.Is(err, api.ErrUnauthenticated) {
					t.Errorf("%s, %s without a certificate: got %v; want unauthenticated", l.name, cl.name, err)
				}
			}
		}
	})

	t.Run("plaintext gRPC gets no connection", func(t *testing.T) {
		for _, l := range listeners {
			cc := dial(t, l.addr, transport.Insecure(), transport.AnyServer())
			for _, cl := range l.calls {
				if err := cl.do(callCtx(t), cc); !errors.Is(err, api.ErrUnavailable) {
					t.Errorf("%s, %s in plaintext: got %v; want no connection (unavailable)", l.name, cl.name, err)
				}
			}
		}
	})

	t.Run("a node certificate acts for its own node in its own region only", func(t *testing.T) {
		server := transport.ServerIs(pki.Region("sec-1"))
		otherRegion := dial(t, r1.grpc, c.pki.Security(pki.Node("sec-2", r1.node)), server) // same name, region sec-2
		otherNode := dial(t, r1.grpc, c.pki.Security(pki.Node("sec-1", "sec-1-z")), server)
		for _, cl := range regionCalls(r1.node) {
			for who, cc := range map[string]*grpc.ClientConn{"node:sec-2/" + r1.node: otherRegion, "node:sec-1/sec-1-z": otherNode} {
				if err := cl.do(callCtx(t), cc); !errors.Is(err, api.ErrForbidden) {
					t.Errorf("%s as %s: got %v; want forbidden", cl.name, who, err)
				}
			}
		}
	})

	t.Run("a region certificate serves federation only, for itself", func(t *testing.T) {
		cc := dial(t, c.globalGRPC, c.pki.Security(pki.Region("sec-2")), transport.ServerIs(pki.Global("g1")))
		for _, cl := range globalCalls() {
			err := cl.do(callCtx(t), cc)
			want := api.ErrForbidden // heartbeats for another region
			if strings.HasPrefix(cl.name, "ResourceService") {
				want = api.ErrUnauthenticated // tokens only
			}
			if !errors.Is(err, want) {
				t.Errorf("%s as region:sec-2: got %v; want %v", cl.name, err, want)
			}
		}
	})

	t.Run("an agent answers its own region only", func(t *testing.T) {
		server := transport.ServerIs(pki.Node("sec-1", r1.node))
		for who, want := range map[pki.Identity]error{
			pki.Region("sec-2"):        api.ErrForbidden,
			pki.Global("g1"):           api.ErrForbidden,
			pki.Node("sec-1", "other"): api.ErrForbidden,
		} {
			cc := dial(t, r1.nodeAddr, c.pki.Security(who), server)
			for _, cl := range nodeCalls() {
				if err := cl.do(callCtx(t), cc); !errors.Is(err, want) {
					t.Errorf("%s as %s: got %v; want %v", cl.name, who, err, want)
				}
			}
		}
		own := dial(t, r1.nodeAddr, c.pki.Security(pki.Region("sec-1")), server)
		if err := nodeCalls()[0].do(callCtx(t), own); err != nil {
			t.Errorf("NodeService.Status as region:sec-1: got %v; want an answer", err)
		}
	})

	t.Run("nothing the refused calls asked for happened", func(t *testing.T) {
		after := c.registered(t)
		if _, ok := after["rogue"]; ok {
			t.Error("got region rogue registered; want none")
		}
		for name, r := range before {
			if a := after[name]; a.Endpoint != r.Endpoint || a.ConsoleURL != r.ConsoleURL {
				t.Errorf("region %s: got endpoint %s, console %s; want %s, %s", name, a.Endpoint, a.ConsoleURL, r.Endpoint, r.ConsoleURL)
			}
		}
		if n := c.node(t, "sec-1", r1.node); n.Address != nodeBefore.Address || n.Address != r1.nodeAddr {
			t.Errorf("node %s: got address %s; want %s", r1.node, n.Address, r1.nodeAddr)
		}
	})

	t.Run("the region REST API needs its token", func(t *testing.T) {
		anonREST := framework.NewClient("http://"+r1.http, "")
		for _, path := range []string{"/v1/nodes", "/v1/resources", "/v1/replicas?node=" + r1.node, "/v1/events", "/v1/status"} {
			resp, err := anonREST.Do(callCtx(t), http.MethodGet, path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != http.StatusUnauthorized {
				t.Errorf("GET %s without a token: got %d %s; want 401", path, resp.Status, resp.Body)
			}
		}
		if code, err := c.regionREST("sec-1").Get("/v1/nodes", nil); err != nil || code != 200 {
			t.Errorf("GET /v1/nodes with the token: got %d %v; want 200", code, err)
		}
	})

	t.Run("a cross-site request is refused", func(t *testing.T) {
		for _, target := range []struct{ base, path string }{
			{"http://" + r1.http, "/v1/nodes/" + r1.node + "/cordon"},
			{"http://" + r1.http, "/v1/nodes/" + r1.node + "/drain"},
			{"http://" + c.globalHTTP, "/v1/regions/sec-1/nodes/" + r1.node + "/cordon"},
		} {
			// What a page on another site can make a browser send
			// without a preflight: a text/plain POST with its Origin.
			req, err := http.NewRequestWithContext(callCtx(t), http.MethodPost, target.base+target.path, strings.NewReader(`{"reason":"csrf"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "text/plain")
			req.Header.Set("Origin", "http://evil.example")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("cross-site POST %s: got %d %s; want 403", target.path, resp.StatusCode, body)
			}
		}
		if n := c.node(t, "sec-1", r1.node); !n.Schedulable {
			t.Errorf("node %s: got cordoned (%s); want schedulable", r1.node, n.CordonReason)
		}
	})

	t.Run("a request naming another host is refused", func(t *testing.T) {
		for _, base := range []string{"http://" + r1.http, "http://" + c.globalHTTP} {
			req, err := http.NewRequestWithContext(callCtx(t), http.MethodGet, base+"/v1/status", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = "rebind.evil.example"
			req.Header.Set("Authorization", "Bearer "+framework.RegionToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s with Host rebind.evil.example: got %d; want 403", base, resp.StatusCode)
			}
		}
	})

	t.Run("a trickling body is cut", func(t *testing.T) {
		for _, target := range []struct{ addr, path, token string }{
			{r1.http, "/v1/nodes/" + r1.node + "/cordon", framework.RegionToken},
			{c.globalHTTP, "/v1/flavors", c.token},
		} {
			addr := target.addr
			took, err := trickle(addr, target.path, target.token, 30*time.Second)
			if err != nil {
				t.Errorf("%s: %v", addr, err)
				continue
			}
			if took < readTimeout {
				t.Errorf("%s: cut after %s; want no earlier than api.readTimeout %s", addr, took, readTimeout)
			}
			t.Logf("%s: a trickling body was cut after %s (api.readTimeout %s)", addr, took.Round(time.Millisecond), readTimeout)
		}
	})
	t.Run("strings a node would choke on are refused at the API", func(t *testing.T) {
		lb := func(path string) map[string]any {
			return map[string]any{"name": "lb-inject", "kind": "Loadbalancer", "spec": map[string]any{"loadbalancer": map[string]any{
				"listeners": []map[string]any{{"port": 30080, "protocol": "http"}}, "selector": map[string]string{"app": "web"},
				"healthCheck": map[string]any{"type": "http", "path": path},
			}}}
		}
		image := func(field, value string) map[string]any {
			spec := map[string]any{field: value}
			if field == "archive" {
				spec["ref"] = "docker.io/library/busybox:latest"
			}
			return map[string]any{"name": "img-attack", "kind": "Image", "spec": map[string]any{"image": spec}}
		}
		for _, tt := range []struct {
			name  string
			body  map[string]any
			field string
		}{
			// An HAProxy directive smuggled into the configuration.
			{"health check path with a newline", lb("/ok\n    stats socket /tmp/x level admin"), "spec.loadbalancer.healthCheck.path"},
			{"health check path with a space", lb("/ok HTTP/1.0"), "spec.loadbalancer.healthCheck.path"},
			{"archive with ..", image("archive", "/var/lib/strata/images/../../../etc/shadow"), "spec.image.archive"},
			{"relative archive with ..", image("archive", "../../x"), "spec.image.archive"},
			{"archive file URL of a relative name", image("archive", "file://etc/shadow"), "spec.image.archive"},
			{"archive URL with credentials", image("archive", "https://user:secret@images.example.com/a.tar"), "spec.image.archive"},
			{"kernel with ..", image("kernel", "/srv/vm/../../etc/shadow"), "spec.image.kernel"},
			{"relative disk with ..", image("disk", "../disk.qcow2"), "spec.image.disk"},
		} {
			resp, err := c.global().Do(callCtx(t), http.MethodPost, "/v1/resources", tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != http.StatusBadRequest || !strings.Contains(string(resp.Body), tt.field) {
				t.Errorf("%s: got %d %s; want 400 naming %s", tt.name, resp.Status, resp.Body, tt.field)
			}
			if strings.Contains(string(resp.Body), "secret") {
				t.Errorf("%s: the answer repeats the credentials: %s", tt.name, resp.Body)
			}
		}
	})
	t.Run("tenants", func(t *testing.T) { tenantAttacks(t, c) })
	if r2.node == "" {
		t.Fatal("region sec-2 has no node")
	}
}

// trickle sends an authenticated request whose body comes a byte every
// 100 ms to a handler that reads its body, and returns how long the
// server kept reading it; an error if it still did after limit.
func trickle(addr, path, token string, limit time.Duration) (time.Duration, error) {
	// Before the connection: the server's clock cannot start earlier.
	start := time.Now()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n", path, addr, token)
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, conn)
		close(closed)
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-closed:
			return time.Since(start), nil
		case <-tick.C:
			if time.Since(start) > limit {
				return 0, fmt.Errorf("still reading a trickling body after %s", limit)
			}
			if _, err := conn.Write([]byte(" ")); err != nil {
				select {
				case <-closed:
				case <-time.After(5 * time.Second):
				}
				return time.Since(start), nil
			}
		}
	}
}
