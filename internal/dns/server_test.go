package dns

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
)

// startServer listens on a free loopback port and closes at the test's end.
func startServer(t *testing.T, cfg Config, tb *Table) *Server {
	t.Helper()
	s := NewServer(cfg, tb)
	if err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// loopbackIs maps 127.0.0.1 to tenant.
func loopbackIs(tenant string) func(netip.Addr) (string, bool) {
	return func(a netip.Addr) (string, bool) {
		if a == netip.MustParseAddr("127.0.0.1") {
			return tenant, true
		}
		return "", false
	}
}

func exchange(t *testing.T, network, addr, name string, qtype uint16) *mdns.Msg {
	t.Helper()
	c := &mdns.Client{Net: network, Timeout: 5 * time.Second}
	q := new(mdns.Msg).SetQuestion(name, qtype)
	r, _, err := c.Exchange(q, addr)
	if err != nil {
		t.Fatalf("%s query of %s: %v", network, name, err)
	}
	if r.Id != q.Id {
		t.Fatalf("reply id %d, query %d", r.Id, q.Id)
	}
	return r
}

// observed records Observe's calls.
type observed struct {
	mu      sync.Mutex
	results []string
}

func (o *observed) observe(result string, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if d < 0 {
		result = "negative duration"
	}
	o.results = append(o.results, result)
}

// get is the results observed once there are n of them (Observe runs
// after the reply is written), or what there is after a deadline.
func (o *observed) get(n int) []string {
	deadline := time.Now().Add(10 * time.Second)
	for {
		o.mu.Lock()
		got := append([]string(nil), o.results...)
		o.mu.Unlock()
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(time.Millisecond)
	}
}

func TestServerUDPAndTCP(t *testing.T) {
	var obs observed
	s := startServer(t, Config{Region: "eu", Identify: loopbackIs("acme"), Observe: obs.observe}, testTable())
	if _, port, err := net.SplitHostPort(s.Addr()); err != nil || port == "0" {
		t.Fatalf("Addr() = %q", s.Addr())
	}
	for _, network := range []string{"udp", "tcp"} {
		r := exchange(t, network, s.Addr(), "web.acme.eu.strata.internal.", mdns.TypeA)
		if r.Rcode != mdns.RcodeSuccess || !r.Authoritative || len(r.Answer) != 2 {
			t.Fatalf("%s: %v", network, r)
		}
		if a := r.Answer[0].(*mdns.A).A.String(); a != "10.0.0.1" {
			t.Errorf("%s: first answer %s", network, a)
		}
		r = exchange(t, network, s.Addr(), "web.beta.eu.strata.internal.", mdns.TypeA)
		if r.Rcode != mdns.RcodeNameError || len(r.Ns) != 1 {
			t.Fatalf("%s, another tenant's name: %v", network, r)
		}
	}
	// No upstreams: outside the zone is REFUSED.
	if r := exchange(t, "udp", s.Addr(), "example.com.", mdns.TypeA); r.Rcode != mdns.RcodeRefused {
		t.Fatalf("outside the zone without upstreams: %v", r)
	}
	want := Stats{Queries: 5, NXDomain: 2, Refused: 1}
	if got := s.Stats(); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
	// Observe runs after each reply: in any order.
	wantObs := []string{"answered", "answered", "nxdomain", "nxdomain", "refused"}
	if got := slices.Sorted(slices.Values(obs.get(len(wantObs)))); !slices.Equal(got, wantObs) {
		t.Errorf("observed %v, want %v", got, wantObs)
	}
}

func TestServerRefusesUnknownSource(t *testing.T) {
	nobody := func(netip.Addr) (string, bool) { return "", false }
	s := startServer(t, Config{Identify: nobody, Upstreams: []string{"127.0.0.1:1"}}, testTable())
	for _, name := range []string{"web.acme.eu.strata.internal.", "example.com."} {
		if r := exchange(t, "udp", s.Addr(), name, mdns.TypeA); r.Rcode != mdns.RcodeRefused {
			t.Fatalf("%s from an unknown source: %v", name, r)
		}
	}
	if got := s.Stats(); got.Refused != 2 || got.Forwarded != 0 || got.UpstreamFailures != 0 {
		t.Fatalf("Stats() = %+v", got)
	}
}

func TestServerDefaultIdentify(t *testing.T) {
	tb := testTable()
	s := startServer(t, Config{}, tb)
	if r := exchange(t, "udp", s.Addr(), "web.acme.eu.strata.internal.", mdns.TypeA); r.Rcode != mdns.RcodeRefused {
		t.Fatalf("before 127.0.0.1 is a replica: %v", r)
	}
	// 127.0.0.1 becomes one of beta's replicas (not ready: still asks).
	tb.Upsert(ep("beta-local", "beta", "eu", "job", "127.0.0.1", false))
	if r := exchange(t, "udp", s.Addr(), "web.beta.eu.strata.internal.", mdns.TypeA); r.Rcode != mdns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("as beta: %v", r)
	}
}

