package dns

import (
	"reflect"
	"testing"
)

// TestNames: the names Names spells are the ones ParseName reads back,
// lowercased, with SRV names for named ports only.
func TestNames(t *testing.T) {
	got := Names("Strata.Internal.", "Acme", "DB", []string{"eu-west", "us-east"},
		[]Port{{Name: "pg", Proto: "tcp", Port: 5432}, {Proto: "tcp", Port: 9187}, {Name: "Metrics", Proto: "UDP", Port: 9000}})
	want := ResourceNames{
		Name: "db.acme.strata.internal",
		SRV: []SRVName{
			{Name: "_pg._tcp.db.acme.strata.internal", Port: 5432, Proto: "tcp"},
			{Name: "_metrics._udp.db.acme.strata.internal", Port: 9000, Proto: "udp"},
		},
		Regions: []RegionNames{
			{Region: "eu-west", Name: "db.acme.eu-west.strata.internal", SRV: []SRVName{
				{Name: "_pg._tcp.db.acme.eu-west.strata.internal", Port: 5432, Proto: "tcp"},
				{Name: "_metrics._udp.db.acme.eu-west.strata.internal", Port: 9000, Proto: "udp"},
			}},
			{Region: "us-east", Name: "db.acme.us-east.strata.internal", SRV: []SRVName{
				{Name: "_pg._tcp.db.acme.us-east.strata.internal", Port: 5432, Proto: "tcp"},
				{Name: "_metrics._udp.db.acme.us-east.strata.internal", Port: 9000, Proto: "udp"},
			}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Names:\ngot  %+v\nwant %+v", got, want)
	}
	for _, tc := range []struct {
		name string
		want Name
	}{
		{got.Name, Name{Kind: Service, Resource: "db", Tenant: "acme"}},
		{got.Regions[0].Name, Name{Kind: Service, Resource: "db", Tenant: "acme", Region: "eu-west"}},
		{got.Regions[1].SRV[0].Name, Name{Kind: SRV, Resource: "db", Tenant: "acme", Region: "us-east", Port: "pg", Proto: "tcp"}},
		{ReplicaName(DefaultZone, "acme", "db", "eu-west", "DB-1"), Name{Kind: Replica, Replica: "db-1", Resource: "db", Tenant: "acme", Region: "eu-west"}},
	} {
		if n, ok := ParseName(tc.name, DefaultZone); !ok || n != tc.want {
			t.Errorf("ParseName(%q) = %+v, %v; want %+v", tc.name, n, ok, tc.want)
		}
	}
	if n := Names(DefaultZone, "acme", "db", nil, nil); n.Name != "db.acme.strata.internal" || n.SRV != nil || n.Regions != nil {
		t.Errorf("Names without regions or ports: %+v", n)
	}
}
