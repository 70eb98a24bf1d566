package dns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mdns "github.com/miekg/dns"
)

// DefaultZone is the zone a Config without one serves.
const DefaultZone = "strata.internal"

// DefaultTTL is the answers' TTL when Config has none: short, since
// replicas come and go.
const DefaultTTL = 5 * time.Second

// upstreamTimeout bounds one exchange with one upstream resolver.
const upstreamTimeout = 2 * time.Second

// Stats counts a server's queries since it was made.
type Stats struct {
	// Queries counts every query received.
	Queries uint64
	// NXDomain counts in-zone answers of a name that does not exist (or
	// is another tenant's).
	NXDomain uint64
	// Refused counts queries from unknown sources, and out-of-zone
	// queries when there are no upstreams.
	Refused uint64
	// Forwarded counts queries answered by an upstream.
	Forwarded uint64
	// UpstreamFailures counts out-of-zone queries that no upstream
	// answered (SERVFAIL).
	UpstreamFailures uint64
}

// Config is what a Server serves and to whom.
type Config struct {
	// Zone is the zone answered from the table, e.g. "strata.internal"
	// (case and dots do not matter); DefaultZone when empty.
	Zone string
	// TTL is the answers' TTL (and the SOA's minimum); DefaultTTL when 0.
	TTL time.Duration
	// Region is this node's region: region-less names answer it first.
	Region string
	// Upstreams are "host:port" resolvers tried in order for names
	// outside the zone; with none, such names are REFUSED.
	Upstreams []string
	// Identify maps a query's source address to the tenant asking; nil
	// means Table.TenantOf, so that only the host's own replicas may ask.
	Identify func(src netip.Addr) (tenant string, ok bool)
	// Observe, if set, is called once per query with its result (one of
	// the Result constants) and how long it took: the agent's metrics.
	Observe func(result string, d time.Duration)
}

// Server is a node's DNS server: it answers the zone's names from a Table,
// over UDP and TCP on one address, and forwards other names upstream.
type Server struct {
	cfg    Config
	table  *Table
	zone   string // normalized
	fqdn   string // zone + "."
	region string
	ttl    uint32

	mu        sync.Mutex
	servers   []*mdns.Server // TCP
	udp       *udpLoop
	addr      string
	closed    bool
	closeOnce sync.Once
	closeErr  error

	cache answerCache

	queries, nxdomain, refused, forwarded, upstreamFailures atomic.Uint64
}

// NewServer returns a server of cfg answering from t; Listen starts it.
func NewServer(cfg Config, t *Table) *Server {
	zone := NormalizeZone(cfg.Zone)
	if zone == "" {
		zone = DefaultZone
	}
	ttl := cfg.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	s := &Server{
		cfg:    cfg,
		table:  t,
		zone:   zone,
		fqdn:   zone + ".",
		region: strings.ToLower(cfg.Region),
		ttl:    uint32(ttl / time.Second),
	}
	if s.cfg.Identify == nil {
		s.cfg.Identify = t.TenantOf
	}
	return s
}