func TestServerBadQueries(t *testing.T) {
	s := startServer(t, Config{Identify: loopbackIs("acme")}, testTable())
	c := &mdns.Client{Net: "udp", Timeout: 5 * time.Second}

	notify := new(mdns.Msg).SetNotify("strata.internal.")
	if r, _, err := c.Exchange(notify, s.Addr()); err != nil || r.Rcode != mdns.RcodeNotImplemented {
		t.Fatalf("NOTIFY: %v, %v", r, err)
	}
	two := new(mdns.Msg).SetQuestion("web.acme.eu.strata.internal.", mdns.TypeA)
	two.Question = append(two.Question, mdns.Question{Name: "web.acme.strata.internal.", Qtype: mdns.TypeA, Qclass: mdns.ClassINET})
	if r, _, err := c.Exchange(two, s.Addr()); err != nil || r.Rcode != mdns.RcodeFormatError {
		t.Fatalf("two questions: %v, %v", r, err)
	}
}

// TestServerTruncatesUDP: an answer too big for a plain UDP reply comes
// truncated, and whole over TCP.
func TestServerTruncatesUDP(t *testing.T) {
	tb := NewTable()
	for i := range 100 {
		tb.Upsert(ep(
			"replica-with-a-long-name-"+string(rune('a'+i/26))+string(rune('a'+i%26)),
			"acme", "eu", "big", netip.AddrFrom4([4]byte{10, 5, 0, byte(i)}).String(), true,
			Port{Name: "http", Proto: "tcp", Port: 80}))
	}
	s := startServer(t, Config{Identify: loopbackIs("acme")}, tb)
	name := "_http._tcp.big.acme.eu.strata.internal."
	if r := exchange(t, "udp", s.Addr(), name, mdns.TypeSRV); !r.Truncated {
		t.Fatalf("UDP answer of 100 SRV records not truncated: %d records", len(r.Answer))
	}
	if r := exchange(t, "tcp", s.Addr(), name, mdns.TypeSRV); r.Truncated || len(r.Answer) != 100 || len(r.Extra) != 100 {
		t.Fatalf("TCP: truncated %v, %d answers, %d extra", r.Truncated, len(r.Answer), len(r.Extra))
	}
}

// upstream is a resolver for the forwarding tests: it answers every A
// question with 192.0.2.1, over UDP truncated (no records) when truncate
// is set, so that only TCP gets the record.
func upstream(t *testing.T, truncate bool) string {
	t.Helper()
	pc, l, err := bind("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	handler := mdns.HandlerFunc(func(w mdns.ResponseWriter, req *mdns.Msg) {
		m := new(mdns.Msg).SetReply(req)
		m.RecursionAvailable = true
		if _, udp := w.RemoteAddr().(*net.UDPAddr); udp && truncate {
			m.Truncated = true
		} else {
			rr, err := mdns.NewRR(req.Question[0].Name + " 60 IN A 192.0.2.1")
			if err != nil {
				panic(err)
			}
			m.Answer = []mdns.RR{rr}
		}
		_ = w.WriteMsg(m)
	})
	for _, srv := range []*mdns.Server{{PacketConn: pc, Handler: handler}, {Listener: l, Handler: handler}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("upstream did not start")
		}
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
	return pc.LocalAddr().String()
}

// downAddr is a loopback UDP address nothing listens on.
func downAddr(t *testing.T) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	return addr
}

