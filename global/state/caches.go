package state

import (
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// Caches are the in-memory copies of the global collections, shared by
// the API and the master controller of one process.
type Caches struct {
	// CacheSet runs them, waits for them and checks them together.
	store.CacheSet

	Flavors      *store.Cache[api.Flavor]
	Resources    *store.Cache[api.Resource]
	Statuses     *store.Cache[api.ResourceStatus]
	Regions      *store.Cache[api.Region]
	RegionStatus *store.Cache[api.RegionStatus]
	Tokens       *store.Cache[api.Token]
	Tenants      *store.Cache[api.Tenant]
	Admissions   *store.Cache[Admission]
	Policies     *store.Cache[api.NetworkPolicy]

	ResourceFeed     store.Feed[api.Resource]
	FlavorFeed       store.Feed[api.Flavor]
	RegionFeed       store.Feed[api.Region]
	RegionStatusFeed store.Feed[api.RegionStatus]
	PolicyFeed       store.Feed[api.NetworkPolicy]
}

// NewCaches returns the caches of st; Run fills them.
func NewCaches(st *State) *Caches {
	c := &Caches{}
	c.Flavors = store.NewCache(st.Flavors, store.WithOnChange(c.FlavorFeed.Publish))
	c.Resources = store.NewCache(st.Resources, store.WithOnChange(c.ResourceFeed.Publish),
		store.WithIndex(LabelIndex, resourceLabels))
	c.Statuses = store.NewCache(st.Statuses)
	c.Regions = store.NewCache(st.Regions, store.WithOnChange(c.RegionFeed.Publish))
	c.RegionStatus = store.NewCache(st.RegionStatus, store.WithOnChange(c.RegionStatusFeed.Publish))
	c.Tokens = store.NewCache(st.Tokens)
	c.Tenants = store.NewCache(st.Tenants)
	c.Admissions = store.NewCache(st.Admissions)
	c.Policies = store.NewCache(st.Policies, store.WithOnChange(c.PolicyFeed.Publish))
	c.CacheSet = store.NewCacheSet("global", c.Flavors, c.Resources, c.Statuses, c.Regions, c.RegionStatus, c.Tokens, c.Tenants, c.Admissions, c.Policies)
	return c
}

// LabelIndex is the index of the Resources cache by tenant and label:
// LabelTerm(tenant, k, v) finds a tenant's resources labelled k=v, and
// LabelTerm(tenant, k, "") those that have label k, so that a list with
// a selector costs its matches, not the tenant's size.
const LabelIndex = "labels"

// LabelTerm is a value of LabelIndex: a tenant's label k=v, or with v ""
// its label k, whatever its value. Tenants are names (no "/") and label
// keys have no "=", so the terms of different tenants and keys differ.
func LabelTerm(tenant, k, v string) string {
	if v == "" {
		return tenant + "/" + k
	}
	return tenant + "/" + k + "=" + v
}

func resourceLabels(name string, r *api.Resource) []string {
	tenant, _ := SplitResourceName(name)
	out := make([]string, 0, 2*len(r.Labels))
	for k, v := range r.Labels {
		out = append(out, LabelTerm(tenant, k, ""))
		if v != "" {
			out = append(out, LabelTerm(tenant, k, v))
		}
	}
	return out
}