// Listen starts serving UDP and TCP on addr ("10.0.0.1:53", or
// "127.0.0.1:0" for any free port, TCP then taking UDP's port). It returns
// once both serve, or the error of either (the other then closed).
func (s *Server) Listen(addr string) error {
	if err := s.listenable(); err != nil {
		return err
	}
	pc, l, err := bind(addr)
	if err != nil {
		return err
	}
	bound := pc.LocalAddr().String()
	// TCP through miekg/dns's server; UDP, where the load is, through
	// the server's own loop (serveUDP), which answers a repeated query
	// from the cache without unpacking it.
	tcp := []*mdns.Server{{Listener: l, Handler: mdns.HandlerFunc(s.serve)}}
	started := make(chan struct{}, 1)
	failed := make(chan error, 1)
	tcp[0].NotifyStartedFunc = func() { started <- struct{}{} }
	go func() {
		if err := tcp[0].ActivateAndServe(); err != nil {
			failed <- err
		}
	}()
	select {
	case <-started:
	case err := <-failed:
		pc.Close()
		shutdown(tcp)
		return fmt.Errorf("dns: serve %s: %w", bound, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.listenableLocked(); err != nil {
		// Closed, or listening already, while starting.
		pc.Close()
		shutdown(tcp)
		return err
	}
	s.servers, s.addr = tcp, bound
	s.udp = s.serveUDP(pc.(*net.UDPConn))
	return nil
}

// listenable says why Listen may not start: a closed server stays closed,
// and a server listens on one address.
func (s *Server) listenable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listenableLocked()
}

func (s *Server) listenableLocked() error {
	switch {
	case s.closed:
		return errors.New("dns: server closed")
	case s.servers != nil:
		return fmt.Errorf("dns: server already listening on %s", s.addr)
	}
	return nil
}

// bindTries bounds the ports tried for an address of port 0: UDP's free
// port may be taken for TCP.
const bindTries = 16

// bind opens the UDP socket and the TCP listener on the same address; for
// port 0, on the same free port.
func bind(addr string) (net.PacketConn, net.Listener, error) {
	_, port, _ := net.SplitHostPort(addr)
	for try := 1; ; try++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("dns: listen udp %s: %w", addr, err)
		}
		bound := pc.LocalAddr().String()
		l, err := net.Listen("tcp", bound)
		if err == nil {
			return pc, l, nil
		}
		pc.Close()
		if port != "0" || try == bindTries {
			return nil, nil, fmt.Errorf("dns: listen tcp %s: %w", bound, err)
		}
	}
}

// shutdown stops servers, started or not.
func shutdown(servers []*mdns.Server) error {
	var errs []error
	for _, srv := range servers {
		if err := srv.Shutdown(); err != nil {
			// A server that never started still holds its socket.
			closeSocket(srv)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func closeSocket(srv *mdns.Server) {
	if srv.PacketConn != nil {
		srv.PacketConn.Close()
	}
	if srv.Listener != nil {
		srv.Listener.Close()
	}
}

// Addr is the UDP address the server is bound to (TCP has the same), or
// "" before Listen.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Close stops serving both UDP and TCP; later calls do nothing, and a
// closed server does not listen again.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		servers, udp := s.servers, s.udp
		s.closed = true
		s.mu.Unlock()
		s.closeErr = errors.Join(udp.close(), shutdown(servers))
	})
	return s.closeErr
}

// Stats is the server's counters now.
func (s *Server) Stats() Stats {
	return Stats{
		Queries:          s.queries.Load(),
		NXDomain:         s.nxdomain.Load(),
		Refused:          s.refused.Load(),
		Forwarded:        s.forwarded.Load(),
		UpstreamFailures: s.upstreamFailures.Load(),
	}
}

// serve answers one query.
func (s *Server) serve(w mdns.ResponseWriter, req *mdns.Msg) {
	start := time.Now()
	s.queries.Add(1)
	s.observe(s.reply(w, req, udpSize(w, req), nil, 0), start)
}

// observe reports a query's result and how long it took since start.
func (s *Server) observe(result string, start time.Time) {
	if s.cfg.Observe != nil {
		s.cfg.Observe(result, time.Since(start))
	}
}

// udpSize is the largest reply req's client takes over UDP (its EDNS0
// size, else 512 bytes), or 0 over TCP.
func udpSize(w mdns.ResponseWriter, req *mdns.Msg) int {
	if _, udp := w.RemoteAddr().(*net.UDPAddr); !udp {
		return 0
	}
	if opt := req.IsEdns0(); opt != nil {
		return max(int(opt.UDPSize()), mdns.MinMsgSize)
	}
	return mdns.MinMsgSize
}

