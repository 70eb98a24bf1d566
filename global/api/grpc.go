package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/internal/transport"
	"github.com/stratahq/strata/proto/apiproto"
	globalv1 "github.com/stratahq/strata/proto/global/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// RegisterGRPC serves ResourceService and FederationService on srv, which
// should come from transport.NewServer: its interceptor converts the
// services' errors to gRPC statuses.
func (s *Server) RegisterGRPC(srv *grpc.Server) {
	globalv1.RegisterResourceServiceServer(srv, &resourceServer{s: s})
	globalv1.RegisterFederationServiceServer(srv, &federationServer{regions: s.regions, s: s})
}

// GRPCPolicy says who may call the global tier's gRPC services:
// FederationService is the regions' (region:*, each speaking for itself
// only, checked per call); ResourceService is the tenants', who
// authenticate with bearer tokens like REST callers: a tier certificate
// (region, node or global) grants nothing there.
func (s *Server) GRPCPolicy() transport.Policy {
	return transport.Policy{
		globalv1.FederationService_ServiceDesc.ServiceName: {Kinds: []pki.Kind{pki.KindRegion}},
		globalv1.ResourceService_ServiceDesc.ServiceName:   {Token: s.tokens.authenticate, Audit: s.auditOrNil()},
	}
}

// resourceServer is ResourceService over the services. gRPC has no field
// presence for replicas: 0 there means "not given" (the kind's default on
// create, unchanged on update); ScaleResource sets 0.
type resourceServer struct {
	globalv1.UnimplementedResourceServiceServer
	s *Server
}

func (g *resourceServer) CreateFlavor(ctx context.Context, req *globalv1.CreateFlavorRequest) (*resourcev1.Flavor, error) {
	f, err := g.s.flavors.Create(ctx, apiproto.FlavorFromPB(req.GetFlavor()))
	if err != nil {
		return nil, err
	}
	return apiproto.FlavorToPB(&f), nil
}

