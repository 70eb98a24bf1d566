package api

import (
	"context"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/transport"
	globalv1 "github.com/stratahq/strata/proto/global/v1"
)

// GetConfigData gives a region the data of the Configs and Secrets a
// resource it runs names; the caller must be region:<name> of the region
// it names.
func (f *federationServer) GetConfigData(ctx context.Context, req *globalv1.GetConfigDataRequest) (*globalv1.GetConfigDataResponse, error) {
	if err := transport.AuthorizeRegion(ctx, req.GetRegion()); err != nil {
		return nil, err
	}
	refs := make([]api.ConfigRef, 0, len(req.GetRefs()))
	for _, r := range req.GetRefs() {
		switch r.GetKind() {
		case "config":
			refs = append(refs, api.ConfigRef{Config: r.GetName()})
		case "secret":
			refs = append(refs, api.ConfigRef{Secret: r.GetName()})
		default:
			return nil, api.Invalid("refs", "kind %q is not config or secret", r.GetKind())
		}
	}
	items, err := f.s.ConfigData(ctx, req.GetRegion(), req.GetTenant(), req.GetResource(), refs)
	if err != nil {
		return nil, err
	}
	out := &globalv1.GetConfigDataResponse{Items: make([]*globalv1.ConfigData, len(items))}
	for i, it := range items {
		out.Items[i] = &globalv1.ConfigData{Kind: it.Ref.Kind(), Name: it.Ref.Name(), Data: it.Data, Type: string(it.Type)}
	}
	return out, nil
}
