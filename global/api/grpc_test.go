package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/rest"
	"github.com/stratahq/strata/internal/transport"
	"github.com/stratahq/strata/internal/transport/transporttest"
	"github.com/stratahq/strata/proto/apiproto"
	globalv1 "github.com/stratahq/strata/proto/global/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// serveGRPC serves the env's Service over gRPC, mutual TLS with the
// certificate of global:global-1, and returns the address.
func (e *testEnv) serveGRPC(t *testing.T) string {
	t.Helper()
	return transporttest.Serve(t, e.pki.Security(t, pki.Global("global-1")), e.svc.GRPCPolicy(), nil, e.svc.RegisterGRPC)
}

// dialAs connects to addr as id (a tier certificate of the env's CA).
func (e *testEnv) dialAs(t *testing.T, addr string, id pki.Identity) *grpc.ClientConn {
	t.Helper()
	return transporttest.Dial(t, addr, e.pki.Security(t, id), transport.ServerIs(pki.Global("global-1")))
}

// dialTenant connects to addr as a tenant's program: it trusts the CA
// and holds no certificate (its bearer token is its identity).
func (e *testEnv) dialTenant(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	sec, err := transport.TokenClient(e.pki.TLS(t, pki.Global("global-1")).CA)
	if err != nil {
		t.Fatal(err)
	}
	return transporttest.Dial(t, addr, sec, transport.ServerIs(pki.Global("global-1")))
}

func bearer(ctx context.Context, tok string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

// TestGRPCParity checks that ResourceService answers what REST answers.
func TestGRPCParity(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	client := globalv1.NewResourceServiceClient(e.dialTenant(t, e.serveGRPC(t)))
	ctx := bearer(waitFor(t), e.admin)

	res := &resourcev1.Resource{
		Name: "grpc-app", Kind: "Compute", Labels: map[string]string{"via": "grpc"},
		Spec: &resourcev1.ResourceSpec{Flavor: "small", Compute: &resourcev1.ComputeSpec{Image: "busybox:latest"}},
	}
	created, err := client.CreateResource(ctx, &globalv1.CreateResourceRequest{Resource: res, RequestId: "g-1"})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("create", func(t *testing.T) {
		if created.GetReplicas() != 1 || created.GetGeneration() != 1 || created.GetStatus().GetPhase() != "created" || created.GetUid() == "" {
			t.Fatalf("got %v; want 1 replica (the default), generation 1, phase created", created)
		}
		again, err := client.CreateResource(ctx, &globalv1.CreateResourceRequest{Resource: res, RequestId: "g-1"})
		if err != nil || again.GetUid() != created.GetUid() {
			t.Fatalf("got %v, %v; want the same resource for a retried request_id", again, err)
		}
	})
	t.Run("get matches REST", func(t *testing.T) {
		got, err := client.GetResource(ctx, &globalv1.ResourceRef{Name: "grpc-app"})
		if err != nil {
			t.Fatal(err)
		}
		viaREST := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/grpc-app", nil)))
		if viaGRPC := apiproto.ResourceFromPB(got); !api.SameJSON(viaGRPC, viaREST) {
			t.Fatalf("got over gRPC %+v; want what REST says, %+v", viaGRPC, viaREST)
		}
	})
	t.Run("list matches REST", func(t *testing.T) {
		e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("rest-app")))
		got, err := client.ListResources(ctx, &globalv1.ListResourcesRequest{Selector: "via=grpc", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.GetItems()) != 1 || got.GetItems()[0].GetName() != "grpc-app" || got.GetContinue() != "" {
			t.Fatalf("got %v; want grpc-app only", got)
		}
		all, err := client.ListResources(ctx, &globalv1.ListResourcesRequest{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		viaREST := decodeAs[ResourceList](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources?limit=1", nil)))
		if all.GetContinue() != viaREST.Continue || all.GetItems()[0].GetName() != viaREST.Items[0].Name {
			t.Fatalf("got page %v; want REST's first page %+v", all, viaREST)
		}
	})
	t.Run("delete", func(t *testing.T) {
		got, err := client.DeleteResource(ctx, &globalv1.ResourceRef{Name: "grpc-app"})
		if err != nil {
			t.Fatal(err)
		}
		viaREST := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/grpc-app", nil)))
		if got.GetDeletionRequestedAt() == nil || viaREST.DeletionRequestedAt == nil || got.GetGeneration() != viaREST.Generation {
			t.Fatalf("got %v; want deletion requested, as REST shows: %+v", got, viaREST)
		}
	})

	errs := []struct {
		name      string
		call      func() error
		want      error
		wantField string
	}{
		{"unknown resource", func() error {
			_, err := client.GetResource(ctx, &globalv1.ResourceRef{Name: "nope"})
			return err
		}, api.ErrNotFound, ""},
		{"invalid resource keeps its field", func() error {
			_, err := client.CreateResource(ctx, &globalv1.CreateResourceRequest{Resource: &resourcev1.Resource{Name: "x", Kind: "Compute"}})
			return err
		}, api.ErrInvalid, "spec.compute"},
		{"no token", func() error {
			_, err := client.ListFlavors(t.Context(), &globalv1.ListFlavorsRequest{})
			return err
		}, api.ErrUnauthenticated, ""},
		{"viewer writes", func() error {
			_, err := client.CreateResource(bearer(t.Context(), e.token(t, DefaultTenant, api.RoleViewer)), &globalv1.CreateResourceRequest{Resource: res})
			return err
		}, api.ErrForbidden, ""},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v; want %v", err, tt.want)
			}
			var fe *api.FieldError
			if tt.wantField != "" && (!errors.As(err, &fe) || fe.Field != tt.wantField) {
				t.Fatalf("got %v; want a field error on %s", err, tt.wantField)
			}
		})
	}
}

