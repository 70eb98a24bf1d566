package alerts

import (
	"context"
	"time"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
)

// RegionClients gives a region's RegionService client.
type RegionClients interface {
	Client(ctx context.Context, region string) (regionv1.RegionServiceClient, error)
}

// readTimeout bounds one read of a region's stream: a region that does
// not answer is skipped for this pass, not waited on.
const readTimeout = 5 * time.Second

// RegionSource reads the regions' event streams over their
// RegionService, and their health from the global caches.
type RegionSource struct {
	Caches  *state.Caches
	Clients RegionClients
}

var _ Source = RegionSource{}

// Regions implements Source.
func (s RegionSource) Regions() []string {
	items := s.Caches.Regions.List()
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Name
	}
	return out
}

// Read implements Source.
func (s RegionSource) Read(ctx context.Context, region, after string, limit int) ([]Event, error) {
	c, err := s.Clients.Client(ctx, region)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	resp, err := c.ListEvents(ctx, &regionv1.ListEventsRequest{After: after, Limit: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(resp.GetItems()))
	for i, p := range resp.GetItems() {
		out[i] = Event{
			ID: p.GetId(), Type: p.GetType(), Reason: p.GetReason(), Object: p.GetObject(), Region: p.GetRegion(),
			Tenant: p.GetTenant(), Message: p.GetMessage(), Time: p.GetTime().AsTime(), Fields: p.GetFields(),
		}
		if out[i].Region == "" {
			out[i].Region = region
		}
		out[i].ResourceLabels = s.resourceLabels(&out[i])
	}
	return out, nil
}

// resourceLabels are the labels of the resource ev is about, from the
// global cache (nil for none, or one deleted since).
func (s RegionSource) resourceLabels(ev *Event) map[string]string {
	key := ResourceOf(ev)
	if key == "" {
		return nil
	}
	it, ok := s.Caches.Resources.Get(key)
	if !ok {
		return nil
	}
	return it.Value.Labels
}

// Health implements Source: Region<Health> for every region whose
// health is known.
func (s RegionSource) Health() []Event {
	var out []Event
	for _, it := range s.Caches.RegionStatus.List() {
		st := it.Value
		if st.Health == api.HealthUnknown || st.Health == "" {
			continue
		}
		msg := "region " + it.Name + " is " + string(st.Health)
		if st.Reason != "" {
			msg += ": " + st.Reason
		}
		typ := events.TypeWarning
		if st.Health == api.HealthUp {
			typ = events.TypeNormal
		}
		out = append(out, Event{
			Type: typ, Reason: "Region" + string(st.Health), Object: "region/" + it.Name, Region: it.Name,
			Message: msg, Time: st.Since,
		})
	}
	return out
}
