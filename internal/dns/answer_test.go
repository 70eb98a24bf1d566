package dns

import (
	"reflect"
	"strings"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
)

// testTable is acme's web in eu (two ready, one not, one IPv6), acme's api
// in us and ap, acme's db in eu with no ready replica, and beta's web in eu.
func testTable() *Table {
	tb := NewTable()
	http := Port{Name: "http", Proto: "tcp", Port: 8080}
	tb.Reset([]Endpoint{
		ep("web-2", "acme", "eu", "web", "10.0.0.2", true, http),
		ep("web-1", "acme", "eu", "web", "10.0.0.1", true, http, Port{Proto: "tcp", Port: 9000}),
		ep("web-3", "acme", "eu", "web", "10.0.0.3", false, http),
		ep("web-6", "acme", "eu", "web", "fd00::6", true, http),
		ep("api-us", "acme", "us", "api", "10.1.0.1", true),
		ep("api-ap", "acme", "ap", "api", "10.2.0.1", true),
		ep("api-ap2", "acme", "ap", "api", "10.2.0.2", true),
		ep("api-ca", "acme", "ca", "api", "10.3.0.1", false),
		ep("db-1", "acme", "eu", "db", "10.0.1.1", false),
		ep("beta-web", "beta", "eu", "web", "10.9.0.1", true, http),
	})
	return tb
}

func testServer(tb *Table, region string) *Server {
	return NewServer(Config{Zone: "Strata.Internal.", TTL: 30 * time.Second, Region: region}, tb)
}

func ask(s *Server, tenant, name string, qtype uint16) *mdns.Msg {
	return s.Answer(tenant, mdns.Question{Name: name, Qtype: qtype, Qclass: mdns.ClassINET})
}

// rrs is the records' text without the owner name's case mattering.
func rrs(rr []mdns.RR) []string {
	out := make([]string, 0, len(rr))
	for _, r := range rr {
		out = append(out, strings.Join(strings.Fields(r.String()), " "))
	}
	return out
}