func (g *resourceServer) GetFlavor(ctx context.Context, req *globalv1.GetFlavorRequest) (*resourcev1.Flavor, error) {
	f, err := g.s.flavors.Get(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return apiproto.FlavorToPB(&f), nil
}

func (g *resourceServer) ListFlavors(ctx context.Context, _ *globalv1.ListFlavorsRequest) (*globalv1.ListFlavorsResponse, error) {
	items, err := g.s.flavors.List(ctx)
	if err != nil {
		return nil, err
	}
	resp := &globalv1.ListFlavorsResponse{}
	for i := range items {
		resp.Items = append(resp.Items, apiproto.FlavorToPB(&items[i]))
	}
	return resp, nil
}

func (g *resourceServer) UpdateFlavor(ctx context.Context, req *globalv1.UpdateFlavorRequest) (*resourcev1.Flavor, error) {
	f, err := g.s.flavors.Update(ctx, apiproto.FlavorFromPB(req.GetFlavor()))
	if err != nil {
		return nil, err
	}
	return apiproto.FlavorToPB(&f), nil
}

func (g *resourceServer) DeleteFlavor(ctx context.Context, req *globalv1.DeleteFlavorRequest) (*globalv1.DeleteFlavorResponse, error) {
	if _, err := g.s.flavors.Delete(ctx, req.GetName(), 0); err != nil {
		return nil, err
	}
	return &globalv1.DeleteFlavorResponse{}, nil
}

func (g *resourceServer) CreateResource(ctx context.Context, req *globalv1.CreateResourceRequest) (*resourcev1.Resource, error) {
	r := apiproto.ResourceFromPB(req.GetResource())
	o := WriteOptions{IdempotencyKey: req.GetRequestId(), ReplicasUnset: r.Replicas == 0}
	out, err := g.s.resources.Create(ctx, "", r, o)
	if err != nil {
		return nil, err
	}
	return apiproto.ResourceToPB(&out), nil
}

func (g *resourceServer) GetResource(ctx context.Context, req *globalv1.ResourceRef) (*resourcev1.Resource, error) {
	out, err := g.s.resources.Get(ctx, req.GetTenant(), req.GetName())
	if err != nil {
		return nil, err
	}
	return apiproto.ResourceToPB(&out), nil
}

func (g *resourceServer) ListResources(ctx context.Context, req *globalv1.ListResourcesRequest) (*globalv1.ListResourcesResponse, error) {
	page, err := g.s.resources.List(ctx, req.GetTenant(), ListQuery{
		Selector: req.GetSelector(), Kind: req.GetKind(), Limit: int(req.GetLimit()), Continue: req.GetContinue(),
	})
	if err != nil {
		return nil, err
	}
	resp := &globalv1.ListResourcesResponse{Continue: page.Continue}
	for i := range page.Items {
		resp.Items = append(resp.Items, apiproto.ResourceToPB(&page.Items[i]))
	}
	return resp, nil
}

func (g *resourceServer) UpdateResource(ctx context.Context, req *globalv1.UpdateResourceRequest) (*resourcev1.Resource, error) {
	r := apiproto.ResourceFromPB(req.GetResource())
	o := WriteOptions{IdempotencyKey: req.GetRequestId(), ReplicasUnset: r.Replicas == 0}
	out, err := g.s.resources.Update(ctx, "", r, o)
	if err != nil {
		return nil, err
	}
	return apiproto.ResourceToPB(&out), nil
}

func (g *resourceServer) DeleteResource(ctx context.Context, req *globalv1.ResourceRef) (*resourcev1.Resource, error) {
	out, err := g.s.resources.Delete(ctx, req.GetTenant(), req.GetName(), 0)
	if err != nil {
		return nil, err
	}
	return apiproto.ResourceToPB(&out), nil
}

func (g *resourceServer) ScaleResource(ctx context.Context, req *globalv1.ScaleResourceRequest) (*resourcev1.Resource, error) {
	out, err := g.s.resources.Scale(ctx, req.GetTenant(), req.GetName(), int(req.GetReplicas()))
	if err != nil {
		return nil, err
	}
	return apiproto.ResourceToPB(&out), nil
}

func (g *resourceServer) RollbackResource(ctx context.Context, req *globalv1.RollbackResourceRequest) (*resourcev1.Resource, error) {
	out, err := g.s.resources.Rollback(ctx, req.GetTenant(), req.GetName(), req.GetToRevision())
	if err != nil {
		return nil, err
	}
	return apiproto.ResourceToPB(&out), nil
}

func (g *resourceServer) ListRevisions(ctx context.Context, req *globalv1.ResourceRef) (*globalv1.ListRevisionsResponse, error) {
	revs, err := g.s.resources.Revisions(ctx, req.GetTenant(), req.GetName())
	if err != nil {
		return nil, err
	}
	resp := &globalv1.ListRevisionsResponse{}
	for i := range revs {
		resp.Items = append(resp.Items, apiproto.RevisionToPB(&revs[i]))
	}
	return resp, nil
}

// ListReplicas has no field for unreachable regions; Replicas logs them.
func (g *resourceServer) ListReplicas(ctx context.Context, req *globalv1.ResourceRef) (*globalv1.ListReplicasResponse, error) {
	reps, err := g.s.replicas.List(ctx, req.GetTenant(), req.GetName())
	if err != nil {
		return nil, err
	}
	resp := &globalv1.ListReplicasResponse{}
	for i := range reps.Items {
		resp.Items = append(resp.Items, apiproto.ReplicaToPB(&reps.Items[i]))
	}
	return resp, nil
}

func (g *resourceServer) RegisterRegion(ctx context.Context, req *globalv1.RegisterRegionRequest) (*resourcev1.Region, error) {
	r, _, err := g.s.regions.Register(ctx, apiproto.RegionFromPB(req.GetRegion()))
	if err != nil {
		return nil, err
	}
	return apiproto.RegionToPB(&r), nil
}

func (g *resourceServer) GetRegion(ctx context.Context, req *globalv1.RegionRef) (*resourcev1.Region, error) {
	r, err := g.s.regions.Get(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return apiproto.RegionToPB(&r), nil
}

func (g *resourceServer) ListRegions(ctx context.Context, _ *globalv1.ListRegionsRequest) (*globalv1.ListRegionsResponse, error) {
	regions, err := g.s.regions.List(ctx)
	if err != nil {
		return nil, err
	}
	return &globalv1.ListRegionsResponse{Items: regionsToPB(regions)}, nil
}

func (g *resourceServer) DeleteRegion(ctx context.Context, req *globalv1.RegionRef) (*globalv1.DeleteRegionResponse, error) {
	if _, err := g.s.regions.Delete(ctx, req.GetName()); err != nil {
		return nil, err
	}
	return &globalv1.DeleteRegionResponse{}, nil
}

func (g *resourceServer) ListNodes(ctx context.Context, req *globalv1.ListNodesRequest) (*globalv1.ListNodesResponse, error) {
	nodes, err := g.s.nodes.List(ctx, req.GetRegion(), req.GetSelector())
	if err != nil {
		return nil, err
	}
	resp := &globalv1.ListNodesResponse{Unreachable: nodes.Unreachable}
	for i := range nodes.Items {
		resp.Items = append(resp.Items, apiproto.NodeToPB(&nodes.Items[i]))
	}
	return resp, nil
}

func (g *resourceServer) GetNode(ctx context.Context, req *globalv1.NodeRef) (*resourcev1.Node, error) {
	n, err := g.s.nodes.Get(ctx, req.GetRegion(), req.GetName())
	if err != nil {
		return nil, err
	}
	return apiproto.NodeToPB(&n), nil
}

func (g *resourceServer) DeleteNode(ctx context.Context, req *globalv1.NodeRef) (*globalv1.DeleteNodeResponse, error) {
	if err := g.s.nodes.Delete(ctx, req.GetRegion(), req.GetName()); err != nil {
		return nil, err
	}
	return &globalv1.DeleteNodeResponse{}, nil
}

func (g *resourceServer) CordonNode(ctx context.Context, req *globalv1.CordonNodeRequest) (*resourcev1.Node, error) {
	n, err := g.s.nodes.Cordon(ctx, req.GetRegion(), req.GetName(), req.GetReason())
	if err != nil {
		return nil, err
	}
	return apiproto.NodeToPB(&n), nil
}

func (g *resourceServer) UncordonNode(ctx context.Context, req *globalv1.NodeRef) (*resourcev1.Node, error) {
	n, err := g.s.nodes.Uncordon(ctx, req.GetRegion(), req.GetName())
	if err != nil {
		return nil, err
	}
	return apiproto.NodeToPB(&n), nil
}

func (g *resourceServer) DrainNode(ctx context.Context, req *globalv1.DrainNodeRequest) (*resourcev1.DrainStatus, error) {
	d, err := g.s.nodes.Drain(ctx, req.GetRegion(), req.GetName(), apiproto.DrainRequestFromPB(req.GetDrain()))
	if err != nil {
		return nil, err
	}
	return apiproto.DrainStatusToPB(&d), nil
}

func (g *resourceServer) GetDrain(ctx context.Context, req *globalv1.NodeRef) (*resourcev1.DrainStatus, error) {
	d, err := g.s.nodes.GetDrain(ctx, req.GetRegion(), req.GetName())
	if err != nil {
		return nil, err
	}
	return apiproto.DrainStatusToPB(&d), nil
}

func (g *resourceServer) GetStatus(ctx context.Context, _ *globalv1.GetStatusRequest) (*globalv1.GlobalStatus, error) {
	st, err := g.s.Status(ctx)
	if err != nil {
		return nil, err
	}
	resp := &globalv1.GlobalStatus{
		Id: st.ID, Leader: st.Leader, IsLeader: st.IsLeader, Version: st.Version, Regions: regionsToPB(st.Regions),
	}
	if !st.LeaderSince.IsZero() {
		resp.LeaderSince = timestamppb.New(st.LeaderSince)
	}
	return resp, nil
}

func regionsToPB(regions []api.Region) []*resourcev1.Region {
	out := make([]*resourcev1.Region, len(regions))
	for i := range regions {
		out[i] = apiproto.RegionToPB(&regions[i])
	}
	return out
}

// federationServer is FederationService: regions report in.
type federationServer struct {
	globalv1.UnimplementedFederationServiceServer
	regions *Regions
	s       *Server
}

// RegionHeartbeat lets a region speak only for itself: the caller must
// be region:<name> of the region it registers.
func (f *federationServer) RegionHeartbeat(ctx context.Context, req *globalv1.RegionHeartbeatRequest) (*globalv1.RegionHeartbeatResponse, error) {
	r := apiproto.RegionFromPB(req.GetRegion())
	if err := transport.AuthorizeRegion(ctx, r.Name); err != nil {
		return nil, err
	}
	var st *api.RegionStatus
	if req.GetStatus() != nil {
		s := apiproto.RegionStatusFromPB(req.GetStatus())
		st = &s
	}
	every, err := f.regions.Heartbeat(ctx, r, req.GetSeq(), st)
	if err != nil {
		return nil, err
	}
	resp := &globalv1.RegionHeartbeatResponse{IntervalMs: every.Milliseconds()}
	if version, flavors := flavorCatalog(f.s.caches.Flavors); version != req.GetFlavorsVersion() {
		resp.FlavorsVersion = version
		for i := range flavors {
			resp.Flavors = append(resp.Flavors, apiproto.FlavorToPB(&flavors[i]))
		}
	}
	return resp, nil
}

// flavorCatalog is the flavor catalog for the regions' headroom, with a
// version that changes with any flavor's creation, change or deletion
// (a digest of the names and revisions), so that a region is sent the
// catalog only when it differs from the one it has.
func flavorCatalog(c *store.Cache[api.Flavor]) (version string, flavors []api.Flavor) {
	h := sha256.New()
	for _, it := range c.List() {
		fmt.Fprintf(h, "%s@%d\n", it.Name, it.ModRevision)
		fl := *it.Value
		fl.Name = it.Name
		flavors = append(flavors, fl)
	}
	return hex.EncodeToString(h.Sum(nil)[:12]), flavors
}