func TestServerForwards(t *testing.T) {
	for _, tc := range []struct {
		name     string
		truncate bool
	}{{"over UDP", false}, {"truncated: again over TCP", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var obs observed
			up := upstream(t, tc.truncate)
			// The first upstream is down: the next one answers.
			s := startServer(t, Config{Identify: loopbackIs("acme"), Upstreams: []string{downAddr(t), up}, Observe: obs.observe}, testTable())
			r := exchange(t, "udp", s.Addr(), "example.com.", mdns.TypeA)
			if r.Rcode != mdns.RcodeSuccess || r.Truncated || len(r.Answer) != 1 || r.Answer[0].(*mdns.A).A.String() != "192.0.2.1" {
				t.Fatalf("forwarded: %v", r)
			}
			if r.Authoritative {
				t.Error("a forwarded answer claims authority")
			}
			if got := s.Stats(); got.Forwarded != 1 || got.UpstreamFailures != 0 {
				t.Errorf("Stats() = %+v", got)
			}
			if got := obs.get(1); !slices.Equal(got, []string{"forwarded"}) {
				t.Errorf("observed %v", got)
			}
		})
	}
}

func TestServerUpstreamDown(t *testing.T) {
	var obs observed
	s := startServer(t, Config{Identify: loopbackIs("acme"), Upstreams: []string{downAddr(t)}, Observe: obs.observe}, testTable())
	r := exchange(t, "udp", s.Addr(), "example.com.", mdns.TypeA)
	if r.Rcode != mdns.RcodeServerFailure {
		t.Fatalf("upstream down: %v", r)
	}
	if got := s.Stats(); got.UpstreamFailures != 1 || got.Forwarded != 0 || got.Queries != 1 {
		t.Errorf("Stats() = %+v", got)
	}
	if got := obs.get(1); !slices.Equal(got, []string{"upstream_failure"}) {
		t.Errorf("observed %v", got)
	}
}

func TestServerListenAndClose(t *testing.T) {
	s := NewServer(Config{}, NewTable())
	if err := s.Close(); err != nil {
		t.Fatalf("Close before Listen: %v", err)
	}
	if err := s.Listen("127.0.0.1:0"); err == nil {
		t.Fatal("a closed server listened")
	}

	a := startServer(t, Config{}, NewTable())
	if err := a.Listen("127.0.0.1:0"); err == nil {
		t.Fatal("a server listened twice")
	}
	// The port is taken (UDP and TCP): a second server fails and leaves
	// nothing bound.
	b := NewServer(Config{}, NewTable())
	if err := b.Listen(a.Addr()); err == nil {
		b.Close()
		t.Fatal("a second server listened on a taken address")
	}
	// TCP taken, UDP free: Listen fails and releases the UDP socket.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := b.Listen(l.Addr().String()); err == nil {
		t.Fatal("listened with TCP taken")
	}
	pc, err := net.ListenPacket("udp", l.Addr().String())
	if err != nil {
		t.Fatalf("UDP socket left bound after a failed Listen: %v", err)
	}
	pc.Close()

	// Close stops both and is idempotent.
	addr := a.Addr()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("TCP still accepts after Close")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, _, err := (&mdns.Client{Net: "udp", Timeout: 200 * time.Millisecond}).Exchange(new(mdns.Msg).SetQuestion("x.strata.internal.", mdns.TypeA), addr); err == nil {
		t.Fatal("UDP still answers after Close")
	}
}