func TestAnswerNames(t *testing.T) {
	s := testServer(testTable(), "eu")
	for _, tc := range []struct {
		name  string
		q     string
		qtype uint16
		rcode int
		want  []string
		extra []string
	}{
		{"resource in region", "web.acme.eu.strata.internal.", mdns.TypeA, mdns.RcodeSuccess, []string{
			"web.acme.eu.strata.internal. 30 IN A 10.0.0.1",
			"web.acme.eu.strata.internal. 30 IN A 10.0.0.2",
		}, nil},
		{"AAAA", "web.acme.eu.strata.internal.", mdns.TypeAAAA, mdns.RcodeSuccess, []string{
			"web.acme.eu.strata.internal. 30 IN AAAA fd00::6",
		}, nil},
		{"no trailing dot", "web.acme.eu.strata.internal", mdns.TypeA, mdns.RcodeSuccess, []string{
			"web.acme.eu.strata.internal 30 IN A 10.0.0.1",
			"web.acme.eu.strata.internal 30 IN A 10.0.0.2",
		}, nil},
		{"case-insensitive", "WEB.Acme.EU.strata.INTERNAL.", mdns.TypeA, mdns.RcodeSuccess, []string{
			"WEB.Acme.EU.strata.INTERNAL. 30 IN A 10.0.0.1",
			"WEB.Acme.EU.strata.INTERNAL. 30 IN A 10.0.0.2",
		}, nil},
		{"replica", "web-2.web.acme.eu.strata.internal.", mdns.TypeA, mdns.RcodeSuccess, []string{
			"web-2.web.acme.eu.strata.internal. 30 IN A 10.0.0.2",
		}, nil},
		{"replica upper case", "WEB-1.web.acme.eu.strata.internal.", mdns.TypeA, mdns.RcodeSuccess, []string{
			"WEB-1.web.acme.eu.strata.internal. 30 IN A 10.0.0.1",
		}, nil},
		{"region-less: own region", "web.acme.strata.internal.", mdns.TypeA, mdns.RcodeSuccess, []string{
			"web.acme.strata.internal. 30 IN A 10.0.0.1",
			"web.acme.strata.internal. 30 IN A 10.0.0.2",
		}, nil},
		{"region-less: first other region by name", "api.acme.strata.internal.", mdns.TypeA, mdns.RcodeSuccess, []string{
			"api.acme.strata.internal. 30 IN A 10.2.0.1",
			"api.acme.strata.internal. 30 IN A 10.2.0.2",
		}, nil},
		{"SRV", "_http._tcp.web.acme.eu.strata.internal.", mdns.TypeSRV, mdns.RcodeSuccess, []string{
			"_http._tcp.web.acme.eu.strata.internal. 30 IN SRV 0 10 8080 web-1.web.acme.eu.strata.internal.",
			"_http._tcp.web.acme.eu.strata.internal. 30 IN SRV 0 10 8080 web-2.web.acme.eu.strata.internal.",
			"_http._tcp.web.acme.eu.strata.internal. 30 IN SRV 0 10 8080 web-6.web.acme.eu.strata.internal.",
		}, []string{
			"web-1.web.acme.eu.strata.internal. 30 IN A 10.0.0.1",
			"web-2.web.acme.eu.strata.internal. 30 IN A 10.0.0.2",
			"web-6.web.acme.eu.strata.internal. 30 IN AAAA fd00::6",
		}},
		{"SRV region-less", "_HTTP._TCP.web.acme.strata.internal.", mdns.TypeSRV, mdns.RcodeSuccess, []string{
			"_HTTP._TCP.web.acme.strata.internal. 30 IN SRV 0 10 8080 web-1.web.acme.eu.strata.internal.",
			"_HTTP._TCP.web.acme.strata.internal. 30 IN SRV 0 10 8080 web-2.web.acme.eu.strata.internal.",
			"_HTTP._TCP.web.acme.strata.internal. 30 IN SRV 0 10 8080 web-6.web.acme.eu.strata.internal.",
		}, []string{
			"web-1.web.acme.eu.strata.internal. 30 IN A 10.0.0.1",
			"web-2.web.acme.eu.strata.internal. 30 IN A 10.0.0.2",
			"web-6.web.acme.eu.strata.internal. 30 IN AAAA fd00::6",
		}},
		{"apex SOA", "strata.internal.", mdns.TypeSOA, mdns.RcodeSuccess, []string{
			"strata.internal. 30 IN SOA ns.strata.internal. hostmaster.strata.internal. 1 3600 600 86400 30",
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := ask(s, "acme", tc.q, tc.qtype)
			if m.Rcode != tc.rcode || !m.Authoritative {
				t.Fatalf("rcode %s, aa %v; want %s, aa", mdns.RcodeToString[m.Rcode], m.Authoritative, mdns.RcodeToString[tc.rcode])
			}
			if got := rrs(m.Answer); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("answer:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if got := rrs(m.Extra); len(got)+len(tc.extra) > 0 && !reflect.DeepEqual(got, tc.extra) {
				t.Errorf("extra:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.extra, "\n"))
			}
			if len(m.Ns) != 0 {
				t.Errorf("authority in a positive answer: %v", m.Ns)
			}
		})
	}
}

const soaText = "strata.internal. 30 IN SOA ns.strata.internal. hostmaster.strata.internal. 1 3600 600 86400 30"

func TestAnswerNegative(t *testing.T) {
	s := testServer(testTable(), "eu")
	for _, tc := range []struct {
		name  string
		q     string
		qtype uint16
		rcode int
	}{
		{"AAAA of an IPv4-only replica", "web-1.web.acme.eu.strata.internal.", mdns.TypeAAAA, mdns.RcodeSuccess},
		{"replica not ready", "web-3.web.acme.eu.strata.internal.", mdns.TypeA, mdns.RcodeSuccess},
		{"resource without ready replicas", "db.acme.eu.strata.internal.", mdns.TypeA, mdns.RcodeSuccess},
		{"region-less resource without ready replicas", "db.acme.strata.internal.", mdns.TypeA, mdns.RcodeSuccess},
		{"TXT of a resource", "web.acme.eu.strata.internal.", mdns.TypeTXT, mdns.RcodeSuccess},
		{"A of an SRV name", "_http._tcp.web.acme.eu.strata.internal.", mdns.TypeA, mdns.RcodeSuccess},
		{"SRV of a port nobody has", "_dns._udp.web.acme.eu.strata.internal.", mdns.TypeSRV, mdns.RcodeSuccess},
		{"A of the apex", "strata.internal.", mdns.TypeA, mdns.RcodeSuccess},
		{"missing resource", "nope.acme.eu.strata.internal.", mdns.TypeA, mdns.RcodeNameError},
		{"missing region", "web.acme.us.strata.internal.", mdns.TypeA, mdns.RcodeNameError},
		{"missing replica", "web-9.web.acme.eu.strata.internal.", mdns.TypeA, mdns.RcodeNameError},
		{"replica of another region", "web-1.web.acme.us.strata.internal.", mdns.TypeA, mdns.RcodeNameError},
		{"region-less missing", "nope.acme.strata.internal.", mdns.TypeA, mdns.RcodeNameError},
		{"one label", "acme.strata.internal.", mdns.TypeA, mdns.RcodeNameError},
		{"five labels", "a.web-1.web.acme.eu.strata.internal.", mdns.TypeA, mdns.RcodeNameError},
		{"one underscore label", "_http.web.acme.eu.strata.internal.", mdns.TypeSRV, mdns.RcodeNameError},
		{"SRV of a replica", "_http._tcp.web-1.web.acme.eu.strata.internal.", mdns.TypeSRV, mdns.RcodeNameError},
		{"another tenant's resource", "web.beta.eu.strata.internal.", mdns.TypeA, mdns.RcodeNameError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := ask(s, "acme", tc.q, tc.qtype)
			if m.Rcode != tc.rcode || !m.Authoritative {
				t.Fatalf("rcode %s, aa %v; want %s, aa", mdns.RcodeToString[m.Rcode], m.Authoritative, mdns.RcodeToString[tc.rcode])
			}
			if len(m.Answer)+len(m.Extra) != 0 {
				t.Errorf("records in a negative answer: %v %v", m.Answer, m.Extra)
			}
			if got := rrs(m.Ns); len(got) != 1 || got[0] != soaText {
				t.Errorf("authority %v, want the SOA", got)
			}
		})
	}
}