// reply counts and writes the reply to req from the source of w,
// truncated to size over UDP, and returns its result. An in-zone answer
// to a UDP query (raw, its bytes) is kept in the answer cache for table
// generation gen, read before the answer was.
func (s *Server) reply(w mdns.ResponseWriter, req *mdns.Msg, size int, raw []byte, gen uint64) string {
	tenant, m, result := s.check(w, req)
	if m == nil && !s.inZone(req) {
		m, result = s.forward(req)
	}
	if m != nil {
		s.count(result)
		write(w, m, size)
		return result
	}
	m = new(mdns.Msg)
	m.SetReply(req)
	m.Compress = true
	if opt := req.IsEdns0(); opt != nil {
		m.SetEdns0(max(opt.UDPSize(), mdns.MinMsgSize), false)
	}
	result = s.fill(m, tenant, req.Question[0])
	if size > 0 {
		m.Truncate(size)
	}
	b, err := m.Pack()
	if err != nil {
		s.count(ResultServFail)
		write(w, new(mdns.Msg).SetRcode(req, mdns.RcodeServerFailure), size)
		return ResultServFail
	}
	if raw != nil {
		s.cache.put(tenant, raw, gen, b, result)
	}
	s.count(result)
	_, _ = w.Write(b)
	return result
}

// check refuses what the server does not answer: other opcodes than
// QUERY, other than one question, a source that is no replica it knows.
// It returns the tenant asking, or the reply and its result.
func (s *Server) check(w mdns.ResponseWriter, req *mdns.Msg) (string, *mdns.Msg, string) {
	if req.Opcode != mdns.OpcodeQuery {
		return "", new(mdns.Msg).SetRcode(req, mdns.RcodeNotImplemented), ResultNotImp
	}
	if len(req.Question) != 1 {
		return "", new(mdns.Msg).SetRcode(req, mdns.RcodeFormatError), ResultFormErr
	}
	tenant, ok := s.cfg.Identify(sourceAddr(w.RemoteAddr()))
	if !ok {
		return "", new(mdns.Msg).SetRcode(req, mdns.RcodeRefused), ResultRefused
	}
	return tenant, nil, ""
}

// inZone says whether req asks a name of the zone.
func (s *Server) inZone(req *mdns.Msg) bool {
	_, in := ParseName(req.Question[0].Name, s.zone)
	return in
}

// write sends m, truncated to size over UDP.
func write(w mdns.ResponseWriter, m *mdns.Msg, size int) {
	if size > 0 {
		m.Truncate(size)
	}
	_ = w.WriteMsg(m)
}

// sourceAddr is a query's source address, IPv4 unmapped.
func sourceAddr(a net.Addr) netip.Addr {
	var ap netip.AddrPort
	switch a := a.(type) {
	case *net.UDPAddr:
		ap = a.AddrPort()
	case *net.TCPAddr:
		ap = a.AddrPort()
	}
	return ap.Addr().Unmap()
}

// forward asks the upstreams in order for a name outside the zone: over
// UDP, again over TCP when the answer is truncated, the next upstream on
// error. None answering is SERVFAIL; no upstreams at all is REFUSED.
func (s *Server) forward(req *mdns.Msg) (*mdns.Msg, string) {
	if len(s.cfg.Upstreams) == 0 {
		return new(mdns.Msg).SetRcode(req, mdns.RcodeRefused), ResultRefused
	}
	udp := &mdns.Client{Net: "udp", Timeout: upstreamTimeout}
	tcp := &mdns.Client{Net: "tcp", Timeout: upstreamTimeout}
	for _, up := range s.cfg.Upstreams {
		r, _, err := udp.Exchange(req, up)
		if err == nil && r.Truncated {
			r, _, err = tcp.Exchange(req, up)
		}
		if err == nil {
			r.Id = req.Id
			return r, ResultForwarded
		}
	}
	return new(mdns.Msg).SetRcode(req, mdns.RcodeServerFailure), ResultUpstreamFailure
}

// count adds a query's result to the counters.
func (s *Server) count(result string) {
	switch result {
	case ResultNXDomain:
		s.nxdomain.Add(1)
	case ResultRefused:
		s.refused.Add(1)
	case ResultForwarded:
		s.forwarded.Add(1)
	case ResultUpstreamFailure:
		s.upstreamFailures.Add(1)
	}
}
