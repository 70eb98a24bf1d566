package alerts

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/stratahq/strata/global/quota"
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
// RegionService, and their health and the tenants' quotas from the
// global caches.
type RegionSource struct {
	Caches  *state.Caches
	Clients RegionClients
	// NearFull is the fraction of a quota limit at which a tenant's
	// QuotaNearFull fires (default DefaultNearFull).
	NearFull float64
}

// DefaultNearFull is the fraction of a limit that makes a quota near
// full: 90%.
const DefaultNearFull = 0.9

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

// Levels implements Source: Region<Health> for every region whose
// health is known, QuotaNearFull or QuotaOK for every limited tenant,
// and ReserveShort or ReserveHeld for every resource with a reserve the
// master has weighed.
func (s RegionSource) Levels(now time.Time) []Event {
	return slices.Concat(s.health(), s.quotas(now), s.reserves(now))
}

// reserves is ReserveShort for every resource whose schedule.reserve
// does not hold (its status says so), ReserveHeld for those whose does.
func (s RegionSource) reserves(now time.Time) []Event {
	var out []Event
	for _, it := range s.Caches.Resources.List() {
		r := it.Value
		if r.Schedule.Reserve == "" || r.Deleting() {
			continue
		}
		st, ok := s.Caches.Statuses.Get(it.Name)
		if !ok || st.Value.UID != r.UID || st.Value.Reserve == nil {
			continue
		}
		res := st.Value.Reserve
		ev := Event{Type: events.TypeNormal, Reason: "ReserveHeld", Object: "resource/" + it.Name, Tenant: r.Tenant,
			Message: fmt.Sprintf("reserve %s of %s holds: %s", r.Schedule.Reserve, it.Name, res.Message), Time: now,
			ResourceLabels: r.Labels}
		if !res.Holds {
			ev.Type, ev.Reason = events.TypeWarning, "ReserveShort"
			ev.Message = fmt.Sprintf("reserve %s of %s does not hold: %s", r.Schedule.Reserve, it.Name, res.Message)
		}
		out = append(out, ev)
	}
	return out
}

// quotas is QuotaNearFull for every tenant that uses NearFull of a limit
// of its quota or of a region's, QuotaOK for the other limited tenants.
func (s RegionSource) quotas(now time.Time) []Event {
	frac := s.NearFull
	if frac <= 0 {
		frac = DefaultNearFull
	}
	count := quota.Counter{Resources: s.Caches.Resources, Flavors: s.Caches.Flavors}
	var out []Event
	for _, it := range s.Caches.Tenants.List() {
		t := it.Value
		if !t.Limited() {
			continue
		}
		regions := slices.Sorted(maps.Keys(t.RegionQuotas))
		use, in := count.Usage(it.Name, "", regions)
		near := quota.NearFull(t.Quota, use, frac)
		for _, region := range regions {
			if near != "" {
				break
			}
			if n := quota.NearFull(t.RegionQuotas[region], in[region], frac); n != "" {
				near = n + " in region " + region
			}
		}
		ev := Event{Type: events.TypeNormal, Reason: "QuotaOK", Object: "tenant/" + it.Name, Tenant: it.Name,
			Message: "tenant " + it.Name + " is within its quota", Time: now}
		if near != "" {
			ev.Type, ev.Reason = events.TypeWarning, "QuotaNearFull"
			ev.Message = fmt.Sprintf("tenant %s uses %s (%.0f%% or more of a limit)", it.Name, near, frac*100)
		}
		out = append(out, ev)
	}
	return out
}

// health is Region<Health> for every region whose health is known.
func (s RegionSource) health() []Event {
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