func TestRegionHeartbeat(t *testing.T) {
	e := newEnv(t, envConfig{})
	fed := globalv1.NewFederationServiceClient(e.dialAs(t, e.serveGRPC(t), pki.Region("eu")))
	ctx := waitFor(t)
	beat := func(t *testing.T, seq uint64, endpoint string) {
		t.Helper()
		resp, err := fed.RegionHeartbeat(ctx, &globalv1.RegionHeartbeatRequest{
			Region: &resourcev1.Region{Name: "eu", Endpoint: endpoint, ConsoleUrl: "http://eu.example:8080", Zones: []string{"a", "b"}},
			Seq:    seq,
			Status: &resourcev1.RegionStatus{Nodes: 3, NodesUp: 2, Leader: "eu-r2"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetIntervalMs() != config.DefaultRegionsLiveness().HeartbeatInterval.Milliseconds() {
			t.Fatalf("got interval %dms; want %dms", resp.GetIntervalMs(), config.DefaultRegionsLiveness().HeartbeatInterval.Milliseconds())
		}
	}
	etcdRev := func(t *testing.T) int64 {
		t.Helper()
		resp, err := e.st.Store.Client().Get(ctx, "probe")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}

	beat(t, 1, "10.0.0.1:9091")
	reg, err := e.st.Regions.Get(ctx, "eu")
	if err != nil {
		t.Fatalf("got %v; want eu registered by its first heartbeat", err)
	}
	if reg.Value.ConsoleURL != "http://eu.example:8080" || !slices.Equal(reg.Value.Zones, []string{"a", "b"}) || reg.Value.RegisteredAt.IsZero() {
		t.Fatalf("got %+v; want the heartbeat's console URL and zones", reg.Value)
	}
	// Steady beats must cost no etcd write: wait until the cache has the
	// registration, as a long-running replica's would.
	poll(t, "region cached", func() error {
		if !e.svc.regions.registeredAs(*reg.Value) {
			return errors.New("not cached yet")
		}
		return nil
	})

	t.Run("steady beats write nothing to etcd", func(t *testing.T) {
		before := etcdRev(t)
		beat(t, 2, "10.0.0.1:9091")
		beat(t, 3, "10.0.0.1:9091")
		if after := etcdRev(t); after != before {
			t.Fatalf("got etcd revision %d after beats; want %d (no write)", after, before)
		}
	})
	t.Run("every beat is recorded", func(t *testing.T) {
		beats := e.beats.all()
		var seqs []uint64
		for _, b := range beats {
			if b.ID != "eu" || b.At.IsZero() || b.Metrics["nodes_up"] != 2 {
				t.Fatalf("got beat %+v; want eu's, stamped, with its metrics", b)
			}
			seqs = append(seqs, b.Seq)
		}
		if !slices.Equal(seqs, []uint64{1, 2, 3}) {
			t.Fatalf("got seqs %v; want 1 2 3", seqs)
		}
	})
	t.Run("a new endpoint is written; labels set by an admin stay", func(t *testing.T) {
		e.must(t, http.StatusOK, e.do(t, "POST", "/v1/regions", `{"name":"eu","endpoint":"10.0.0.1:9091","consoleURL":"http://eu.example:8080","zones":["a","b"],"labels":{"tier":"gold"}}`))
		beat(t, 4, "10.0.0.2:9091")
		got := decodeAs[api.Region](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/regions/eu", nil)))
		if got.Endpoint != "10.0.0.2:9091" || got.Labels["tier"] != "gold" {
			t.Fatalf("got %+v; want the new endpoint and the admin's labels", got)
		}
		// The leader comes from the last beat, in GET and in the list.
		if got.Status == nil || got.Status.Leader != "eu-r2" || got.Status.NodesUp != 2 {
			t.Fatalf("got status %+v; want leader eu-r2 and 2 nodes up from the beat", got.Status)
		}
		list := decodeAs[rest.List[api.Region]](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/regions", nil)))
		if len(list.Items) != 1 || list.Items[0].Status == nil || list.Items[0].Status.Leader != "eu-r2" {
			t.Fatalf("got %+v; want eu with leader eu-r2", list.Items)
		}
	})
	t.Run("a restarted region registers again: its first beat refreshes registeredAt", func(t *testing.T) {
		before, err := e.st.Regions.Get(ctx, "eu")
		if err != nil {
			t.Fatal(err)
		}
		beat(t, 5, "10.0.0.2:9091")
		if same, _ := e.st.Regions.Get(ctx, "eu"); !same.Value.RegisteredAt.Equal(before.Value.RegisteredAt) {
			t.Fatalf("steady beat: registeredAt %v; want it kept, %v", same.Value.RegisteredAt, before.Value.RegisteredAt)
		}
		beat(t, 1, "10.0.0.2:9091")
		after, err := e.st.Regions.Get(ctx, "eu")
		if err != nil {
			t.Fatal(err)
		}
		if !after.Value.RegisteredAt.After(before.Value.RegisteredAt) || after.Value.Labels["tier"] != "gold" {
			t.Fatalf("beat 1 of a new process: registeredAt %v, labels %v; want later than %v, labels kept",
				after.Value.RegisteredAt, after.Value.Labels, before.Value.RegisteredAt)
		}
	})
	t.Run("an invalid registration is refused", func(t *testing.T) {
		_, err := fed.RegionHeartbeat(ctx, &globalv1.RegionHeartbeatRequest{Region: &resourcev1.Region{Name: "eu", Endpoint: "no-port"}})
		var fe *api.FieldError
		if !errors.As(err, &fe) || fe.Field != "endpoint" {
			t.Fatalf("got %v; want a field error on endpoint", err)
		}
	})
}

// TestSecurityGlobalPeers checks who may call the global tier's gRPC
// services over mutual TLS: regions may only heartbeat, each for itself;
// tier certificates grant nothing on ResourceService, which takes bearer
// tokens only; and nobody calls anything anonymously.
func TestSecurityGlobalPeers(t *testing.T) {
	e := newEnv(t, envConfig{})
	addr := e.serveGRPC(t)
	eu := e.dialAs(t, addr, pki.Region("eu"))
	node := e.dialAs(t, addr, pki.Node("eu", "n1"))
	peerGlobal := e.dialAs(t, addr, pki.Global("global-2"))
	anonymous := e.dialTenant(t, addr)
	ctx := waitFor(t)

	heartbeat := func(cc *grpc.ClientConn, region string) error {
		_, err := globalv1.NewFederationServiceClient(cc).RegionHeartbeat(ctx, &globalv1.RegionHeartbeatRequest{
			Region: &resourcev1.Region{Name: region, Endpoint: "127.0.0.1:9091"},
		})
		return err
	}
	listResources := func(cc *grpc.ClientConn, ctx context.Context) error {
		_, err := globalv1.NewResourceServiceClient(cc).ListResources(ctx, &globalv1.ListResourcesRequest{})
		return err
	}
	tests := []struct {
		name string
		call func() error
		want error // nil for success
	}{
		{"region beats for itself", func() error { return heartbeat(eu, "eu") }, nil},
		{"region beats for another", func() error { return heartbeat(eu, "rogue") }, api.ErrForbidden},
		{"node beats for a region", func() error { return heartbeat(node, "eu") }, api.ErrForbidden},
		{"global peer beats for a region", func() error { return heartbeat(peerGlobal, "eu") }, api.ErrForbidden},
		{"anonymous beat", func() error { return heartbeat(anonymous, "rogue") }, api.ErrUnauthenticated},
		{"region certificate on ResourceService", func() error { return listResources(eu, ctx) }, api.ErrUnauthenticated},
		{"node certificate on ResourceService", func() error { return listResources(node, ctx) }, api.ErrUnauthenticated},
		{"global certificate on ResourceService", func() error { return listResources(peerGlobal, ctx) }, api.ErrUnauthenticated},
		{"anonymous on ResourceService", func() error { return listResources(anonymous, ctx) }, api.ErrUnauthenticated},
		{"bad token on ResourceService", func() error { return listResources(anonymous, bearer(ctx, "strata_00000000_nope")) }, api.ErrUnauthenticated},
		{"token on ResourceService", func() error { return listResources(anonymous, bearer(ctx, e.admin)) }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if (tt.want == nil && err != nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("got %v; want %v", err, tt.want)
			}
		})
	}
	for _, name := range []string{"rogue"} {
		if _, err := e.st.Regions.Get(ctx, name); err == nil {
			t.Fatalf("got region %s registered by a refused heartbeat; want none", name)
		}
	}
}
