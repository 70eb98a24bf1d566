package dns

import (
	"strings"
	"testing"
)

func TestParseName(t *testing.T) {
	const z = "strata.internal"
	for _, tc := range []struct {
		name string
		zone string
		want Name
		in   bool
	}{
		{"strata.internal.", z, Name{Kind: Apex}, true},
		{"STRATA.internal", "Strata.Internal.", Name{Kind: Apex}, true},
		{"web.acme.strata.internal.", z, Name{Kind: Service, Resource: "web", Tenant: "acme"}, true},
		{"Web.Acme.EU.strata.internal", z, Name{Kind: Service, Resource: "web", Tenant: "acme", Region: "eu"}, true},
		{"r1.web.acme.eu.strata.internal.", z, Name{Kind: Replica, Replica: "r1", Resource: "web", Tenant: "acme", Region: "eu"}, true},
		{"_http._tcp.web.acme.strata.internal.", z, Name{Kind: SRV, Port: "http", Proto: "tcp", Resource: "web", Tenant: "acme"}, true},
		{"_HTTP._Udp.web.acme.eu.strata.internal.", z, Name{Kind: SRV, Port: "http", Proto: "udp", Resource: "web", Tenant: "acme", Region: "eu"}, true},
		{"acme.strata.internal.", z, Name{}, true},
		{"a.b.c.d.e.strata.internal.", z, Name{}, true},
		{"_http._tcp.web.strata.internal.", z, Name{}, true},
		{"_http._tcp.r1.web.acme.eu.strata.internal.", z, Name{}, true},
		{"_http.web.acme.eu.strata.internal.", z, Name{}, true},
		{"_._tcp.web.acme.strata.internal.", z, Name{}, true},
		{"web._acme.strata.internal.", z, Name{}, true},
		{"web..acme.strata.internal.", z, Name{}, true},
		{`we\.b.acme.strata.internal.`, z, Name{}, true},
		{".strata.internal.", z, Name{}, true},
		{"example.com.", z, Name{}, false},
		{"xstrata.internal.", z, Name{}, false},
		{"internal.", z, Name{}, false},
		{"", z, Name{}, false},
		{"web.acme.", "", Name{Kind: Service, Resource: "web", Tenant: "acme"}, true},
	} {
		got, in := ParseName(tc.name, tc.zone)
		if got != tc.want || in != tc.in {
			t.Errorf("ParseName(%q, %q) = %+v, %v; want %+v, %v", tc.name, tc.zone, got, in, tc.want, tc.in)
		}
	}
}

func FuzzParseName(f *testing.F) {
	for _, seed := range []string{
		"strata.internal.", "web.acme.strata.internal.", "web.acme.eu.strata.internal",
		"r1.web.acme.eu.strata.internal.", "_http._tcp.web.acme.eu.strata.internal.",
		"_http._tcp.web.acme.strata.internal.", "_._.strata.internal.", "..strata.internal.",
		`\046.strata.internal.`, "example.com.", "", ".", "_", "STRATA.INTERNAL",
	} {
		f.Add(seed, "strata.internal")
	}
	f.Add("web.acme.", "")
	f.Add("a.b", ".")
	f.Fuzz(func(t *testing.T, name, zone string) {
		n, in := ParseName(name, zone)
		if !in && n != (Name{}) {
			t.Fatalf("outside the zone yet parsed: %+v", n)
		}
		for _, l := range []string{n.Replica, n.Resource, n.Tenant, n.Region, n.Port, n.Proto} {
			if strings.Contains(l, ".") || l != strings.ToLower(l) {
				t.Fatalf("label %q of %+v", l, n)
			}
		}
		switch n.Kind {
		case Service, Replica, SRV:
			if n.Resource == "" || n.Tenant == "" {
				t.Fatalf("%+v has no resource or tenant", n)
			}
		}
		// Answering any name must not panic either.
		s := NewServer(Config{Zone: zone, Region: "eu"}, testTable())
		for _, qtype := range []uint16{1, 28, 33} {
			_ = ask(s, n.Tenant, name, qtype)
		}
	})
}