// TestServerAnswerCache: a repeated question is answered from the cache
// with its own id and the case it was asked in; a change of the table is
// answered at once (no stale answer), whatever was cached; one tenant's
// cached answer is never another's; the cache stays bounded.
func TestServerAnswerCache(t *testing.T) {
	tb := NewTable()
	tb.Upsert(Endpoint{ID: "db-1", Tenant: "acme", Region: "eu", Resource: "db", Addr: netip.MustParseAddr("10.0.0.1"), Ready: true})
	var tenant atomicString
	tenant.set("acme")
	s := startServer(t, Config{Region: "eu", Identify: func(netip.Addr) (string, bool) { return tenant.get(), true }}, tb)
	addrs := func(m *mdns.Msg) []string {
		var out []string
		for _, rr := range m.Answer {
			if a, ok := rr.(*mdns.A); ok {
				out = append(out, a.A.String())
			}
		}
		slices.Sort(out)
		return out
	}
	const name = "db.acme.eu.strata.internal."
	for i := range 3 {
		r := exchange(t, "udp", s.Addr(), name, mdns.TypeA) // exchange checks the id
		if got := addrs(r); !slices.Equal(got, []string{"10.0.0.1"}) || r.Rcode != mdns.RcodeSuccess {
			t.Fatalf("query %d: %v %v; want 10.0.0.1", i, mdns.RcodeToString[r.Rcode], got)
		}
	}
	if r := exchange(t, "udp", s.Addr(), "DB.Acme.eu.strata.internal.", mdns.TypeA); r.Question[0].Name != "DB.Acme.eu.strata.internal." || len(r.Answer) != 1 || r.Answer[0].Header().Name != "DB.Acme.eu.strata.internal." {
		t.Errorf("mixed case: question %q, answer %v; want the case asked", r.Question[0].Name, r.Answer)
	}
	tb.Upsert(Endpoint{ID: "db-2", Tenant: "acme", Region: "eu", Resource: "db", Addr: netip.MustParseAddr("10.0.0.2"), Ready: true})
	if got := addrs(exchange(t, "udp", s.Addr(), name, mdns.TypeA)); !slices.Equal(got, []string{"10.0.0.1", "10.0.0.2"}) {
		t.Errorf("after db-2 joined: %v; want both", got)
	}
	tb.Remove("db-1")
	tb.Remove("db-2")
	if r := exchange(t, "udp", s.Addr(), name, mdns.TypeA); r.Rcode != mdns.RcodeNameError {
		t.Errorf("after both left: %s %v; want NXDOMAIN", mdns.RcodeToString[r.Rcode], r.Answer)
	}
	tb.Upsert(Endpoint{ID: "db-1", Tenant: "acme", Region: "eu", Resource: "db", Addr: netip.MustParseAddr("10.0.0.1"), Ready: true})
	exchange(t, "udp", s.Addr(), name, mdns.TypeA)
	tenant.set("other")
	if r := exchange(t, "udp", s.Addr(), name, mdns.TypeA); r.Rcode != mdns.RcodeNameError || len(r.Answer) != 0 {
		t.Errorf("another tenant after acme's answer was cached: %s %v; want NXDOMAIN", mdns.RcodeToString[r.Rcode], r.Answer)
	}
	for i := range cacheEntries + 10 {
		exchange(t, "udp", s.Addr(), fmt.Sprintf("n%d.acme.eu.strata.internal.", i), mdns.TypeA)
	}
	if n := s.cache.len(); n > cacheEntries || n == 0 {
		t.Errorf("cache holds %d answers; want some, at most %d", n, cacheEntries)
	}
}

// atomicString is a string read by the server's goroutines.
type atomicString struct {
	mu sync.Mutex
	s  string
}

func (a *atomicString) set(s string) { a.mu.Lock(); a.s = s; a.mu.Unlock() }
func (a *atomicString) get() string  { a.mu.Lock(); defer a.mu.Unlock(); return a.s }

// TestServerUDPMalformed: over UDP, a packet with the reply bit set or
// shorter than a header gets no answer (a server that answered replies
// could be made to loop), and one that does not unpack gets FORMERR with
// its id.
func TestServerUDPMalformed(t *testing.T) {
	s := startServer(t, Config{Identify: loopbackIs("acme")}, NewTable())
	conn, err := net.Dial("udp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reply := new(mdns.Msg).SetQuestion("db.acme.eu.strata.internal.", mdns.TypeA)
	reply.Response = true
	b, err := reply.Pack()
	if err != nil {
		t.Fatal(err)
	}
	// A reply, a short packet, then a header announcing a question that
	// is not there: only the last is answered.
	for _, p := range [][]byte{b, {1, 2, 3}, {0xab, 0xcd, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 7}} {
		if _, err := conn.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	got := new(mdns.Msg)
	if err := got.Unpack(buf[:n]); err != nil {
		t.Fatal(err)
	}
	if got.Id != 0xabcd || got.Rcode != mdns.RcodeFormatError || !got.Response {
		t.Errorf("answer: id %#x %s; want the malformed query's id 0xabcd, FORMERR", got.Id, mdns.RcodeToString[got.Rcode])
	}
	if st := s.Stats(); st.Queries != 1 {
		t.Errorf("Stats().Queries = %d; want 1 (the reply and the short packet are no queries)", st.Queries)
	}
}
