// Package state is the global tier's view of its etcd: one typed
// collection per kind of object, and the key layout in one place.
//
//	flavors/<name>                        api.Flavor
//	resources/<tenant>/<name>             api.Resource (spec; written by the API)
//	status/<tenant>/<name>                api.ResourceStatus (written by the master)
//	revisions/<tenant>/<name>/<number>    api.Revision (immutable)
//	regions/<name>                        api.Region (registration)
//	regionstatus/<name>                   api.RegionStatus (health transitions)
//	tenants/<name>                        api.Tenant (quotas)
//	netpolicies/<tenant>/<name>           api.NetworkPolicy
//	admissions/<tenant>                   Admission (a limited tenant's last admitted write)
//	tokens/<id>                           api.Token (hashed)
//	requests/<tenant>/<key>               Request (idempotency keys)
//	configs/<tenant>/<name>               api.Config
//	secrets/<tenant>/<name>               SealedSecret (data encrypted)
//	election/                             the master election
//
// Resources, statuses and revisions, the objects written for every
// resource change and status report, are stored as protobuf
// (apiproto.StoreCodec), the others as JSON; both codecs read JSON, so a
// store written before the binary codec stays readable.
package state

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/proto/apiproto"
)

// ElectionPrefix is the master election's prefix under the store prefix.
const ElectionPrefix = "election/"

// State holds the global collections.
type State struct {
	Store        *store.Store
	Flavors      *store.Collection[api.Flavor]
	Resources    *store.Collection[api.Resource]
	Statuses     *store.Collection[api.ResourceStatus]
	Revisions    *store.Collection[api.Revision]
	Regions      *store.Collection[api.Region]
	RegionStatus *store.Collection[api.RegionStatus]
	Tenants      *store.Collection[api.Tenant]
	Policies     *store.Collection[api.NetworkPolicy]
	Admissions   *store.Collection[Admission]
	Tokens       *store.Collection[api.Token]
	Requests     *store.Collection[Request]
	Configs      *store.Collection[api.Config]
	Secrets      *store.Collection[SealedSecret]
}

// New returns the collections over s, writing binary values.
func New(s *store.Store) *State { return NewWriting(s, apiproto.FormatBinary) }

// NewWriting returns the collections over s; those with a binary codec
// write values in format f (FormatJSON during a rolling upgrade from a
// release that only reads JSON).
func NewWriting(s *store.Store, f apiproto.Format) *State {
	return &State{
		Store:        s,
		Flavors:      store.NewCollection(s, "flavors/", store.JSON[api.Flavor]()),
		Resources:    store.NewCollection(s, "resources/", apiproto.StoreCodec(f, apiproto.ResourceToPB, apiproto.ResourceFromPB)),
		Statuses:     store.NewCollection(s, "status/", apiproto.StoreCodec(f, apiproto.ResourceStatusToPB, apiproto.ResourceStatusFromPB)),
		Revisions:    store.NewCollection(s, "revisions/", apiproto.StoreCodec(f, apiproto.RevisionToPB, apiproto.RevisionFromPB)),
		Regions:      store.NewCollection(s, "regions/", store.JSON[api.Region]()),
		RegionStatus: store.NewCollection(s, "regionstatus/", store.JSON[api.RegionStatus]()),
		Tenants:      store.NewCollection(s, "tenants/", store.JSON[api.Tenant]()),
		Policies:     store.NewCollection(s, "netpolicies/", store.JSON[api.NetworkPolicy]()),
		Admissions:   store.NewCollection(s, "admissions/", store.JSON[Admission]()),
		Tokens:       store.NewCollection(s, "tokens/", store.JSON[api.Token]()),
		Requests:     store.NewCollection(s, "requests/", store.JSON[Request]()),
		Configs:      store.NewCollection(s, "configs/", store.JSON[api.Config]()),
		Secrets:      store.NewCollection(s, "secrets/", store.JSON[SealedSecret]()),
	}
}

// Request records an idempotent write so that a retry with the same key
// returns the first result instead of acting twice.
type Request struct {
	Key string `json:"key"`
	// BodyHash tells a true retry from a different request reusing a key.
	BodyHash    string    `json:"bodyHash"`
	Operation   string    `json:"operation"`
	ResourceUID string    `json:"resourceUID"`
	Resource    string    `json:"resource"`
	CreatedAt   time.Time `json:"createdAt"`
}

// Admission is the serialization point of a limited tenant's quota:
// every write that may grow what the tenant holds rewrites it in the
// transaction of the write, conditional on the revision it read, so
// that two admissions decided on the same usage cannot both commit.
// Usage itself is always computed from the resources; Usage here is
// what it was after the last admission, for people reading etcd.
type Admission struct {
	Tenant string    `json:"tenant"`
	Usage  api.Quota `json:"usage"`
	At     time.Time `json:"at"`
}

// ResourceName is the collection name of a resource: tenant/name.
func ResourceName(tenant, name string) string { return tenant + "/" + name }

// SplitResourceName splits tenant/name.
func SplitResourceName(n string) (tenant, name string) {
	tenant, name, _ = strings.Cut(n, "/")
	return tenant, name
}

// RevisionName is the collection name of revision number n of a resource.
// Zero-padded so that names sort by number.
func RevisionName(tenant, name string, n int64) string {
	return fmt.Sprintf("%s/%s/%012d", tenant, name, n)
}

// RevisionPrefix is the name prefix of a resource's revisions.
func RevisionPrefix(tenant, name string) string { return tenant + "/" + name + "/" }

// RevisionNumber parses the number out of a revision name.
func RevisionNumber(revName string) int64 {
	i := strings.LastIndexByte(revName, '/')
	n, _ := strconv.ParseInt(revName[i+1:], 10, 64)
	return n
}
