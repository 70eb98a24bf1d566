package manifest

import (
	"bytes"
	"encoding/json"

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
	return sameJSON(reg(want), reg(cur))
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
	return sameJSON(Defaulted(Settable(want)), Defaulted(Settable(cur)))
}

// sameJSON compares by JSON encoding, which, unlike reflect.DeepEqual, takes
// an empty map or list for an absent one, as the API's storage does.
func sameJSON(a, b any) bool {
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && bytes.Equal(ja, jb)
}
