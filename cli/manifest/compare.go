package manifest

import (
	"github.com/stratahq/strata/internal/api"
)

// The UpToDate functions decide between "configured" and "unchanged": they
// compare what a manifest sets, after the API's defaults, with what the
// server holds, so that applying an unchanged file writes nothing.

// FlavorUpToDate reports whether cur already is what want says.
func FlavorUpToDate(want, cur api.Flavor) bool {
	return want.Kind == cur.Kind && want.Spec == cur.Spec
}

// RegionUpToDate reports whether cur's registration already is what want
// says.
func RegionUpToDate(want, cur api.Region) bool {
	reg := func(r api.Region) api.Region {
		return api.Region{Name: r.Name, Endpoint: r.Endpoint, ConsoleURL: r.ConsoleURL, Zones: r.Zones, Labels: r.Labels}
	}
	return api.SameJSON(reg(want), reg(cur))
}

// PolicyUpToDate reports whether cur already selects and admits what
// want says.
func PolicyUpToDate(want, cur api.NetworkPolicy) bool {
	rules := func(p api.NetworkPolicy) api.NetworkPolicy {
		return api.NetworkPolicy{Selector: p.Selector, Ingress: p.Ingress}
	}
	return api.SameJSON(rules(want), rules(cur))
}

// AlertRuleUpToDate reports whether cur already matches and sends as
// want says. A manifest with a receiver secret is never up to date: the
// server does not answer the secret, so it cannot be compared, and is
// written again.
func AlertRuleUpToDate(want, cur api.AlertRule) bool {
	if want.Receiver.Secret != "" {
		return false
	}
	spec := func(r api.AlertRule) api.AlertRule {
		g := api.D(r.GroupWaitOr())
		return api.AlertRule{
			Reasons: r.Reasons, Region: r.Region, Tenant: r.Tenant, Object: r.Object, Selector: r.Selector, Labels: r.Labels,
			GroupWait: &g, Receiver: api.AlertReceiver{Type: r.Receiver.Type, URL: r.Receiver.URL},
		}
	}
	return api.SameJSON(spec(want), spec(cur))
}

// ResourceUpToDate reports whether cur already has every user-settable
// field as o says. A manifest without replicas leaves the count alone, and
// one without a tenant means the resource's own.
func ResourceUpToDate(o Object, cur api.Resource) bool {
	want := *o.Resource
	if want.Tenant != "" && want.Tenant != cur.Tenant {
		return false
	}
	want.Tenant = cur.Tenant
	if !o.ReplicasSet {
		want.Replicas = cur.Replicas
	}
	w := Defaulted(want.Settable())
	if w.Spec.Compute != nil && cur.Spec.Compute != nil {
		// The generations of configs and secrets are the server's.
		w.Spec.Compute.ConfigVersions = cur.Spec.Compute.ConfigVersions
	}
	return api.SameJSON(w, Defaulted(cur.Settable()))
}