// TestAnswerTenantIsolation: another tenant's names answer exactly as
// names that do not exist.
func TestAnswerTenantIsolation(t *testing.T) {
	s := testServer(testTable(), "eu")
	for _, pair := range [][2]string{
		{"web.beta.eu.strata.internal.", "web.gamma.eu.strata.internal."},
		{"web.beta.strata.internal.", "web.gamma.strata.internal."},
		{"beta-web.web.beta.eu.strata.internal.", "beta-web.web.gamma.eu.strata.internal."},
		{"_http._tcp.web.beta.eu.strata.internal.", "_http._tcp.web.gamma.eu.strata.internal."},
	} {
		for _, qtype := range []uint16{mdns.TypeA, mdns.TypeAAAA, mdns.TypeSRV, mdns.TypeTXT} {
			other := ask(s, "acme", pair[0], qtype)
			missing := ask(s, "acme", pair[1], qtype)
			if other.Rcode != mdns.RcodeNameError {
				t.Fatalf("%s %s: rcode %s", pair[0], mdns.TypeToString[qtype], mdns.RcodeToString[other.Rcode])
			}
			// Same question name, so the wire forms must be equal byte for byte.
			missing.Question = other.Question
			a, err := other.Pack()
			if err != nil {
				t.Fatal(err)
			}
			b, err := missing.Pack()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Errorf("%s %s differs from a missing name:\n%v\n%v", pair[0], mdns.TypeToString[qtype], other, missing)
			}
		}
		// Its own tenant gets it.
		if m := ask(s, "BETA", pair[0], mdns.TypeA); m.Rcode == mdns.RcodeNameError {
			t.Errorf("beta cannot resolve its own %s", pair[0])
		}
	}
}

func TestAnswerRegionLess(t *testing.T) {
	tb := testTable()
	// From us, api answers us; from eu (no api) the first region by name
	// with ready replicas: ap, not ca (none ready), not us.
	if got := rrs(ask(testServer(tb, "us"), "acme", "api.acme.strata.internal.", mdns.TypeA).Answer); !reflect.DeepEqual(got, []string{"api.acme.strata.internal. 30 IN A 10.1.0.1"}) {
		t.Errorf("from us: %v", got)
	}
	// ap's replicas stop being ready: the answer falls to us.
	tb.Upsert(ep("api-ap", "acme", "ap", "api", "10.2.0.1", false))
	tb.Upsert(ep("api-ap2", "acme", "ap", "api", "10.2.0.2", false))
	if got := rrs(ask(testServer(tb, "ap"), "acme", "api.acme.strata.internal.", mdns.TypeA).Answer); !reflect.DeepEqual(got, []string{"api.acme.strata.internal. 30 IN A 10.1.0.1"}) {
		t.Errorf("from ap, none ready there: %v", got)
	}
	// A new ready replica in ca comes before us by name.
	tb.Upsert(ep("api-ca", "acme", "ca", "api", "10.3.0.1", true))
	if got := rrs(ask(testServer(tb, "eu"), "acme", "api.acme.strata.internal.", mdns.TypeA).Answer); !reflect.DeepEqual(got, []string{"api.acme.strata.internal. 30 IN A 10.3.0.1"}) {
		t.Errorf("from eu with ca ready: %v", got)
	}
	// No region ready: the name exists, NODATA.
	for _, id := range []string{"api-us", "api-ca"} {
		e := tb.byID[id].Endpoint
		e.Ready = false
		tb.Upsert(e)
	}
	m := ask(testServer(tb, "eu"), "acme", "api.acme.strata.internal.", mdns.TypeA)
	if m.Rcode != mdns.RcodeSuccess || len(m.Answer) != 0 || len(m.Ns) != 1 {
		t.Errorf("no region ready: %v", m)
	}
	// All removed: NXDOMAIN.
	for _, id := range []string{"api-us", "api-ca", "api-ap", "api-ap2"} {
		tb.Remove(id)
	}
	if m := ask(testServer(tb, "eu"), "acme", "api.acme.strata.internal.", mdns.TypeA); m.Rcode != mdns.RcodeNameError {
		t.Errorf("all removed: %s", mdns.RcodeToString[m.Rcode])
	}
}

func TestAnswerDefaults(t *testing.T) {
	s := NewServer(Config{}, testTable())
	m := ask(s, "acme", "web.acme.eu.strata.internal.", mdns.TypeA)
	if len(m.Answer) != 2 || m.Answer[0].Header().Ttl != 5 {
		t.Fatalf("default zone and TTL: %v", m)
	}
	if m := ask(s, "acme", "example.com.", mdns.TypeA); m.Rcode != mdns.RcodeRefused || m.Authoritative {
		t.Fatalf("outside the zone: %v", m)
	}
}

func BenchmarkAnswer(b *testing.B) {
	tb := NewTable()
	for i := range fleetSize {
		tb.Upsert(fleetEndpoint(i))
	}
	s := NewServer(Config{Region: "region-0"}, tb)
	q := mdns.Question{Name: "svc-00.tenant-000.region-0.strata.internal.", Qtype: mdns.TypeA, Qclass: mdns.ClassINET}
	b.ReportAllocs()
	for b.Loop() {
		if m := s.Answer("tenant-000", q); m.Rcode != mdns.RcodeSuccess {
			b.Fatal(m)
		}
	}
}
